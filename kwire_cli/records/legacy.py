"""Legacy message sets (magic 0 and 1): one message per entry, a compressed one wrapping an inner set."""

from __future__ import annotations

import zlib
from typing import Any

from kwire_cli.errors import CompressionError, DecompressedTooLarge
from kwire_cli.wire import Buffer

from .compression import Compression, codec_label, decompress
from .forms import show_bytes
from .layout import I32, I64, LEGACY_HEADER, LOG_OVERHEAD, MIN_MESSAGE_SIZE, Bad, batch_error, put_raw_hex
from .limits import ITEMS_OPTION, current_budget


def _legacy_message(buf: Buffer, pos: int, end: int, cap: int, nested: bool) -> dict[str, Any]:
    """Decode one legacy message occupying buf[pos:end]. Raises Bad(msg) on a broken message;
    returns the dict otherwise (which may carry "error" for a failed decompression)."""
    offset, size, crc, magic, attrs = LEGACY_HEADER.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise Bad(f"magic {magic} inside a legacy message set")
    codec = attrs & 7
    m = {
        "ByteOffset": pos,
        "Offset": offset,
        "MessageSize": size,
        "Crc": crc,
        "CrcComputed": zlib.crc32(memoryview(buf)[pos + 16:end]),
        "Magic": magic,
        "Attributes": attrs,
        "Compression": codec_label(codec),
    }
    m["CrcValid"] = m["Crc"] == m["CrcComputed"]
    p = pos + 18
    if magic == 1:
        if p + 8 > end:
            raise Bad("message too short for its timestamp")
        m["TimestampType"] = "LogAppendTime" if attrs & 0x08 else "CreateTime"
        m["Timestamp"] = I64.unpack_from(buf, p)[0]
        p += 8
    fields: dict[str, Any] = {}
    for name in ("Key", "Value"):
        if p + 4 > end:
            raise Bad(f"{name.lower()} length cut short by the end of the message")
        (ln,) = I32.unpack_from(buf, p)
        p += 4
        if ln == -1:
            fields[name] = None
        elif ln < 0 or p + ln > end:
            raise Bad(f"{name.lower()} length {ln} runs past the end of the {size}-byte message")
        else:
            fields[name] = buf[p:p + ln]
            p += ln
    if p != end:
        raise Bad(f"{end - p} bytes left after the value")
    try:
        m["Key"] = None if fields["Key"] is None else show_bytes(fields["Key"])
        if codec == 0:
            m["Value"] = None if fields["Value"] is None else show_bytes(fields["Value"])
            return m
    except DecompressedTooLarge as e:  # its form would take more than the frame's cap leaves
        raise Bad(str(e)) from None
    if nested:
        raise Bad("compressed message inside a compressed message set")
    known = Compression.of(codec)
    if known is None or not known.legacy:
        raise Bad(f"compression codec {codec} is not valid for magic {magic}")
    payload = fields["Value"] or b""
    m["CompressedSize"] = len(payload)
    try:
        inner_buf, framing = decompress(codec, payload, cap)
    except DecompressedTooLarge as e:
        m["error"] = f"{codec_label(codec)}: {e}"
        return m
    except CompressionError as e:
        m["error"] = f"corrupt {codec_label(codec)} payload: {e}"
        return m
    m["DecompressedSize"] = len(inner_buf)
    if framing is not None:
        m["CompressionFraming"] = framing
    inner: list[dict[str, Any]] = []
    m["Messages"] = inner
    q = 0
    n = len(inner_buf)
    j = 0
    budget = current_budget()
    while q < n:
        if budget is not None:
            if budget.items_left <= 0:
                m["error"] = (f"inner message {j} at byte {q} of the decompressed payload: the frame's cap "
                              f"of {budget.max_items} records and headers is reached ({ITEMS_OPTION} raises it)")
                return m
            budget.items_left -= 1
        if q + LOG_OVERHEAD > n:
            m["error"] = f"inner message {j} at byte {q} of the decompressed payload: cut short"
            return m
        (isize,) = I32.unpack_from(inner_buf, q + 8)
        iend = q + LOG_OVERHEAD + isize
        if isize < MIN_MESSAGE_SIZE or iend > n:
            m["error"] = (f"inner message {j} at byte {q} of the decompressed payload: "
                          f"size {isize} is invalid for the {n - q} bytes left")
            return m
        try:
            inner.append(_legacy_message(inner_buf, q, iend, cap, True))
        except Bad as e:
            m["error"] = f"inner message {j} at byte {q} of the decompressed payload: {e}"
            return m
        q = iend
        j += 1
    # absolute offsets: magic 1 wrappers carry the offset of the last inner message and the inner
    # offsets are relative (0..n-1); magic 0 inner messages carry absolute offsets already.
    # (as Java's and kafka-python's readers do, a negative base - a producer's wrapper offset of 0 -
    # leaves the inner offsets as they are)
    base = offset - inner[-1]["Offset"] if inner and magic >= 1 else -1
    for im in inner:
        im["AbsoluteOffset"] = base + im["Offset"] if base >= 0 else im["Offset"]
    return m


def decode_legacy(buf: Buffer, pos: int, end: int, index: int, cap: int) -> dict[str, Any]:
    budget = current_budget()
    if budget is not None:
        if budget.items_left <= 0:
            offset, size, _crc, magic, attrs = LEGACY_HEADER.unpack_from(buf, pos)
            return batch_error({"ByteOffset": pos, "Offset": offset, "MessageSize": size, "Magic": magic,
                                 "Attributes": attrs}, index, pos, end, buf,
                                f"the frame's cap of {budget.max_items} records and headers is reached "
                                f"({ITEMS_OPTION} raises it)")
        budget.items_left -= 1
    try:
        m = _legacy_message(buf, pos, end, cap, False)
    except Bad as e:
        offset, size, _crc, magic, attrs = LEGACY_HEADER.unpack_from(buf, pos)
        batch = {"ByteOffset": pos, "Offset": offset, "MessageSize": size, "Magic": magic,
                 "Attributes": attrs}
        return batch_error(batch, index, pos, end, buf, str(e))
    if "error" in m:
        m["error"] = f"batch {index} at byte {pos} (offset {m['Offset']}): {m['error']}"
        put_raw_hex(m, buf, pos, end)
    return m
