"""TCP reassembly, Kafka framing and request/response pairing, fed one ``Packet`` at a time.

``StreamAssembler`` knows nothing about files: feed it ``Packet`` tuples in capture order (from
``iter_packets``, or, in Spark, the packets of some connections gathered from several rotated files
and sorted by file order and packet number) and it returns ``KafkaFrame`` and ``Damage`` events;
``finish()`` flushes.

Per connection and direction:

* Reassembly works in 32-bit modular sequence space unwrapped to an unbounded stream offset, so
  wraparound near 2**32 is invisible. Out-of-order segments wait in a small buffer keyed by
  offset; retransmissions and overlaps are trimmed (bytes already delivered win; among buffered
  segments the one with the lower offset wins). A hole is declared a *gap* (bytes lost, packet
  numbers on both sides) when the peer acknowledged past it (the capture missed bytes the peer
  got), when buffered data exceeds ``max_buffered``, when the connection closes, or at the end.
  Bytes a snap length cut off (``Packet.wire_len``) are a gap at once.
* A connection first seen mid-stream (no SYN) starts at its first payload byte, in resync mode.
* Framing: 4-byte big-endian size, then the frame. After a gap, if the size of the frame in
  progress is known, the reader skips exactly the rest of that frame and checks that a plausible
  frame follows; otherwise (and on a mid-stream start, or a size outside 1..``max_frame``) it
  resynchronises: client->broker, the next plausible request header; broker->client, the next
  response whose correlation id matches a request still open on the connection.
* Pairing: requests by correlation id (Produce with acks=0 expects no response); at most
  ``max_open`` open requests per connection (the oldest are dropped and reported).

Memory is bounded per connection (out-of-order buffer, one partial frame, the open requests) and
closed connections are dropped (FIN both ways, RST, or idle longer than ``idle_timeout``).
"""
from __future__ import annotations

import struct
from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator

from .events import (
    ACK,
    FIN,
    GAP,
    NON_KAFKA,
    OVERSIZE_FRAME,
    PARTIAL_FRAME,
    RESYNC_SKIP,
    RST,
    SYN,
    UNANSWERED_REQUEST,
    UNPAIRED_RESPONSE,
    UNPARSEABLE,
    CaptureStats,
    Damage,
    KafkaFrame,
    Packet,
    endpoint,
)
from .kafka import (
    DEFAULT_MAX_FRAME,
    MAX_FRAME_OPTION,
    PRODUCE,
    ApiCheck,
    _plausible_at,
    broker_side,
    find_request_start,
    find_response_start,
    find_response_start_blind,
    looks_like_request,
    produce_acks,
)

_M = 0xFFFFFFFF
_HALF = 0x80000000
_I32 = struct.Struct(">i").unpack_from
_PREFIX = struct.Struct(">hhi").unpack_from
_EMPTY: tuple = ()
_tnew = tuple.__new__


class _Dir:
    """One direction of a connection: reassembly state and framing state."""

    __slots__ = ("base", "nxt", "ooo", "heap", "ooo_bytes", "fin_off", "last_packet", "ack_seq", "ack_packet",
                 "fin_packet", "buf", "start_packet", "resync", "skip", "skip_acc", "skip_from", "verify",
                 "is_request", "src", "dst", "need")

    def __init__(self) -> None:
        self.base: int | None = None     # sequence number of stream offset 0
        self.nxt = 0                     # next stream offset expected
        self.ooo: dict = {}              # offset -> (payload, packet, ts, lost_tail)
        self.heap: list = []             # sorted offsets of the buffered segments
        self.ooo_bytes = 0
        self.fin_off: int | None = None
        self.last_packet: int | None = None
        self.ack_seq: int | None = None  # the peer's latest acknowledgement number for this direction
        self.ack_packet: int | None = None  # ... and the packet that carried it
        self.fin_packet: int | None = None
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

    def finished(self) -> bool:
        return self.fin_off is not None and self.nxt >= self.fin_off and not self.ooo


class Connection:
    """One TCP connection: two directions, the broker side, the open requests."""

    __slots__ = ("keys", "ends", "dirs", "broker", "reason", "label", "open", "noreply", "syn_from",
                 "last_ts", "file", "gen", "kafka", "reset", "fin_seen")

    def __init__(self, src: tuple, dst: tuple, gen: int = 1) -> None:
        self.ends = (src, dst)
        self.keys = (src + dst, dst + src)
        self.dirs = (_Dir(), _Dir())
        self.broker: int | None = None
        self.reason = ""
        self.label = f"{endpoint(*src)}<->{endpoint(*dst)}" + (f"#{gen}" if gen > 1 else "")
        self.open: dict = {}  # correlation id -> (api_key, api_version, ts, packet)
        self.noreply: dict = {}  # the last few acks=0 Produce requests, in case a broker answers anyway
        self.syn_from: int | None = None
        self.last_ts = 0.0
        self.file = ""
        self.gen = gen
        self.kafka = True
        self.reset = False
        self.fin_seen = False


class StreamAssembler:
    """Packets in, Kafka frames and damage out. See the module docstring.

    ``broker_ports``: ports that are brokers (default {9092}); other connections are classified
    by ``kafka.broker_side``. ``strict=True`` drops connections whose broker side could only be
    guessed (SYN receiver / lower port, with no request header seen) as non-Kafka.
    ``api_check(api_key, api_version) -> bool`` may tighten request resynchronisation.
    """

    def __init__(self, *, broker_ports: Iterable[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                 max_buffered: int = 4 << 20, max_open: int = 10000, idle_timeout: float | None = 1800.0,
                 stats: CaptureStats | None = None, api_check: ApiCheck | None = None,
                 strict: bool = False) -> None:
        self.broker_ports = frozenset(broker_ports) if broker_ports is not None else frozenset({9092})
        self.max_frame = max_frame
        self.max_buffered = max_buffered
        self.max_open = max_open
        self.idle_timeout = idle_timeout
        self.stats = stats if stats is not None else CaptureStats()
        self.api_check = api_check
        self.strict = strict
        self.known_brokers: dict = {}    # (ip, port) -> True, learned; bounded
        self._flows: dict = {}           # (src ip, src port, dst ip, dst port) -> (Connection, dir index)
        self._closed: dict = {}          # same key -> (close ts, generation)
        self._out: list = []
        self._count = 0

    # ------------------------------------------------------------------ public
    def feed(self, pkt: Packet) -> list | tuple:
        """Process one packet; return the events it produced (possibly empty)."""
        file, packet, ts, sip, sport, dip, dport, seq, ack, flags, payload, wire_len = pkt
        key = (sip, sport, dip, dport)
        ent = self._flows.get(key)
        self.stats.payload_bytes += len(payload)
        self._count += 1
        if not self._count & 0xFFFF and self.idle_timeout is not None:
            self._sweep(ts)
        if ent is None:
            tomb = self._closed.get(key)
            gen = 1
            if tomb is not None:
                if not flags & SYN and ts - tomb[0] < 120.0:
                    if payload:
                        self.stats.after_close_bytes += len(payload)
                    return _EMPTY
                gen = tomb[1] + 1
                del self._closed[key]
                self._closed.pop((dip, dport, sip, sport), None)
            if not payload and not flags & SYN and wire_len == 0:
                return _EMPTY  # a bare ACK/FIN/RST of a connection we never saw: nothing to start
            conn = Connection((sip, sport), (dip, dport), gen)
            self.stats.connections += 1
            self._flows[conn.keys[0]] = (conn, 0)
            self._flows[conn.keys[1]] = (conn, 1)
            di = 0
        else:
            conn, di = ent
        conn.last_ts = ts
        conn.file = file
        d = conn.dirs[di]
        if flags & SYN:
            isn1 = (seq + 1) & _M
            if d.base is None:
                d.base = isn1
                if not flags & ACK:
                    conn.syn_from = di
                elif conn.syn_from is None:
                    # SYN-ACK without the SYN seen: its ack number starts the other direction
                    conn.syn_from = 1 - di
                    r0 = conn.dirs[1 - di]
                    if r0.base is None:
                        r0.base = ack & _M
            elif isn1 != d.base and not d.nxt and not d.heap and d.fin_off is None and not conn.reset:
                d.base = isn1  # a SYN sent again with a new ISN before any data: start from it
            elif isn1 != d.base and not flags & ACK:
                # a new connection on the same ports: close the old one, start again
                self._close(conn, file, "new SYN on the same ports")
                del self._closed[key]
                self._closed.pop((dip, dport, sip, sport), None)
                conn = Connection((sip, sport), (dip, dport), conn.gen + 1)
                self.stats.connections += 1
                self._flows[conn.keys[0]] = (conn, 0)
                self._flows[conn.keys[1]] = (conn, 1)
                conn.last_ts = ts
                conn.file = file
                di = 0
                d = conn.dirs[0]
                d.base = isn1
                conn.syn_from = 0
            seq = isn1
        r = conn.dirs[1 - di]
        if flags & ACK:
            r.ack_seq = ack
            r.ack_packet = packet
            if r.heap:
                assert r.base is not None  # data was buffered: the direction has started
                a = r.nxt + (((ack - r.base - r.nxt) + _HALF) & _M) - _HALF
                if a >= r.heap[0]:
                    self._gaps(conn, r, file, a)
        if payload or wire_len:
            if d.base is None:
                d.base = seq
                d.resync = True
            if conn.broker is None:
                self._decide(conn, di, payload, file, packet, ts)
            if conn.kafka:
                nxt = d.nxt
                n = len(payload)
                if (seq - d.base - nxt) & _M == 0 and wire_len <= n and d.fin_off is None and not d.heap:
                    # the common case, in order and whole: straight to the framer
                    d.nxt = nxt + n
                    d.last_packet = packet
                    self.stats.delivered_bytes += n
                    self._deliver(conn, d, payload, file, packet, ts)
                else:
                    self._segment(conn, d, seq, payload, wire_len, file, packet, ts)
            else:
                self.stats.non_kafka_bytes += len(payload)
        if flags & FIN:
            if d.base is None:
                d.base = seq
            off = d.nxt + (((seq - d.base - d.nxt) + _HALF) & _M) - _HALF
            end = off + (wire_len if wire_len > len(payload) else len(payload))
            if d.fin_off is None or end < d.fin_off:
                d.fin_off = end
                d.fin_packet = packet
            conn.fin_seen = True
        if flags & RST:
            conn.reset = True
            self._close(conn, file, "reset")
        elif conn.fin_seen and conn.dirs[0].finished() and conn.dirs[1].finished():
            self._close(conn, file, "closed")
        out = self._out
        if out:
            self._out = []
            return out
        return _EMPTY

    def finish(self) -> list:
        """End of input: declare remaining gaps, flush partial frames, close every connection."""
        seen = set()
        for conn, _ in list(self._flows.values()):
            if id(conn) in seen:
                continue
            seen.add(id(conn))
            self._close(conn, conn.file, "end of capture")
        out = self._out
        self._out = []
        return out

    def process(self, packets: Iterable[Packet]) -> Iterator:
        """Feed every packet, then finish; yield the events."""
        feed = self.feed
        for p in packets:
            ev = feed(p)
            if ev:
                yield from ev
        yield from self.finish()

    # ------------------------------------------------------------------ internals
    def _damage(self, file, packet, conn, kind, nbytes, detail, ts=None):
        self.stats.add_damage(kind, nbytes)
        self._out.append(Damage(file, packet, conn.label, kind, nbytes, detail, ts))

    def _decide(self, conn: Connection, di: int, payload: bytes, file, packet, ts) -> None:
        req_from = di if looks_like_request(payload, self.max_frame, self.api_check) else None
        syn_recv = None if conn.syn_from is None else 1 - conn.syn_from
        b, reason = broker_side(conn.ends[0], conn.ends[1], self.broker_ports,
                                known_brokers=self.known_brokers, request_from=req_from,
                                syn_receiver=syn_recv)
        conn.broker = b
        conn.reason = reason
        client, broker = conn.ends[1 - b], conn.ends[b]
        cl, br = endpoint(*client), endpoint(*broker)
        conn.label = f"{cl}->{br}" + (f"#{conn.gen}" if conn.gen > 1 else "")
        cd, bd = conn.dirs[1 - b], conn.dirs[b]
        cd.is_request, cd.src, cd.dst = True, cl, br
        bd.is_request, bd.src, bd.dst = False, br, cl
        if self.strict and reason in ("syn", "lower-port"):
            conn.kafka = False
            self._damage(file, packet, conn, NON_KAFKA, 0,
                         f"packet {packet}: connection {conn.label} does not look like Kafka "
                         f"(no broker port, no request header); its bytes are not decoded", ts)
            return
        if broker not in self.known_brokers:
            if len(self.known_brokers) >= 65536:
                self.known_brokers.pop(next(iter(self.known_brokers)))
            self.known_brokers[broker] = True

    def _segment(self, conn, d: _Dir, seq, payload, wire_len, file, packet, ts) -> None:
        st = self.stats
        nxt = d.nxt
        off = nxt + (((seq - d.base - nxt) + _HALF) & _M) - _HALF
        n = len(payload)
        lost_tail = wire_len - n if wire_len > n else 0
        end = off + n
        if d.fin_off is not None and end + lost_tail > d.fin_off:
            beyond = end - max(off, d.fin_off)
            if beyond > 0:
                st.after_close_bytes += beyond
                payload = payload[:n - beyond]
                n -= beyond
                end -= beyond
            lost_tail = max(0, min(lost_tail, d.fin_off - end))
        if end <= nxt:
            st.duplicate_bytes += n
            if lost_tail and end + lost_tail > nxt:
                # a snap-length cut segment whose captured part we had: the rest is lost
                d.last_packet = packet
                self._lost(conn, d, end + lost_tail - nxt, file, packet, packet, ts, "cut by the snap length")
                if d.heap:
                    self._drain(conn, d, file, packet, ts)
            return
        if off < nxt:
            trim = nxt - off
            st.duplicate_bytes += trim
            payload = payload[trim:]
            off = nxt
            n -= trim
        if off == nxt:
            d.nxt = end
            d.last_packet = packet
            st.delivered_bytes += n
            self._deliver(conn, d, payload, file, packet, ts)
            if lost_tail:
                self._lost(conn, d, lost_tail, file, packet, packet, ts, "cut by the snap length")
            if d.heap:
                self._drain(conn, d, file, packet, ts)
            return
        # out of order: keep it until the hole fills or is declared lost
        self._buffer(d, off, payload, packet, ts, lost_tail)
        if d.ack_seq is not None and d.heap:  # (a segment all past the FIN buffers nothing)
            assert d.base is not None
            a = nxt + (((d.ack_seq - d.base - nxt) + _HALF) & _M) - _HALF
            if a >= d.heap[0]:
                self._gaps(conn, d, file, a)
        while d.ooo_bytes > self.max_buffered:
            self._gaps(conn, d, file, None, one=True)

    def _buffer(self, d: _Dir, off, payload, packet, ts, lost_tail) -> None:
        """Keep an out-of-order segment, minus every byte already buffered (first copy wins): it
        may be split into the pieces that fill holes between buffered segments."""
        st = self.stats
        offs, ooo = d.heap, d.ooo
        end = off + len(payload)
        i = bisect_right(offs, off)
        if i:
            p = offs[i - 1]
            pend = p + len(ooo[p][0])
            if pend > off:
                cut = min(pend, end) - off
                st.duplicate_bytes += cut
                off += cut
        pieces = []
        while off < end:
            if i < len(offs) and offs[i] < end:
                q = offs[i]
                if q > off:
                    pieces.append((off, q))
                qend = q + len(ooo[q][0])
                covered = min(qend, end) - max(q, off)
                if covered > 0:
                    st.duplicate_bytes += covered
                off = max(off, qend)
                i += 1
            else:
                pieces.append((off, end))
                break
        base = end - len(payload)
        for a, b in pieces:
            piece = payload[a - base:b - base]
            ooo[a] = (piece, packet, ts, lost_tail if b == end else 0)
            insort(offs, a)
            d.ooo_bytes += b - a
            st.pending_bytes += b - a
        if not pieces and lost_tail and end not in ooo:
            ooo[end] = (b"", packet, ts, lost_tail)
            insort(offs, end)

    def _drain(self, conn, d: _Dir, file, packet, ts) -> None:
        """Deliver buffered segments that are now in order. ``packet``/``ts``: the packet that made
        them deliverable (None: each segment's own)."""
        st = self.stats
        heap, ooo = d.heap, d.ooo
        while heap and heap[0] <= d.nxt:
            o = heap.pop(0)
            data, fr, t, lost_tail = ooo.pop(o)
            k = len(data)
            d.ooo_bytes -= k
            st.pending_bytes -= k
            e = o + k
            if e <= d.nxt:
                st.duplicate_bytes += k
            else:
                if o < d.nxt:
                    trim = d.nxt - o
                    st.duplicate_bytes += trim
                    data = data[trim:]
                d.nxt = e
                d.last_packet = fr
                st.delivered_bytes += len(data)
                cf, ct = (fr, t) if packet is None else (packet, ts)
                self._deliver(conn, d, data, file, cf, ct)
            if lost_tail and e + lost_tail > d.nxt:
                self._lost(conn, d, e + lost_tail - d.nxt, file, fr, fr, t, "cut by the snap length")

    def _gaps(self, conn, d: _Dir, file, upto, one: bool = False) -> None:
        """Declare holes lost: the one before the first buffered segment (``one``), or all holes
        before offset ``upto`` (None: all)."""
        while d.heap and (upto is None or d.heap[0] <= upto):
            o = d.heap[0]
            if o > d.nxt:
                _data, fr, t, _lt = d.ooo[o]
                self._lost(conn, d, o - d.nxt, file, d.last_packet, fr, t, "")
            self._drain(conn, d, file, None, None)
            if one:
                return

    def _lost(self, conn, d: _Dir, lost: int, file, before, after, ts, why: str) -> None:
        """``lost`` stream bytes at ``d.nxt`` were never captured: report, move on, tell the framer."""
        assert d.base is not None  # only a started direction loses bytes
        s0 = (d.base + d.nxt) & _M
        s1 = (s0 + lost) & _M
        where = f"after packet {before}" if before == after else f"between packets {before} and {after}"
        self._damage(file, after, conn, GAP, lost,
                     f"{lost} bytes lost {where}" + (f" ({why})" if why else "")
                     + f", {d.src or 'stream'} seq {s0}..{s1}", ts)
        d.nxt += lost
        self._frame_gap(conn, d, lost, file, after, ts)

    # ------------------------------------------------------------------ framing
    def _deliver(self, conn, d: _Dir, data, file, packet, ts) -> None:
        if d.skip:
            n = len(data)
            if n <= d.skip:
                d.skip -= n
                return
            data = data[d.skip:]
            d.skip = 0
        buf = d.buf
        if not buf and not d.resync and not d.verify:
            # fast path: frames straight out of this segment
            n = len(data)
            pos = 0
            maxf = self.max_frame
            while n - pos >= 4:
                size = _I32(data, pos)[0]
                if size <= 0 or size > maxf:
                    break
                e = pos + 4 + size
                if e > n:
                    break
                self._emit(conn, d, data[pos + 4:e], file, packet, ts, packet)
                pos = e
            if pos == n:
                return
            buf += data[pos:] if pos else data
            d.start_packet = packet
            if n - pos < 4 or 0 < _I32(data, pos)[0] <= maxf:
                return
        else:
            if not buf:
                d.start_packet = packet
            buf += data
            if len(buf) < d.need:
                return
        self._frames(conn, d, file, packet, ts)

    def _frames(self, conn, d: _Dir, file, packet, ts) -> None:
        buf = d.buf
        maxf = self.max_frame
        first = True
        while True:
            if d.resync:
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
                self._end_resync(conn, d, file, packet, ts)
                d.start_packet = packet
            if len(buf) < 4:
                return
            size = _I32(buf, 0)[0]
            if size <= 0 or size > maxf:
                why = (f"is over the frame cap of {maxf} bytes ({MAX_FRAME_OPTION} raises it)" if size > maxf
                       else f"outside 1..{maxf}")
                self._damage(file, packet, conn, OVERSIZE_FRAME, 0,
                             f"packet {packet}: {d.src}->{d.dst} frame size {size} {why}; resynchronising", ts)
                d.resync = True
                d.skip_from = packet
                del buf[:1]
                d.skip_acc += 1
                continue
            if d.verify:
                if d.is_request:
                    p = _plausible_at(buf, 0, maxf, self.api_check)
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
            self._emit(conn, d, bytes(buf[4:total]), file, packet, ts,
                       d.start_packet if first else packet)
            del buf[:total]
            first = False
            d.start_packet = packet

    def _end_resync(self, conn, d: _Dir, file, packet, ts) -> None:
        if d.skip_acc:
            what = "a request header" if d.is_request else "a response to an open request"
            self._damage(file, packet, conn, RESYNC_SKIP, d.skip_acc,
                         f"{d.skip_acc} bytes {d.src}->{d.dst} skipped looking for {what} "
                         f"(packets {d.skip_from}..{packet})", ts)
        d.skip_acc = 0
        d.skip_from = None

    def _frame_gap(self, conn, d: _Dir, lost: int, file, packet, ts) -> None:
        """The framer's side of a gap of ``lost`` bytes right after what it has seen."""
        buf = d.buf
        d.need = 0
        st = self.stats
        if d.resync:
            d.skip_acc += len(buf)
            buf.clear()
            return
        if d.skip:
            # the gap fell inside the rest of a frame we were skipping: those bytes are gap, not partial
            cut = min(lost, d.skip)
            st.damage_bytes[PARTIAL_FRAME] = st.damage_bytes.get(PARTIAL_FRAME, 0) - cut
            if lost < d.skip:
                d.skip -= lost
                return
            over = lost - d.skip
            d.skip = 0
            if over:
                d.resync = True
            else:
                d.verify = True
            return
        n = len(buf)
        if n >= 4:
            size = _I32(buf, 0)[0]
            remaining = 4 + size - n
            if d.is_request and n >= 12:
                # the request's header survived: keep it open so its response still pairs
                ak, av, corr = _PREFIX(buf, 4)
                acks = produce_acks(bytes(buf[4:]), av) if ak == PRODUCE else None
                if acks != 0:
                    self._open_request(conn, ak, av, corr, ts, packet)
            if lost <= remaining:
                d.skip = remaining - lost
                d.verify = True
                partial = n + d.skip
                how = "the rest of it skipped"
            else:
                d.resync = True
                partial = n
                how = "resynchronising"
            self._damage(file, packet, conn, PARTIAL_FRAME, partial,
                         f"packet {packet}: {d.src}->{d.dst} frame of {size} bytes cut by a "
                         f"{lost}-byte gap ({n} bytes before it, {partial - n} after); {how}", ts)
        elif n:
            d.resync = True
            self._damage(file, packet, conn, PARTIAL_FRAME, n,
                         f"packet {packet}: {n} bytes of a frame size prefix cut by a gap", ts)
        else:
            d.resync = True
        buf.clear()

    def _open_request(self, conn, ak, av, corr, ts, packet) -> None:
        op = conn.open
        if len(op) >= self.max_open and corr not in op:
            old = next(iter(op))
            del op[old]
            self._damage(conn.file, packet, conn, UNANSWERED_REQUEST, 0,
                         f"request with correlation id {old} dropped unanswered: more than "
                         f"{self.max_open} open requests on the connection")
        op[corr] = (ak, av, ts, packet)

    def _emit(self, conn, d: _Dir, data: bytes, file, packet, ts, start_packet) -> None:
        st = self.stats
        size = len(data)
        st.frames += 1
        st.frame_bytes += size + 4
        if d.is_request:
            st.requests += 1
            if size < 8:
                self._out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "request", data,
                                                    size, None, None, None, None, None, start_packet, None)))
                self._damage(file, packet, conn, UNPARSEABLE, 0,
                             f"packet {packet}: request of {size} bytes is too short for a header", ts)
                return
            ak, av, corr = _PREFIX(data, 0)
            acks = None
            if ak == PRODUCE:
                acks = produce_acks(data, av)
                if acks == 0:
                    st.acks0_requests += 1
                    nr = conn.noreply
                    if len(nr) >= 64:
                        del nr[next(iter(nr))]
                    nr[corr] = (ak, av, ts, packet)
            if acks != 0:
                op = conn.open
                if len(op) >= self.max_open and corr not in op:
                    self._open_request(conn, ak, av, corr, ts, packet)
                else:
                    op[corr] = (ak, av, ts, packet)
            self._out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "request", data, size,
                                                ak, av, corr, None, None, start_packet, acks)))
            return
        st.responses += 1
        if size < 4:
            self._out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "response", data,
                                                size, None, None, None, None, None, start_packet, None)))
            self._damage(file, packet, conn, UNPARSEABLE, 0,
                         f"packet {packet}: response of {size} bytes has no correlation id", ts)
            return
        corr = _I32(data, 0)[0]
        req = conn.open.pop(corr, None)
        if req is None and conn.noreply:
            # some brokers (tansu 0.6) answer acks=0 Produce requests: pair them all the same
            req = conn.noreply.pop(corr, None)
            if req is not None:
                st.acks0_answered += 1
        if req is None:
            self._out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "response", data,
                                                size, None, None, corr, None, None, start_packet, None)))
            self._damage(file, packet, conn, UNPAIRED_RESPONSE, 0,
                         f"packet {packet}: response with correlation id {corr} matches no open request", ts)
            return
        st.paired += 1
        self._out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "response", data, size,
                                            req[0], req[1], corr, req[2], req[3], start_packet, None)))

    # ------------------------------------------------------------------ closing
    def _close(self, conn: Connection, file, why: str) -> None:
        if self._flows.get(conn.keys[0], (None,))[0] is not conn:
            return
        st = self.stats
        if conn.kafka and conn.broker is not None:
            for d in conn.dirs:
                if d.heap:
                    self._gaps(conn, d, file, None)
                if d.base is not None:
                    self._unseen_tail(conn, d, file)
                if d.skip:
                    st.damage_bytes[PARTIAL_FRAME] = st.damage_bytes.get(PARTIAL_FRAME, 0) - d.skip
                    d.skip = 0
                if d.resync:
                    d.skip_acc += len(d.buf)
                    d.buf.clear()
                    self._end_resync(conn, d, file, d.last_packet, conn.last_ts)
                elif d.buf:
                    n = len(d.buf)
                    want = (_I32(d.buf, 0)[0] + 4) if n >= 4 else None
                    self._damage(file, d.last_packet, conn, PARTIAL_FRAME, n,
                                 f"{d.src}->{d.dst}: incomplete frame at {why}: {n} of "
                                 f"{want if want is not None else '?'} bytes", conn.last_ts)
                    d.buf.clear()
            if conn.open:
                ids = list(conn.open)
                shown = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
                self._damage(file, None, conn, UNANSWERED_REQUEST, 0,
                             f"{len(ids)} request(s) without a response at {why} "
                             f"(correlation ids {shown})", conn.last_ts)
                conn.open.clear()
        for k in conn.keys:  # both the same for a connection from an ip:port to itself
            self._flows.pop(k, None)
            self._closed[k] = (conn.last_ts, conn.gen)
        while len(self._closed) > 200000:
            self._closed.pop(next(iter(self._closed)))

    def _unseen_tail(self, conn, d: _Dir, file) -> None:
        """At close: bytes the peer acknowledged, or that came before the FIN, but that the capture
        never showed (a lost segment followed only by ACKs/FIN) are a gap too."""
        end = d.fin_off
        packet = d.fin_packet
        why = "before the FIN"
        if d.ack_seq is not None:
            assert d.base is not None  # (called for started directions only)
            a = d.nxt + (((d.ack_seq - d.base - d.nxt) + _HALF) & _M) - _HALF
            if end is not None and a > end:
                a = end  # the ACK of the FIN itself
            if end is None or a > end:
                end, packet, why = a, d.ack_packet, "acknowledged by the peer"
        if end is not None and end > d.nxt:
            self._lost(conn, d, end - d.nxt, file, d.last_packet, packet, conn.last_ts,
                       f"{why}, never captured")

    def _sweep(self, now: float) -> None:
        assert self.idle_timeout is not None  # (only called with one)
        limit = now - self.idle_timeout
        idle = {id(c): c for c, _ in self._flows.values() if c.last_ts < limit}
        for conn in idle.values():
            self._close(conn, conn.file, "idle timeout")
        cut = now - 120.0
        for k in [k for k, v in self._closed.items() if v[0] < cut]:
            del self._closed[k]

