"""The byte layout shared by record batches (magic 2) and legacy messages (magic 0/1), and how a
batch that cannot be decoded is reported.

Every entry of a records field starts with an int64 offset and an int32 length (``LOG_OVERHEAD``);
the magic byte at offset 16 says which layout follows.
"""

from __future__ import annotations

import struct
from typing import Any

from kwire_cli.wire import Buffer

from .forms import note_long_form
from .limits import DECOMPRESSED_OPTION, current_budget

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


def batch_error(batch: dict[str, Any], index: int, pos: int, end: int, buf: Buffer, msg: str) -> dict[str, Any]:
    """Mark a batch (or top-level legacy message) that could not be decoded: its "error" (batch
    index, byte position, offset and what went wrong) and "RawHex" (the whole batch, so nothing is
    lost and it encodes back verbatim)."""
    offset = batch.get("BaseOffset", batch.get("Offset"))
    batch["error"] = f"batch {index} at byte {pos} (offset {offset}): {msg}"
    put_raw_hex(batch, buf, pos, end)
    return batch


# bytes shown as hex (RawHex) without charging the frame budget: small ones cost little, and
# a frame can hold only so many of them
_RAW_FREE = 1 << 20


def put_raw_hex(entry: dict[str, Any], buf: Buffer, pos: int, end: int | None = None, key: str = "RawHex") -> None:
    """``entry[key]`` = the hex of ``buf[pos:end]`` (made from a memoryview: no copy of the
    bytes). A megabyte or more is charged to the frame budget in force (twice its bytes); when
    less than that is left it is not shown, and ``entry["error"]`` says so, naming the cap and
    the option that raises it."""
    mv = memoryview(buf)[pos:end]
    n = len(mv)
    budget = current_budget()
    if n >= _RAW_FREE:
        note_long_form()
    if n >= _RAW_FREE and budget is not None:
        if 2 * n > budget.left:
            entry["error"] = (f"{entry.get('error', '')}; its {n} bytes are not shown as {key}: their hex takes "
                              f"{2 * n} bytes, more than the {budget.left} bytes left of the frame's cap of "
                              f"{budget.limit} bytes ({DECOMPRESSED_OPTION} raises it)").lstrip("; ")
            return
        budget.left -= 2 * n
    entry[key] = mv.hex()


def with_where(msg: str, where: str) -> str:
    """Insert ``where`` (" of the decompressed payload") after the first byte position."""
    if not where:
        return msg
    head, sep, tail = msg.partition(": ")
    return f"{head}{where}{sep}{tail}"
