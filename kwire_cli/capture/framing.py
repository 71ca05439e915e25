"""Kafka framing: a connection's byte stream (after TCP, TLS and KIP-43 tokens) cut into frames.

Each frame is a 4-byte big-endian size, then the frame. The framer is the last stage of every
connection's byte-stream stack (``data`` / ``gap`` calls, as the stages before it take) and hands
each whole frame to pairing (``pairing.Pairing.emit``).

After a gap, if the size of the frame in progress is known, the reader skips exactly the rest of
that frame and checks that a plausible frame follows; otherwise (and on a mid-stream start, or a
size outside 1..``max_frame``) it resynchronises: client->broker, the next plausible request
header; broker->client, the next response whose correlation id matches a request still open on
the connection. With a ``check`` (``check.CodecCheck``) resynchronisation accepts only frames the
codec confirms (``hunt.Hunter``); without one, a plausible header is enough.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from .events import OVERSIZE_FRAME, PARTIAL_FRAME, RESYNC_SKIP
from .kafka import (
    MAX_FRAME_OPTION,
    PRODUCE,
    ApiCheck,
    FrameCheck,
    find_request_start,
    find_response_start,
    find_response_start_blind,
    plausible_at,
    produce_acks,
)
from .outbox import Outbox

if TYPE_CHECKING:
    from .pairing import Pairing

_I32 = struct.Struct(">i").unpack_from
_PREFIX = struct.Struct(">hhi").unpack_from


class FrameDir:
    """One direction of a connection: what framing knows of it (and hunting's state)."""

    __slots__ = ("buf", "start_packet", "resync", "skip", "skip_acc", "skip_from", "verify", "is_request", "src",
                 "dst", "need", "marks", "hoff", "scan", "scan_ver", "wait", "divert", "cut")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.start_packet: int | None = None
        self.resync = False
        self.skip = 0                    # bytes still to skip of a frame a gap cut
        self.skip_acc = 0                # bytes skipped in the current resync episode
        self.skip_from: int | None = None
        self.verify = False
        self.is_request = False
        self.need = 0                    # buffered bytes needed before the pending frame completes
        self.src = ""
        self.dst = ""
        # hunting (resync confirmed by a FrameCheck): where each buffered packet's bytes start
        self.marks: list[Any] = []            # (offset in the hunt, packet, ts, file), ascending
        self.hoff = 0                    # offset in the hunt of buf[0]
        self.scan = 0                    # buf offset from which candidates are still to be judged
        self.scan_ver = -1               # the connection's ``opened`` count when ``scan`` was set
        self.wait: list[Any] = []             # candidates waiting for their frame: (end, offset, extra)
        self.divert = False              # a stage was put before framing: hand it the bytes after this frame
        self.cut = False                 # the frame being skipped was cut by a gap and shown all the same

    def forget_hunt(self) -> None:
        self.marks = []
        self.hoff = 0
        self.scan = 0
        self.wait = []


def oversize_why(size: int, maxf: int) -> str:
    return (f"is over the frame cap of {maxf} bytes ({MAX_FRAME_OPTION} raises it)" if size > maxf
            else f"outside 1..{maxf}")


class Framer:
    """Bytes in, whole frames out to ``pairing`` (see the module docstring). One for all the
    connections of an assembler; the state is in their ``FrameDir``s."""

    def __init__(self, box: Outbox, pairing: Pairing, *, max_frame: int, check: FrameCheck | None,
                 api_check: ApiCheck | None) -> None:
        self.box = box
        self.pairing = pairing
        self.emit = pairing.emit
        self.max_frame = max_frame
        self.check = check
        self.api_check = api_check
        self.hunter: Any = None  # with a check, a ``hunt.Hunter`` (set by the assembler)

    def data(self, conn: Any, d: FrameDir, data: Any, file: str, packet: int | None, ts: float | None) -> None:
        if d.skip:
            n = len(data)
            if n < d.skip:
                d.skip -= n
                return
            data = data[d.skip:]
            d.skip = 0
            d.cut = False
            if not len(data):
                return
        buf = d.buf
        if not buf and not d.resync and not d.verify:
            # fast path: frames straight out of this segment
            n = len(data)
            pos = 0
            maxf = self.max_frame
            emit = self.emit
            while n - pos >= 4:
                size = _I32(data, pos)[0]
                if size <= 0 or size > maxf:
                    break
                e = pos + 4 + size
                if e > n:
                    break
                emit(conn, d, data[pos + 4:e], file, packet, ts, packet)
                pos = e
                if d.divert:
                    self.hand_over(conn, d, data[pos:], file, packet, ts)
                    return
            if pos == n:
                return
            buf += data[pos:] if pos else data
            d.start_packet = packet
            if n - pos < 4 or 0 < _I32(data, pos)[0] <= maxf:
                return
        else:
            if d.resync and self.hunter is not None:
                d.marks.append((d.hoff + len(buf), packet, ts, file))
                buf += data
                self.hunter.hunt(conn, d, file, packet, ts)
                return
            if not buf:
                d.start_packet = packet
            buf += data
            if len(buf) < d.need:
                return
        self.frames(conn, d, file, packet, ts)

    def hand_over(self, conn: Any, d: FrameDir, rest: Any, file: str, packet: int | None,
                  ts: float | None) -> None:
        """A stage was put before framing (KIP-43 tokens follow the frame just emitted): the bytes
        after it are that stage's."""
        d.divert = False
        if len(rest):
            conn.sasl.data(conn, d, bytes(rest), file, packet, ts)

    def frames(self, conn: Any, d: FrameDir, file: str, packet: int | None, ts: float | None) -> None:
        buf = d.buf
        maxf = self.max_frame
        first = True
        while True:
            if d.resync:
                if self.hunter is not None:
                    self.hunter.begin(d, file, packet, ts)
                    self.hunter.hunt(conn, d, file, packet, ts)
                    return
                if d.skip_from is None:
                    d.skip_from = packet
                if d.is_request:
                    i, ok = find_request_start(buf, 0, maxf, self.api_check)
                elif conn.open or conn.dirs[1 - conn.broker].base is not None:
                    i, ok = find_response_start(buf, conn.open, 0, maxf)
                else:  # the client's side of this connection is not in the capture at all
                    i, ok = find_response_start_blind(buf, 0, maxf)
                if i:
                    del buf[:i]
                    d.skip_acc += i
                if not ok:
                    return
                d.resync = False
                d.verify = False
                self.end_resync(conn, d, file, packet, ts)
                d.start_packet = packet
            if len(buf) < 4:
                return
            size = _I32(buf, 0)[0]
            if size <= 0 or size > maxf:
                self.box.damage(file, packet, conn, OVERSIZE_FRAME, 0,
                                f"packet {packet}: {d.src}->{d.dst} frame size {size} {oversize_why(size, maxf)}; "
                                "resynchronising", ts)
                d.resync = True
                d.skip_from = packet
                del buf[:1]
                d.skip_acc += 1
                continue
            if d.verify:
                if d.is_request:
                    p = plausible_at(buf, 0, maxf, self.api_check)
                    if p == -1:
                        return
                    if p == 0:
                        d.resync = True
                        d.skip_from = packet
                        continue
                d.verify = False
            total = 4 + size
            if len(buf) < total:
                d.need = total
                return
            d.need = 0
            self.emit(conn, d, bytes(buf[4:total]), file, packet, ts, d.start_packet if first else packet)
            del buf[:total]
            first = False
            d.start_packet = packet
            if d.divert:
                rest = bytes(buf)
                buf.clear()
                self.hand_over(conn, d, rest, file, packet, ts)
                return

    def end_resync(self, conn: Any, d: FrameDir, file: str, packet: int | None, ts: float | None) -> None:
        if d.skip_acc:
            what = "a request header" if d.is_request else "a response to an open request"
            self.box.damage(file, packet, conn, RESYNC_SKIP, d.skip_acc,
                            f"{d.skip_acc} bytes {d.src}->{d.dst} skipped looking for {what} "
                            f"(packets {d.skip_from}..{packet})", ts)
        d.skip_acc = 0
        d.skip_from = None

    def gap(self, conn: Any, d: FrameDir, lost: int, file: str, packet: int | None, ts: float | None,
            snap: bool = False) -> None:
        """A gap of ``lost`` bytes right after what framing has seen (``snap``: the rest of a packet
        the snap length cut)."""
        buf = d.buf
        d.need = 0
        st = self.box.stats
        d.forget_hunt()
        if d.resync:
            d.skip_acc += len(buf)
            buf.clear()
            return
        if d.skip:
            # the gap fell inside the rest of a frame we were skipping: those bytes are gap, not partial
            cut = min(lost, d.skip)
            if d.cut:
                st.cut_bytes -= cut
            else:
                st.damage_bytes[PARTIAL_FRAME] = st.damage_bytes.get(PARTIAL_FRAME, 0) - cut
            if lost < d.skip:
                d.skip -= lost
                return
            over = lost - d.skip
            d.skip = 0
            d.cut = False
            if over:
                d.resync = True
            else:
                d.verify = True
            return
        n = len(buf)
        if snap and n >= (12 if d.is_request else 8):
            # the snap length cut the frame after its header (its size, and a request's api key,
            # version and correlation id; a response's correlation id): a row all the same, cut,
            # with its first bytes; the sequence numbers tell where it ends
            size = _I32(buf, 0)[0]
            remaining = 4 + size - n
            data = bytes(buf[4:])
            buf.clear()
            if lost <= remaining:
                d.skip = remaining - lost
                d.cut = d.skip > 0
                d.verify = True
                st.cut_bytes += n + d.skip
            else:
                st.cut_bytes += n
                d.resync = True  # the next frame's start is in the gap
            self.emit(conn, d, data, file, packet, ts, d.start_packet if d.start_packet is not None else packet, size)
            return
        if n >= 4:
            size = _I32(buf, 0)[0]
            remaining = 4 + size - n
            if d.is_request and n >= 12:
                # the request's header survived: keep it open so its response still pairs
                ak, av, corr = _PREFIX(buf, 4)
                acks = produce_acks(bytes(buf[4:]), av) if ak == PRODUCE else None
                if acks != 0:
                    self.pairing.open_request(conn, ak, av, corr, ts, packet)
            if lost <= remaining:
                d.skip = remaining - lost
                d.verify = True
                partial = n + d.skip
                how = "the rest of it skipped"
            else:
                d.resync = True
                partial = n
                how = "resynchronising"
            self.box.damage(file, packet, conn, PARTIAL_FRAME, partial,
                            f"packet {packet}: {d.src}->{d.dst} frame of {size} bytes cut by a "
                            f"{lost}-byte gap ({n} bytes before it, {partial - n} after); {how}", ts)
        elif n:
            d.resync = True
            self.box.damage(file, packet, conn, PARTIAL_FRAME, n,
                            f"packet {packet}: {n} bytes of a frame size prefix cut by a gap", ts)
        else:
            d.resync = True
        buf.clear()

    def close(self, conn: Any, d: FrameDir, file: str, why: str, last_packet: int | None) -> None:
        """The connection closes: what framing still holds of direction ``d`` is reported."""
        st = self.box.stats
        ts = conn.last_ts
        if d.skip:
            if d.cut:
                st.cut_bytes -= d.skip
            else:
                st.damage_bytes[PARTIAL_FRAME] = st.damage_bytes.get(PARTIAL_FRAME, 0) - d.skip
            d.skip = 0
            d.cut = False
        hunter = self.hunter
        if d.resync and hunter is not None and d.buf:
            hunter.hunt(conn, d, file, last_packet, ts, final=True)
        if d.resync:
            if hunter is not None and d.buf and not d.is_request:
                hunter.tiler.tile_at_end(conn, d, file)
            d.skip_acc += len(d.buf)
            d.buf.clear()
            d.marks = []
            self.end_resync(conn, d, file, last_packet, ts)
        elif d.buf:
            n = len(d.buf)
            want = (_I32(d.buf, 0)[0] + 4) if n >= 4 else None
            self.box.damage(file, last_packet, conn, PARTIAL_FRAME, n,
                            f"{d.src}->{d.dst}: incomplete frame at {why}: {n} of "
                            f"{want if want is not None else '?'} bytes", ts)
            d.buf.clear()
