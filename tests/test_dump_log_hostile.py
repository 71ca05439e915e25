"""kwire dump-log over a log directory with odd and hostile files, in a process of its own whose
peak memory is measured: a FIFO and a dangling symbolic link named like segments are skipped with a
note each (a FIFO blocked the command for ever; a dangling link stopped the directory with exit 1),
an entry whose length says 2^31-1 in a sparse file is one damage line (it was read whole: 6.3 GB,
then MemoryError), a producer snapshot whose count says 21 million and an index of 400,000 entries
are streamed entry by entry (they were held whole: hundreds of MB)."""
from __future__ import annotations

import os
import resource
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import peak_rss

ROOT = Path(__file__).resolve().parents[1]
SEGMENT = ROOT / "fixtures" / "logs" / "kwire-produce-none-0" / "00000000000000000000.log"


def dump_log(*args: str, timeout: float = 60) -> tuple[int, str, str, int, float]:
    """exit code, stdout, stderr (without the memory line), peak RSS in MB, CPU seconds (its user and
    system time: wall time on a shared machine says more about the neighbours; a hang is the
    timeout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(peak_rss.kwire_argv(["dump-log", *args]), capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT), KWIRE_NO_PROGRESS="1"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    err, peak = peak_rss.split(p.stderr)
    return p.returncode, p.stdout, err, peak >> 20, seconds


@pytest.fixture
def hostile_dir(tmp_path: Path) -> Path:
    part = tmp_path / "orders-0"
    part.mkdir()
    shutil.copy(SEGMENT, part / "00000000000000000000.log")
    os.mkfifo(part / "00000000000000000100.log")                               # a FIFO named like a segment
    (part / "00000000000000000200.log").symlink_to(tmp_path / "gone.log")     # a dangling link
    with open(part / "00000000000000000300.log", "wb") as f:                  # sparse: 2 GiB, one entry
        f.write(struct.pack(">qi", 300, (1 << 31) - 1))
        f.truncate(12 + (1 << 31) - 1)
    with open(part / "00000000000000000400.snapshot", "wb") as f:             # 21 million producers, it says
        f.write(struct.pack(">hIi", 1, 0, 21_000_000))
        f.truncate(12 << 20)
    with open(part / "00000000000000000500.index", "wb") as f:                # 400,000 entries
        f.write(b"".join(struct.pack(">ii", i + 1, i * 8) for i in range(400_000)))
    return part


def test_a_hostile_log_directory_is_read_in_bounded_time_and_memory(hostile_dir):
    code, out, err, rss, seconds = dump_log(str(hostile_dir), "--format", "jsonl")
    assert code == 0, err
    assert seconds < 10 and rss < 90, (seconds, rss)
    notes = [x for x in err.splitlines() if x.startswith("kwire: note: skipped")]
    assert len(notes) == 2
    assert any("00000000000000000100.log: a fifo" in x for x in notes)
    assert any("00000000000000000200.log: a dangling symbolic link" in x for x in notes)
    assert "00000000000000000300.log: entry at position 0 (offset 300) has length 2147483647, over the cap" in err
    assert "entry count 21000000 at byte 6" in err
    assert out.count('"type": "producer"') + out.count('"type":"producer"') == ((12 << 20) - 10) // 46
    assert out.count('"index-entry"') == 400_000
    assert "Traceback" not in err and "internal error" not in err


def test_a_fifo_or_device_named_itself_is_one_line(hostile_dir):
    code, _, err, _, _ = dump_log(str(hostile_dir / "00000000000000000100.log"))
    assert code == 1 and err.count("\n") == 1 and err.endswith("\n") and "a fifo, not a regular file" in err


def test_verify_keeps_24_bytes_a_batch(tmp_path):
    """--verify's map of the segment: three arrays of 8-byte numbers, whatever the batch count."""
    from kwire_cli.logs import IndexCheck, IndexEntry, segment_map
    one = bytearray(SEGMENT.read_bytes()[:12 + struct.unpack_from(">i", SEGMENT.read_bytes(), 8)[0]])
    delta = struct.unpack_from(">i", one, 23)[0]
    seg = tmp_path / "00000000000000000000.log"
    with open(seg, "wb") as f:
        for i in range(2000):
            struct.pack_into(">q", one, 0, i * (delta + 1))
            f.write(one)
    with open(seg, "rb") as f:
        m = segment_map(f)
    assert len(m) == 2000 and all(a.itemsize == 8 and len(a) == 2000 for a in (m.positions, m.lasts, m.stamps))
    check = IndexCheck("offset-index", m)
    ok = IndexEntry(0, 10 * (delta + 1) + delta, position=10 * len(one))
    check.check(ok)
    off = IndexEntry(1, 11 * (delta + 1) + delta, position=11 * len(one) + 1)
    check.check(off)
    assert ok.problem is None and off.problem == f"position {11 * len(one) + 1} is not a batch boundary of the segment"
    t = IndexCheck("time-index", m)
    e = IndexEntry(0, 5 * (delta + 1) + delta, timestamp=m.stamps[5])
    t.check(e)
    assert e.problem is None and t.bad == 0
