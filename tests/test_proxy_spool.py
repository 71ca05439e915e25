"""The decoding side's spool: frames past the in-memory backlog wait in a file and are decoded late,
in order, instead of not shown; past its cap they are counted as not shown; when the proxy stops,
the spool is decoded before the summary, unless told to give up."""
from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from typing import Any

import pytest

from kwire_cli.codec import encode_request
from kwire_cli.proxy.decoding import DecodeChannel
from proxy_faults import heartbeat_answer, read_frame, running


def frame(corr: int, n: int) -> bytes:
    import struct
    body = struct.pack(">hhi", 0, 9, corr) + bytes(n)
    return struct.pack(">i", len(body)) + body


def big_heartbeat(corr: int) -> bytes:
    """A Heartbeat request of 20 kB (its member id): 600 of them fill more than the socket pair takes."""
    return encode_request(12, 4, {"CorrelationId": corr, "ClientId": "t"},
                          {"GroupId": "g", "GenerationId": 1, "MemberId": "m" * 20_000, "GroupInstanceId": None})


class SlowSink:
    """Keeps the frames' correlation ids and sizes, ``delay`` seconds each (a decoder that falls behind)."""

    def __init__(self, delay: float) -> None:
        self.got: list[tuple[int, int]] = []
        self.delay = delay

    def frame(self, f: Any, notes: list[str]) -> None:  # noqa: ARG002
        time.sleep(self.delay)
        self.got.append((f.correlation_id, f.size))

    def result(self) -> list[tuple[int, int]]:
        return self.got


def _fields(i: int) -> tuple:
    return ("proxy", i, 0.0, "a", "b", "a<->b", "request", 0, 9, i, None, None, None, 1)


def _put(ch: DecodeChannel, first: int, count: int, size: int) -> int:
    taken = 0
    for i in range(first, first + count):
        f = frame(i, size + i % 7)
        taken += ch.put(_fields(i), [], [f[:8], memoryview(f)[8:]] if i % 2 else f, len(f))
    return taken


@pytest.mark.parametrize("process", [True, False], ids=["process", "thread"])
def test_frames_past_the_backlog_are_spooled_and_all_decoded_in_order(process):
    """A decoder far slower than the frames come, a 1 MiB backlog: the frames it refuses go to the
    spool, and every later one too; the decoding side gets every frame, whole and in order, none
    counted as not shown. Once the spool has drained, frames go straight to the socket again, and
    a second wave that spools again keeps the order."""
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(SlowSink(0.0005), backlog=1 << 20, process=process, spool=1 << 30)
        ch.start(loop)
        t = time.monotonic()
        assert _put(ch, 0, 600, 30_000) == 600
        assert time.monotonic() - t < 5  # never waited for the decoder nor the disk
        assert ch.spool is not None and ch.spool.frames_in > 0 and ch.spooled()[0] > 0
        deadline = time.monotonic() + 60
        while (ch.spool.active or ch.lag()[0]) and time.monotonic() < deadline:
            loop.run_until_complete(asyncio.sleep(0.05))
        assert not ch.spool.active and ch.spooled() == (0, 0) and ch.lag()[0] == 0
        first = ch.spool.frames_in
        assert _put(ch, 600, 600, 30_000) == 600
        assert ch.spool.frames_in > first  # spooled again
        loop.run_until_complete(asyncio.sleep(0.1))
        ch.flush()
        ch.detach()
        ch.close()
    finally:
        loop.close()
    assert ch.not_shown == 0 and ch.broken is None
    assert ch.result == [(i, 8 + 30_000 + i % 7) for i in range(1200)]
    assert ch.spool.most > 1 << 20


def test_frames_added_while_the_decoding_side_is_busy_go_to_disk_not_pile_up_in_memory(monkeypatch):
    """While the spool's thread waits for the decoding side to take more, what the event loop adds
    meanwhile is written to disk: a decoding side slower than the frames come (5 ms a frame of
    30 kB: the spool's thread waits about 0.15 s for it to take each MiB), 2 MiB allowed in memory,
    60 MB added 240 kB at a time (the loop turning between) is all taken, then all decoded in order
    once it speeds up. (Written only between the MiB it sends, about 800 of the 2,000 frames were
    refused.)"""
    import kwire_cli.proxy.spool as spool
    monkeypatch.setattr(spool, "MEMORY", 2 << 20)
    fast = threading.Event()

    class Slowish(SlowSink):
        def frame(self, f: Any, notes: list[str]) -> None:
            if not fast.is_set():
                time.sleep(0.005)
            super().frame(f, notes)

    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(Slowish(0), backlog=1 << 20, process=False, spool=1 << 30)
        ch.start(loop)
        taken = 0
        for burst in range(250):
            taken += _put(ch, burst * 8, 8, 30_000)
            loop.run_until_complete(asyncio.sleep(0.012))
        assert taken == 2000 and ch.not_shown == 0
        assert ch.spool is not None and ch.spool.bytes_out > 0  # it had the socket and waited on it
        fast.set()
        ch.flush()
        ch.detach()
        ch.close()
    finally:
        fast.set()
        loop.close()
    assert ch.not_shown == 0 and [corr for corr, _ in ch.result] == list(range(2000))


def test_past_the_spools_cap_frames_are_counted_not_shown_and_the_rest_stay_in_order():
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(SlowSink(0.002), backlog=1 << 20, process=True, spool=2 << 20)
        ch.start(loop)
        taken = _put(ch, 0, 800, 30_000)
        assert 0 < taken < 800 and ch.not_shown == 800 - taken
        assert ch.spool is not None and ch.spool.most <= 2 << 20
        loop.run_until_complete(asyncio.sleep(0.1))
        ch.flush()
        ch.detach()
        ch.close()
    finally:
        loop.close()
    got = [corr for corr, _ in ch.result]
    assert len(got) == taken and got == sorted(got) and ch.not_shown == 800 - taken


def test_at_the_stop_the_spool_is_decoded_unless_given_up():
    """``close`` writes the spool's frames to the decoding side before the end mark; ``give_up``
    during it stops after a whole message, and the frames left are counted as not shown: the
    frames decoded are the first ones, in order, and with those not shown make every frame."""
    loop = asyncio.new_event_loop()
    try:
        ch = DecodeChannel(SlowSink(0.002), backlog=1 << 20, process=True, spool=1 << 30)
        ch.start(loop)
        assert _put(ch, 0, 3000, 10_000) == 3000
        loop.run_until_complete(asyncio.sleep(0.05))
        ch.flush()
        ch.detach()
        spooled = ch.spooled()[0]
        assert spooled > 1000
        closing = threading.Thread(target=ch.close)
        closing.start()
        time.sleep(0.5)
        ch.give_up()
        closing.join(60)
        assert not closing.is_alive()
    finally:
        loop.close()
    got = [corr for corr, _ in ch.result]
    assert ch.broken is None and 0 < ch.not_shown <= spooled
    assert got == list(range(3000 - ch.not_shown))


def test_the_proxy_decodes_the_spool_before_its_summary_and_says_so():
    """A real proxy, a fake broker, a decoder slower than the client (kwire pcap's rows, made by the
    real decoding side, 2 ms a frame) and a 64 KiB backlog: 600 requests of 20 kB and their answers, the close says how
    many frames it decodes from the spool, and every row comes out in order, none not shown."""
    from kwire_cli.capture.session import Conversation
    from kwire_cli.output.options import OutputOptions
    from kwire_cli.output.show import FrameRows, RowPrinter
    from kwire_cli.output.writers import JsonLinesWriter
    from kwire_cli.proxy.decoding import RowsOnly

    out = io.BytesIO()
    writer = JsonLinesWriter(out)
    rows = FrameRows(Conversation(), RowPrinter(writer, OutputOptions(fmt="jsonl", live=True).keep(), live=True,
                                                summary=RowsOnly()))

    class Slow:
        def frame(self, f: Any, notes: list[str]) -> None:
            time.sleep(0.002)
            rows.frame(f, notes)

        def result(self) -> Any:
            return rows.result()

    async def answer(w: asyncio.StreamWriter, key: int, version: int, corr: int) -> None:
        w.write(heartbeat_answer(corr))

    async def scenario() -> list[str]:
        async with running(answer, decode_backlog=64 << 10, sink=Slow()) as (px, _broker, notes):
            r, w = await asyncio.open_connection(*px.bootstrap)
            for i in range(600):
                w.write(big_heartbeat(i))
                assert await read_frame(r) == heartbeat_answer(i)
            assert px.decoder.spooled()[0] > 0
            w.close()
        assert px.stats.not_shown == 0 and px.stats.frames == 1200
        return notes

    notes = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert any(n.startswith("decoding the ") and "spooled to disk before the summary" in n for n in notes), notes
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(g["kind"], g["correlation_id"]) for g in got] == \
        [(k, i) for i in range(600) for k in ("request", "response")]


def test_yield_holds_the_decoding_while_the_traffic_is_busy_and_feeds_it_when_the_traffic_pauses():
    """--decode-priority yield: 6 MB handed over at once (busy: past 256 KiB within 20 ms) go to the
    spool and none reaches the decoding side while the traffic is busy, though the backlog would
    take them all; nothing reaches it after one quiet stretch of 20 ms either (full-speed traffic has
    such gaps); once nothing came for 100 ms (QUIET_TICKS of them in a row) the spool is written to
    the decoding side, and every frame is decoded, in order. ("low" sends the same frames straight
    to it.)"""
    from kwire_cli.proxy.decoding import QUIET, QUIET_TICKS
    assert QUIET_TICKS > 3  # (the two or three quiet ticks below are not enough)
    for priority in ("yield", "low"):
        loop = asyncio.new_event_loop()
        sink = SlowSink(0)
        try:
            ch = DecodeChannel(sink, backlog=64 << 20, process=False, spool=1 << 30, priority=priority)
            ch.start(loop)
            assert _put(ch, 0, 200, 30_000) == 200
            assert ch.spool is not None
            if priority == "low":
                assert ch.spool.frames_in == 0
            else:
                assert ch.spool.frames_in > 190  # all but the first 256 KiB's
                loop.run_until_complete(asyncio.sleep(QUIET / 4))  # (the loop turns: the first frames go)
                _put(ch, 200, 40, 30_000)  # still busy
                time.sleep(0.2)
                assert ch.spool.bytes_out == 0 and len(sink.got) < 10  # held: nothing from the spool
                loop.run_until_complete(asyncio.sleep(QUIET * 2.5))  # one or two quiet ticks, not QUIET_TICKS
                time.sleep(0.2)
                assert ch.spool.bytes_out == 0 and len(sink.got) < 10  # still held
            deadline = time.monotonic() + 30
            while len(sink.got) < (240 if priority == "yield" else 200) and time.monotonic() < deadline:
                loop.run_until_complete(asyncio.sleep(0.02))
            ch.flush()
            ch.detach()
            ch.close()
        finally:
            loop.close()
        n = 240 if priority == "yield" else 200
        assert ch.not_shown == 0 and ch.result == [(i, 8 + 30_000 + i % 7) for i in range(n)]
