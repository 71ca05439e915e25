"""Confluent's schema framing of a key or value: where the schema's id or GUID is written.

Two places, as Confluent's serializers write them:

* a prefix of the key/value itself: magic byte 0 and the schema's id (4 bytes, big-endian), or
  magic byte 1 and the schema's GUID (16 bytes);
* a record header ``__key_schema_id`` / ``__value_schema_id`` holding magic byte 1 and the GUID
  (then the key/value has no prefix).

Protobuf adds the message indexes after the id or GUID (in the prefix, or in the header when the
GUID is there): a zig-zag varint count, then that many zig-zag varints, the path of the message in
the .proto file (top-level message, then nested ones); a single byte 0 stands for ``[0]``, the
first message.  Which schema type applies is only known once the schema is found, so the indexes
are read separately (:func:`message_indexes`).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

MAGIC_ID = 0
MAGIC_GUID = 1
KEY_HEADER = "__key_schema_id"
VALUE_HEADER = "__value_schema_id"
# more indexes than this is not a message path anyone writes (Confluent's reader refuses 100000)
MAX_INDEXES = 64


class FramingError(ValueError):
    """Bytes that are not the framing they claim to be (the reason is one line)."""


@dataclass(frozen=True)
class SchemaRef:
    """Which schema a key/value names: its id or its GUID, and where the rest starts.

    ``rest`` is what follows the id or GUID in the bytes it was read from (for a prefix: the
    Protobuf message indexes, if any, then the encoded value; for a header: the indexes, if any).
    ``in_header`` tells that the GUID came from a record header (the key/value is then all payload).
    """

    schema_id: int | None
    guid: str | None
    rest: bytes
    in_header: bool = False

    def name(self) -> str:
        """``id 7`` or ``GUID 2f3a...``: how notes name it."""
        return f"id {self.schema_id}" if self.schema_id is not None else f"GUID {self.guid}"


def header_name(field: str) -> str:
    """The record header that holds a key's (``field == "key"``) or a value's GUID."""
    return KEY_HEADER if field == "key" else VALUE_HEADER


def read_prefix(data: bytes) -> SchemaRef | None:
    """The schema named by the first bytes of ``data``, or None when they are no schema prefix."""
    if len(data) >= 5 and data[0] == MAGIC_ID:
        return SchemaRef(int.from_bytes(data[1:5], "big"), None, bytes(data[5:]))
    if len(data) >= 17 and data[0] == MAGIC_GUID:
        return SchemaRef(None, str(uuid.UUID(bytes=bytes(data[1:17]))), bytes(data[17:]))
    return None


def read_header(value: bytes | None) -> SchemaRef:
    """The schema named by a ``__key_schema_id`` / ``__value_schema_id`` header's value."""
    if value is None:
        raise FramingError("schema id header has no value")
    ref = read_prefix(value)
    if ref is None:
        raise FramingError(f"schema id header of {len(value)} bytes does not start with magic byte "
                           f"0 or 1 and an id or GUID")
    return SchemaRef(ref.schema_id, ref.guid, ref.rest, in_header=True)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """One zig-zag varint at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise FramingError("message indexes end inside a varint")
        if shift > 63:
            raise FramingError("message index varint longer than 10 bytes")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return (result >> 1) ^ -(result & 1), pos


def message_indexes(data: bytes) -> tuple[list[int], int]:
    """Protobuf's message indexes at the start of ``data``: (indexes, bytes they took)."""
    count, pos = read_varint(data, 0)
    if count == 0:
        return [0], pos
    if count < 0 or count > MAX_INDEXES:
        raise FramingError(f"message index count {count} (at most {MAX_INDEXES})")
    indexes = []
    for _ in range(count):
        index, pos = read_varint(data, pos)
        if index < 0:
            raise FramingError(f"negative message index {index}")
        indexes.append(index)
    return indexes, pos
