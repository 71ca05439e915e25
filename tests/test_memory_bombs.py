"""Tiny inputs that decode into huge value trees (issue 15, item 1): each bomb shape of the issue,
at its size, through every command that decodes it (kwire decode as JSON, YAML and a tree; kwire
pcap's summary and JSON lines), in a subprocess under an address-space limit.

With the default limits a frame costs at most a few hundred MB and a few seconds: the run exits
cleanly (0, or a named one-line error), never with a traceback or MemoryError, its peak RSS is
under 1 GiB (kwire decode) or 500 MB (kwire pcap), and what stopped decoding is named with the
option that raises it. The bombs are built by tests/memory_bombs.py (kwire's own encoder, cramjam);
the before/after table of the issue was measured on the same bombs.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time

import pytest

from memory_bombs import ISSUE_SIZES, bomb, pcap_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AS_LIMIT = 1536 << 20        # address space of the child: 1.5 GiB
DECODE_RSS = 1 << 30         # the goal: kwire decode under 1 GiB per frame
PCAP_RSS = 500 * 1000 * 1000  # kwire pcap under 500 MB on any capture
SECONDS = 30                 # the goal is 10 s a frame (3-4 s measured); slack for slow machines
CAP_NOTE = b"(--max-records raises it)"

COMMANDS = {
    "decode-json": (lambda f: ["decode", f"@{f}.bin", "--format", "json"], DECODE_RSS),
    "decode-tree": (lambda f: ["decode", f"@{f}.bin"], DECODE_RSS),
    "decode-yaml": (lambda f: ["decode", f"@{f}.bin", "--format", "yaml"], DECODE_RSS),
    "pcap-summary": (lambda f: ["pcap", f"{f}.pcap", "--summary"], PCAP_RSS),
    "pcap-jsonl": (lambda f: ["pcap", f"{f}.pcap", "--format", "jsonl"], PCAP_RSS),
}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    for shape in ISSUE_SIZES:
        frame = bomb(shape)
        (d / f"{shape}.bin").write_bytes(frame)
        (d / f"{shape}.pcap").write_bytes(pcap_of(frame))
    return d


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def run_limited(args: list[str], out_path) -> tuple[int, int, float, bytes]:
    """``kwire ARGS`` under the address-space limit, stdout to ``out_path``: (exit code, peak RSS
    in bytes, seconds, stderr). The peak is the child's own (os.wait4's rusage)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               KWIRE_NO_PROGRESS="1", COLUMNS="200")
    err_path = f"{out_path}.err"
    t = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as errf:
        p = subprocess.Popen([sys.executable, "-m", "kwire_cli", *args], stdout=out, stderr=errf,
                             cwd=ROOT, env=env, preexec_fn=_limit_address_space)
        timer = threading.Timer(SECONDS * 4, p.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
    seconds = time.monotonic() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(err_path, "rb") as f:
        err = f.read()
    return p.returncode, usage.ru_maxrss * 1024, seconds, err


def _contains(path, needle: bytes) -> bool:
    """Whether the file holds ``needle`` (read a megabyte at a time: outputs are ~200 MB)."""
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if needle in tail + chunk:
                return True
            tail = chunk[-len(needle):]
    return False


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("shape", list(ISSUE_SIZES))
def test_a_bomb_costs_a_bounded_frame_and_names_the_cap(bombs, tmp_path, shape, command):
    make_args, rss_goal = COMMANDS[command]
    out = tmp_path / "out"
    code, peak, seconds, err = run_limited(make_args(str(bombs / shape)), out)
    text = err.decode("utf-8", "replace")
    assert b"Traceback" not in err and b"MemoryError" not in err, text[-3000:]
    assert code == 0, text[-3000:]
    assert all(line.startswith("kwire: ") for line in text.splitlines()), text[-3000:]
    # the cut is named, with the option that raises it: a warning on stderr, and in the output
    assert "cut at a frame's cap of records and headers (--max-records raises it)" in text, text
    if command == "decode-yaml":   # YAML folds long strings at spaces
        assert _contains(out, b"--max-records")
    elif command != "pcap-summary":
        assert _contains(out, CAP_NOTE)
    else:
        assert _contains(out, b"cut at a frame's cap of records and headers " + CAP_NOTE)
    assert peak <= rss_goal, f"peak RSS {peak >> 20} MiB"
    assert seconds <= SECONDS, f"{seconds:.1f} s"


@pytest.mark.parametrize("fmt", ["--summary", "--format=jsonl"])
def test_a_capture_of_several_bombs_costs_one_frame_at_a_time(tmp_path, fmt):
    """Fixed: kwire pcap's loop held the row before while the next one decoded (two frames' trees
    at once: 740 MB for this capture). Four 4,000,000-record bombs, two on one connection (never
    answered) and two on connections of their own: still under 500 MB."""
    from capture_util import Conversation, write_pcap
    from memory_bombs import KV_RECORD, produce_request, zstd_records_batch
    batch = zstd_records_batch(4_000_000, KV_RECORD)
    segs = []
    shared = Conversation(client=("10.0.0.9", 40000))
    segs += shared.handshake()
    for i in range(2):
        own = Conversation(client=("10.0.0.1", 50000 + i))
        segs += own.handshake() + own.send(0, produce_request(batch, corr=i + 1), mss=1400)
        segs += shared.send(0, produce_request(batch, corr=i + 1), mss=1400)
    cap = tmp_path / "bombs.pcap"
    cap.write_bytes(write_pcap(segs))
    code, peak, seconds, err = run_limited(["pcap", str(cap), fmt], tmp_path / "out")
    assert code == 0 and b"Traceback" not in err, err
    assert b"4 record batch(es) cut at a frame's cap of records and headers (--max-records raises it)" in err
    assert peak <= PCAP_RSS, f"peak RSS {peak >> 20} MiB"
    assert seconds <= 4 * SECONDS


@pytest.mark.parametrize("fmt", ["json", "yaml", "pretty"])
def test_an_input_of_several_bombs_is_decoded_one_frame_at_a_time(tmp_path, fmt):
    """Fixed: kwire decode of several frames decoded them all before printing any (four
    4,000,000-record bombs back to back, 14 KB: 1,230 MB at the new cap); each is now
    printed and let go of before the next one decodes (405 MB)."""
    from memory_bombs import KV_RECORD, produce_request, zstd_records_batch
    batch = zstd_records_batch(4_000_000, KV_RECORD)
    data = tmp_path / "bombs.bin"
    data.write_bytes(b"".join(produce_request(batch, corr=i + 1) for i in range(4)))
    out = tmp_path / "out"
    code, peak, seconds, err = run_limited(["decode", f"@{data}", "--format", fmt], out)
    assert code == 0 and b"Traceback" not in err, err
    assert err.decode() == ("kwire: warning: 4 record batch(es) cut at a frame's cap of records and headers "
                            "(--max-records raises it)\n")
    assert peak <= DECODE_RSS, f"peak RSS {peak >> 20} MiB"
    assert seconds <= 4 * SECONDS
    if fmt == "json":
        with open(out, "rb") as f:
            assert f.read(60).startswith(b'[\n  {\n    "api_key": 0,\n    "api_name": "Produce"')


def test_the_tree_says_how_many_records_it_leaves_out(bombs, tmp_path):
    out = tmp_path / "out"
    code, _, _, err = run_limited(["decode", f"@{bombs / 'zstd-records'}.bin"], out)
    assert code == 0, err
    text = out.read_text()
    assert "… 389999 more records not shown: a tree shows 10000 batch, record and header lines " \
           "(--format json shows all)" in text
    assert "record 399998 at byte 2799986 of the decompressed payload: the 399998 records and headers left " \
           "of the frame's cap are used up (--max-records raises it)" in " ".join(text.split())


def test_max_records_raises_the_cap(tmp_path):
    """The option the note names does raise it (500,000 empty records: cut by default, all of
    them with --max-records 500002, the batch counting 2)."""
    frame = bomb("zstd-records", 500_000)
    cap = tmp_path / "b.pcap"
    cap.write_bytes(pcap_of(frame))
    env = dict(os.environ, PYTHONPATH=ROOT)

    def summary(*more: str) -> bytes:
        p = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(cap), "--summary", "--format", "json",
                            *more], capture_output=True, cwd=ROOT, env=env, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        return p.stdout
    out = summary()
    assert b'"records": 399998' in out and b'"item_cap": 1' in out
    out = summary("--max-records", "500002")
    assert b'"records": 500000' in out and b'"item_cap": 0' in out
