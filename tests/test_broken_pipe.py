"""A reader that stops early (`kwire pcap ... | head -1`) ends kwire quietly with exit status 0,
as other Unix tools do (issue 14, item 5): neither Click's exit 1 nor Rich's, nor a message."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = str(ROOT / "fixtures" / "captures" / "kafka-python-consume.pcap")


@pytest.mark.parametrize("args", [
    ["pcap", CAPTURE], ["pcap", CAPTURE, "--format", "jsonl"], ["pcap", CAPTURE, "--format", "json"],
    ["pcap", CAPTURE, "--summary"], ["decode", "@" + str(ROOT / "fixtures" / "hex" / "metadata-request-v12.hex")],
    ["list"],
])
def test_a_reader_that_stops_early_is_a_quiet_success(args):
    env = dict(os.environ, KWIRE_NO_PROGRESS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "kwire_cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as head does after its first line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert first and err == b""
