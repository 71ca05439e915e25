"""Request/response pairing: each whole frame becomes a ``KafkaFrame``, a response carrying its
request's API, version and time.

Requests pair by correlation id (Produce with acks=0 expects no response; some brokers answer it
all the same, and the answer pairs); at most ``max_open`` open requests per connection (the oldest
are dropped and reported); with a ``request_timeout``, requests unanswered for that long (capture
time) expire and are reported (``unanswered-request``, counted in
``CaptureStats.expired_requests``). A SaslHandshake v0 answer without error starts KIP-43's raw
tokens (``on_sasl(conn, d, rounds)``: the assembler puts ``transforms.SaslTokens`` before framing).
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .events import UNANSWERED_REQUEST, UNPAIRED_RESPONSE, UNPARSEABLE, KafkaFrame
from .kafka import PRODUCE, produce_acks
from .outbox import Outbox

_PREFIX = struct.Struct(">hhi").unpack_from
_H16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_tnew = tuple.__new__
SASL_HANDSHAKE = 17
# rounds of raw tokens each way after a SaslHandshake v0, by mechanism (unknown: not switched)
SASL_ROUNDS = {"PLAIN": 1, "OAUTHBEARER": 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}


class Pairing:
    """Frames in (``emit``), ``KafkaFrame`` events out; the open requests are in each connection
    (``conn.open``, ``conn.noreply``)."""

    def __init__(self, box: Outbox, *, max_open: int, request_timeout: float | None,
                 known_clients: set[Any] | None, on_sasl: Callable[[Any, Any, int], None]) -> None:
        self.box = box
        self.stats = box.stats
        self.max_open = max_open
        self.request_timeout = request_timeout
        self.known_clients = known_clients  # client ids (bytes) of requests seen, for hunting; bounded
        self.on_sasl = on_sasl

    def open_request(self, conn: Any, ak: int, av: int, corr: int, ts: float | None, packet: int | None) -> None:
        op = conn.open
        if len(op) >= self.max_open and corr not in op:
            old = next(iter(op))
            del op[old]
            self.box.damage(conn.file, packet, conn, UNANSWERED_REQUEST, 0,
                            f"request with correlation id {old} dropped unanswered: more than "
                            f"{self.max_open} open requests on the connection", corrs=(old,))
        op[corr] = (ak, av, ts, packet)

    def emit(self, conn: Any, d: Any, data: bytes, file: str, packet: int | None, ts: float | None,
             start_packet: int | None, size: int = -1) -> None:
        """One whole frame of direction ``d`` (without its size prefix); with a ``size``, a frame a
        gap cut (``data``: its first bytes, its header at least), counted in ``stats.cut_frames``."""
        st = self.stats
        n = len(data)
        st.frames += 1
        if size < 0:
            size = n
            st.frame_bytes += n + 4
        else:
            st.cut_frames += 1
        out = self.box.events
        if d.is_request:
            st.requests += 1
            if n < 8:
                out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "request", data,
                                              size, None, None, None, None, None, start_packet, None)))
                self.box.damage(file, packet, conn, UNPARSEABLE, 0,
                                f"packet {packet}: request of {size} bytes is too short for a header", ts)
                return
            ak, av, corr = _PREFIX(data, 0)
            acks = None
            if ak == SASL_HANDSHAKE and av == 0:
                conn.sasl_mech = handshake_mechanism(data)
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
                    self.open_request(conn, ak, av, corr, ts, packet)
                else:
                    op[corr] = (ak, av, ts, packet)
            conn.opened += 1
            apis = conn.apis
            if len(apis) < 64:
                apis.add((ak, av))
            if not conn.cid and self.known_clients is not None:
                self.learn_client(conn, data)
            out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "request", data, size,
                                          ak, av, corr, None, None, start_packet, acks)))
            return
        st.responses += 1
        if n < 4:
            out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "response", data,
                                          size, None, None, None, None, None, start_packet, None)))
            self.box.damage(file, packet, conn, UNPARSEABLE, 0,
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
            out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "response", data,
                                          size, None, None, corr, None, None, start_packet, None)))
            self.box.damage(file, packet, conn, UNPAIRED_RESPONSE, 0,
                            f"packet {packet}: response with correlation id {corr} matches no open request", ts)
            return
        st.paired += 1
        out.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, "response", data, size,
                                      req[0], req[1], corr, req[2], req[3], start_packet, None)))
        if req[0] == SASL_HANDSHAKE and req[1] == 0 and n >= 6 and _H16(data, 4)[0] == 0:
            rounds = SASL_ROUNDS.get(conn.sasl_mech or "")
            if rounds:
                self.on_sasl(conn, d, rounds)  # raw tokens follow (KIP-43)

    def learn_client(self, conn: Any, data: bytes) -> None:
        """Remember a request's client id (bytes), once per connection (at most 1024)."""
        conn.cid = True
        known = self.known_clients
        assert known is not None
        if len(data) >= 10 and len(known) < 1024:
            cl = _H16(data, 8)[0]
            if cl > 0:
                known.add(bytes(data[10:10 + cl]))

    def expire(self, conns: list[Any], now: float) -> None:
        """Requests of ``conns`` unanswered for ``request_timeout`` expire."""
        timeout = self.request_timeout
        assert timeout is not None
        limit = now - timeout
        for conn in conns:
            op = conn.open
            if not op:
                continue
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
            self.box.damage(conn.file, None, conn, UNANSWERED_REQUEST, 0,
                            f"{len(old)} request(s) without a response after {timeout:g} s, expired "
                            f"(correlation ids {shown})", now, tuple(old))

    def close(self, conn: Any, file: str, why: str) -> None:
        """The connection closes: its requests still open are reported unanswered."""
        if conn.open:
            ids = list(conn.open)
            shown = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
            self.box.damage(file, None, conn, UNANSWERED_REQUEST, 0,
                            f"{len(ids)} request(s) without a response at {why} "
                            f"(correlation ids {shown})", conn.last_ts, tuple(ids))
            conn.open.clear()


def handshake_mechanism(data: bytes) -> str | None:
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
