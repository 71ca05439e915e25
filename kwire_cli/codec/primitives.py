"""Wire primitives: varints (KIP-482), zigzag varints, uuids.

Fixed-size integers are read and written with precompiled `struct.Struct`s in the compiled
plans; the functions here cover what struct cannot.
"""
from __future__ import annotations

import base64
import uuid as _uuid

from kwire_cli.errors import DecodeError


def read_uvarint(buf: bytes, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """Unsigned varint (7 bits a byte, low first). 5 bytes at most for 32 bits, 10 for 64."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise DecodeError(f"varint cut short: {end - start} bytes left at offset {start}", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if max_bytes == 5 and result > 0xFFFFFFFF:
                raise DecodeError(f"unsigned varint at offset {start} does not fit 32 bits", start)
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise DecodeError(f"varint at offset {start} is longer than {max_bytes} bytes", start)


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Zigzag-encoded signed 32-bit varint."""
    n, pos = read_uvarint(buf, pos, end, 5)
    return (n >> 1) ^ -(n & 1), pos


def read_varlong(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos, end, 10)
    if n >= 1 << 64:
        raise DecodeError(f"varlong before offset {pos} does not fit 64 bits", pos)
    return (n >> 1) ^ -(n & 1), pos


def write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def uvarint_bytes(n: int) -> bytes:
    out = bytearray()
    write_uvarint(out, n)
    return bytes(out)


def write_varint(out: bytearray, n: int) -> None:
    write_uvarint(out, ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, n: int) -> None:
    write_uvarint(out, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uuid_to_text(raw: bytes) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_text(text: str) -> bytes:
    """Accept Kafka's base64 form or the dashed hex form; raise ValueError otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"a uuid must be text, got {type(text).__name__}")
    if len(text) == 22:
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (ValueError, TypeError):
            raise ValueError(f"{text!r} is not a base64 uuid") from None
        if len(raw) == 16 and uuid_to_text(raw) == text:
            return raw
        raise ValueError(f"{text!r} is not a base64 uuid")
    if len(text) in (32, 36):
        return _uuid.UUID(text).bytes
    raise ValueError(f"{text!r} is not a uuid (22-char base64 or 36-char dashed hex)")
