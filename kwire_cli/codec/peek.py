"""Reading the leading fields of a request without decoding the whole of it.

The capture layer needs one field of some requests before it decodes them (a Produce request's
``Acks``: acks=0 means no response will come), on every such request of a capture and on requests
cut short by a lost packet. ``peek_request_field`` reads the request header with its compiled
plan, then only the body fields up to the one asked for (``compiler.compile_prefix``, compiled
once per version), with the spec's own rules: header versions, compact or not, nullable.
"""
from __future__ import annotations

import struct
from typing import Any

from kwire_cli.codec.compiler import compile_prefix
from kwire_cli.codec.headers import request_header_version
from kwire_cli.codec.message import check_version, header_plan
from kwire_cli.errors import DecodeError, KwireError, UnknownApiKey
from kwire_cli.spec.registry import registry

__all__ = ["peek_request_field", "peek_request_header"]

_PEEK = struct.Struct(">hh")
_readers: dict[tuple[int, int, str | None], tuple[object, Any, Any]] = {}


def _readers_for(data: bytes, field: str | None, api_version: int | None) -> tuple[Any, Any]:
    """The compiled readers of a request's header and of its body up to ``field`` (None: the header
    only), by the api key and version of its first 4 bytes (``api_version`` instead of the latter)."""
    if len(data) < 4:
        raise DecodeError(f"request header needs at least 4 bytes (api key, version), {len(data)} given", 0)
    key, version = _PEEK.unpack_from(data, 0)
    if api_version is not None:
        version = api_version
    reg = registry()
    hit = _readers.get((key, version, field))
    if hit is None or hit[0] is not reg:
        try:
            api = reg.api(key)
        except KwireError:
            raise UnknownApiKey(f"unknown API key {key} in the request header at offset 0", 0) from None
        check_version(api, version, "request")
        hit = (reg, header_plan("request", request_header_version(api, version)).decode,
               None if field is None else compile_prefix(api.request, version, field))
        _readers[(key, version, field)] = hit
    return hit[1], hit[2]


def peek_request_field(data: bytes, field: str, *, api_version: int | None = None) -> Any:
    """The value of top-level body field ``field`` of a request (header + body, no size prefix),
    read from the bytes before it: ``data`` may end anywhere after that field.

    ``api_version`` reads the request as that version instead of the one in its header (the
    caller has already read it). Raises DecodeError (UnknownApiKey, UnknownVersion, bytes cut short
    before the field, ...) or KwireError when the request has no such field at that version."""
    if data.__class__ is not bytes:
        data = bytes(data)
    header, body = _readers_for(data, field, api_version)
    end = len(data)
    _, pos = header(data, 0, end)
    values, _ = body(data, pos, end)
    return values[field]


def peek_request_header(data: bytes) -> dict[str, Any]:
    """The header of a request (api key and version, correlation id, client id, tagged fields),
    read with its compiled plan and nothing of the body: what a row shows before the body is
    decoded. Raises DecodeError (UnknownApiKey, a version newer than the specs, a header cut short
    or not as the format says) where decoding the request would say more."""
    if data.__class__ is not bytes:
        data = bytes(data)
    header, _ = _readers_for(data, None, None)
    values: dict[str, Any] = header(data, 0, len(data))[0]
    return values
