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
  got) and the hole is ``hold_time`` old or ``hold_packets`` packets of the connection went by
  since (until then a late segment, e.g. two segments the capture shows swapped with the ACK of
  the later one between them, still fills it), when buffered data exceeds ``max_buffered``, when
  the connection closes, or at the end. Bytes a snap length cut off (``Packet.wire_len``) are a
  gap at once.
* A connection first seen mid-stream (no SYN) starts at its first payload byte, in resync mode:
  its first four bytes are not trusted as a size. With a ``check`` (``check.CodecCheck``, as
  kwire pcap and spark-decode use) a frame start is accepted only when the codec confirms it (see
  the hunting methods: ``_hunt_request``, ``_hunt_response``, ``_tile``); without one, a
  plausible header is enough.
* Framing: 4-byte big-endian size, then the frame. After a gap, if the size of the frame in
  progress is known, the reader skips exactly the rest of that frame and checks that a plausible
  frame follows; otherwise (and on a mid-stream start, or a size outside 1..``max_frame``) it
  resynchronises: client->broker, the next plausible request header; broker->client, the next
  response whose correlation id matches a request still open on the connection.
* TLS: a connection whose first bytes are a ClientHello (any port), or TLS records where no Kafka
  request could start, goes through a ``kwire_cli.tls.TlsConnection`` with the assembler's key log:
  the in-order bytes of each direction are TLS records, their decrypted application data is the
  Kafka byte stream that framing reads. A gap in the records is a hole in the plaintext (framing
  resynchronises); a connection without secrets in the key log is one ``tls-no-key`` ``Note``
  (not damage: its records are whole; nothing framed; counted per TLS version and server in
  ``CaptureStats.tls_not_decrypted``); handshakes, alerts and key updates are ``Note`` events.
* KIP-43 legacy SASL: after a SaslHandshake v0 answer without error, the client and the broker
  exchange raw size-prefixed tokens, not Kafka frames: as many each way as the mechanism's rounds
  (PLAIN and OAUTHBEARER 1, SCRAM 2; a PLAIN broker's token is empty: size 0). They come out as
  frames of kind ``sasl-token``; Kafka framing resumes after them. Other mechanisms (GSSAPI) have
  no fixed count: their tokens stay undecoded frames.
* Pairing: requests by correlation id (Produce with acks=0 expects no response); at most
  ``max_open`` open requests per connection (the oldest are dropped and reported); with a
  ``request_timeout``, requests unanswered for that long (capture time) expire and are reported
  (``unanswered-request``, counted in ``CaptureStats.expired_requests``).

Memory is bounded per connection (out-of-order buffer, one partial frame, the open requests) and
closed connections are dropped (FIN both ways, RST, or idle longer than ``idle_timeout``).

Live captures (``kwire_cli.capture.live``): ``tick(now)`` tells the assembler that capture time
``now`` has come with no packet (the input is waiting for traffic), so that a hole held open for a
late segment is declared a gap ``hold_time`` after it opened, and requests expire, without waiting
for the next packet.
"""
from __future__ import annotations

import struct
from bisect import bisect_right, insort
from collections.abc import Iterable, Iterator

from kwire_cli.tls import (
    ALERT,
    HANDSHAKE,
    KEY_UPDATE,
    NO_KEY,
    KeyLog,
    Plaintext,
    TlsConnection,
    TlsEvent,
    looks_like_client_hello,
    looks_like_tls_record,
)
from kwire_cli.tls import (
    GAP as TLS_GAP,
)

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
    TLS_NO_KEY,
    TLS_PREFIX,
    UNANSWERED_REQUEST,
    UNPAIRED_RESPONSE,
    UNPARSEABLE,
    CaptureStats,
    Damage,
    KafkaFrame,
    Note,
    Packet,
    endpoint,
)
from .kafka import (
    DEFAULT_MAX_FRAME,
    MAX_FRAME_OPTION,
    PRODUCE,
    REQUEST_CANDIDATE,
    ApiCheck,
    FrameCheck,
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
_H16 = struct.Struct(">h").unpack_from
_I32P = struct.Struct(">i").pack
_EMPTY: tuple = ()
_tnew = tuple.__new__
SASL_HANDSHAKE = 17
SASL_TOKEN = "sasl-token"  # the kind of a KIP-43 raw SASL token's frame
# rounds of raw tokens each way after a SaslHandshake v0, by mechanism (unknown: not switched)
SASL_ROUNDS = {"PLAIN": 1, "OAUTHBEARER": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}
_INF = float("inf")
API_VERSIONS = 18
EPHEMERAL = 32768  # the lowest port Linux (and IANA: 49152) hands out to clients


def _first(t: tuple):
    return t[0]


def _cover(wait: list, i: int, plausible) -> int | None:
    """The end of the furthest-reaching candidate still waiting that starts before ``i`` and whose
    frame would hold it: a frame found inside a frame not yet judged waits for that judgement.
    Waiting candidates whose first bytes already contradict the spec (``plausible(offset, extra)``
    is False) are dropped from ``wait`` here (only a candidate that holds up another is examined)."""
    cover = None
    k = 0
    while k < len(wait):
        e, w, x, m = wait[k]
        if w < i < e:
            # examined again once it has twice the bytes it had at the last look (m < 0: -bytes then)
            if m >= 0 or plausible.bytes_at(w) >= -2 * m:
                if not plausible(w, x):
                    del wait[k]
                    continue
                wait[k] = (e, w, x, -max(1, plausible.bytes_at(w)))
            if cover is None or e > cover:
                cover = e
        k += 1
    return cover


class _Plausible:
    """``(offset, extra) -> bool``: could the waiting candidate at ``offset`` still be a frame? Its
    first bytes are decoded (zero-padded to its size) by ``test``; candidates larger than
    ``window`` are not examined (padding them would cost what waiting for them does)."""

    __slots__ = ("buf", "n", "window", "test")

    def __init__(self, buf, n: int, window: int, test) -> None:
        self.buf, self.n, self.window, self.test = buf, n, window, test

    def bytes_at(self, i: int) -> int:
        return self.n - i

    def __call__(self, i: int, x) -> bool:
        size = _I32(self.buf, i)[0]
        if size > self.window:
            return True
        return self.test(i, size, x)


class _Dir:
    """One direction of a connection: reassembly state and framing state."""

    __slots__ = ("base", "nxt", "ooo", "heap", "ooo_bytes", "fin_off", "last_packet", "ack_seq", "ack_packet",
                 "fin_packet", "buf", "start_packet", "resync", "skip", "skip_acc", "skip_from", "verify",
                 "is_request", "src", "dst", "need", "marks", "hoff", "scan", "scan_ver", "wait", "held")

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
        # hunting (resync confirmed by a FrameCheck): where each buffered packet's bytes start
        self.marks: list = []            # (offset in the hunt, packet, ts, file), ascending
        self.hoff = 0                    # offset in the hunt of buf[0]
        self.scan = 0                    # buf offset from which candidates are still to be judged
        self.scan_ver = -1               # the connection's ``opened`` count when ``scan`` was set
        self.wait: list = []             # candidates waiting for their frame: (end, offset, extra)
        self.held: int | None = None     # a hole the peer acknowledged, held open up to this offset

    def finished(self) -> bool:
        return self.fin_off is not None and self.nxt >= self.fin_off and not self.ooo


class Connection:
    """One TCP connection: two directions, the broker side, the open requests."""

    __slots__ = ("keys", "ends", "dirs", "broker", "reason", "label", "open", "noreply", "syn_from",
                 "last_ts", "file", "gen", "kafka", "reset", "fin_seen", "apis", "opened", "cid", "held",
                 "hold_pkts", "tls", "sasl", "sasl_mech")

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
        self.apis: set = set()   # (api key, version) of the requests seen (bounded)
        self.opened = 0          # requests opened so far (resync rescans when it changes)
        self.cid = False         # a client id of this connection is in known_clients
        self.held = False        # a direction holds an acknowledged hole open (late segments)
        self.hold_pkts = 0       # packets of the connection since then
        self.tls: TlsConnection | None = None  # TLS records: decrypted before framing
        self.sasl: list | None = None   # KIP-43 raw tokens still to come [client, server], after a v0 handshake
        self.sasl_mech: str | None = None  # the mechanism the last SaslHandshake v0 request named


class StreamAssembler:
    """Packets in, Kafka frames and damage out. See the module docstring.

    ``broker_ports``: ports that are brokers (default {9092}); other connections are classified
    by ``kafka.broker_side``. ``strict=True`` drops connections whose broker side could only be
    guessed (SYN receiver / lower port, with no request header seen) as non-Kafka.
    ``api_check(api_key, api_version) -> bool`` may tighten request resynchronisation.

    ``hold_time`` (capture seconds) / ``hold_packets``: how long a hole the peer acknowledged stays
    open for a late segment before it is declared a gap.

    ``request_timeout`` (capture seconds, None: never): a request still unanswered that long after
    it completed expires (reported, counted in ``stats.expired_requests``; its response, should it
    come after all, is unpaired). Live captures set it so that memory stays flat.

    ``keylog``: the ``kwire_cli.tls.KeyLog`` that TLS connections are decrypted with (None: an
    empty one; TLS connections are still recognised, and reported as not decrypted).

    ``check`` (a ``kafka.FrameCheck``, e.g. ``check.CodecCheck()``): resynchronisation then accepts
    only frames the codec confirms (see the module docstring); a candidate whose frame is not
    complete yet is waited for while it is at most ``resync_window`` bytes (larger ones need
    stronger evidence), and up to ``resync_window`` bytes before a response's confirmed start are
    kept to find the responses to requests the capture never showed. Without it, resync trusts a
    plausible header (the behaviour kept for hand-made test streams).
    """

    def __init__(self, *, broker_ports: Iterable[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                 max_buffered: int = 4 << 20, max_open: int = 10000, idle_timeout: float | None = 1800.0,
                 stats: CaptureStats | None = None, api_check: ApiCheck | None = None,
                 strict: bool = False, check: FrameCheck | None = None,
                 resync_window: int = 1 << 20, hold_time: float = 0.2, hold_packets: int = 64,
                 keylog: KeyLog | None = None, request_timeout: float | None = None) -> None:
        self.broker_ports = frozenset(broker_ports) if broker_ports is not None else frozenset({9092})
        self.max_frame = max_frame
        self.max_buffered = max_buffered
        self.max_open = max_open
        self.idle_timeout = idle_timeout
        self.stats = stats if stats is not None else CaptureStats()
        self.api_check = api_check
        self.strict = strict
        self.check = check
        self.resync_window = min(resync_window, max_frame)
        self.hold_time = hold_time
        self.hold_packets = hold_packets
        self.request_timeout = request_timeout
        self._holding: dict = {}         # id -> Connection with a hole held open (for ``tick``)
        self._next_expiry = -_INF        # capture time of the next look for expired requests
        self.keylog = keylog if keylog is not None else KeyLog()
        if check is not None and api_check is None:
            self.api_check = check.api_ok
        self.known_clients: set = set()  # client ids (bytes) of requests seen, for large candidates; bounded
        self.max_pending = 4 << 20       # bytes set aside to tile at the end (``_stash``), at most
        self._pending: list = []
        self._pending_bytes = 0
        self._apis_closed: set = set()   # (api key, version) of the requests of closed connections; bounded
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
        if ts >= self._next_expiry and self.request_timeout is not None:
            self._expire_requests(ts)
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
                    self._acked_hole(conn, r, file, a, ts)
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
        if conn.held:
            self._expire_holds(conn, file, ts)
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

    def tick(self, now: float) -> list | tuple:
        """No packet until capture time ``now`` (a live capture waiting for traffic): declare the
        holes held open that are ``hold_time`` old, expire requests older than
        ``request_timeout``, forget closed connections' tombstones; return the events."""
        for key, conn in list(self._holding.items()):
            if self._flows.get(conn.keys[0], (None,))[0] is not conn:
                del self._holding[key]  # closed since
                continue
            if conn.held:
                self._expire_holds(conn, conn.file, now, count=False)
            if not conn.held:
                del self._holding[key]
        if self.request_timeout is not None and now >= self._next_expiry:
            self._expire_requests(now)
        out = self._out
        if out:
            self._out = []
            return out
        return _EMPTY

    def _expire_requests(self, now: float) -> None:
        """Requests unanswered for ``request_timeout`` expire (looked at once a capture second);
        closed connections' tombstones older than 120 s go too."""
        timeout = self.request_timeout
        assert timeout is not None
        self._next_expiry = now + 1.0
        limit = now - timeout
        seen = set()
        for conn, _ in list(self._flows.values()):
            op = conn.open
            if not op or id(conn) in seen:
                continue
            seen.add(id(conn))
            old = []
            for corr, req in op.items():  # opened in capture order: the oldest first
                if req[2] >= limit:
                    break
                old.append(corr)
            if not old:
                continue
            for corr in old:
                del op[corr]
            self.stats.expired_requests += len(old)
            shown = ", ".join(str(i) for i in old[:5]) + (", ..." if len(old) > 5 else "")
            self._damage(conn.file, None, conn, UNANSWERED_REQUEST, 0,
                         f"{len(old)} request(s) without a response after {timeout:g} s, expired "
                         f"(correlation ids {shown})", now, tuple(old))
        if self._closed:
            cut = now - 120.0
            closed = self._closed
            while closed:
                k = next(iter(closed))
                if closed[k][0] >= cut:
                    break
                del closed[k]

    def finish(self) -> list:
        """End of input: declare remaining gaps, flush partial frames, close every connection."""
        seen = set()
        for conn, _ in list(self._flows.values()):
            if id(conn) in seen:
                continue
            seen.add(id(conn))
            self._close(conn, conn.file, "end of capture")
        if self._pending:
            self._resolve_pending()
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
    def _damage(self, file, packet, conn, kind, nbytes, detail, ts=None, corrs=None):
        self.stats.add_damage(kind, nbytes)
        self._out.append(Damage(file, packet, conn.label, kind, nbytes, detail, ts, corrs))

    def _decide(self, conn: Connection, di: int, payload: bytes, file, packet, ts) -> None:
        ports = self.broker_ports
        pa, pb = conn.ends[0][1], conn.ends[1][1]
        hello = looks_like_client_hello(payload)  # whoever sends it is the client
        if hello or (looks_like_tls_record(payload)  # or TLS caught after its handshake
                     and not looks_like_request(payload, self.max_frame, self.api_check)):
            conn.tls = TlsConnection(self.keylog, "")
            self.stats.tls_connections += 1
        if hello:
            req_from = di
        elif (pa in ports) != (pb in ports):
            req_from = None  # the port decides
        elif conn.syn_from is None and self.check is not None and (pa < EPHEMERAL) != (pb < EPHEMERAL):
            # caught mid-stream, one side on an ephemeral port: that is the client (its first bytes
            # may be an answer that happens to read as a request, and the lower port decides)
            req_from = None
        elif looks_like_request(payload, self.max_frame, self.api_check) and self._vouch(payload, conn):
            req_from = di
        else:
            req_from = None
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

    def _vouch(self, payload: bytes, conn) -> bool:
        """With a check: does the payload start with a whole request the codec confirms? A capture
        that starts mid-stream may begin with a broker's bytes that only look like a header (a
        SaslAuthenticate answer reads as a Produce v2 request with no topics): without the SYN,
        the request must also name a client."""
        check = self.check
        if check is None:
            return True
        e = 4 + _I32(payload, 0)[0]
        if e > len(payload) or (conn.syn_from is None and _H16(payload, 12)[0] <= 0):
            return False
        r = check.request(bytes(payload[4:e]))
        return r == 2 or (r == 1 and e == len(payload))

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
                self._acked_hole(conn, d, file, a, ts)
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

    def _acked_hole(self, conn, d: _Dir, file, a: int, ts) -> None:
        """The peer acknowledged bytes past a hole (up to offset ``a``): the capture missed them, or
        they come late (a capture can show two segments swapped, the ACK of the later one between
        them). A hole already ``hold_time`` old (capture time since the data past it arrived) is
        declared lost now; a younger one is held open until it is that old or ``hold_packets``
        packets of the connection have gone by, so that a late segment still fills it (a gap,
        once reported, cannot be taken back)."""
        if ts - d.ooo[d.heap[0]][2] >= self.hold_time:
            self._gaps(conn, d, file, a)
            return
        if d.held is None or a > d.held:
            d.held = a
        conn.held = True
        self._holding[id(conn)] = conn

    def _expire_holds(self, conn, file, ts, count: bool = True) -> None:
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
                self._gaps(conn, d, file, a)
                continue
            held = True
        if not held:
            conn.held = False
            conn.hold_pkts = 0

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
        if conn.tls is not None:
            self._tls_items(conn, conn.tls.gap(0 if d.is_request else 1, lost), file, after, ts)
            return
        self._frame_gap(conn, d, lost, file, after, ts)

    # ------------------------------------------------------------------ framing
    def _deliver(self, conn, d: _Dir, data, file, packet, ts) -> None:
        tls = conn.tls
        if tls is not None:
            self.stats.tls_bytes += len(data)
            self._tls_items(conn, tls.feed(0 if d.is_request else 1, data), file, packet, ts)
            return
        self._frame_in(conn, d, data, file, packet, ts)

    def _tls_items(self, conn, items: list, file, packet, ts) -> None:
        """What a TLS connection gave back: plaintext to the framer, events as damage or notes."""
        for it in items:
            if it.__class__ is Plaintext:
                d = conn.dirs[1 - conn.broker] if it.direction == 0 else conn.dirs[conn.broker]
                self.stats.tls_plaintext += len(it.data)
                self._frame_in(conn, d, it.data, file, packet, ts)
            else:
                self._tls_event(conn, it, file, packet, ts)

    def _tls_event(self, conn, ev: TlsEvent, file, packet, ts) -> None:
        st = self.stats
        kind = ev.kind
        if kind == HANDSHAKE:
            hs = ev.handshake
            if hs is not None:
                name = f"{hs.version} {hs.cipher_suite}"
                st.tls_sessions[name] = st.tls_sessions.get(name, 0) + 1
            self._out.append(Note(file, packet, conn.label, "tls", ev.message, ts))
        elif kind in (ALERT, KEY_UPDATE):
            self._out.append(Note(file, packet, conn.label, "tls-" + kind, ev.message, ts))
        elif kind == NO_KEY:
            # not damage: the records are whole, there is no key for them (said once per server)
            ver = ev.handshake.version.replace("v", " ") if ev.handshake is not None else "TLS"
            server = endpoint(*conn.ends[conn.broker]) if conn.broker is not None else conn.label
            key = f"{ver} on {server}"
            st.tls_not_decrypted[key] = st.tls_not_decrypted.get(key, 0) + 1
            self._out.append(Note(file, packet, conn.label, TLS_NO_KEY, ev.message, ts))
        elif kind != TLS_GAP:  # (a TCP gap is reported as such already)
            self._damage(file, packet, conn, TLS_PREFIX + kind, ev.nbytes, ev.message, ts)
        if ev.breaks_stream and ev.direction is not None:
            # the plaintext has a hole of unknown size here: the framer resynchronises
            d = conn.dirs[1 - conn.broker] if ev.direction == 0 else conn.dirs[conn.broker]
            self._frame_gap(conn, d, self.max_frame + 8, file, packet, ts)

    def _frame_in(self, conn, d: _Dir, data, file, packet, ts) -> None:
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
            if d.resync and self.check is not None:
                d.marks.append((d.hoff + len(buf), packet, ts, file))
                buf += data
                self._hunt(conn, d, file, packet, ts)
                return
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
                if self.check is not None:
                    self._begin_hunt(d, file, packet, ts)
                    self._hunt(conn, d, file, packet, ts)
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
                self._end_resync(conn, d, file, packet, ts)
                d.start_packet = packet
            if len(buf) < 4:
                return
            size = _I32(buf, 0)[0]
            if size == 0 and conn.sasl is not None and conn.sasl[0 if d.is_request else 1]:
                self._emit(conn, d, b"", file, packet, ts, d.start_packet if first else packet)
                del buf[:4]
                first = False
                d.start_packet = packet
                continue
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

    # ------------------------------------------------------------------ hunting (with a FrameCheck)
    def _begin_hunt(self, d: _Dir, file, packet, ts) -> None:
        """Enter hunting with what ``d.buf`` holds (the bytes of a frame that lost sync)."""
        if not d.marks:
            d.hoff = 0
            if d.buf:
                d.marks.append((0, d.start_packet if d.start_packet is not None else packet, ts, file))
        d.scan = 0
        d.wait = []
        d.scan_ver = -1
        d.need = 0
        if d.skip_from is None:
            d.skip_from = d.marks[0][1] if d.marks else packet

    def _mark(self, d: _Dir, off: int) -> tuple:
        """(offset, packet, ts, file) of the packet that delivered ``d.buf[off]``."""
        marks = d.marks
        i = bisect_right(marks, (d.hoff + off, _INF)) - 1
        return marks[i if i >= 0 else 0]

    def _drop(self, d: _Dir, k: int, skipped: bool = True) -> None:
        """Forget ``d.buf[:k]`` while hunting (``skipped``: those bytes are resync-skip)."""
        if k <= 0:
            return
        del d.buf[:k]
        if skipped:
            d.skip_acc += k
        d.hoff += k
        d.scan = max(0, d.scan - k)
        if d.wait:
            d.wait = [(e - k, i - k, x, m) for e, i, x, m in d.wait if i >= k]
        marks = d.marks
        i = bisect_right(marks, (d.hoff, _INF)) - 1
        if i > 0:
            del marks[:i]

    def _hunt(self, conn, d: _Dir, file, packet, ts, final: bool = False) -> None:
        """Resynchronise on confirmed frames only: find the first frame start the check confirms in
        ``d.buf``, report the bytes before it, emit it and the frames after it; until then wait.
        ``final``: the stream ends, candidates still waiting for bytes will never have them."""
        while True:
            if d.is_request:
                at, keep = self._hunt_request(d, final)
                tiles: list = []
            else:
                at, keep, tiles = self._hunt_response(conn, d, final)
            if at is None:
                self._drop(d, keep)
                if d.skip_from is None:
                    d.skip_from = packet
                return
            first = tiles[0][0] if tiles else at
            if d.is_request or not self._stash(conn, d, first, _I32(d.buf, first + 4)[0]):
                self._drop(d, first)
            self._end_resync(conn, d, file, self._mark(d, 0)[1] if d.buf else packet, ts)
            d.resync = False
            d.verify = False
            for a, e in tiles:
                self._emit_marked(conn, d, a - first, e - first)
            self._drop(d, at - first, skipped=False)
            if not self._frames_marked(conn, d, packet):
                return

    @staticmethod
    def _rejudge(wait: list, n: int, judge, plausible, final: bool) -> tuple:
        """Judge again the candidates waiting for bytes (``(end, offset, extra, seen)``, by offset):
        those whose frame is all here, all of them at the end of the stream.
        Returns (the first confirmed ``(offset, extra)`` no earlier waiting candidate's frame holds,
        or None; the candidates still waiting)."""
        still: list = []
        for ent in wait:
            e, i, x, seen = ent
            if e <= n or final:
                r, e2 = judge(i, x)
                seen = n - i
                if r < 0 and final:
                    r = 0
            else:
                still.append(ent)
                continue
            if r == 1:
                cover = _cover(still, i, plausible)
                if cover is None:
                    return (i, x), still
                still.append((cover, i, x, seen))
            elif r < 0:
                still.append((e2, i, x, seen))
        return None, still

    def _hunt_request(self, d: _Dir, final: bool = False) -> tuple:
        """(offset of the first confirmed request, 0) or (None, bytes that can never start one).

        Candidates whose frame has not fully arrived wait (``d.wait``); a later candidate that the
        check confirms wins over them unless one of them would hold it."""
        buf = d.buf
        n = len(buf)

        def judge(i: int, _x) -> tuple:
            return self._judge_request(buf, i, n)

        check = self.check
        assert check is not None
        plausible = _Plausible(buf, n, self.resync_window,
                               lambda i, size, _x: check.request_prefix(bytes(buf[i + 4:n]), size))
        if d.wait:
            won, d.wait = self._rejudge(d.wait, n, judge, plausible, final)
            if won is not None:
                d.wait = []
                return won[0], 0
        wait = d.wait
        i = d.scan
        search = REQUEST_CANDIDATE.search
        while True:
            m = search(buf, i)
            if m is None:
                break
            i = m.start()
            r, e = self._judge_request(buf, i, n)
            if r < 0 and final:
                r = 0
            if r == 1:
                cover = _cover(wait, i, plausible)
                if cover is None:
                    d.wait = []
                    return i, 0
                r, e = -1, cover
            if r < 0 and len(wait) < 64:
                wait.append((e, i, None, n - i))
            i += 1
        d.scan = max(i, n - 13)
        keep = d.scan
        if wait:
            keep = min(keep, wait[0][1])
        return None, keep

    def _emit_marked(self, conn, d: _Dir, a: int, e: int) -> None:
        """Emit the frame at ``d.buf[a:e]`` (size prefix included), its packets from the marks."""
        sp = self._mark(d, a)[1]
        _o, ep, ets, efile = self._mark(d, e - 1)
        self._emit(conn, d, bytes(d.buf[a + 4:e]), efile, ep, ets, sp)

    def _frames_marked(self, conn, d: _Dir, packet) -> bool:
        """In sync at ``d.buf[0]`` after hunting: emit the whole frames buffered (packets from the
        marks) and leave hunting. True: a size went out of bounds and hunting goes on."""
        buf = d.buf
        maxf = self.max_frame
        while len(buf) >= 4:
            size = _I32(buf, 0)[0]
            if size <= 0 or size > maxf:
                _o, p, t, f = self._mark(d, 0)
                why = (f"is over the frame cap of {maxf} bytes ({MAX_FRAME_OPTION} raises it)" if size > maxf
                       else f"outside 1..{maxf}")
                self._damage(f, p, conn, OVERSIZE_FRAME, 0,
                             f"packet {p}: {d.src}->{d.dst} frame size {size} {why}; resynchronising", t)
                d.resync = True
                d.skip_from = p
                d.scan = 0
                d.wait = []
                self._drop(d, 1)
                return True
            total = 4 + size
            if len(buf) < total:
                d.need = total
                break
            self._emit_marked(conn, d, 0, total)
            self._drop(d, total, skipped=False)
        d.start_packet = self._mark(d, 0)[1] if buf else packet
        d.marks = []
        d.hoff = 0
        d.scan = 0
        d.wait = []
        return False

    def _judge_request(self, buf, i: int, n: int) -> tuple[int, int]:
        """(1, _): a confirmed request starts at ``buf[i]``; (0, _): none does; (-1, end): judge
        again when ``end`` bytes are here (its header or its frame is not all here yet)."""
        check = self.check
        assert check is not None
        p = _plausible_at(buf, i, self.max_frame, check.api_ok)
        if p == 0:
            return 0, 0
        if p == -1:  # the header (size .. client id) is not all here
            return -1, i + 14 + (max(0, _H16(buf, i + 12)[0]) if n - i >= 14 else 0)
        size = _I32(buf, i)[0]
        e = i + 4 + size
        if e <= n:
            r = check.request(bytes(buf[i + 4:e]))
            if r != 1:
                return (1 if r else 0), 0
            # a complete request and bytes the spec does not explain: the stream must go on with
            # another plausible request right there (or end there, the client waiting for an answer)
            if e == n:
                return 1, 0
            q = _plausible_at(buf, e, self.max_frame, check.api_ok)
            return (1, 0) if q == 1 else (0, 0) if q == 0 else (-1, e + 14)
        if size <= self.resync_window:
            return -1, e
        # larger: worth waiting for only with a client id already seen in the capture
        cl = _H16(buf, i + 12)[0]
        return (-1, e) if cl > 0 and bytes(buf[i + 14:i + 14 + cl]) in self.known_clients else (0, 0)

    def _hunt_response(self, conn, d: _Dir, final: bool = False) -> tuple:
        """(anchor, 0, tiles): the first response to a request still open on the connection,
        confirmed, and the frames (offset, end) that tile the bytes before it exactly; or
        (None, bytes to forget, ()) while none is confirmed (up to ``resync_window`` bytes are kept).
        Candidates whose frame has not fully arrived wait; a later confirmed one wins over them
        unless one of them would hold it."""
        buf = d.buf
        n = len(buf)
        window = self.resync_window
        keep = n - window if n > window else 0
        if not conn.open and not conn.noreply:
            d.wait = []
            return None, keep, ()
        if d.scan_ver != conn.opened:  # other requests are open now: look at everything again
            d.scan = 0
            d.wait = []
            d.scan_ver = conn.opened

        def judge(i: int, cr) -> tuple:
            r = self._judge_response(conn, d, i, n, cr[0], cr[1])
            return r, i + 4 + _I32(buf, i)[0]

        check = self.check
        assert check is not None
        plausible = _Plausible(buf, n, self.resync_window,
                               lambda i, size, cr: check.response_prefix(bytes(buf[i + 4:n]), size,
                                                                         cr[1][0], cr[1][1]))
        if d.wait:
            won, d.wait = self._rejudge(d.wait, n, judge, plausible, final)
            if won is not None:
                d.wait = []
                return won[0], 0, self._tile(conn, buf, won[0], won[1][0])
        wait = d.wait
        start = d.scan
        cands = []
        find = buf.find
        for table in (conn.open, conn.noreply):
            for corr, req in table.items():
                pat = _I32P(corr)
                j = find(pat, start + 4)
                hits = 0
                while j != -1 and hits < 256:
                    cands.append((j - 4, corr, req))
                    hits += 1
                    j = find(pat, j + 1)
        cands.sort(key=_first)
        for i, corr, req in cands:
            r = self._judge_response(conn, d, i, n, corr, req)
            if r < 0 and final:
                r = 0
            if r == 1:
                cover = _cover(wait, i, plausible)
                if cover is None:
                    d.wait = []
                    return i, 0, self._tile(conn, buf, i, corr)
                if len(wait) < 64:
                    wait.append((cover, i, (corr, req), n - i))
            elif r < 0 and len(wait) < 64:
                wait.append((i + 4 + _I32(buf, i)[0], i, (corr, req), n - i))
        d.scan = max(0, n - 7)
        if wait:
            keep = min(keep, wait[0][1])
        return None, keep, ()

    def _judge_response(self, conn, d: _Dir, i: int, n: int, corr: int, req: tuple) -> int:
        """1: the answer to ``req`` starts at ``d.buf[i]``; 0: it does not; -2: wait for its bytes."""
        check = self.check
        assert check is not None
        buf = d.buf
        ak, av = req[0], req[1]
        size = _I32(buf, i)[0]
        if size < 4 + check.response_header_version(ak, av) or size > self.max_frame:
            return 0
        if self._mark(d, i)[2] < req[2]:
            return 0  # its first byte was captured before the request was complete: not its answer
        e = i + 4 + size
        if e <= n:
            r = check.response(bytes(buf[i + 4:e]), ak, av)
            if r != 1:
                return 1 if r else 0
            # complete, with bytes the spec does not explain: another sane size must follow
            if e == n:
                return 1
            if n - e < 4:
                return -2
            return 1 if 4 <= _I32(buf, e)[0] <= self.max_frame else 0
        if size <= self.resync_window:
            return -2
        # larger: worth waiting for only as the answer to the oldest request (brokers answer in order)
        return -2 if conn.open and corr == next(iter(conn.open)) else 0

    def _tile(self, conn, buf, end: int, bound: int | None) -> list:
        """Responses to requests the capture never showed, before a confirmed start ``end``: frames
        (offset, end) that land exactly on each other and on ``end``, outermost first, each with a
        correlation id below the next one's (``bound``) and decoding as one of the APIs the
        connection uses."""
        out: list = []
        apis = None
        while end >= 8:
            if apis is None:
                apis = self._tile_apis(conn)
            s = self._landing(apis, buf, end, bound)
            if s is None:
                break
            out.append((s, end))
            bound = _I32(buf, s + 4)[0]
            end = s
        out.reverse()
        return out

    def _tile_apis(self, conn) -> list:
        """The (api key, version) pairs a response of unknown request may answer, likeliest first:
        the connection's own, those of the other connections, then ApiVersions (every connection's
        first request, so often the one a capture missed)."""
        seen = set(conn.apis)
        out = sorted(seen)
        others: set = set()
        for c, _ in self._flows.values():
            if c is not conn:
                others |= c.apis
                if len(others) > 256:
                    break
        others |= self._apis_closed
        out += sorted(others - seen)
        seen |= others
        check = self.check
        assert check is not None
        out += [(API_VERSIONS, v) for v in range(5) if (API_VERSIONS, v) not in seen and check.api_ok(API_VERSIONS, v)]
        return out

    def _landing(self, apis: list, buf, end: int, bound: int | None) -> int | None:
        """The smallest offset s whose size prefix ends its frame exactly at ``end`` and whose frame
        decodes as an answer to one of ``apis`` (correlation id in 0..``bound``-1)."""
        check = self.check
        assert check is not None
        find = buf.find
        # the size at s is end - s - 4: its top three bytes are constant over blocks of 256 offsets
        for blk in range((end - 4) >> 8, -1, -1):
            vlo = blk << 8
            slo = max(0, end - 4 - vlo - 255)
            shi = end - 4 - vlo  # inclusive; a size is at least 4
            if shi > end - 8:
                shi = end - 8
            if slo > shi:
                continue
            pat = _I32P(vlo)[:3]
            j = find(pat, slo, shi + 3)
            while j != -1:
                if _I32(buf, j)[0] == end - j - 4:
                    c = _I32(buf, j + 4)[0]
                    if c >= 0 and (bound is None or c < bound):
                        data = bytes(buf[j + 4:end])
                        for ak, av in apis:
                            if check.response(data, ak, av) == 2:
                                return j
                        if bound is not None and c == bound - 1:
                            # the id right before the next one: any API of the specs may answer
                            for ak, av in check.layouts():
                                if (ak, av) not in apis and check.rare_response(data, ak, av) == 2:
                                    return j
                j = find(pat, j + 1, shi + 3)
        return None

    def _tile_at_end(self, conn, d: _Dir, file) -> None:
        """The stream ends while hunting for a response: frames that land exactly on its end (and
        on each other) and decode as answers to the connection's APIs are responses all the same;
        the bytes before them wait for the end of the capture (``_stash``)."""
        bound = min(conn.open) if conn.open else None
        tiles = self._tile(conn, d.buf, len(d.buf), bound)
        first = tiles[0][0] if tiles else len(d.buf)
        if not self._stash(conn, d, first, _I32(d.buf, first + 4)[0] if tiles else bound):
            self._drop(d, first)
        if not tiles:
            return
        self._end_resync(conn, d, file, self._mark(d, 0)[1], conn.last_ts)
        for a, e in tiles:
            self._emit_marked(conn, d, a - first, e - first)
        self._drop(d, len(d.buf), skipped=False)

    def _stash(self, conn, d: _Dir, nbytes: int, bound: int | None) -> bool:
        """Set ``d.buf[:nbytes]`` aside: responses the bytes before a confirmed start may hold, to
        requests whose API only later traffic (or another connection) shows. They are looked at
        again at the end of the capture (``finish``), when every API seen is known, and reported
        then (frames, or skipped bytes). False when there is nothing worth it or no room."""
        if nbytes < 8 or self._pending_bytes + nbytes > self.max_pending:
            return False
        hi = d.hoff + nbytes
        marks = [m for m in d.marks if m[0] < hi]
        self._pending.append((conn, d.src, d.dst, bytes(d.buf[:nbytes]), marks, d.hoff, bound, d.skip_from))
        self._pending_bytes += nbytes
        self.stats.buffered_bytes += nbytes
        self._drop(d, nbytes, skipped=False)
        return True

    def _resolve_pending(self) -> None:
        """End of the capture: tile the bytes set aside with every API the capture showed; what
        does not tile is reported as skipped."""
        pending, self._pending = self._pending, []
        for conn, src, dst, region, marks, hoff, bound, skip_from in pending:
            t = _Dir()
            t.src, t.dst = src, dst
            t.buf = bytearray(region)
            t.marks = marks
            t.hoff = hoff
            t.skip_from = skip_from if skip_from is not None else marks[0][1]
            self.stats.buffered_bytes -= len(region)
            self._pending_bytes -= len(region)
            tiles = self._tile(conn, t.buf, len(t.buf), bound)
            first = tiles[0][0] if tiles else len(t.buf)
            self._drop(t, first)
            _o, p, ts, file = self._mark(t, 0) if t.buf else marks[-1]
            self._end_resync(conn, t, file, p, ts)
            for a, e in tiles:
                self._emit_marked(conn, t, a - first, e - first)

    def _learn_client(self, conn, data: bytes) -> None:
        """Remember a request's client id (bytes), once per connection (at most 1024)."""
        conn.cid = True
        if len(data) >= 10 and len(self.known_clients) < 1024:
            cl = _H16(data, 8)[0]
            if cl > 0:
                self.known_clients.add(bytes(data[10:10 + cl]))

    def _frame_gap(self, conn, d: _Dir, lost: int, file, packet, ts) -> None:
        """The framer's side of a gap of ``lost`` bytes right after what it has seen."""
        buf = d.buf
        d.need = 0
        st = self.stats
        d.marks = []
        d.hoff = 0
        d.scan = 0
        d.wait = []
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
                         f"{self.max_open} open requests on the connection", corrs=(old,))
        op[corr] = (ak, av, ts, packet)

    def _emit(self, conn, d: _Dir, data: bytes, file, packet, ts, start_packet) -> None:
        st = self.stats
        size = len(data)
        st.frames += 1
        st.frame_bytes += size + 4
        sasl = conn.sasl
        if sasl is not None:
            side = 0 if d.is_request else 1
            if sasl[side]:
                sasl[side] -= 1
                if not sasl[0] and not sasl[1]:
                    conn.sasl = None
                self._out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, SASL_TOKEN, data,
                                                    size, None, None, None, None, None, start_packet, None)))
                return
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
            if ak == SASL_HANDSHAKE and av == 0:
                conn.sasl_mech = _handshake_mechanism(data)
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
            conn.opened += 1
            apis = conn.apis
            if len(apis) < 64:
                apis.add((ak, av))
            if not conn.cid and self.check is not None:
                self._learn_client(conn, data)
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
        if req[0] == SASL_HANDSHAKE and req[1] == 0 and size >= 6 and _H16(data, 4)[0] == 0:
            rounds = SASL_ROUNDS.get(conn.sasl_mech or "")
            if rounds:
                conn.sasl = [rounds, rounds]  # raw tokens follow (KIP-43)
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
            tls = conn.tls
            if tls is not None:
                self._tls_items(conn, tls.finish(), file, None, conn.last_ts)
                if tls.handshake is not None and not tls.no_key and any(c.decrypted for c in tls.counters):
                    st.tls_decrypted += 1
            for d in conn.dirs:
                if d.skip:
                    st.damage_bytes[PARTIAL_FRAME] = st.damage_bytes.get(PARTIAL_FRAME, 0) - d.skip
                    d.skip = 0
                if d.resync and self.check is not None and d.buf:
                    self._hunt(conn, d, file, d.last_packet, conn.last_ts, final=True)
                if d.resync:
                    if self.check is not None and d.buf and not d.is_request:
                        self._tile_at_end(conn, d, file)
                    d.skip_acc += len(d.buf)
                    d.buf.clear()
                    d.marks = []
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
                             f"(correlation ids {shown})", conn.last_ts, tuple(ids))
                conn.open.clear()
        if conn.apis and len(self._apis_closed) < 512:
            self._apis_closed |= conn.apis
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



def _handshake_mechanism(data: bytes) -> str | None:
    """The mechanism a SaslHandshake v0 request names (request header v1: api key, version,
    correlation id, client id; then the Mechanism string)."""
    try:
        n = _H16(data, 8)[0]
        off = 10 + max(n, 0)
        m = _H16(data, off)[0]
        if m < 0 or off + 2 + m > len(data):
            return None
        return bytes(data[off + 2:off + 2 + m]).decode("ascii")
    except (struct.error, UnicodeDecodeError):
        return None
