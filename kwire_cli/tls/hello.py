"""ClientHello and ServerHello (RFC 8446 4.1.2-4.1.4, RFC 5246 7.4.1): what a decoder needs and
what a reader wants to see (versions, suites, SNI, ALPN, resumption offers)."""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from .suites import (
    EXT_ALPN,
    EXT_EARLY_DATA,
    EXT_ENCRYPT_THEN_MAC,
    EXT_EXTENDED_MASTER_SECRET,
    EXT_KEY_SHARE,
    EXT_PRE_SHARED_KEY,
    EXT_SERVER_NAME,
    EXT_SESSION_TICKET,
    EXT_SUPPORTED_VERSIONS,
    HELLO_RETRY_RANDOM,
)


class HelloError(ValueError):
    """A hello message that does not parse (the reason names the field)."""


class _Reader:
    __slots__ = ("b", "p", "end", "what")

    def __init__(self, b: bytes, what: str):
        self.b = b
        self.p = 0
        self.end = len(b)
        self.what = what

    def take(self, n: int, name: str) -> bytes:
        if self.p + n > self.end:
            raise HelloError("%s: %s needs %d bytes, %d left" % (self.what, name, n, self.end - self.p))
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def u8(self, name: str) -> int:
        return self.take(1, name)[0]

    def u16(self, name: str) -> int:
        return int.from_bytes(self.take(2, name), "big")

    def vec(self, len_bytes: int, name: str) -> bytes:
        n = int.from_bytes(self.take(len_bytes, name + " length"), "big")
        return self.take(n, name)

    def left(self) -> int:
        return self.end - self.p


_TYPE_LEN = struct.Struct(">HH").unpack_from   # an extension's type and length


def _extensions_at(b: bytes, p: int) -> dict[int, bytes] | None:
    """The extensions of a hello from ``b[p:]`` when every length fits (the usual case), read by
    index; None for anything else (``_extensions`` then names what does not fit)."""
    n = len(b)
    if p >= n:
        return {}
    if n - p < 2:
        return None
    end = p + 2 + (b[p] << 8 | b[p + 1])
    if end > n:
        return None
    exts: dict[int, bytes] = {}
    p += 2
    type_len = _TYPE_LEN
    while end - p >= 4:
        t, ln = type_len(b, p)
        q = p + 4 + ln
        if q > end:
            break
        exts[t] = b[p + 4:q]
        p = q
    return exts if p == end else None


def _extensions(r: _Reader) -> dict[int, bytes]:
    exts: dict[int, bytes] = {}
    if not r.left():
        return exts
    b, p, n = r.b, r.p, r.end
    if n - p >= 2 and p + 2 + (b[p] << 8 | b[p + 1]) <= n:
        # every length fits (the usual case): read by index; else the reader names what does not
        fast = _extensions_at(b, p)
        if fast is not None:
            r.p = p + 2 + (b[p] << 8 | b[p + 1])
            return fast
    er = _Reader(r.vec(2, "extensions"), r.what + " extensions")
    while er.left():
        t = er.u16("extension type")
        exts[t] = er.vec(2, "extension %d" % t)
    return exts


_PRINTABLE = re.compile(rb"[\x20-\x5b\x5d-\x7e]*\Z").match   # printable ASCII but the backslash


def _text(b: bytes) -> str:
    """Input bytes as text safe for a terminal: printable ASCII, the rest as \\xNN."""
    if _PRINTABLE(b):
        return b.decode("ascii")
    return "".join(chr(c) if 32 <= c < 127 and c != 92 else "\\x%02x" % c for c in b)


def _alpn(data: bytes) -> list[str]:
    out: list[str] = []
    try:
        r = _Reader(data, "ALPN")
        lr = _Reader(r.vec(2, "protocol_name_list"), "ALPN")
        while lr.left():
            out.append(_text(lr.vec(1, "protocol name")))
    except HelloError:
        pass
    return out


def _sni(data: bytes) -> str | None:
    n = len(data)
    if n >= 5 and data[2] == 0 and (data[0] << 8 | data[1]) == n - 2 and (data[3] << 8 | data[4]) == n - 5:
        return _text(data[5:])      # one host_name, every length right (the usual case)
    try:
        r = _Reader(data, "server_name")
        lr = _Reader(r.vec(2, "server_name_list"), "server_name")
        while lr.left():
            kind = lr.u8("name_type")
            name = lr.vec(2, "host_name")
            if kind == 0:
                return _text(name)
    except HelloError:
        pass
    return None


class ClientHello:
    """A ClientHello's fields; ``cipher_suites``, ``supported_versions`` and ``alpn`` are read from
    the message when asked (decoding needs none of them)."""

    __slots__ = ("legacy_version", "random", "session_id", "extensions", "sni", "_suites")

    def __init__(self, legacy_version: int, random: bytes, session_id: bytes, suites: bytes,
                 extensions: dict[int, bytes], sni: str | None = None):
        self.legacy_version = legacy_version
        self.random = random
        self.session_id = session_id
        self._suites = suites        # the cipher_suites vector's bytes (an even number)
        self.extensions = extensions
        self.sni = sni

    def __repr__(self) -> str:
        return "ClientHello(legacy_version=%r, random=%r, session_id=%r, cipher_suites=%r, sni=%r)" % (
            self.legacy_version, self.random, self.session_id, self.cipher_suites, self.sni)

    @property
    def cipher_suites(self) -> list[int]:
        b = self._suites
        return list(_U16S[len(b) >> 1].unpack_from(b)) if len(b) >> 1 < len(_U16S) else [
            int.from_bytes(b[i:i + 2], "big") for i in range(0, len(b), 2)]

    @property
    def supported_versions(self) -> list[int]:
        sv = self.extensions.get(EXT_SUPPORTED_VERSIONS)
        if not sv:
            return []
        vb = sv[1:1 + sv[0]]
        return [int.from_bytes(vb[i:i + 2], "big") for i in range(0, len(vb) - 1, 2)]

    @property
    def alpn(self) -> list[str]:
        a = self.extensions.get(EXT_ALPN)
        return _alpn(a) if a is not None else []

    @property
    def encrypt_then_mac(self) -> bool:
        return EXT_ENCRYPT_THEN_MAC in self.extensions

    @property
    def extended_master_secret(self) -> bool:
        return EXT_EXTENDED_MASTER_SECRET in self.extensions

    @property
    def session_ticket(self) -> bytes | None:
        """The TLS 1.2 session ticket offered (RFC 5077), or None (empty: asks for one)."""
        return self.extensions.get(EXT_SESSION_TICKET)

    @property
    def offers_psk(self) -> bool:
        return EXT_PRE_SHARED_KEY in self.extensions

    @property
    def offers_early_data(self) -> bool:
        return EXT_EARLY_DATA in self.extensions


def parse_client_hello(body: bytes) -> ClientHello:
    """The ClientHello of a handshake message body (``HelloError`` naming the field that does
    not parse)."""
    head = _client_hello_head(body)
    exts = None
    if head is None:
        r = _Reader(body, "ClientHello")
        legacy = r.u16("legacy_version")
        random = r.take(32, "random")
        sid = r.vec(1, "session_id")
        suites = r.vec(2, "cipher_suites")
        if len(suites) % 2:
            raise HelloError("ClientHello: cipher_suites of odd length %d" % len(suites))
        r.vec(1, "compression_methods")
    else:
        legacy, random, sid, suites, p = head
        exts = _extensions_at(body, p)
        if exts is None:
            r = _Reader(body, "ClientHello")
            r.p = p
    if exts is None:
        exts = _extensions(r)
    sn = exts.get(EXT_SERVER_NAME)
    return ClientHello(legacy, random, sid, suites, exts, _sni(sn) if sn is not None else None)


_U16S = [struct.Struct(">%dH" % i) for i in range(512)]   # cipher suite lists up to 511 suites


def _client_hello_head(b: bytes) -> tuple[int, bytes, bytes, bytes, int] | None:
    """A ClientHello's fields before its extensions (legacy version, random, session id, the
    cipher suites' bytes, where the extensions start) read by index when every length fits (the
    usual case); None for anything else, which the reader then reads or names the field that does
    not fit."""
    n = len(b)
    if n < 35:
        return None
    p = 35 + b[34]
    if p + 2 > n:
        return None
    k = b[p] << 8 | b[p + 1]
    q = p + 2 + k
    if k & 1 or q >= n or q + 1 + b[q] > n:
        return None
    return (b[0] << 8 | b[1], b[2:34], b[35:p], b[p + 2:q], q + 1 + b[q])


@dataclass
class ServerHello:
    legacy_version: int
    random: bytes
    session_id: bytes
    cipher_suite: int
    extensions: dict[int, bytes] = field(default_factory=dict)

    @property
    def version(self) -> int:
        """The version chosen: supported_versions (TLS 1.3) or legacy_version."""
        sv = self.extensions.get(EXT_SUPPORTED_VERSIONS)
        if sv is not None and len(sv) == 2:
            return int.from_bytes(sv, "big")
        return self.legacy_version

    @property
    def hello_retry(self) -> bool:
        return self.random == HELLO_RETRY_RANDOM

    @property
    def encrypt_then_mac(self) -> bool:
        return EXT_ENCRYPT_THEN_MAC in self.extensions

    @property
    def extended_master_secret(self) -> bool:
        return EXT_EXTENDED_MASTER_SECRET in self.extensions

    @property
    def psk_accepted(self) -> bool:
        return EXT_PRE_SHARED_KEY in self.extensions

    @property
    def key_share(self) -> bool:
        return EXT_KEY_SHARE in self.extensions

    @property
    def alpn(self) -> list[str]:
        a = self.extensions.get(EXT_ALPN)
        return _alpn(a) if a is not None else []


def parse_server_hello(body: bytes) -> ServerHello:
    n = len(body)
    if n >= 35 and 38 + body[34] <= n:
        # every fixed field fits (the usual case): read by index, the extensions as below
        p = 35 + body[34]
        exts = _extensions_at(body, p + 3)
        if exts is None:
            r = _Reader(body, "ServerHello")
            r.p = p + 3
            exts = _extensions(r)
        return ServerHello(body[0] << 8 | body[1], body[2:34], body[35:p], body[p] << 8 | body[p + 1], exts)
    r = _Reader(body, "ServerHello")
    legacy = r.u16("legacy_version")
    random = r.take(32, "random")
    sid = r.vec(1, "session_id")
    suite = r.u16("cipher_suite")
    r.u8("compression_method")
    return ServerHello(legacy, random, sid, suite, _extensions(r))


def parse_encrypted_extensions_alpn(body: bytes) -> list[str]:
    """ALPN from a TLS 1.3 EncryptedExtensions body (empty when absent or unreadable)."""
    if body == b"\x00\x00":
        return []       # no extensions (the usual case)
    try:
        exts = _extensions(_Reader(body, "EncryptedExtensions"))
    except HelloError:
        return []
    a = exts.get(EXT_ALPN)
    return _alpn(a) if a is not None else []


def parse_new_session_ticket12(body: bytes) -> bytes | None:
    """The ticket of a TLS 1.2 NewSessionTicket (RFC 5077 3.3), or None when it does not parse."""
    try:
        r = _Reader(body, "NewSessionTicket")
        r.take(4, "ticket_lifetime_hint")
        return r.vec(2, "ticket")
    except HelloError:
        return None


def text(b: bytes) -> str:
    return _text(b)
