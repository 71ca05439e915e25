"""Packets in, Kafka frames and damage out: one TCP connection after the other through a stack.

``StreamAssembler`` knows nothing about files: feed it ``Packet`` tuples in capture order (from
``iter_packets``, or, in Spark, the packets of some connections gathered from several rotated files
and sorted by file order and packet number) and it returns ``KafkaFrame``, ``Damage`` and ``Note``
events; ``finish()`` flushes. Each connection's bytes go through these stages, each in its module:

* TCP reassembly (``tcp``): each direction as one in-order byte stream, holes declared gaps.
* Transforms of that byte stream (``transforms``): TLS records decrypted with the key log
  (``TlsStage``), KIP-43 raw SASL tokens taken out (``SaslTokens``), composed in the
  connection's stack (``connection.Connection.stages``).
* Kafka framing (``framing``), with resynchronisation after a gap or a mid-stream start
  (``hunt``: confirmed by the codec with a ``check``; ``tiling``: responses to requests the
  capture never showed).
* Request/response pairing with expiry (``pairing``).

The assembler itself tells connections apart (a new SYN on the same ports is a new one), decides
which side is the broker (``kafka.broker_side``; a connection whose first bytes are a ClientHello,
or TLS records where no request could start, gets a ``TlsStage``), and drops closed connections
(FIN both ways, RST, or idle longer than ``idle_timeout``). A connection first seen mid-stream
(no SYN) starts at its first payload byte, in resync mode: its first four bytes are not trusted as
a size. Memory is bounded per connection (out-of-order buffer, one partial frame, the open
requests).

Live captures (``kwire_cli.capture.live``): ``tick(now)`` tells the assembler that capture time
``now`` has come with no packet (the input is waiting for traffic), so that a hole held open for a
late segment is declared a gap ``hold_time`` after it opened, and requests expire, without waiting
for the next packet.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any

from kwire_cli.tls import KeyLog, TlsConnection, looks_like_client_hello, looks_like_tls_record

from .connection import Connection
from .events import ACK, FIN, NON_KAFKA, RST, SYN, CaptureStats, Packet, endpoint
from .framing import Framer
from .hunt import Hunter
from .kafka import DEFAULT_MAX_FRAME, ApiCheck, FrameCheck, broker_side, looks_like_request
from .outbox import Outbox
from .pairing import SASL_ROUNDS, Pairing
from .tcp import M32, Reassembly
from .tiling import Tiler
from .transforms import SASL_TOKEN, SaslTokens, TlsStage

__all__ = ["Connection", "StreamAssembler", "SASL_TOKEN", "SASL_ROUNDS", "EPHEMERAL"]

_I32 = struct.Struct(">i").unpack_from
_H16 = struct.Struct(">h").unpack_from
_EMPTY: tuple[Any, ...] = ()
_INF = float("inf")
EPHEMERAL = 32768  # the lowest port Linux (and IANA: 49152) hands out to clients


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
    only frames the codec confirms (``hunt``); a candidate whose frame is not complete yet is
    waited for while it is at most ``resync_window`` bytes (larger ones need stronger evidence),
    and up to ``resync_window`` bytes before a response's confirmed start are kept to find the
    responses to requests the capture never showed. Without it, resync trusts a plausible header
    (the behaviour kept for hand-made test streams).
    """

    def __init__(self, *, broker_ports: Iterable[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                 max_buffered: int = 4 << 20, max_open: int = 10000, idle_timeout: float | None = 1800.0,
                 stats: CaptureStats | None = None, api_check: ApiCheck | None = None,
                 strict: bool = False, check: FrameCheck | None = None,
                 resync_window: int = 1 << 20, hold_time: float = 0.2, hold_packets: int = 64,
                 keylog: KeyLog | None = None, request_timeout: float | None = None) -> None:
        self.broker_ports = frozenset(broker_ports) if broker_ports is not None else frozenset({9092})
        self.max_frame = max_frame
        self.idle_timeout = idle_timeout
        self.stats = stats if stats is not None else CaptureStats()
        self.api_check = api_check
        self.strict = strict
        self.check = check
        self.request_timeout = request_timeout
        self._next_expiry = -_INF        # capture time of the next look for expired requests
        self.keylog = keylog if keylog is not None else KeyLog()
        if check is not None and api_check is None:
            self.api_check = check.api_ok
        self.known_clients: set[bytes] = set()  # client ids (bytes) of requests seen, for large candidates; bounded
        self._apis_closed: set[tuple[int, int]] = set()  # (api key, version) of closed connections' requests; bounded
        self.known_brokers: dict[tuple[str, int], bool] = {}    # (ip, port) -> True, learned; bounded
        # (src ip, src port, dst ip, dst port) -> (Connection, dir index)
        self._flows: dict[tuple[str, int, str, int], tuple[Connection, int]] = {}
        self._closed: dict[tuple[str, int, str, int], tuple[float, int]] = {}  # same key -> (close ts, generation)
        self._count = 0
        box = self._box = Outbox(self.stats)
        self._tcp = Reassembly(box, max_buffered=max_buffered, hold_time=hold_time, hold_packets=hold_packets)
        self._pairing = Pairing(box, max_open=max_open, request_timeout=request_timeout,
                                known_clients=self.known_clients if check is not None else None,
                                on_sasl=self._start_sasl)
        self._framer = Framer(box, self._pairing, max_frame=max_frame, check=check, api_check=self.api_check)
        self._tiler: Tiler | None = None
        if check is not None:
            hunter = Hunter(box, self._framer, check=check, max_frame=max_frame,
                            resync_window=min(resync_window, max_frame), known_clients=self.known_clients)
            self._tiler = hunter.tiler = Tiler(box, hunter, check=check, other_apis=self._other_apis)
            self._framer.hunter = hunter

    # ------------------------------------------------------------------ public
    def feed(self, pkt: Packet) -> list[Any] | tuple[Any, ...]:
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
            conn = Connection((sip, sport), (dip, dport), gen, self._framer)
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
            isn1 = (seq + 1) & M32
            if d.base is None:
                d.base = isn1
                if not flags & ACK:
                    conn.syn_from = di
                elif conn.syn_from is None:
                    # SYN-ACK without the SYN seen: its ack number starts the other direction
                    conn.syn_from = 1 - di
                    r0 = conn.dirs[1 - di]
                    if r0.base is None:
                        r0.base = ack & M32
            elif isn1 != d.base and not d.nxt and not d.heap and d.fin_off is None and not conn.reset:
                d.base = isn1  # a SYN sent again with a new ISN before any data: start from it
            elif isn1 != d.base and not flags & ACK:
                # a new connection on the same ports: close the old one, start again
                self._close(conn, file, "new SYN on the same ports")
                del self._closed[key]
                self._closed.pop((dip, dport, sip, sport), None)
                conn = Connection((sip, sport), (dip, dport), conn.gen + 1, self._framer)
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
                self._tcp.acked(conn, r, file, ts)
        if payload or wire_len:
            if d.base is None:
                d.base = seq
                d.frames.resync = True
            if conn.broker is None:
                self._decide(conn, di, payload, file, packet, ts)
            if conn.kafka:
                nxt = d.nxt
                n = len(payload)
                if (seq - d.base - nxt) & M32 == 0 and wire_len <= n and d.fin_off is None and not d.heap:
                    # the common case, in order and whole: straight to the framer
                    d.nxt = nxt + n
                    d.last_packet = packet
                    self.stats.delivered_bytes += n
                    conn.sink.data(conn, d.frames, payload, file, packet, ts)
                else:
                    self._tcp.segment(conn, d, seq, payload, wire_len, file, packet, ts)
            else:
                self.stats.non_kafka_bytes += len(payload)
        if flags & FIN:
            if d.base is None:
                d.base = seq
            off = d.offset(seq)
            end = off + (wire_len if wire_len > len(payload) else len(payload))
            if d.fin_off is None or end < d.fin_off:
                d.fin_off = end
                d.fin_packet = packet
            conn.fin_seen = True
        if conn.held:
            self._tcp.expire_holds(conn, file, ts)
        if flags & RST:
            conn.reset = True
            self._close(conn, file, "reset")
        elif conn.fin_seen and conn.dirs[0].finished() and conn.dirs[1].finished():
            self._close(conn, file, "closed")
        box = self._box
        out = box.events
        if out:
            box.events = []
            return out
        return _EMPTY


    def tick(self, now: float) -> list[Any] | tuple[Any, ...]:
        """No packet until capture time ``now`` (a live capture waiting for traffic): declare the
        holes held open that are ``hold_time`` old, expire requests older than
        ``request_timeout``, forget closed connections' tombstones; return the events."""
        holding = self._tcp.holding
        conn: Connection
        for key, conn in list(holding.items()):
            if self._flows.get(conn.keys[0], (None,))[0] is not conn:
                del holding[key]  # closed since
                continue
            if conn.held:
                self._tcp.expire_holds(conn, conn.file, now, count=False)
            if not conn.held:
                del holding[key]
        if self.request_timeout is not None and now >= self._next_expiry:
            self._expire_requests(now)
        return self._box.take()

    def _connections(self) -> list[Connection]:
        """Every open connection once, in the order they were first seen."""
        seen: dict[int, Connection] = {}
        for conn, _ in self._flows.values():
            seen.setdefault(id(conn), conn)
        return list(seen.values())

    def _expire_requests(self, now: float) -> None:
        """Requests unanswered for ``request_timeout`` expire (looked at once a capture second);
        closed connections' tombstones older than 120 s go too."""
        self._next_expiry = now + 1.0
        self._pairing.expire(self._connections(), now)
        if self._closed:
            cut = now - 120.0
            closed = self._closed
            while closed:
                k = next(iter(closed))
                if closed[k][0] >= cut:
                    break
                del closed[k]

    def finish(self) -> list[Any] | tuple[Any, ...]:
        """End of input: declare remaining gaps, flush partial frames, close every connection."""
        for conn in self._connections():
            self._close(conn, conn.file, "end of capture")
        if self._tiler is not None and self._tiler.pending:
            self._tiler.resolve_pending()
        return list(self._box.take())

    def process(self, packets: Iterable[Packet]) -> Iterator[Any]:
        """Feed every packet, then finish; yield the events."""
        feed = self.feed
        for p in packets:
            ev = feed(p)
            if ev:
                yield from ev
        yield from self.finish()

    # ------------------------------------------------------------------ internals
    def _decide(self, conn: Connection, di: int, payload: bytes, file: str, packet: int, ts: float) -> None:
        """Which side of a new connection is the broker, and whether it is TLS."""
        ports = self.broker_ports
        pa, pb = conn.ends[0][1], conn.ends[1][1]
        hello = looks_like_client_hello(payload)  # whoever sends it is the client
        if hello or (looks_like_tls_record(payload)  # or TLS caught after its handshake
                     and not looks_like_request(payload, self.max_frame, self.api_check)):
            conn.tls = TlsStage(TlsConnection(self.keylog, ""), self._box, self.max_frame)
            conn.add_stage(conn.tls)
            self.stats.tls_connections += 1
        if hello:
            req_from: int | None = di
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
        cd, bd = conn.frames[1 - b], conn.frames[b]
        cd.is_request, cd.src, cd.dst = True, cl, br
        bd.is_request, bd.src, bd.dst = False, br, cl
        conn.dirs[1 - b].src, conn.dirs[b].src = cl, br
        if self.strict and reason in ("syn", "lower-port"):
            conn.kafka = False
            self._box.damage(file, packet, conn, NON_KAFKA, 0,
                             f"packet {packet}: connection {conn.label} does not look like Kafka "
                             f"(no broker port, no request header); its bytes are not decoded", ts)
            return
        if broker not in self.known_brokers:
            if len(self.known_brokers) >= 65536:
                self.known_brokers.pop(next(iter(self.known_brokers)))
            self.known_brokers[broker] = True

    def _vouch(self, payload: bytes, conn: Connection) -> bool:
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

    def _start_sasl(self, conn: Connection, d: object, rounds: int) -> None:
        """A SaslHandshake v0 answer without error (on direction ``d``): KIP-43 raw tokens follow,
        ``rounds`` each way; framing hands the bytes after that answer to the tokens' stage."""
        stage = conn.sasl
        if stage is None:
            stage = conn.sasl = SaslTokens(self._box, self.max_frame)
            conn.add_stage(stage)
        stage.left = [rounds, rounds]
        d.divert = True  # type: ignore[attr-defined]
        if conn.broker is None:
            return
        cd = conn.frames[1 - conn.broker]
        if cd.buf and not cd.resync and cd is not d:  # client bytes framing already holds
            rest = bytes(cd.buf)
            cd.buf.clear()
            cd.need = 0
            stage.data(conn, cd, rest, conn.file, cd.start_packet, conn.last_ts)

    def _other_apis(self, conn: Connection) -> set[tuple[int, int]]:
        """The (api key, version) pairs of the requests of the connections but ``conn`` (tiling)."""
        others: set[tuple[int, int]] = set()
        for c, _ in self._flows.values():
            if c is not conn:
                others |= c.apis
                if len(others) > 256:
                    break
        return others | self._apis_closed

    # ------------------------------------------------------------------ closing
    def _close(self, conn: Connection, file: str, why: str) -> None:
        if self._flows.get(conn.keys[0], (None,))[0] is not conn:
            return
        if conn.kafka and conn.broker is not None:
            self._tcp.close(conn, file)
            for stage in list(conn.stages):
                stage.close(conn, file)
            for t in conn.dirs:
                self._framer.close(conn, t.frames, file, why, t.last_packet)
            self._pairing.close(conn, file, why)
        if conn.apis and len(self._apis_closed) < 512:
            self._apis_closed |= conn.apis
        for k in conn.keys:  # both the same for a connection from an ip:port to itself
            self._flows.pop(k, None)
            self._closed[k] = (conn.last_ts, conn.gen)
        while len(self._closed) > 200000:
            self._closed.pop(next(iter(self._closed)))

    def _sweep(self, now: float) -> None:
        assert self.idle_timeout is not None  # (only called with one)
        limit = now - self.idle_timeout
        idle = {id(c): c for c, _ in self._flows.values() if c.last_ts < limit}
        for conn in idle.values():
            self._close(conn, conn.file, "idle timeout")
        cut = now - 120.0
        for k in [k for k, v in self._closed.items() if v[0] < cut]:
            del self._closed[k]
