"""One expander of FILE, DIR and GLOB arguments for every command (kwire_cli.inputs.paths), and
what the commands make of it: a directory's files that are not captures are skipped with one
note; a file named on the command line is read (its error is the reader's); a name that does not
exist is exit code 2 in every command."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from cli_run import kwire
from kwire_cli.inputs import SourceError
from kwire_cli.inputs.paths import expand_paths, not_a_capture

CAPS = Path(__file__).resolve().parent.parent / "fixtures" / "captures"


def _dir(tmp_path: Path) -> Path:
    d = tmp_path / "caps"
    (d / "sub").mkdir(parents=True)
    for n, client in (("cap10", "kafkajs"), ("cap", "kafka-python"), ("cap2", "confluent-kafka")):
        shutil.copy(CAPS / f"{client}-admin.pcap", d / n)
    (d / "manifest.json").write_text('{"captures": []}\n')
    (d / "sub" / "empty.pcap").write_bytes(b"")
    (d / ".hidden.pcap").write_bytes(b"x")
    return d


def test_a_directory_stands_for_its_captures_in_rotation_order(tmp_path):
    d = _dir(tmp_path)
    got = expand_paths([str(d)], accept=not_a_capture)
    assert [os.path.relpath(p, d) for p in got.paths] == ["cap", "cap2", "cap10"]
    assert [(os.path.relpath(p, d), why) for p, why in got.refused] == [
        ("manifest.json", "not a pcap or pcapng file"), ("sub/empty.pcap", "empty")]
    # a glob is read as a directory is; duplicates are read once when asked
    got = expand_paths([str(d / "cap*"), str(d / "cap")], accept=not_a_capture, unique=True)
    assert [os.path.relpath(p, d) for p in got.paths] == ["cap", "cap2", "cap10"]
    # without accept, every regular file; named, a file is as given
    assert len(expand_paths([str(d)]).paths) == 5
    assert expand_paths([str(d / "manifest.json")], accept=not_a_capture).paths == [str(d / "manifest.json")]


def test_names_that_do_not_exist_are_source_errors(tmp_path):
    with pytest.raises(SourceError, match=r"^FILES: no such file: /no/such \(and 1 more\)$"):
        expand_paths(["/no/such", str(tmp_path), "/no/such2"])
    with pytest.raises(SourceError, match=r"^FILES: no such file matches /no/such\*$"):
        expand_paths(["/no/such*"])


def test_pcap_of_a_directory_skips_what_is_not_a_capture_with_one_note(tmp_path):
    d = _dir(tmp_path)
    r = kwire("pcap", str(d), "--format", "jsonl")
    assert r.code == 0, r
    notes = [line for line in r.err.splitlines() if "skipped" in line]
    assert notes == [f"kwire: note: skipped 2 files that are not captures: {d / 'manifest.json'} (not a pcap or "
                     f"pcapng file), {d / 'sub' / 'empty.pcap'} (empty)"]
    assert {json.loads(line)["file"] for line in r.out.splitlines()} == {
        str(d / n) for n in ("cap", "cap2", "cap10")}
    # named on the command line, it is read, and its error is the reader's
    r = kwire("pcap", str(d / "manifest.json"))
    assert r.code == 1 and "manifest.json: not a pcap or pcapng file" in r.err


@pytest.mark.parametrize("args", [["pcap", "/no/such.pcap"], ["dump-log", "/no/such.log"],
                                  ["decode", "@/no/such.hex"], ["encode", "/no/such.yaml"],
                                  ["negotiate", "@/no/such.hex"],
                                  pytest.param(["spark-decode", "/no/such.pcap", "--out", "/no/out"],
                                               marks=pytest.mark.skipif(importlib.util.find_spec("pyspark") is None,
                                                                        reason="spark-decode needs PySpark"))])
def test_a_missing_file_is_exit_code_2_in_every_command(args):
    r = kwire(*args)
    assert r.code == 2 and r.out == "" and r.err.count("\n") == 1 and "/no/such" in r.err, r


def test_dump_log_reads_a_quoted_glob_as_its_directory():
    """dump-log FILES through the shared expander: a glob stands for the log files it matches,
    each partition's in base-offset order, as the directory itself gives them."""
    part = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "kwire-produce-gzip-0"
    by_dir = kwire("dump-log", str(part), "--format", "jsonl")
    by_glob = kwire("dump-log", str(part / "*"), "--format", "jsonl")
    assert by_dir.code == by_glob.code == 0 and by_glob.out == by_dir.out and by_dir.out
    assert kwire("dump-log", str(part.parent / "no-such-*")).code == 2
