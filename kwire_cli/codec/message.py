"""Whole messages: header + body, with or without the size prefix.

A request names itself in its header (api key and version), so it decodes from its bytes
alone; a response does not, so it needs (api key, version), as a client knows them from the
request it sent.
"""
from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from kwire_cli.codec import native
from kwire_cli.codec.compiler import Plan, compile_plan
from kwire_cli.codec.framing import frame, unframe
from kwire_cli.codec.headers import request_header_version, response_header_version
from kwire_cli.codec.native import decode_pair
from kwire_cli.errors import (
    DecodeError,
    EncodeError,
    KwireError,
    TrailingBytes,
    UnknownApiKey,
    UnknownVersion,
    Violation,
)
from kwire_cli.spec.registry import Api, Registry, registry

_PEEK = struct.Struct(">hh")
_PEEK_AT = _PEEK.unpack_from
_SIZE_AT = struct.Struct(">i").unpack_from


@dataclass(slots=True)
class Message:
    api_key: int
    api_name: str
    api_version: int
    kind: str
    header: dict[str, Any] | None
    body: dict[str, Any]
    size: int  # bytes of header + body, without the size prefix
    # the version whose body layout read the bytes when it is not api_version: a KIP-511 fallback
    # answer (v0), or the newest known layout for a version newer than the specs ("assumed")
    layout_version: int | None = None
    # (empty tuples by default: no allocation per message on the hot path; set, never appended to)
    notes: Sequence[str] = ()  # what a reader should know (one line each)
    violations: Sequence[Violation] = ()  # lenient decoding only

    def to_json(self) -> dict[str, Any]:
        out = {"api_key": self.api_key, "api_name": self.api_name, "api_version": self.api_version,
               "kind": self.kind, "header": self.header, "body": self.body, "size": self.size}
        if self.layout_version is not None:
            out["layout_version"] = self.layout_version
        if self.notes:
            out["notes"] = list(self.notes)
        if self.violations:
            out["violations"] = [v.to_json() for v in self.violations]
        return out


# The native whole-frame entry (codec/_speedups.c) builds Messages itself, filling these slots
if native.frame_setup is not None:
    native.frame_setup(Message, tuple(f.name for f in fields(Message)), registry)
_request_frame = native.decode_request_frame if native.frame_setup is not None else None
_response_frame = native.decode_response_frame if native.frame_setup is not None else None

RECORDS_MODE = "decode"  # records fields are decoded into values by kwire_cli.records unless asked otherwise


def check_version(api: Api, version: int, kind: str) -> None:
    spec = api.spec(kind)
    if version not in spec.valid_versions:
        raise UnknownVersion(f"{api.name} v{version} is not a valid version "
                             f"(valid: {spec.valid_versions}; api key {api.key})")


MAX_VERSION = 0x7FFF  # a version is an int16


def layout_version(api: Api, version: int, kind: str) -> int:
    """The version whose layout reads ``version``: itself when the specs have it; the newest the
    specs know when ``version`` is newer (an *assumed* version, as Wireshark labels it: the caller
    keeps the result only when the bytes read whole with it); else UnknownVersion."""
    valid = api.spec(kind).valid_versions
    if version in valid:
        return version
    if valid.hi < version <= MAX_VERSION:
        return valid.hi
    check_version(api, version, kind)
    raise AssertionError  # pragma: no cover  (check_version raised)


def newer_than_specs(api: Api, version: int, kind: str, layout: int, why: str) -> UnknownVersion:
    """The error for a version newer than the specs whose bytes do not read with the newest layout."""
    valid = api.spec(kind).valid_versions
    return UnknownVersion(f"{api.name} v{version} is newer than the specs in use ({api.name} {valid} in "
                          f"{registry().folder}) and does not read with the v{layout} layout ({why}); "
                          f"--specs DIR reads a newer Kafka checkout's clients/src/main/resources/common/message")


def assumed_note(api: Api, version: int, layout: int) -> str:
    return (f"assumed version: {api.name} v{version} is newer than the specs in use (newest v{layout}); "
            f"its bytes read whole with the v{layout} layout, shown here")


def body_plan(api: Api, version: int, kind: str, records: str | None = None) -> Plan:
    check_version(api, version, kind)
    return compile_plan(api.spec(kind), version, records or RECORDS_MODE)


def header_plan(kind: str, header_version: int) -> Plan:
    spec = registry().schema("RequestHeader" if kind == "request" else "ResponseHeader")
    return compile_plan(spec, header_version, "hex")


def message_label(api: Api, version: int, kind: str) -> str:
    return f"{api.name} v{version} {kind}"


def _run(plan: Plan, data: bytes, pos: int, end: int, label: str) -> tuple[dict[str, Any], int]:
    try:
        return plan.decode(data, pos, end)
    except DecodeError as e:
        if not e.context:
            e.context = label
        raise
    except RecursionError:
        raise DecodeError(f"nesting too deep at offset {pos}", pos, context=label) from None


def _finish(pos: int, end: int, label: str, msg: Message) -> Message:
    """Trailing bytes are an error; the error still carries the complete message (`.decoded`)."""
    if pos != end:
        raise TrailingBytes(f"{end - pos} trailing bytes after a complete message at offset {pos}",
                            pos, context=label, decoded=msg)
    return msg


# (api, header plan, body plan, label, header label, newest version the specs know)
_Target = tuple[Api, Plan, Plan, str, str, int]
_targets: dict[tuple[int, int, str, str | None], tuple[Registry, _Target]] = {}


def _target(key: int, version: int, kind: str, records: str | None, registry_now: Registry) -> _Target:
    """What decoding a message needs, looked up once and then cached (per registry)."""
    t = _targets.get((key, version, kind, records))
    if t is not None and t[0] is registry_now:
        return t[1]
    try:
        api = registry_now.api(key)
    except KwireError:
        raise UnknownApiKey(f"unknown API key {key}", 0) from None
    lv = layout_version(api, version, kind)
    hv = request_header_version(api, lv) if kind == "request" else response_header_version(api, lv)
    label = message_label(api, version, kind)
    if lv != version:
        label += f" (read as v{lv})"
    value = (api, header_plan(kind, hv), body_plan(api, lv, kind, records), label, label + " header",
             api.spec(kind).valid_versions.hi)
    _targets[(key, version, kind, records)] = (registry_now, value)
    hplan, bplan = value[1], value[2]
    if native.remember_target is not None and lv == version and hplan.native and bplan.native:
        native.remember_target(kind == "response", records, key, version, registry_now, hplan.decode, bplan.decode,
                               api.key, api.name, value[5])
    return value


def _assumed(api: Api, version: int, kind: str, msg: Message | None, err: DecodeError | None) -> Message:
    """A message of a version newer than the specs, read with the newest layout: kept, labelled, when
    it read whole; otherwise the error says so and what to do."""
    lv = api.spec(kind).valid_versions.hi
    if msg is None or err is not None:
        why = str(err) if err is not None else "it does not read"
        raise newer_than_specs(api, version, kind, lv, why.split(": ", 1)[-1]) from None
    msg.layout_version = lv
    msg.notes = [*msg.notes, assumed_note(api, version, lv)]
    return msg


def decode_request(data: bytes, *, size_prefixed: bool | None = None, records: str | None = None) -> Message:
    if _request_frame is not None:  # the whole frame in one native call; None: the path below decides
        msg: Message | None = _request_frame(data, size_prefixed, records)
        if msg is not None:
            return msg
    if data.__class__ is not bytes:
        data = bytes(data)
    end = len(data)
    if size_prefixed is not False and end >= 4 and _SIZE_AT(data, 0)[0] == end - 4:
        start = 4  # a size prefix that fits: what unframe returns for it, without the call
    else:
        start, end = unframe(data, size_prefixed)
    if end - start < 4:
        raise DecodeError(f"request header needs at least 4 bytes (api key, version), "
                          f"{end - start} left at offset {start}", start)
    key, version = _PEEK_AT(data, start)
    reg = registry()
    cached = _targets.get((key, version, "request", records))
    if cached is not None and cached[0] is reg:
        api, hplan, bplan, label, hlabel, hi = cached[1]
    else:
        if key not in reg.apis:
            raise UnknownApiKey(f"unknown API key {key} in the request header at offset {start}", start)
        api, hplan, bplan, label, hlabel, hi = _target(key, version, "request", records, reg)
    if version > hi:
        return _assumed_read(api, version, "request", hplan, bplan, data, start, end, label, hlabel)
    if decode_pair is not None:  # header and body in one native call; None: the path below decides
        both = decode_pair(hplan.decode, bplan.decode, data, start, end)
        if both is not None:
            return Message(api.key, api.name, version, "request", both[0], both[1], end - start)
    # _run's work inlined (the same errors): two calls fewer per frame
    try:
        header, pos = hplan.decode(data, start, end)
    except DecodeError as e:
        if not e.context:
            e.context = hlabel
        raise
    except RecursionError:
        raise DecodeError(f"nesting too deep at offset {start}", start, context=hlabel) from None
    try:
        body, pos = bplan.decode(data, pos, end)
    except DecodeError as e:
        if not e.context:
            e.context = label
        raise
    except RecursionError:
        raise DecodeError(f"nesting too deep at offset {pos}", pos, context=label) from None
    if pos != end:
        return _finish(pos, end, label, Message(api.key, api.name, version, "request", header, body, end - start))
    return Message(api.key, api.name, version, "request", header, body, end - start)


def _assumed_read(api: Api, version: int, kind: str, hplan: Plan, bplan: Plan, data: bytes, start: int, end: int,
                  label: str, hlabel: str) -> Message:
    try:
        header, pos = _run(hplan, data, start, end, hlabel)
        body, pos = _run(bplan, data, pos, end, label)
    except DecodeError as e:
        return _assumed(api, version, kind, None, e)
    if pos != end:
        return _assumed(api, version, kind, None,
                        DecodeError(f"{end - pos} bytes left over at offset {pos}", pos))
    return _assumed(api, version, kind, Message(api.key, api.name, version, kind, header, body, end - start), None)


def decode_response(data: bytes, api_key: int | str, api_version: int, *,
                    size_prefixed: bool | None = None, records: str | None = None) -> Message:
    if _response_frame is not None:  # the whole frame in one native call; None: the path below decides
        msg: Message | None = _response_frame(data, api_key, api_version, size_prefixed, records)
        if msg is not None:
            return msg
    if data.__class__ is not bytes:
        data = bytes(data)
    reg = registry()
    if api_key.__class__ is not int:
        api_key = reg.api(api_key).key
    cached = _targets.get((api_key, api_version, "response", records))
    if cached is not None and cached[0] is reg:
        api, hplan, bplan, label, hlabel, hi = cached[1]
    else:
        api, hplan, bplan, label, hlabel, hi = _target(api_key, api_version, "response", records, reg)
    end = len(data)
    if size_prefixed is not False and end >= 4 and _SIZE_AT(data, 0)[0] == end - 4:
        start = 4  # a size prefix that fits: what unframe returns for it, without the call
    else:
        start, end = unframe(data, size_prefixed)
    if api_version > hi:
        return _assumed_read(api, api_version, "response", hplan, bplan, data, start, end, label, hlabel)
    if decode_pair is not None:  # header and body in one native call; None: the path below decides
        both = decode_pair(hplan.decode, bplan.decode, data, start, end)
        if both is not None:
            return Message(api.key, api.name, api_version, "response", both[0], both[1], end - start)
    header, pos = _run(hplan, data, start, end, hlabel)
    try:
        body, pos = _run(bplan, data, pos, end, label)
    except DecodeError:
        fallback = kip511_fallback(api, api_version, data, pos, end, records)
        if fallback is None:
            raise
        body, pos = fallback
        return Message(api.key, api.name, api_version, "response", header, body, end - start, layout_version=0,
                       notes=[kip511_note(api_version)])
    if pos != end:
        return _finish(pos, end, label, Message(api.key, api.name, api_version, "response", header, body,
                                                end - start))
    return Message(api.key, api.name, api_version, "response", header, body, end - start)


API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


def kip511_note(version: int) -> str:
    return (f"KIP-511: the broker does not support ApiVersions v{version} and answered UNSUPPORTED_VERSION "
            f"in the v0 body layout (read as v0, as clients do; the client retries with the highest "
            f"version listed for ApiVersions)")


def kip511_fallback(api: Api, version: int, data: bytes, pos: int, end: int,
            records: str | None) -> tuple[dict[str, Any], int] | None:
    """A KIP-511 fallback answer: an ApiVersions response to a version the broker does not support
    is written in the v0 body layout with ErrorCode UNSUPPORTED_VERSION (35), whatever version the
    request had. Clients read it so (Kafka's ApiVersionsResponse.parse, sarama, kafka-python); so
    does kwire, when the v0 layout reads the body whole. None when it is not such an answer."""
    if api.key != API_VERSIONS_KEY or version == 0 or end - pos < 2:
        return None
    if struct.unpack_from(">h", data, pos)[0] != UNSUPPORTED_VERSION:
        return None
    try:
        body, p = body_plan(api, 0, "response", records).decode(data, pos, end)
    except DecodeError:
        return None
    return (body, p) if p == end else None


def decode_body(data: bytes, api_key: int | str, api_version: int, kind: str, *,
                records: str | None = None) -> Message:
    """A bare body: no size prefix, no header."""
    data = bytes(data)
    api = registry().api(api_key)
    label = message_label(api, api_version, kind)
    lv = layout_version(api, api_version, kind)
    if lv != api_version:
        try:
            body, pos = _run(body_plan(api, lv, kind, records), data, 0, len(data), label)
        except DecodeError as e:
            return _assumed(api, api_version, kind, None, e)
        if pos != len(data):
            return _assumed(api, api_version, kind, None,
                            DecodeError(f"{len(data) - pos} bytes left over at offset {pos}", pos))
        return _assumed(api, api_version, kind, Message(api.key, api.name, api_version, kind, None, body, len(data)),
                        None)
    try:
        body, pos = _run(body_plan(api, api_version, kind, records), data, 0, len(data), label)
    except DecodeError:
        fallback = kip511_fallback(api, api_version, data, 0, len(data), records) if kind == "response" else None
        if fallback is None:
            raise
        return Message(api.key, api.name, api_version, kind, None, fallback[0], len(data), layout_version=0,
                       notes=[kip511_note(api_version)])
    return _finish(pos, len(data), label, Message(api.key, api.name, api_version, kind, None, body, len(data)))


def _encode(plan: Plan, value: Any, out: bytearray, label: str) -> None:
    try:
        plan.encode(value if value is not None else {}, out)
    except EncodeError as e:
        if not e.context:
            e.context = label
        raise
    except RecursionError:
        raise EncodeError("value nested too deep", context=label) from None


def encode_body(api_key: int | str, api_version: int, kind: str, body: dict[str, Any] | None) -> bytes:
    api = registry().api(api_key)
    out = bytearray()
    _encode(body_plan(api, api_version, kind), body, out, message_label(api, api_version, kind))
    return bytes(out)


def _encode_message(api: Api, api_version: int, kind: str, header_version: int, header: dict[str, Any],
                    body: dict[str, Any] | None, size_prefix: bool) -> bytes:
    try:
        check_version(api, api_version, kind)
    except UnknownVersion as e:
        raise EncodeError(str(e)) from None
    label = message_label(api, api_version, kind)
    out = bytearray()
    _encode(header_plan(kind, header_version), header, out, label + " header")
    _encode(body_plan(api, api_version, kind), body, out, label)
    return frame(bytes(out)) if size_prefix else bytes(out)


def encode_request(api_key: int | str, api_version: int, header: dict[str, Any] | None, body: dict[str, Any] | None, *,
                   size_prefix: bool = True) -> bytes:
    """Header fields RequestApiKey/RequestApiVersion are filled in (and checked when given)."""
    api = registry().api(api_key)
    hv = request_header_version(api, api_version)
    h = dict(header or {})
    for k, want in (("RequestApiKey", api.key), ("RequestApiVersion", api_version)):
        if k in h and h[k] != want:
            raise EncodeError(f"header {k} is {h[k]!r} but the message is {api.name} v{api_version}")
        h[k] = want
    if hv == 0:
        h.pop("ClientId", None)
    return _encode_message(api, api_version, "request", hv, h, body, size_prefix)


def encode_response(api_key: int | str, api_version: int, header: dict[str, Any] | None, body: dict[str, Any] | None, *,
                    size_prefix: bool = True) -> bytes:
    api = registry().api(api_key)
    return _encode_message(api, api_version, "response", response_header_version(api, api_version),
                           header or {}, body, size_prefix)
