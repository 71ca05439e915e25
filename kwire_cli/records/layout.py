"""The byte layout shared by record batches (magic 2) and legacy messages (magic 0/1), and how a
batch that cannot be decoded is reported.

Every entry of a records field starts with an int64 offset and an int32 length (``LOG_OVERHEAD``);
the magic byte at offset 16 says which layout follows.
"""

from __future__ import annotations

import struct
from typing import Any

V2_HEADER = struct.Struct(">qiibIhiqqqhii")   # 61 bytes, through the record count
V2_HEADER_SIZE = V2_HEADER.size
V2_CRC_AT = 17       # BaseOffset(8) + BatchLength(4) + PartitionLeaderEpoch(4) + Magic(1)
V2_CRC_FROM = 21     # the CRC-32C covers Attributes .. end
LEGACY_HEADER = struct.Struct(">qiIbb")        # offset, message size, crc, magic, attributes: 18 bytes
LOG_OVERHEAD = 12                              # offset int64 + length int32, common to every magic
MIN_MESSAGE_SIZE = 14                          # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


class Bad(Exception):
    """One record / message could not be decoded: (message with its byte position). Internal to the
    records decoders: it becomes a batch's "error"."""


def batch_error(batch: dict[str, Any], index: int, pos: int, end: int, buf: bytes, msg: str) -> dict[str, Any]:
    """Mark a batch (or top-level legacy message) that could not be decoded: its "error" (batch
    index, byte position, offset and what went wrong) and "RawHex" (the whole batch, so nothing is
    lost and it encodes back verbatim)."""
    offset = batch.get("BaseOffset", batch.get("Offset"))
    batch["error"] = f"batch {index} at byte {pos} (offset {offset}): {msg}"
    batch["RawHex"] = buf[pos:end].hex()
    return batch


def with_where(msg: str, where: str) -> str:
    """Insert ``where`` (" of the decompressed payload") after the first byte position."""
    if not where:
        return msg
    head, sep, tail = msg.partition(": ")
    return f"{head}{where}{sep}{tail}"
