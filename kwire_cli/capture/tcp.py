"""TCP reassembly: each direction of a connection as one in-order byte stream, and its gaps.

Reassembly works in 32-bit modular sequence space unwrapped to an unbounded stream offset, so
wraparound near 2**32 is invisible. Out-of-order segments wait in a small buffer keyed by offset;
retransmissions and overlaps are trimmed (bytes already delivered win; among buffered segments the
one with the lower offset wins). A hole is declared a *gap* (bytes lost, packet numbers on both
sides) when the peer acknowledged past it (the capture missed bytes the peer got) and the hole is
``hold_time`` old or ``hold_packets`` packets of the connection went by since (until then a late
segment, e.g. two segments the capture shows swapped with the ACK of the later one between them,
still fills it), when buffered data exceeds ``max_buffered``, when the connection closes, or at
the end. Bytes a snap length cut off (``Packet.wire_len``) are a gap at once.

In-order bytes and gaps go to the connection's byte-stream stack (``conn.sink``: TLS records,
KIP-43 tokens, then Kafka framing; ``transforms``, ``framing``) as ``data`` and ``gap`` calls; a
gap says whether it is the rest of a packet the snap length cut (framing then still shows the
frame whose header it has, cut).
"""
from __future__ import annotations

from bisect import bisect_right, insort
from typing import TYPE_CHECKING, Any

from .events import GAP
from .outbox import Outbox

if TYPE_CHECKING:
    from .framing import FrameDir

SNAP_CUT = "cut by the snap length"  # why bytes of a packet are lost: the capture kept its first bytes only
M32 = 0xFFFFFFFF
HALF = 0x80000000


class TcpDir:
    """One direction of a connection: what reassembly knows of it."""

    __slots__ = ("base", "nxt", "ooo", "heap", "ooo_bytes", "fin_off", "last_packet", "ack_seq", "ack_packet",
                 "fin_packet", "held", "frames", "src")

    def __init__(self, frames: FrameDir) -> None:
        self.base: int | None = None     # sequence number of stream offset 0
        self.nxt = 0                     # next stream offset expected
        self.ooo: dict[int, Any] = {}              # offset -> (payload, packet, ts, lost_tail)
        self.heap: list[int] = []             # sorted offsets of the buffered segments
        self.ooo_bytes = 0
        self.fin_off: int | None = None
        self.last_packet: int | None = None
        self.ack_seq: int | None = None  # the peer's latest acknowledgement number for this direction
        self.ack_packet: int | None = None  # ... and the packet that carried it
        self.fin_packet: int | None = None
        self.held: int | None = None     # a hole the peer acknowledged, held open up to this offset
        self.frames = frames             # the framing state of the same direction
        self.src = ""

    def finished(self) -> bool:
        return self.fin_off is not None and self.nxt >= self.fin_off and not self.ooo

    def offset(self, seq: int) -> int:
        """The stream offset of sequence number ``seq`` (nearest to what was delivered)."""
        assert self.base is not None
        nxt = self.nxt
        return nxt + (((seq - self.base - nxt) + HALF) & M32) - HALF


class Reassembly:
    """Segments in, in-order bytes and gaps out to each connection's ``sink`` (see the module
    docstring). One for all the connections of an assembler; the state is in their ``TcpDir``s."""

    def __init__(self, box: Outbox, *, max_buffered: int, hold_time: float, hold_packets: int) -> None:
        self.box = box
        self.stats = box.stats
        self.max_buffered = max_buffered
        self.hold_time = hold_time
        self.hold_packets = hold_packets
        self.holding: dict[int, Any] = {}          # id -> Connection with a hole held open (for ``tick``)

    def acked(self, conn: Any, r: TcpDir, file: str, ts: float) -> None:
        """The peer acknowledged up to ``r.ack_seq`` while segments of ``r`` wait in its buffer."""
        assert r.ack_seq is not None
        a = r.offset(r.ack_seq)  # (data was buffered: the direction has started)
        if a >= r.heap[0]:
            self.acked_hole(conn, r, file, a, ts)

    def segment(self, conn: Any, d: TcpDir, seq: int, payload: bytes, wire_len: int, file: str, packet: int,
                ts: float) -> None:
        st = self.stats
        nxt = d.nxt
        off = d.offset(seq)
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
                self.lost(conn, d, end + lost_tail - nxt, file, packet, packet, ts, SNAP_CUT)
                if d.heap:
                    self.drain(conn, d, file, packet, ts)
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
            conn.sink.data(conn, d.frames, payload, file, packet, ts)
            if lost_tail:
                self.lost(conn, d, lost_tail, file, packet, packet, ts, SNAP_CUT)
            if d.heap:
                self.drain(conn, d, file, packet, ts)
            return
        # out of order: keep it until the hole fills or is declared lost
        self.buffer(d, off, payload, packet, ts, lost_tail)
        if d.ack_seq is not None and d.heap:  # (a segment all past the FIN buffers nothing)
            a = d.offset(d.ack_seq)
            if a >= d.heap[0]:
                self.acked_hole(conn, d, file, a, ts)
        while d.ooo_bytes > self.max_buffered:
            self.gaps(conn, d, file, None, one=True)

    def buffer(self, d: TcpDir, off: int, payload: bytes, packet: int, ts: float, lost_tail: int) -> None:
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

    def drain(self, conn: Any, d: TcpDir, file: str, packet: int | None, ts: float | None) -> None:
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
                conn.sink.data(conn, d.frames, data, file, cf, ct)
            if lost_tail and e + lost_tail > d.nxt:
                self.lost(conn, d, e + lost_tail - d.nxt, file, fr, fr, t, SNAP_CUT)

    def acked_hole(self, conn: Any, d: TcpDir, file: str, a: int, ts: float) -> None:
        """The peer acknowledged bytes past a hole (up to offset ``a``): the capture missed them, or
        they come late (a capture can show two segments swapped, the ACK of the later one between
        them). A hole already ``hold_time`` old (capture time since the data past it arrived) is
        declared lost now; a younger one is held open until it is that old or ``hold_packets``
        packets of the connection have gone by, so that a late segment still fills it (a gap,
        once reported, cannot be taken back)."""
        if ts - d.ooo[d.heap[0]][2] >= self.hold_time:
            self.gaps(conn, d, file, a)
            return
        if d.held is None or a > d.held:
            d.held = a
        conn.held = True
        self.holding[id(conn)] = conn

    def expire_holds(self, conn: Any, file: str, ts: float, count: bool = True) -> None:
        """After each packet of a connection with a hole held open (``count``: one more packet of
        it), or as time passes (``tick``): declare what is old enough."""
        if count:
            conn.hold_pkts += 1
        held = False
        for d in conn.dirs:
            a = d.held
            if a is None:
                continue
            if not d.heap or d.heap[0] > a:  # filled (or only later holes, not acknowledged)
                d.held = None
                continue
            if conn.hold_pkts > self.hold_packets or ts - d.ooo[d.heap[0]][2] >= self.hold_time:
                d.held = None
                self.gaps(conn, d, file, a)
                continue
            held = True
        if not held:
            conn.held = False
            conn.hold_pkts = 0

    def gaps(self, conn: Any, d: TcpDir, file: str, upto: int | None, one: bool = False) -> None:
        """Declare holes lost: the one before the first buffered segment (``one``), or all holes
        before offset ``upto`` (None: all)."""
        while d.heap and (upto is None or d.heap[0] <= upto):
            o = d.heap[0]
            if o > d.nxt:
                _data, fr, t, _lt = d.ooo[o]
                self.lost(conn, d, o - d.nxt, file, d.last_packet, fr, t, "")
            self.drain(conn, d, file, None, None)
            if one:
                return

    def lost(self, conn: Any, d: TcpDir, lost: int, file: str, before: int | None, after: int | None, ts: float,
             why: str) -> None:
        """``lost`` stream bytes at ``d.nxt`` were never captured: report, move on, tell the stack."""
        assert d.base is not None  # only a started direction loses bytes
        s0 = (d.base + d.nxt) & M32
        s1 = (s0 + lost) & M32
        where = f"after packet {before}" if before == after else f"between packets {before} and {after}"
        self.box.damage(file, after, conn, GAP, lost,
                        f"{lost} bytes lost {where}" + (f" ({why})" if why else "")
                        + f", {d.src or 'stream'} seq {s0}..{s1}", ts)
        d.nxt += lost
        conn.sink.gap(conn, d.frames, lost, file, after, ts, why == SNAP_CUT)

    def close(self, conn: Any, file: str) -> None:
        """The connection closes: every hole left, and bytes never captured at its end, are gaps."""
        for d in conn.dirs:
            if d.heap:
                self.gaps(conn, d, file, None)
            if d.base is not None:
                self.unseen_tail(conn, d, file)

    def unseen_tail(self, conn: Any, d: TcpDir, file: str) -> None:
        """At close: bytes the peer acknowledged, or that came before the FIN, but that the capture
        never showed (a lost segment followed only by ACKs/FIN) are a gap too."""
        end = d.fin_off
        packet = d.fin_packet
        why = "before the FIN"
        if d.ack_seq is not None:
            a = d.offset(d.ack_seq)  # (called for started directions only)
            if end is not None and a > end:
                a = end  # the ACK of the FIN itself
            if end is None or a > end:
                end, packet, why = a, d.ack_packet, "acknowledged by the peer"
        if end is not None and end > d.nxt:
            self.lost(conn, d, end - d.nxt, file, d.last_packet, packet, conn.last_ts,
                      f"{why}, never captured")
