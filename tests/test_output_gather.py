"""The JSON writers' large writes (kwire_cli/output/gather.py): the same bytes in few calls,
whatever the stream's buffering, and no row lost when the rows stop on an error."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kwire_cli.capture import CaptureStats
from kwire_cli.capture.session import Conversation
from kwire_cli.errors import InputError
from kwire_cli.output.gather import SIZE, Gathered
from kwire_cli.output.show import RowPrinter, print_rows
from kwire_cli.output.writers import JsonLinesWriter
from kwire_cli.proxy.decoding import RowsOnly

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "fixtures" / "captures" / "kafka-python-consume.pcap"


class Stingy(io.RawIOBase):
    """An unbuffered stream that takes at most ``most`` bytes a call (as a raw pipe may)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.calls: list[int] = []
        self.got = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        n = min(len(b), self.most)
        self.got += bytes(b[:n])
        self.calls.append(n)
        return n


def test_small_pieces_go_out_together_and_a_partial_write_is_finished():
    out = Stingy(most=50_000)
    g = Gathered(out)
    pieces = [b"x" * (i % 300) + b"\n" for i in range(2_000)] + [b"y" * (3 * SIZE)] + [b"z\n"] * 10
    for p in pieces:
        g.write(p)
    g.flush()
    assert bytes(out.got) == b"".join(pieces)
    assert len(out.calls) < 20, out.calls        # 2,011 pieces, 0.5 MB: a few writes of 64 KiB (or 50,000)
    assert max(out.calls) <= 50_000


def test_pcap_jsonl_is_the_same_bytes_unbuffered():
    runs = []
    for unbuffered in ("1", ""):
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED=unbuffered, KWIRE_NO_PROGRESS="1")
        p = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(CAPTURE), "--format", "jsonl"],
                           capture_output=True, env=env, check=True)
        runs.append(p.stdout)
    assert runs[0] == runs[1] and runs[0].count(b"\n") > 10


def test_rows_written_before_an_error_are_out():
    out = io.BytesIO()

    def rows():
        for i in range(3):
            yield {"kind": "request", "frame": i}
        raise InputError("the capture stopped here")

    printer = RowPrinter(JsonLinesWriter(out), lambda _row: True, summary=RowsOnly())
    with pytest.raises(InputError):
        print_rows(rows(), printer, Conversation(), CaptureStats())
    assert out.getvalue().count(b"\n") == 3 and b'"frame":2' in out.getvalue().replace(b" ", b"")
