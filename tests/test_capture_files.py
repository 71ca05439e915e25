"""Which files kwire pcap reads and how: rotated parts of one capture (issue 13.2) and files that
are not regular files (issue 15.4).

A real capture is split the way tcpdump -C splits it (at packet boundaries, a new file when the
current one reaches a size: ``cap``, ``cap1`` ... ``cap12``); read as a directory, the parts must
give exactly the frames of the unsplit capture. tcpdump -C counts in millions of bytes, too coarse
for the bundled captures (tens of KB), so the split is made here, byte for byte as tcpdump writes
(each part: the file header, then whole packet records).
"""
from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kwire_cli.capture import CaptureStats, KafkaFrame, iter_capture
from kwire_cli.capture.inputs import file_kind, files_under, rotation_order

ROOT = Path(__file__).resolve().parents[1]
CAPS = ROOT / "fixtures" / "captures"


def split_like_tcpdump_C(src: Path, dest: Path, parts: int, name: str = "cap") -> list[Path]:
    """Split a pcap into ``parts`` files of about equal size at packet boundaries, named as
    tcpdump -C names them (``name``, ``name1``, ``name2`` ...)."""
    data = src.read_bytes()
    head, body = data[:24], data[24:]
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    records = []
    pos = 0
    while pos < len(body):
        caplen = struct.unpack_from(order + "I", body, pos + 8)[0]
        records.append(body[pos:pos + 16 + caplen])
        pos += 16 + caplen

    def cut(limit: float) -> list[list[bytes]]:
        files: list[list[bytes]] = [[]]
        size = 0
        for r in records:
            if size >= limit:  # tcpdump -C: the next packet goes to a new file once the size is reached
                files.append([])
                size = 0
            files[-1].append(r)
            size += len(r)
        return files
    lo, hi = 1.0, float(len(body))  # the size limit that makes exactly ``parts`` files
    files = cut(hi)
    for _ in range(60):
        mid = (lo + hi) / 2
        files = cut(mid)
        if len(files) == parts:
            break
        lo, hi = (mid, hi) if len(files) > parts else (lo, mid)
    assert len(files) == parts
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i, recs in enumerate(files):
        p = dest / (name if i == 0 else f"{name}{i}")
        p.write_bytes(head + b"".join(recs))
        out.append(p)
    return out


def frames(events) -> list[tuple]:
    return [(f.kind, f.src, f.dst, f.data, f.api_key, f.api_version, f.correlation_id, f.ts)
            for f in events if isinstance(f, KafkaFrame)]


def kwire_rows(*args: str) -> tuple[list[dict], str, int]:
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", *args, "--format", "jsonl"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=dict(os.environ, KWIRE_NO_PROGRESS="1"))
    return [json.loads(line) for line in r.stdout.splitlines()], r.stderr, r.returncode


def _without_place(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("file", "frame")} for r in rows]


@pytest.mark.parametrize("capture", ["kafka-python-consume.pcap", "confluent-kafka-consume.pcap"])
def test_thirteen_rotated_parts_give_the_frames_of_the_unsplit_capture(tmp_path, capture):
    src = CAPS / capture
    parts = split_like_tcpdump_C(src, tmp_path / "rot", 13)
    assert [p.name for p in parts] == ["cap"] + [f"cap{i}" for i in range(1, 13)]
    whole_stats, split_stats = CaptureStats(), CaptureStats()
    whole = frames(iter_capture(str(src), stats=whole_stats))
    listed = files_under(str(tmp_path / "rot"))
    assert [Path(p).name for p in listed] == [p.name for p in parts]  # cap2 before cap10
    split = frames(iter_capture(listed, stats=split_stats))
    assert split == whole  # bytes, pairing, order
    assert split_stats.damage_count == whole_stats.damage_count
    assert set(whole_stats.damage_count) <= {"unanswered-request"}  # the consumer's last poll
    assert split_stats.files == 13 and split_stats.reconcile()["ok"]
    # read one by one, connections are cut at every rotation: answers lose their requests
    apart = [f for p in parts for f in frames(iter_capture(str(p)))]
    paired = sum(1 for f in whole if f[0] == "response" and f[4] is not None)
    assert sum(1 for f in apart if f[0] == "response" and f[4] is not None) < paired
    # the command: a directory, or the parts named in any order (merged by time)
    rows, err, code = kwire_rows(str(tmp_path / "rot"))
    want, want_err, _c = kwire_rows(str(src))
    assert code == 0 and err == want_err and len(rows) == len(want) > 50
    assert _without_place(rows) == _without_place(want)
    assert {r["file"] for r in rows} <= {str(p) for p in parts}
    shuffled = [str(p) for p in parts]
    random.Random(5).shuffle(shuffled)
    rows2, _e, code = kwire_rows(*shuffled)
    assert code == 0 and _without_place(rows2) == _without_place(want)
    # each row keeps its file and its packet number in that file
    for r in rows:
        n = r["frame"]
        assert 1 <= n <= sum(1 for _ in _records(Path(r["file"])))


def _records(path: Path):
    data = path.read_bytes()
    pos = 24
    while pos < len(data):
        yield pos
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]


def test_the_bundled_rotated_directory_is_one_capture():
    """fixtures/captures/rotated: a 120 KB Produce request and its answer straddle the two files."""
    rows, err, code = kwire_rows(str(CAPS / "rotated"))
    assert code == 0 and len(rows) == 20 and "damage" not in err
    assert all(r["error"] is None for r in rows)


def test_rotation_order():
    names = ["cap10", "cap", "cap2", "cap1", "cap11", "cap9"]
    assert rotation_order(names) == ["cap", "cap1", "cap2", "cap9", "cap10", "cap11"]
    # -W pads, -G names by time: the same order as the names' text
    padded = ["cap03", "cap00", "cap10", "cap01"]
    assert rotation_order(padded) == sorted(padded)
    timed = ["k-2024-05-01_10:00:10.pcap", "k-2024-05-01_09:59:50.pcap", "k-2024-05-01_10:00:00.pcap"]
    assert rotation_order(timed) == sorted(timed)
    assert rotation_order(["d2/cap", "d10/cap", "d1/cap10", "d1/cap9"]) == ["d1/cap9", "d1/cap10", "d2/cap", "d10/cap"]


def test_same_file_named_twice_is_read_twice(tmp_path):
    one, _e, code = kwire_rows(str(CAPS / "kafkajs-produce.pcap"))
    two, _e, code2 = kwire_rows(str(CAPS / "kafkajs-produce.pcap"), str(CAPS / "kafkajs-produce.pcap"))
    assert code == code2 == 0 and two == one * 2


# ------------------------------------------------------------------ non-regular files (issue 15.4)
def _mkfifo(path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(path)


def test_fifo_in_a_directory_is_skipped_with_a_note(tmp_path):
    d = tmp_path / "caps"
    d.mkdir()
    (d / "a.pcap").write_bytes((CAPS / "kafkajs-produce.pcap").read_bytes())
    _mkfifo(d / "b.pipe")
    assert file_kind(str(d / "b.pipe")) == "fifo"
    seen: list = []
    assert files_under(str(d), lambda p, what: seen.append((p, what))) == [str(d / "a.pcap")]
    assert seen == [(str(d / "b.pipe"), "fifo")]
    rows, err, code = kwire_rows(str(d))  # (a timeout of 120 s: it used to block forever)
    assert code == 0 and len(rows) == 10
    assert f"kwire: note: skipped {d / 'b.pipe'}: a fifo, not a regular file" in err.splitlines()


def test_socket_in_a_directory_is_skipped(tmp_path):
    import socket
    d = tmp_path / "s"
    d.mkdir()
    (d / "a.pcap").write_bytes((CAPS / "kafkajs-produce.pcap").read_bytes())
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(d / "sock"))
    except OSError:
        pytest.skip("cannot bind a unix socket here")
    try:
        rows, err, code = kwire_rows(str(d))
        assert code == 0 and len(rows) == 10 and "a socket, not a regular file" in err
    finally:
        s.close()


def test_a_fifo_named_explicitly_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "live"
    _mkfifo(fifo)
    data = (CAPS / "kafkajs-admin.pcap").read_bytes()

    def feed() -> None:
        with open(fifo, "wb") as f:
            for i in range(0, len(data), 1000):
                f.write(data[i:i + 1000])

    t = threading.Thread(target=feed, daemon=True)
    t.start()
    rows, _err, code = kwire_rows(str(fifo))
    t.join(10)
    want, _e, _c = kwire_rows(str(CAPS / "kafkajs-admin.pcap"))
    assert code == 0 and _without_place(rows) == _without_place(want) and len(rows) > 20
    assert {r["file"] for r in rows} == {str(fifo)}


def test_spark_inputs_skip_fifos_in_directories_and_refuse_them_named(tmp_path):
    pytest.importorskip("pyspark")
    from kwire_cli.spark.job import SparkJobError, expand_inputs
    d = tmp_path / "caps"
    d.mkdir()
    for n in ("cap10", "cap", "cap2"):
        (d / n).write_bytes((CAPS / "kafkajs-produce.pcap").read_bytes())
    _mkfifo(d / "pipe")
    seen: list = []
    got = expand_inputs([str(d)], lambda p, what: seen.append(what))
    assert [Path(p).name for p in got] == ["cap", "cap2", "cap10"] and seen == ["fifo"]
    got = expand_inputs([str(d / "*")], lambda p, what: seen.append(what))
    assert [Path(p).name for p in got] == ["cap", "cap2", "cap10"] and seen == ["fifo", "fifo"]
    with pytest.raises(SparkJobError, match="a fifo, not a regular file"):
        expand_inputs([str(d / "pipe")])
