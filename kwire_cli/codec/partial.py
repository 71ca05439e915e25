"""A slow, interpreted decoder that keeps what it read when it fails (`kwire decode --partial`).

The compiled plans (compiler.py) are the codec; this walks the same spec model field by field
with the same primitives and the same error messages, writing each value into a tree that is
already attached to its parent, so that when a `DecodeError` stops it the tree up to the
failure is still there. It is not on any hot path: only `--partial` after a failed decode (and
the tests that check it agrees with the compiled codec) use it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from kwire_cli import wire
from kwire_cli.codec import runtime as R
from kwire_cli.codec.framing import unframe
from kwire_cli.codec.headers import request_header_version, response_header_version
from kwire_cli.codec.message import (
    RECORDS_MODE,
    decode_body,
    decode_request,
    decode_response,
    kip511_fallback,
    layout_version,
    message_label,
)
from kwire_cli.errors import DecodeError, KwireError, TrailingBytes, UnknownApiKey, Violation
from kwire_cli.records.limits import frame_budget
from kwire_cli.spec.model import FieldSpec, FieldType, MessageSpec, StructSpec
from kwire_cli.spec.registry import Api, registry

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FIXED = {k: struct.Struct(">" + fmt) for k, fmt in R.FMT.items()}


def default_value(f: FieldSpec, version: int) -> Any:
    """What the compiled decoder puts in the tree for a field that is absent from the bytes."""
    if f.type.kind == "struct":
        if f.default is None:
            return None
        return struct_default(f.struct_spec, version)
    if isinstance(f.default, list):
        return []
    return f.default


def struct_default(s: StructSpec, version: int) -> dict[str, Any]:
    return {f.name: default_value(f, version) for f in s.fields if version in f.versions}


class Walker:
    """Decode one message spec at one version into caller-owned containers."""

    def __init__(self, spec: MessageSpec, version: int, records_mode: str = "hex",
                 violations: list[Violation] | None = None):
        self.spec = spec
        self.v = version
        self.flexible = spec.flexible(version)
        self.rec = R.records_decoder(records_mode)
        # lenient (a list): a rule broken where the bytes still read on is recorded there and the walk
        # goes on; strict (None): it raises, as the compiled codec does
        self.violations = violations
        self.path: list[str] = []
        self.items_left = R.MAX_ITEMS[0]  # the item budget, as the compiled codec's (runtime.MAX_ITEMS)

    def charge(self, n: int, pos: int) -> None:
        """Take ``n`` items (array elements, unknown tagged fields) from the budget, before they are
        made: past it the walk stops, as the codec does (never a violation read past)."""
        self.items_left -= n
        if self.items_left < 0:
            raise R.too_many(pos)

    def violate(self, err: DecodeError, at: str | None = None) -> None:
        """Record ``err`` as a violation of the value being read (``at``: its name below the path), or
        raise it when strict."""
        if self.violations is None:
            raise err
        path = self.path + ([at] if at is not None else [])
        self.violations.append(Violation.of(err, path))

    def at(self, name: str) -> None:
        self.path.append(name)

    def compact(self, f: FieldSpec) -> bool:
        return f.compact_in(self.v, self.flexible)

    # -- primitives, with the compiled codec's messages
    @staticmethod
    def uvarint(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
        if pos >= end:
            raise R.short(what, 1, pos, end)
        return wire.read_uvarint(buf, pos, end)

    def length(self, kind: str, nullable: bool, compact: bool, buf: bytes, pos: int, end: int) -> tuple[int, int]:
        if compact:
            n, pos = self.uvarint(buf, pos, end, f"{kind} length")
            n -= 1
            if not nullable and n < 0:
                self.violate(R.not_nullable(pos - 1))  # lenient: shown as the null it is
            return n, pos
        size, st = (2, _I16) if kind == "string" else (4, _I32)
        if pos + size > end:
            raise R.short(kind + " length", size, pos, end)
        n = st.unpack_from(buf, pos)[0]
        pos += size
        if n < 0:
            if n != -1:
                raise R.neg_len(n, pos - size)
            if not nullable:
                self.violate(R.not_nullable(pos - size))
        return n, pos

    # -- structs and values
    def struct(self, s: StructSpec, buf: bytes, pos: int, end: int, d: dict[str, Any], depth: int) -> int:
        """Fill `d` (already in the tree) with the fields of `s`; return the new position."""
        if depth > R.MAX_DEPTH:
            raise R.too_deep(pos)
        v = self.v
        present = [f for f in s.fields if v in f.versions]
        tagged = {f.tag_number: f for f in present if f.tagged_in(v)}
        read: set[str] = set()
        try:
            for f in present:
                if f.tagged_in(v):
                    d[f.name] = default_value(f, v)  # a placeholder, in spec order, like the codec
                    continue
                self.path.append(f.name)
                try:
                    pos = self.value(f.type, f.nullable_in(v), self.compact(f), buf, pos, end, d, f.name, f, depth)
                except DecodeError as e:
                    e.prefix(f.name)
                    raise
                self.path.pop()
            if self.flexible:
                pos = self.tags(tagged, buf, pos, end, d, depth, read)
        except DecodeError:
            # the tree shows only what was read: drop the placeholders of tagged fields not reached
            for f in tagged.values():
                if f.name not in read:
                    d.pop(f.name, None)
            raise
        return pos

    def tags(self, tagged: dict[int, FieldSpec], buf: bytes, pos: int, end: int, d: dict[str, Any], depth: int,
             read: set[str]) -> int:
        if pos >= end and self.violations is not None:
            # the bytes end where a tag section must be: an encoder that left it out (tansu's
            # CreateAcls v3 answer, sarama's AlterConfigs v2 request); read as no tagged fields
            e = R.short("tagged field count", 1, pos, end)
            e.rule = "missing-tags"
            e.reason = f"the tagged-field section is missing at offset {pos}, where the bytes end (read as none)"
            self.violate(e)
            return pos
        nt, pos = self.uvarint(buf, pos, end, "tagged field count")
        if not nt:
            return pos
        if nt * 2 > end - pos:
            raise DecodeError("%d tagged fields need at least %d bytes, %d left at offset %d"
                              % (nt, nt * 2, end - pos, pos), pos)
        unk: dict[str, Any] | None = None
        expl: list[Any] | None = None
        prev = -1
        for _ in range(nt):
            tag, pos = wire.read_uvarint(buf, pos, end)
            if tag <= prev:
                self.violate(R.tag_order(tag, prev, pos))  # lenient: read it (a repeat: the later value)
            prev = max(prev, tag)
            sz, pos = wire.read_uvarint(buf, pos, end)
            e2 = pos + sz
            if e2 > end:
                raise R.short("tagged field " + str(tag), sz, pos, end)
            f = tagged.get(tag)
            if f is not None:
                read.add(f.name)
                start = pos
                if self.violations is not None:
                    pos = self.lenient_tag(f, tag, buf, pos, e2, d, depth)
                    if pos < 0:  # its bytes did not read as its value: kept as they are, not guessed
                        d.pop(f.name, None)
                        if unk is None:
                            unk = {}
                        unk[str(tag)] = buf[start:e2].hex()
                        pos = e2
                        continue
                else:
                    try:
                        pos = self.value(f.type, f.nullable_in(self.v), self.compact(f), buf, pos, e2, d,
                                         f.name, f, depth, tagged=True)
                        if pos != e2:
                            raise R.tag_size(f.name, tag, sz, sz - (e2 - pos), pos)
                    except DecodeError as e:
                        e.prefix(f.name)
                        raise
                if d[f.name] == default_value(f, self.v):  # a peer wrote the default explicitly
                    if expl is None:
                        expl = []
                    expl.append(tag)
            else:
                self.charge(1, pos)
                if unk is None:
                    unk = {}
                unk[str(tag)] = buf[pos:e2].hex()
                pos = e2
        if unk:
            d["_unknown_tags"] = unk
        if expl:
            d["_explicit_tags"] = expl
        return pos

    def lenient_tag(self, f: FieldSpec, tag: int, buf: bytes, pos: int, e2: int, d: dict[str, Any],
                    depth: int) -> int:
        """Read a known tagged field leniently: its value, or -1 when its bytes do not read as it (the
        violation recorded; the caller keeps the bytes). A value shorter than its declared size is a
        violation and the rest of the size is skipped."""
        mark = len(self.violations or [])
        saved = list(self.path)
        self.path.append(f.name)
        try:
            end = self.value(f.type, f.nullable_in(self.v), self.compact(f), buf, pos, e2, d, f.name, f, depth,
                             tagged=True)
        except DecodeError as e:
            del self.path[len(saved):]
            if self.violations is not None:
                del self.violations[mark:]
            self.violate(e, f.name)
            return -1
        finally:
            self.path = saved
        if end != e2:
            self.violate(R.tag_size(f.name, tag, e2 - pos, end - pos, end), f.name)
        return e2

    def value(self, ft: FieldType, nullable: bool, compact: bool, buf: bytes, pos: int, end: int,
              into: dict[str, Any] | list[Any], key: Any, f: FieldSpec | None, depth: int, tagged: bool = False) -> int:
        """Read one value and store it as into[key] (or append it when `into` is a list). `tagged`: a
        tagged field's own value (a nullable struct's presence marker is then a varint, 0: null)."""

        def put(x: Any) -> None:
            if isinstance(into, list):
                into.append(x)
            else:
                into[key] = x

        k = ft.kind
        if k in _FIXED:
            st = _FIXED[k]
            if pos + st.size > end:
                raise R.short(k, st.size, pos, end)
            x = st.unpack_from(buf, pos)[0]
            put(x != 0 if k == "bool" else wire.uuid_to_text(x) if k == "uuid" else x)
            return pos + st.size
        if k in ("string", "bytes", "records"):
            n, pos = self.length(k, nullable, compact, buf, pos, end)
            if n < 0:
                put(None)
                return pos
            e = pos + n
            if e > end:
                raise R.short(f"{k} of {n} bytes", n, pos, end)
            if k == "string":
                try:
                    put(buf[pos:e].decode("utf-8"))
                except UnicodeDecodeError as x:
                    self.violate(R.bad_utf8(pos, x))  # lenient: the bytes as they are, flagged
                    put({"invalid_utf8": buf[pos:e].hex()})
            elif k == "bytes":
                put(buf[pos:e].hex())
            else:
                try:
                    put(self.rec(buf[pos:e]))
                except KwireError as x:
                    err = DecodeError(str(x), pos)
                    err.rule = "records"
                    self.violate(err)  # lenient: the records bytes as hex
                    put(buf[pos:e].hex())
            return e
        if k == "struct":
            if nullable and tagged:
                if pos >= end:
                    raise R.short("struct presence marker", 1, pos, end)
                present, pos = wire.read_uvarint(buf, pos, end)
                if present == 0:
                    put(None)
                    return pos
            elif nullable:
                if pos >= end:
                    raise R.short("struct presence byte", 1, pos, end)
                pos += 1
                if buf[pos - 1] >= 128:
                    put(None)
                    return pos
            d: dict[str, Any] = {}
            put(d)
            assert f is not None
            return self.struct(f.struct_spec, buf, pos, end, d, depth + 1)
        if k == "array":
            el = ft.item
            if compact:
                cnt, pos = self.uvarint(buf, pos, end, "array length")
                cnt -= 1
            else:
                if pos + 4 > end:
                    raise R.short("array length", 4, pos, end)
                cnt = _I32.unpack_from(buf, pos)[0]
                pos += 4
                if cnt < -1:
                    raise R.neg_len(cnt, pos - 4)
            if cnt < 0:
                if not nullable:
                    self.violate(R.not_nullable(pos - (1 if compact else 4)))  # lenient: shown as null
                put(None)
                return pos
            ms = max(1, R.min_size(el, compact))
            if cnt * ms > end - pos:
                raise R.big_array(cnt, ms, pos, end)
            self.charge(cnt, pos)
            lst: list[Any] = []
            put(lst)
            for i in range(cnt):
                self.path.append("[%d]" % i)
                try:
                    pos = self.value(el, False, compact, buf, pos, end, lst, None, f, depth)
                except DecodeError as e:
                    e.prefix("[%d]" % i)
                    raise
                self.path.pop()
            return pos
        raise AssertionError(k)  # pragma: no cover


@dataclass
class PartialMessage:
    """What `walk_*` read: the tree so far and, when it stopped early, the error."""
    api: Api
    api_version: int
    kind: str
    header_version: int | None
    header: dict[str, Any] | None
    body: dict[str, Any] | None
    size: int
    error: DecodeError | None = None
    offset: int = 0  # where the message starts in the input (4 with a size prefix)
    extra: dict[str, Any] = dc_field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {"api_key": self.api.key, "api_name": self.api.name, "api_version": self.api_version,
               "kind": self.kind, "header": self.header, "body": self.body, "size": self.size}
        if self.error is not None:
            out["partial"] = True
            out["error"] = {"message": str(self.error), "path": self.error.field_path,
                            "offset": self.error.offset}
        return out


def _walk(walker: Walker, root: StructSpec, data: bytes, pos: int, end: int, label: str,
          d: dict[str, Any]) -> tuple[int, DecodeError | None]:
    try:
        return walker.struct(root, data, pos, end, d, 0), None
    except DecodeError as e:
        if not e.context:
            e.context = label
        return pos, e
    except RecursionError:
        return pos, DecodeError(f"nesting too deep at offset {pos}", pos, context=label)


def _header_spec(kind: str) -> MessageSpec:
    return registry().schema("RequestHeader" if kind == "request" else "ResponseHeader")


def walk_message(data: bytes, kind: str, api_key: int | str | None = None, api_version: int | None = None,
                 *, size_prefixed: bool | None = None, header: bool = True,
                 records: str | None = None, violations: list[Violation] | None = None) -> PartialMessage:
    """Decode like decode_request / decode_response / decode_body, but keep the partial tree.

    Errors that leave nothing to show (no size prefix, unknown API, bad version) are raised.
    """
    data = bytes(data)
    records = records or RECORDS_MODE
    if not header:
        start, end = 0, len(data)
    else:
        start, end = unframe(data, size_prefixed)
    if kind == "request" and header and api_key is None:
        if end - start < 4:
            raise DecodeError(f"request header needs at least 4 bytes (api key, version), "
                              f"{end - start} left at offset {start}", start)
        key, version = struct.unpack_from(">hh", data, start)
        try:
            api = registry().api(key)
        except KwireError:
            raise UnknownApiKey(f"unknown API key {key} in the request header at offset {start}", start) from None
    else:
        if api_key is None or api_version is None:
            raise KwireError("a response (or a bare body) needs its api key and version")
        api = registry().api(api_key)
        version = api_version
    if layout_version(api, version, kind) != version:
        # newer than the specs: the codec reads it whole with the newest layout (an assumed version)
        # or refuses it; either way there is no partial tree worth more than its word
        msg = (decode_body(data, api.key, version, kind, records=records) if not header else
               decode_request(data, size_prefixed=size_prefixed, records=records) if kind == "request" else
               decode_response(data, api.key, version, size_prefixed=size_prefixed, records=records))
        return PartialMessage(api, version, kind, None, msg.header, msg.body, end - start, offset=start)
    label = message_label(api, version, kind)
    pm = PartialMessage(api, version, kind, None, None, None, end - start, offset=start)
    pos = start
    if header:
        hv = request_header_version(api, version) if kind == "request" else response_header_version(api, version)
        pm.header_version = hv
        pm.header = {}
        pos, err = _walk(Walker(_header_spec(kind), hv, "hex", violations), _header_spec(kind).struct, data, pos,
                         end, label + " header", pm.header)
        if err:
            pm.error = err
            return pm
    pm.body = {}
    body_at = pos
    if records == "decode":  # all records fields of the message share one decompression budget
        with frame_budget():
            pos, err = _walk(Walker(api.spec(kind), version, records, violations), api.spec(kind).struct, data,
                             pos, end, label, pm.body)
    else:
        pos, err = _walk(Walker(api.spec(kind), version, records, violations), api.spec(kind).struct, data, pos,
                         end, label, pm.body)
    if err:
        fallback = kip511_fallback(api, version, data, body_at, end, records) if kind == "response" else None
        if fallback is not None:  # a KIP-511 answer, read as clients read it (as the codec does)
            pm.body = fallback[0]
            return pm
        pm.error = err
        return pm
    if pos != end:
        pm.error = TrailingBytes(f"{end - pos} trailing bytes after a complete message at offset {pos}",
                                 pos, context=label)
    return pm
