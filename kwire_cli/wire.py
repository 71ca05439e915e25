"""Wire primitives of the Kafka protocol that `struct` cannot do: varints and uuid text.

* unsigned varints (KIP-482: lengths, counts and tags of flexible versions): 7 bits a byte, low
  group first, at most 5 bytes for 32 bits;
* zig-zag varints and varlongs (record batches: lengths, deltas; ``ByteUtils.readVarint`` /
  ``readVarlong``): at most 5 and 10 bytes;
* uuids: Kafka's text form (``Uuid.toString()``: 22 characters of URL-safe base64 without padding)
  and the 36-character dashed hex form, to and from the 16 bytes on the wire.

Readers take ``(buf, pos, end)`` and return ``(value, new position)``; a varint that runs past
``end`` or is longer than its maximum raises ``DecodeError`` naming the offset. Writers append to
a ``bytearray``. Everything above (the compiled codec, record batches, the capture layer) uses
these; hot loops may inline the one- and two-byte cases, never the general one.
"""
from __future__ import annotations

import binascii
import re
import sys

from kwire_cli.errors import DecodeError

__all__ = ["read_uvarint", "read_varint", "read_varlong", "write_uvarint", "write_varint", "write_varlong",
           "uvarint_bytes", "varint_bytes", "varlong_bytes", "uvarint_size", "zigzag32", "zigzag64",
           "unzigzag", "uuid_to_text", "uuid_from_text", "UUID_TEXT_LEN"]

UUID_TEXT_LEN = 22
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF


# ----------------------------------------------------------------------------- varints

def read_uvarint(buf: Buffer, pos: int, end: int, max_bytes: int = 5, *, strict: bool = True) -> tuple[int, int]:
    """Unsigned varint at ``pos`` (5 bytes at most for 32 bits, 10 for 64).

    ``strict``: a 5-byte varint must fit 32 bits, as KIP-482's unsigned varints do. Record batches'
    zig-zag varints are read as Kafka's ``ByteUtils`` reads them, with ``strict=False``: only the
    length is bounded."""
    start = pos
    stop = pos + max_bytes
    if stop > end:
        stop = end
    result = 0
    shift = 0
    while pos < stop:
        b = buf[pos]
        pos += 1
        if b < 0x80:
            result |= b << shift
            if strict and max_bytes == 5 and result > _M32:
                raise DecodeError(f"unsigned varint at offset {start} does not fit 32 bits", start)
            return result, pos
        result |= (b & 0x7F) << shift
        shift += 7
    if pos >= end and end - start < max_bytes:
        raise DecodeError(f"varint cut short: {end - start} bytes left at offset {start}", start)
    raise DecodeError(f"varint at offset {start} is longer than {max_bytes} bytes", start)


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag-encoded signed 32-bit varint."""
    n, pos = read_uvarint(buf, pos, end, 5)
    return (n >> 1) ^ -(n & 1), pos


def read_varlong(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Zig-zag-encoded signed 64-bit varint (at most 10 bytes, must fit 64 bits)."""
    n, pos = read_uvarint(buf, pos, end, 10)
    if n >= 1 << 64:
        raise DecodeError(f"varlong before offset {pos} does not fit 64 bits", pos)
    return (n >> 1) ^ -(n & 1), pos


def zigzag32(n: int) -> int:
    """The unsigned zig-zag form of a signed 32-bit value."""
    return ((n << 1) ^ (n >> 31)) & _M32


def zigzag64(n: int) -> int:
    """The unsigned zig-zag form of a signed 64-bit value."""
    return ((n << 1) ^ (n >> 63)) & _M64


def unzigzag(n: int) -> int:
    """The signed value of an unsigned zig-zag form."""
    return (n >> 1) ^ -(n & 1)


def write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def write_varint(out: bytearray, n: int) -> None:
    write_uvarint(out, zigzag32(n))


def write_varlong(out: bytearray, n: int) -> None:
    write_uvarint(out, zigzag64(n))


def uvarint_bytes(n: int) -> bytes:
    out = bytearray()
    write_uvarint(out, n)
    return bytes(out)


def varint_bytes(n: int) -> bytes:
    """The bytes of a zig-zag varint (signed 32-bit)."""
    return uvarint_bytes(zigzag32(n))


def varlong_bytes(n: int) -> bytes:
    """The bytes of a zig-zag varlong (signed 64-bit; the same bytes as ``varint_bytes`` for any
    32-bit value)."""
    if -64 <= n <= 63:
        return bytes((((n << 1) ^ (n >> 63)) & 0xFF,))
    return uvarint_bytes(zigzag64(n))


def uvarint_size(n: int) -> int:
    """Bytes of the unsigned varint of ``n`` (n >= 0)."""
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


# ----------------------------------------------------------------------------- uuids

#: bytes as the decoders read them: a frame, a bytearray decompressed into, or a view of either
Buffer = bytes | bytearray | memoryview

_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = str.maketrans("-_", "+/")
_b2a, _a2b = binascii.b2a_base64, binascii.a2b_base64


def uuid_to_text(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()`` of 16 bytes: URL-safe base64 without padding (22 characters).

    On the decode path of every topic id, so done in as few steps as the standard library allows."""
    return _b2a(raw, newline=False)[:UUID_TEXT_LEN].translate(_TO_URLSAFE).decode("ascii")


if sys.version_info >= (3, 11):
    def _base64_16(text: str) -> bytes:
        """The 16 bytes of a 22-character URL-safe base64 text (binascii.Error if it is not one)."""
        return _a2b(text.translate(_FROM_URLSAFE) + "==", strict_mode=True)
else:  # pragma: no cover - Python 3.10: no strict mode, so check the round trip
    def _base64_16(text: str) -> bytes:
        raw = _a2b(text.translate(_FROM_URLSAFE) + "==")
        if len(raw) != 16 or uuid_to_text(raw) != text:
            raise ValueError(f"{text!r} is not a base64 uuid")
        return raw


def uuid_from_text(text: str) -> bytes:
    """The 16 bytes of a uuid in Kafka's base64 form or the dashed (or plain) hex form; ValueError
    (one line) for anything else."""
    # Kafka's canonical form (what Uuid.fromString takes): URL-safe base64 only, and the last
    # character carries 2 bits, so it is one of A, Q, g, w
    if (text.__class__ is str and len(text) == UUID_TEXT_LEN and text[21] in "AQgw"
            and "+" not in text and "/" not in text):
        try:
            return _base64_16(text)
        except (binascii.Error, ValueError):
            pass
    if not isinstance(text, str):
        raise ValueError(f"a uuid must be text, got {type(text).__name__}")
    if len(text) == UUID_TEXT_LEN:
        raise ValueError(f"{text!r} is not a base64 uuid")
    if _UUID_HEX.fullmatch(text):
        return bytes.fromhex(text.replace("-", ""))
    if len(text) in (32, 36):
        raise ValueError(f"{text!r} is not a uuid: hex must be 8-4-4-4-12 digits with dashes (or 32 digits)")
    raise ValueError(f"{text!r} is not a uuid (22-char base64 or 36-char dashed hex)")


# the hex forms encode takes: 8-4-4-4-12 digits with dashes exactly there, or 32 digits (uuid.UUID
# would also take dashes anywhere, braces, "urn:uuid:", underscores and non-ASCII digits)
_UUID_HEX = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                       r"|[0-9a-fA-F]{32}")
