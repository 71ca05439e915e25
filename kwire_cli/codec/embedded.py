"""Schemas carried as opaque bytes inside other messages.

A consumer group's JoinGroup member metadata and SyncGroup assignments are, for protocol type
"consumer", a version (int16) followed by a ConsumerProtocolSubscription / ConsumerProtocolAssignment
body. The group coordinator never looks inside; clients do. Bytes of other protocol types (connect,
streams with its own user data, ...) stay raw.
"""
from __future__ import annotations

import struct
from typing import Any

from kwire_cli.codec.compiler import compile_plan
from kwire_cli.errors import DecodeError, TrailingBytes
from kwire_cli.spec.registry import registry

SUBSCRIPTION = "ConsumerProtocolSubscription"
ASSIGNMENT = "ConsumerProtocolAssignment"


def decode_embedded(schema: str, data: bytes) -> dict[str, Any]:
    """Decode `data` (version int16 + body). A version newer than the spec knows is read with the
    newest known version, as Kafka's clients do; bytes it does not know are kept."""
    spec = registry().schema(schema)
    if len(data) < 2:
        raise DecodeError(f"{schema}: needs a 2-byte version, {len(data)} bytes given", 0)
    version = struct.unpack_from(">h", data, 0)[0]
    if version < spec.valid_versions.lo:
        raise DecodeError(f"{schema}: version {version} is below the lowest known ({spec.valid_versions})", 0)
    read_as = min(version, spec.valid_versions.hi)
    try:
        value, pos = compile_plan(spec, read_as, "hex").decode(data, 2, len(data))
    except DecodeError as e:
        e.context = e.context or f"{schema} v{version}"
        raise
    out: dict[str, Any] = {"schema": schema, "version": version, "value": value}
    if pos != len(data):
        if read_as == version:
            raise TrailingBytes(f"{len(data) - pos} trailing bytes after {schema} v{version} at offset {pos}",
                                pos, context=schema)
        out["unknown_tail"] = data[pos:].hex()
    return out


def _try(schema: str, hexdata: Any) -> dict[str, Any] | None:
    if not isinstance(hexdata, str) or not hexdata:
        return None
    try:
        return decode_embedded(schema, bytes.fromhex(hexdata))
    except (DecodeError, ValueError) as e:
        return {"schema": schema, "error": str(e)}


def consumer_protocol(api_name: str, kind: str, body: dict[str, Any],
                      protocol_type: str | None = None) -> list[dict[str, Any]]:
    """The embedded consumer-protocol values of a JoinGroup/SyncGroup message, with their paths.

    `protocol_type` is the group's protocol type when the message itself does not carry it
    (JoinGroup responses before v7, SyncGroup before v5): take it from the paired request.
    """
    found: list[dict[str, Any]] = []
    ptype = body.get("ProtocolType", protocol_type)
    if ptype != "consumer":
        return found

    def add(path: str, schema: str, data: Any) -> None:
        value = _try(schema, data)
        if value is not None:
            found.append({"path": path, **value})

    if api_name == "JoinGroup":
        if kind == "request":
            for i, p in enumerate(body.get("Protocols") or []):
                add(f"Protocols[{i}].Metadata", SUBSCRIPTION, p.get("Metadata"))
        else:
            for i, m in enumerate(body.get("Members") or []):
                add(f"Members[{i}].Metadata", SUBSCRIPTION, m.get("Metadata"))
    elif api_name == "SyncGroup":
        if kind == "request":
            for i, a in enumerate(body.get("Assignments") or []):
                add(f"Assignments[{i}].Assignment", ASSIGNMENT, a.get("Assignment"))
        else:
            add("Assignment", ASSIGNMENT, body.get("Assignment"))
    return found
