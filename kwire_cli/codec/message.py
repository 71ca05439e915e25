"""Whole messages: header + body, with or without the size prefix.

A request names itself in its header (api key and version), so it decodes from its bytes
alone; a response does not, so it needs (api key, version), as a client knows them from the
request it sent.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kwire_cli.codec.compiler import Plan, compile_plan
from kwire_cli.codec.framing import frame, unframe
from kwire_cli.codec.headers import request_header_version, response_header_version
from kwire_cli.errors import DecodeError, EncodeError, KwireError, TrailingBytes, UnknownApiKey, UnknownVersion
from kwire_cli.spec.registry import Api, Registry, registry

_PEEK = struct.Struct(">hh")


@dataclass
class Message:
    api_key: int
    api_name: str
    api_version: int
    kind: str
    header: dict[str, Any] | None
    body: dict[str, Any]
    size: int  # bytes of header + body, without the size prefix

    def to_json(self) -> dict[str, Any]:
        return {"api_key": self.api_key, "api_name": self.api_name, "api_version": self.api_version,
                "kind": self.kind, "header": self.header, "body": self.body, "size": self.size}


RECORDS_MODE = "decode"  # records fields are decoded into values by kwire_cli.records unless asked otherwise


def check_version(api: Api, version: int, kind: str) -> None:
    spec = api.spec(kind)
    if version not in spec.valid_versions:
        raise UnknownVersion(f"{api.name} v{version} is not a valid version "
                             f"(valid: {spec.valid_versions}; api key {api.key})")


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


_Target = tuple[Api, Plan, Plan, str, str]
_targets: dict[tuple[int, int, str, str | None], tuple[Registry, _Target]] = {}


def _target(key: int, version: int, kind: str, records: str | None, registry_now: Registry) -> _Target:
    """(api, header plan, body plan, label, header label) for a message, looked up once and then cached."""
    t = _targets.get((key, version, kind, records))
    if t is not None and t[0] is registry_now:
        return t[1]
    try:
        api = registry_now.api(key)
    except KwireError:
        raise UnknownApiKey(f"unknown API key {key}", 0) from None
    check_version(api, version, kind)
    hv = request_header_version(api, version) if kind == "request" else response_header_version(api, version)
    label = message_label(api, version, kind)
    value = (api, header_plan(kind, hv), body_plan(api, version, kind, records), label, label + " header")
    _targets[(key, version, kind, records)] = (registry_now, value)
    return value


def decode_request(data: bytes, *, size_prefixed: bool | None = None, records: str | None = None) -> Message:
    if data.__class__ is not bytes:
        data = bytes(data)
    start, end = unframe(data, size_prefixed)
    if end - start < 4:
        raise DecodeError(f"request header needs at least 4 bytes (api key, version), "
                          f"{end - start} left at offset {start}", start)
    key, version = _PEEK.unpack_from(data, start)
    reg = registry()
    if key not in reg.apis:
        raise UnknownApiKey(f"unknown API key {key} in the request header at offset {start}", start)
    api, hplan, bplan, label, hlabel = _target(key, version, "request", records, reg)
    header, pos = _run(hplan, data, start, end, hlabel)
    body, pos = _run(bplan, data, pos, end, label)
    if pos != end:
        return _finish(pos, end, label, Message(api.key, api.name, version, "request", header, body, end - start))
    return Message(api.key, api.name, version, "request", header, body, end - start)


def decode_response(data: bytes, api_key: int | str, api_version: int, *,
                    size_prefixed: bool | None = None, records: str | None = None) -> Message:
    if data.__class__ is not bytes:
        data = bytes(data)
    reg = registry()
    if api_key.__class__ is not int:
        api_key = reg.api(api_key).key
    api, hplan, bplan, label, hlabel = _target(api_key, api_version, "response", records, reg)
    start, end = unframe(data, size_prefixed)
    header, pos = _run(hplan, data, start, end, hlabel)
    body, pos = _run(bplan, data, pos, end, label)
    if pos != end:
        return _finish(pos, end, label, Message(api.key, api.name, api_version, "response", header, body,
                                                end - start))
    return Message(api.key, api.name, api_version, "response", header, body, end - start)


def decode_body(data: bytes, api_key: int | str, api_version: int, kind: str, *,
                records: str | None = None) -> Message:
    """A bare body: no size prefix, no header."""
    data = bytes(data)
    api = registry().api(api_key)
    label = message_label(api, api_version, kind)
    body, pos = _run(body_plan(api, api_version, kind, records), data, 0, len(data), label)
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
