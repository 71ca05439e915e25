"""Kafka framing: a 4-byte big-endian size, then that many bytes."""
from __future__ import annotations

import struct

from kwire_cli.errors import DecodeError, TrailingBytes

_SIZE = struct.Struct(">i")


def has_size_prefix(data: bytes) -> bool:
    """True when the first four bytes give exactly the length of what follows."""
    return len(data) >= 4 and _SIZE.unpack_from(data, 0)[0] == len(data) - 4


def unframe(data: bytes, size_prefixed: bool | None) -> tuple[int, int]:
    """(start, end) of the message inside `data`, checking the size prefix when there is one."""
    if size_prefixed is None:
        size_prefixed = has_size_prefix(data)
    if not size_prefixed:
        return 0, len(data)
    if len(data) < 4:
        raise DecodeError(f"size prefix needs 4 bytes, {len(data)} given", 0)
    size = _SIZE.unpack_from(data, 0)[0]
    if size < 0:
        raise DecodeError(f"negative size prefix {size} at offset 0", 0)
    if size > len(data) - 4:
        raise DecodeError(f"size prefix says {size} bytes, only {len(data) - 4} follow", 0)
    if size < len(data) - 4:
        raise TrailingBytes(f"{len(data) - 4 - size} trailing bytes after the {size}-byte frame "
                            f"at offset {4 + size}", 4 + size)
    return 4, len(data)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
