"""Transforms of a connection's byte stream, between TCP reassembly and Kafka framing.

Each connection has a stack of stages (``Connection.stages``, then the framer): reassembly hands
the in-order bytes of each direction to the first (``data(conn, d, bytes, file, packet, ts)``) and
its gaps (``gap(conn, d, nbytes, file, packet, ts, snap)``; ``snap``: the rest of a packet the snap
length cut); each stage hands what it makes of them to
``next``, in the same two calls. ``d`` is the direction's ``framing.FrameDir``.

* ``TlsStage``: a connection whose first bytes are a ClientHello (any port), or TLS records where
  no Kafka request could start, goes through a ``kwire_cli.tls.TlsConnection`` with the
  assembler's key log: the in-order bytes of each direction are TLS records, their decrypted
  application data is the byte stream the next stage reads. A gap in the records is a hole in the
  plaintext (framing resynchronises); a connection without secrets in the key log is one
  ``tls-no-key`` ``Note`` (not damage: its records are whole; nothing framed; counted per TLS
  version and server in ``CaptureStats.tls_not_decrypted``); handshakes, alerts and key updates
  are ``Note`` events.
* ``SaslTokens``: KIP-43 legacy SASL. After a SaslHandshake v0 answer without error, the client
  and the broker exchange raw size-prefixed tokens, not Kafka frames: as many each way as the
  mechanism's rounds (PLAIN and OAUTHBEARER 1, SCRAM 2; a PLAIN broker's token is empty: size 0).
  They come out as frames of kind ``sasl-token``; the stage then leaves the stack and framing
  reads on. Other mechanisms (GSSAPI) have no fixed count: their tokens stay undecoded frames.
"""
from __future__ import annotations

import struct
from typing import Any

from kwire_cli.tls import ALERT, HANDSHAKE, KEY_UPDATE, NO_KEY, Plaintext, TlsConnection, TlsEvent, native_entry
from kwire_cli.tls import GAP as TLS_GAP

from .events import TLS_NO_KEY, TLS_PREFIX, KafkaFrame, Note, endpoint
from .outbox import Outbox

_I32 = struct.Struct(">i").unpack_from
_tnew = tuple.__new__
SASL_TOKEN = "sasl-token"  # the kind of a KIP-43 raw SASL token's frame


class TlsStage:
    """TLS records in, their plaintext out (see the module docstring)."""

    __slots__ = ("tls", "direct", "next", "box", "stats", "max_frame")

    def __init__(self, tls: TlsConnection, box: Outbox, max_frame: int) -> None:
        self.tls = tls
        self.direct = tls.direct
        self.next: Any = None
        self.box = box
        self.stats = box.stats
        self.max_frame = max_frame

    def data(self, conn: Any, d: Any, data: Any, file: str, packet: int | None, ts: float | None) -> None:
        # (with a native opener the bytes come through ``entry()`` instead: the same in C, the
        # records a native opener holds read without a Python call, the rest through ``rest``)
        self.stats.tls_bytes += len(data)
        self.rest(conn, d, 0 if d.is_request else 1, data, file, packet, ts)

    def rest(self, conn: Any, d: Any, side: int, data: Any, file: str, packet: int | None, ts: float | None) -> None:
        """``data`` through the TLS connection (its bytes counted already)."""
        items: list[Any] = self.tls.feed(side, data)
        if not items:
            return
        st = self.stats
        # as _items, inline: the usual answer is one Plaintext or a few (tuples: direction, data, ...),
        # each of the direction fed, ``d``; ``next`` read each time (a SASL token stage may leave the
        # stack on the way)
        for it in items:
            if it.__class__ is Plaintext:
                pt = it[1]
                st.tls_plaintext += len(pt)
                self.next.data(conn, d, pt, file, packet, ts)
            else:
                self._event(conn, it, file, packet, ts)

    def entry(self) -> Any:
        """Where reassembly hands this stage's bytes (``Connection.sink``): ``data`` in C for the
        bytes a native opener reads (``kwire_cli.tls.native_entry``: the same calls as ``data``),
        or the stage itself. Made anew at each call: the stage does not keep it (it keeps the
        stage)."""
        e = native_entry(self, self.direct, self.stats)
        return e if e is not None else self

    def gap(self, conn: Any, d: Any, lost: int, file: str, packet: int | None, ts: float | None,
            snap: bool = False) -> None:  # noqa: ARG002 (a cut TLS record breaks the plaintext all the same)
        self._items(conn, self.tls.gap(0 if d.is_request else 1, lost), file, packet, ts)

    def close(self, conn: Any, file: str) -> None:
        tls = self.tls
        self._items(conn, tls.finish(), file, None, conn.last_ts)
        if tls.handshake is not None and not tls.no_key:
            c0, c1 = tls.counters
            if c0.decrypted or c1.decrypted:
                self.stats.tls_decrypted += 1

    def _items(self, conn: Any, items: list[Any], file: str, packet: int | None, ts: float | None) -> None:
        """What the TLS connection gave back: plaintext to the next stage, events as damage or notes."""
        for it in items:
            if it.__class__ is Plaintext:
                d = conn.frames[1 - conn.broker] if it.direction == 0 else conn.frames[conn.broker]
                self.stats.tls_plaintext += len(it.data)
                self.next.data(conn, d, it.data, file, packet, ts)
            else:
                self._event(conn, it, file, packet, ts)

    def _event(self, conn: Any, ev: TlsEvent, file: str, packet: int | None, ts: float | None) -> None:
        st = self.stats
        kind = ev.kind
        out = self.box.events
        if kind == HANDSHAKE:
            hs = ev.handshake
            if hs is not None:
                name = f"{hs.version} {hs.cipher_suite}"
                st.tls_sessions[name] = st.tls_sessions.get(name, 0) + 1
            out.append(Note(file, packet, conn.label, "tls", ev.message, ts))
        elif kind in (ALERT, KEY_UPDATE):
            out.append(Note(file, packet, conn.label, "tls-" + kind, ev.message, ts))
        elif kind == NO_KEY:
            # not damage: the records are whole, there is no key for them (said once per server)
            ver = ev.handshake.version.replace("v", " ") if ev.handshake is not None else "TLS"
            server = endpoint(*conn.ends[conn.broker]) if conn.broker is not None else conn.label
            key = f"{ver} on {server}"
            st.tls_not_decrypted[key] = st.tls_not_decrypted.get(key, 0) + 1
            out.append(Note(file, packet, conn.label, TLS_NO_KEY, ev.message, ts))
        elif kind != TLS_GAP:  # (a TCP gap is reported as such already)
            self.box.damage(file, packet, conn, TLS_PREFIX + kind, ev.nbytes, ev.message, ts)
        if ev.breaks_stream and ev.direction is not None:
            # the plaintext has a hole of unknown size here: the framer resynchronises
            d = conn.frames[1 - conn.broker] if ev.direction == 0 else conn.frames[conn.broker]
            self.next.gap(conn, d, self.max_frame + 8, file, packet, ts)


class SaslTokens:
    """KIP-43 raw tokens in, frames of kind ``sasl-token`` out, ``left`` of them each way
    (client, broker); then the bytes go on to ``next`` and the stage leaves the stack."""

    __slots__ = ("next", "left", "bufs", "starts", "box", "max_frame")

    def __init__(self, box: Outbox, max_frame: int) -> None:
        self.next: Any = None
        self.left = [0, 0]
        self.bufs = (bytearray(), bytearray())
        self.starts: list[Any] = [None, None]
        self.box = box
        self.max_frame = max_frame

    def data(self, conn: Any, d: Any, data: Any, file: str, packet: int | None, ts: float | None) -> None:
        side = 0 if d.is_request else 1
        if not self.left[side]:
            self.next.data(conn, d, data, file, packet, ts)
            return
        buf = self.bufs[side]
        if not buf:
            self.starts[side] = packet
        buf += data
        while self.left[side] and len(buf) >= 4:
            size = _I32(buf, 0)[0]
            if size < 0 or size > self.max_frame:
                self.left[side] = 0  # not a token: framing reports it
                break
            if len(buf) < 4 + size:
                return
            self._token(conn, d, bytes(buf[4:4 + size]), file, packet, ts, self.starts[side])
            del buf[:4 + size]
            self.starts[side] = packet
            self.left[side] -= 1
        if not self.left[side]:
            self._done(conn, d, side, file, packet, ts)

    def gap(self, conn: Any, d: Any, lost: int, file: str, packet: int | None, ts: float | None,
            snap: bool = False) -> None:
        side = 0 if d.is_request else 1
        if self.left[side]:  # the tokens of this side cannot be counted any more: framing reads on
            self.left[side] = 0
            self._done(conn, d, side, file, packet, ts)
        self.next.gap(conn, d, lost, file, packet, ts, snap)

    def close(self, conn: Any, file: str) -> None:
        """The connection closes: a token cut short is framing's incomplete frame."""
        for side in (0, 1):
            if self.bufs[side]:
                d = conn.frames[1 - conn.broker] if side == 0 else conn.frames[conn.broker]
                self.left[side] = 0
                self._done(conn, d, side, file, self.starts[side], conn.last_ts)

    def _token(self, conn: Any, d: Any, data: bytes, file: str, packet: int | None, ts: float | None,
               start_packet: int | None) -> None:
        st = self.box.stats
        size = len(data)
        st.frames += 1
        st.frame_bytes += size + 4
        self.box.events.append(_tnew(KafkaFrame, (file, packet, ts, d.src, d.dst, conn.label, SASL_TOKEN, data,
                                                  size, None, None, None, None, None, start_packet, None)))

    def _done(self, conn: Any, d: Any, side: int, file: str, packet: int | None, ts: float | None) -> None:
        """No more tokens this way: the bytes kept go to framing; with none left either way the
        stage leaves the stack."""
        buf = self.bufs[side]
        rest = bytes(buf)
        buf.clear()
        nxt = self.next
        if not self.left[0] and not self.left[1]:
            conn.remove_stage(self)
        if rest:
            nxt.data(conn, d, rest, file, packet, ts)
