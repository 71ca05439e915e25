"""Broker addresses in answers, rewritten so that every later connection goes through the proxy.

A client learns where brokers are from its answers: Metadata's Brokers, FindCoordinator's node
(the top-level fields up to v3, ``Coordinators`` from v4), DescribeCluster's Brokers, Produce
(v10+) and Fetch (v16+) ``NodeEndpoints``, ShareFetch's and ShareAcknowledge's ``NodeEndpoints``,
DescribeQuorum's node listeners. Every ``{Host, Port}`` in such an answer is replaced by the
proxy's own address for that broker (``AddressBook``: one local port per broker, given when the
broker first appears). Everything else in the answer is written back exactly as it came (the
codec re-encodes what it decoded byte for byte: unknown tags and records bytes are kept).

Metadata and FindCoordinator answers (the ones every client asks, again and again), DescribeCluster,
DescribeQuorum (its ports are uint16), ShareFetch and ShareAcknowledge answers are not decoded
and encoded again: ``splice_addresses`` walks their bytes by the spec only as far as the last field
that can hold a broker address (Metadata's Brokers come second; the topics after them are not
read), and splices the new Host and Port bytes in; the result is byte for byte the one of the
decode and re-encode path (tests/test_proxy.py checks it on every such answer in fixtures/), in
a small part of its time. Anything the walk does not expect (a tagged or nullable struct on the
way, bytes that end early) falls back to that path. Produce and Fetch answers, whose addresses
are only in top-level tagged fields, are walked to their tags (``tagged_addresses``) and decoded
only when they carry endpoints.

ApiVersions answers are read too: for an address-carrying API whose advertised MaxVersion is
newer than kwire's specs, the proxy could not rewrite the answers of that version, so it caps
MaxVersion at the newest version the specs know (and says so): the client then asks a version
the proxy can rewrite.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kwire_cli import wire
from kwire_cli.codec import decode_response, encode_response
from kwire_cli.codec.runtime import FMT
from kwire_cli.errors import KwireError
from kwire_cli.spec.model import FieldSpec, StructSpec
from kwire_cli.spec.registry import registry

# api key -> the first version whose answers carry broker addresses
ADDRESS_APIS: dict[int, int] = {
    0: 10,   # Produce: NodeEndpoints (tagged)
    1: 16,   # Fetch: NodeEndpoints (tagged)
    3: 0,    # Metadata: Brokers
    10: 0,   # FindCoordinator: NodeId/Host/Port (v0-3), Coordinators (v4+)
    55: 0,   # DescribeQuorum: Nodes[].Listeners (v2+)
    60: 0,   # DescribeCluster: Brokers
    78: 0,   # ShareFetch: NodeEndpoints
    79: 0,   # ShareAcknowledge: NodeEndpoints
}
API_VERSIONS = 18
MAX_ADDRESSES = 10_000     # broker addresses in one answer; past it the answer is not forwarded
MAX_REENCODED = 4 << 20    # bytes of a Metadata or FindCoordinator answer decoded whole when the walk cannot read it
MAX_API_VERSIONS = 1 << 16  # bytes of an ApiVersions answer read to cap versions (a real one is < 1 KiB)


class CannotRewrite(KwireError):
    """An answer whose broker addresses cannot all be rewritten (too many brokers, no local port left):
    the proxy does not forward it (clients would connect to the brokers directly, past the proxy)."""


def _too_many(n: int) -> CannotRewrite:
    return CannotRewrite(f"more than {MAX_ADDRESSES:,} broker addresses in one answer ({n:,} so far)")


def carries_addresses(api_key: int, version: int) -> bool:
    first = ADDRESS_APIS.get(api_key)
    return first is not None and version >= first


def may_rewrite(api_key: int, version: int) -> bool:
    """Whether the answer to this request may be changed (and so is held whole before forwarding)."""
    return api_key == API_VERSIONS or carries_addresses(api_key, version)


@dataclass
class AddressBook:
    """Real broker address -> the proxy's local address for it. ``bind(host, port)`` is called for
    a broker seen for the first time and returns the local (host, port) it now listens on."""

    bind: Callable[[str, int], tuple[str, int]]
    local: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    def local_for(self, host: str, port: int) -> tuple[str, int]:
        key = (host, port)
        loc = self.local.get(key)
        if loc is None:
            loc = self.local[key] = self.bind(host, port)
        return loc


def _rewrite(node: Any, book: AddressBook, seen: list[tuple[str, int, str, int]]) -> None:
    if isinstance(node, list):
        for x in node:
            _rewrite(x, book, seen)
        return
    if not isinstance(node, dict):
        return
    host, port = node.get("Host"), node.get("Port")
    if isinstance(host, str) and host and isinstance(port, int) and not isinstance(port, bool) and port > 0:
        if len(seen) >= MAX_ADDRESSES:
            raise _too_many(len(seen) + 1)
        lhost, lport = book.local_for(host, port)
        if (lhost, lport) != (host, port):
            node["Host"], node["Port"] = lhost, lport
            seen.append((host, port, lhost, lport))
    for k, v in node.items():
        if isinstance(v, (dict, list)) and k != "Records":
            _rewrite(v, book, seen)


@dataclass
class Rewritten:
    data: bytes                    # the frame to forward, size prefix included
    changes: list[str]             # what was changed, one line each (for the output's notes)


def rewrite_response(frame: bytes, api_key: int, version: int, book: AddressBook) -> Rewritten | None:
    """The answer with its broker addresses replaced (or its ApiVersions capped); None when nothing
    changes (the original bytes are forwarded). ``frame`` includes the size prefix."""
    if api_key == API_VERSIONS:
        if len(frame) > MAX_API_VERSIONS:  # nothing kwire could cap is worth decoding that much for
            return None
        return _cap_versions(frame, version)
    if not carries_addresses(api_key, version):
        return None
    if api_key in SPLICED:
        try:
            return splice_addresses(frame, api_key, version, book)
        except NotSpliced:
            if len(frame) > MAX_REENCODED:
                raise CannotRewrite(f"an answer of {len(frame):,} bytes whose broker addresses cannot be read "
                                    "without decoding all of it") from None
    else:
        try:
            if not tagged_addresses(frame, api_key, version):
                return None  # (a Fetch answer of megabytes: walked, not decoded)
        except NotSpliced:
            pass
    return reencode_addresses(frame, api_key, version, book)


def reencode_addresses(frame: bytes, api_key: int, version: int, book: AddressBook) -> Rewritten | None:
    """``rewrite_response`` by a full decode and re-encode (every address-carrying API)."""
    msg = decode_response(frame, api_key, version, size_prefixed=True, records="hex")
    if msg.layout_version is not None:
        return None
    seen: list[tuple[str, int, str, int]] = []
    _rewrite(msg.body, book, seen)
    if not seen:
        return None
    data = encode_response(api_key, version, msg.header, msg.body, size_prefix=True)
    changes = sorted({f"{h}:{p} -> {lh}:{lp}" for h, p, lh, lp in seen})
    return Rewritten(data, [f"{msg.api_name} v{version}: broker addresses rewritten: " + ", ".join(changes)])


def _cap_versions(frame: bytes, version: int) -> Rewritten | None:
    msg = decode_response(frame, API_VERSIONS, version, size_prefixed=True, records="hex")
    if msg.layout_version is not None:  # a KIP-511 answer: the client asks again
        return None
    reg = registry()
    capped = []
    for entry in msg.body.get("ApiKeys") or []:
        key = entry.get("ApiKey")
        if key not in ADDRESS_APIS or key not in reg.apis:
            continue
        newest = min(reg.apis[key].request.valid_versions.hi, reg.apis[key].response.valid_versions.hi)
        if entry.get("MaxVersion", -1) > newest >= entry.get("MinVersion", 0):
            capped.append(f"{reg.apis[key].name} {entry['MaxVersion']} -> {newest}")
            entry["MaxVersion"] = newest
    if not capped:
        return None
    data = encode_response(API_VERSIONS, version, msg.header, msg.body, size_prefix=True)
    return Rewritten(data, ["ApiVersions: MaxVersion capped at the newest version kwire can rewrite "
                            "addresses in: " + ", ".join(capped)])


# ---------------------------------------------------------------------------------------------
# the walk that splices (Metadata, FindCoordinator)

# Metadata, FindCoordinator, DescribeQuorum, DescribeCluster, ShareFetch, ShareAcknowledge
SPLICED = frozenset({3, 10, 55, 60, 78, 79})
_FIXED = {k: struct.calcsize(">" + f) for k, f in FMT.items()}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PORTS = {"int32": _I32, "uint16": struct.Struct(">H")}


class NotSpliced(Exception):
    """What the walk does not read (the full decode and re-encode path takes the answer)."""


def _carries(s: StructSpec, version: int, seen: tuple[str, ...] = ()) -> bool:
    """Whether a struct (or one below it) has Host and Port fields at ``version``."""
    names = {f.name for f in s.fields if version in f.versions}
    if {"Host", "Port"} <= names:
        return True
    return any(f.struct is not None and f.struct.name not in seen and _carries(f.struct, version, (*seen, s.name))
               for f in s.fields if version in f.versions)


@functools.lru_cache(maxsize=256)
def _plan(api_key: int, version: int) -> tuple[list[FieldSpec], bool, str] | None:
    """The top-level fields to walk (up to the last that can hold an address), whether the version is
    flexible, the API's name; None when the walk cannot do it (an address in a tagged field)."""
    api = registry().apis[api_key]
    spec = api.response
    if version not in spec.valid_versions:
        return None
    present = [f for f in spec.fields if version in f.versions]
    for f in present:
        if f.tagged_in(version) and (f.name in ("Host", "Port") or (f.struct and _carries(f.struct, version))):
            return None
    last = -1
    for i, f in enumerate(present):
        if f.tagged_in(version):
            continue
        if f.name in ("Host", "Port") or (f.struct is not None and _carries(f.struct, version)):
            last = i
    if last < 0:
        return None
    return present[:last + 1], spec.flexible(version), api.name


class _Walk:
    def __init__(self, buf: bytes, version: int, flexible: bool, book: AddressBook) -> None:
        self.buf, self.v, self.flexible, self.book = buf, version, flexible, book
        self.pos = 0
        self.splices: list[tuple[int, int, bytes]] = []
        self.seen: list[tuple[str, int, str, int]] = []
        self.addresses = 0

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise NotSpliced

    def uvarint(self) -> int:
        try:
            n, self.pos = wire.read_uvarint(self.buf, self.pos, len(self.buf))
        except Exception as e:
            raise NotSpliced from e
        return n

    def length(self, f: FieldSpec | None, kind: str, compact: bool) -> int:
        """A string's, bytes' or array's length (-1: null)."""
        if compact:
            return self.uvarint() - 1
        size, st = (2, _I16) if kind == "string" else (4, _I32)
        self.need(size)
        n: int = st.unpack_from(self.buf, self.pos)[0]
        self.pos += size
        if n < -1 or (n == -1 and f is not None and not f.nullable_in(self.v)):
            raise NotSpliced
        return n

    def compact(self, f: FieldSpec) -> bool:
        return f.compact_in(self.v, self.flexible)

    def fields(self, fields: list[FieldSpec], top: bool = False) -> None:
        host: tuple[int, int, str, bool] | None = None   # start, end, value, compact
        port: tuple[int, int] | None = None               # offset, value
        port_st = _I32
        for f in fields:
            if self.v not in f.versions or f.tagged_in(self.v):
                continue
            kind = f.type.kind
            if f.name == "Host" and kind == "string":
                start, compact = self.pos, self.compact(f)
                n = self.length(f, "string", compact)
                if n < 0:
                    raise NotSpliced
                self.need(n)
                try:
                    value = self.buf[self.pos:self.pos + n].decode("utf-8")
                except UnicodeDecodeError as e:
                    raise NotSpliced from e
                self.pos += n
                host = (start, self.pos, value, compact)
            elif f.name == "Port" and kind in _PORTS:
                st = _PORTS[kind]  # int32, or DescribeQuorum's uint16
                self.need(st.size)
                port = (self.pos, st.unpack_from(self.buf, self.pos)[0])
                port_st = st
                self.pos += st.size
            else:
                self.value(f)
        if self.flexible and not top:
            self.tags()
        if host is not None and port is not None and host[2] and port[1] > 0:
            self.addresses += 1
            if self.addresses > MAX_ADDRESSES:
                raise _too_many(self.addresses)
            lhost, lport = self.book.local_for(host[2], port[1])
            if (lhost, lport) != (host[2], port[1]):
                self.seen.append((host[2], port[1], lhost, lport))
                raw = lhost.encode("utf-8")
                head = wire.uvarint_bytes(len(raw) + 1) if host[3] else _I16.pack(len(raw))
                self.splices.append((host[0], host[1], head + raw))
                self.splices.append((port[0], port[0] + port_st.size, port_st.pack(lport)))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.need(size)
            self.pos += size

    def value(self, f: FieldSpec) -> None:
        kind = f.type.kind
        if kind in _FIXED:
            self.need(_FIXED[kind])
            self.pos += _FIXED[kind]
        elif kind in ("string", "bytes", "records"):
            n = self.length(f, "string" if kind == "string" else "bytes", self.compact(f))
            if n > 0:
                self.need(n)
                self.pos += n
        elif kind == "array":
            n = self.length(f, "array", self.compact(f))
            item = f.type.item
            if item.kind == "struct":
                for _ in range(n):
                    self.fields(f.struct_spec.fields)
            elif item.kind in _FIXED:
                self.need(n * _FIXED[item.kind])
                self.pos += max(n, 0) * _FIXED[item.kind]
            elif item.kind == "string":
                for _ in range(n):
                    m = self.length(None, "string", self.compact(f))
                    if m > 0:
                        self.need(m)
                        self.pos += m
            else:
                raise NotSpliced
        elif kind == "struct" and not f.nullable_in(self.v):
            self.fields(f.struct_spec.fields)
        else:  # a nullable struct, a type the walk does not know
            raise NotSpliced


@functools.lru_cache(maxsize=256)
def _tag_plan(api_key: int, version: int) -> tuple[list[FieldSpec], frozenset[int]] | None:
    """The top-level fields of a flexible answer whose addresses are only in top-level tagged fields
    (Produce's and Fetch's ``NodeEndpoints``), and those fields' tags; None otherwise."""
    spec = registry().apis[api_key].response
    if version not in spec.valid_versions or not spec.flexible(version):
        return None
    present = [f for f in spec.fields if version in f.versions]
    tags = set()
    for f in present:
        holds = f.name in ("Host", "Port") or (f.struct is not None and _carries(f.struct, version))
        if holds and not f.tagged_in(version):
            return None
        if holds:
            tags.add(f.tag_number)
    return [f for f in present if not f.tagged_in(version)], frozenset(tags)


def tagged_addresses(frame: bytes, api_key: int, version: int) -> bool:
    """Whether an answer whose broker addresses can only be in top-level tagged fields has one of
    them: its fields are walked by the spec (records skipped by their length, nothing decoded), then
    its top-level tags read. ``NotSpliced`` when the walk cannot tell (the caller decodes)."""
    plan = _tag_plan(api_key, version)
    if plan is None:
        raise NotSpliced
    fields, tags = plan

    def no_book(_host: str, _port: int) -> tuple[str, int]:
        raise NotSpliced  # an address outside the tagged fields: not this walk's
    w = _Walk(frame, version, True, AddressBook(no_book))
    w.pos = 8
    w.tags()  # response header v1
    w.fields(fields, top=True)
    found = False
    for _ in range(w.uvarint()):
        tag = w.uvarint()
        size = w.uvarint()
        w.need(size)
        end = w.pos + size
        if tag in tags and size:  # an array of endpoints: its compact length, N + 1 (0: null, 1: empty)
            found = found or w.uvarint() > 1
        w.pos = end
    if w.pos != len(frame):
        raise NotSpliced
    return found


def splice_addresses(frame: bytes, api_key: int, version: int, book: AddressBook) -> Rewritten | None:
    """``rewrite_response`` for Metadata and FindCoordinator without decoding the answer: the walk
    reads by the spec up to the last field that can hold an address and splices the new Host and
    Port bytes in. ``NotSpliced`` when the walk cannot do it (the caller decodes instead)."""
    plan = _plan(api_key, version)
    if plan is None:
        raise NotSpliced
    fields, flexible, name = plan
    w = _Walk(frame, version, flexible, book)
    w.pos = 8  # size, correlation id
    if flexible:  # response header v1: its tagged fields
        w.tags()
    w.fields(fields, top=True)
    if not w.seen:
        return None
    out, at = [], 0
    for start, end, new in w.splices:
        out += [frame[at:start], new]
        at = end
    out.append(frame[at:])
    body = b"".join(out)
    data = _I32.pack(len(body) - 4) + body[4:]
    changes = sorted({f"{h}:{p} -> {lh}:{lp}" for h, p, lh, lp in w.seen})
    return Rewritten(data, [f"{name} v{version}: broker addresses rewritten: " + ", ".join(changes)])
