"""Decoding of a Kafka ``records`` field: the batches one after another, each a record batch (magic 2,
records/v2.py) or a legacy message (magic 0/1, records/legacy.py).

See the package docstring (``kwire_cli.records``) for the output shape.
"""

from __future__ import annotations

from gc import disable as _gc_disable
from gc import enable as _gc_enable
from gc import isenabled as _gc_isenabled
from typing import Any

from kwire_cli.errors import RecordsError
from kwire_cli.wire import Buffer

from .layout import I32, I64, LOG_OVERHEAD, MIN_MESSAGE_SIZE, batch_error, put_raw_hex
from .legacy import decode_legacy
from .limits import BATCH_ITEMS, ITEMS_OPTION, current_budget, frame_budget, frame_limits
from .v2 import decode_v2

_NOGC_MIN_BYTES = 4096   # smaller records fields make too few containers for the GC to matter


def decode_records(data: Buffer | None, *, max_decompressed: int | None = None,
                   max_frame_decompressed: int | None = None) -> dict[str, Any] | None:
    """Decode a ``records`` field (record batches and/or legacy messages). See the package docstring.

    ``max_decompressed`` caps each batch; all batches together are capped by the enclosing
    ``frame_budget`` (the message codec opens one per message), or, outside one, by
    ``max_frame_decompressed`` for this call. None (the default) for either: the per-frame limit
    in force (``limits.set_frame_limits``, --max-decompressed; 256 MiB unless set), so a
    batch may decompress as much as its whole frame may."""
    if data is None:
        return None
    if max_decompressed is None:
        max_decompressed = frame_limits().decompressed
    if current_budget() is None:
        if max_frame_decompressed is None:
            max_frame_decompressed = frame_limits().decompressed
        if isinstance(max_frame_decompressed, bool) or not isinstance(max_frame_decompressed, int) \
                or max_frame_decompressed < 0:
            raise RecordsError(f"records: max_frame_decompressed must be a byte count >= 0, "
                               f"got {max_frame_decompressed!r}")
        with frame_budget(max_frame_decompressed):
            return decode_records(data, max_decompressed=max_decompressed)
    if type(data) is bytes:
        buf = data
    elif isinstance(data, str):
        try:
            buf = bytes.fromhex(data)
        except ValueError as e:
            raise RecordsError(f"records: a str must be hex: {e}") from None
    elif isinstance(data, (bytearray, memoryview)):
        buf = bytes(data)
    else:
        raise RecordsError(f"records: expected bytes, got {type(data).__name__}")
    cap = max_decompressed
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise RecordsError(f"records: max_decompressed must be a byte count >= 0, got {cap!r}")
    # The value tree is a few small containers per record (over 5 MB for 1 MB of records) and
    # holds no reference cycles, so the cyclic garbage collector has nothing to find in it; left
    # on, it runs a collection every 700 new containers, and each full one walks every object
    # in the process (a third of the decode time in a process of ~35k objects). It is paused
    # while the tree is built (Mercurial's util.nogc does the same) and left as it was found.
    if len(buf) < _NOGC_MIN_BYTES or not _gc_isenabled():
        return _decode_batches(buf, cap)
    _gc_disable()
    try:
        return _decode_batches(buf, cap)
    finally:
        _gc_enable()


def _decode_batches(buf: bytes, cap: int) -> dict[str, Any]:
    n = len(buf)
    pos = 0
    index = 0
    batches = []
    partial = None
    unpack_i32 = I32.unpack_from
    budget = current_budget()
    while pos < n:
        remaining = n - pos
        if remaining < LOG_OVERHEAD:
            partial = {"offset": pos, "bytes": remaining}
            put_raw_hex(partial, buf, pos, key="hex")
            break
        (length,) = unpack_i32(buf, pos + 8)
        if length < MIN_MESSAGE_SIZE:
            raise RecordsError(
                f"records: batch {index} at byte {pos}: length {length} is below the minimum of "
                f"{MIN_MESSAGE_SIZE} bytes, so the batches after it cannot be found")
        end = pos + LOG_OVERHEAD + length
        if end > n:
            partial = {"offset": pos, "bytes": remaining}
            put_raw_hex(partial, buf, pos, key="hex")
            break
        magic = buf[pos + 16]
        if budget is not None and budget.items_left < (BATCH_ITEMS if magic == 2 else 1):
            batches.append(_not_decoded(buf, pos, end, index, budget.max_items))
            break
        if magic == 2:
            if budget is not None:
                budget.items_left -= BATCH_ITEMS
            batches.append(decode_v2(buf, pos, end, index, cap))
        elif magic < 2:
            batches.append(decode_legacy(buf, pos, end, index, cap))
        else:
            magic = magic - 256 if magic > 127 else magic
            batch = {"ByteOffset": pos, "BaseOffset": I64.unpack_from(buf, pos)[0],
                     "BatchLength": length, "Magic": magic}
            batches.append(batch_error(batch, index, pos, end, buf, f"unknown magic {magic}"))
        pos = end
        index += 1
    return {"batches": batches, "partial_trailing_batch": partial}


def _not_decoded(buf: Buffer, pos: int, end: int, index: int, max_items: int) -> dict[str, Any]:
    """The batch at ``pos`` and everything after it, once the frame's item cap is reached: one
    entry (not one per batch: a frame may hold millions of 61-byte batches), its error naming the
    cap and the option, its RawHex all the bytes left (they encode back verbatim)."""
    length = end - pos - LOG_OVERHEAD
    entry = {"ByteOffset": pos, "BaseOffset": I64.unpack_from(buf, pos)[0], "BatchLength": length,
             "Magic": buf[pos + 16] - 256 if buf[pos + 16] > 127 else buf[pos + 16]}
    rest = len(buf) - end
    after = f" and the {rest} bytes after it" if rest else ""
    entry["error"] = (f"batch {index} at byte {pos}{after}: not decoded: the frame's cap of {max_items} "
                      f"records and headers is reached ({ITEMS_OPTION} raises it)")
    put_raw_hex(entry, buf, pos)
    return entry
