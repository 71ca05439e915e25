"""Record batches (magic 2): the batch header, then its records, decoded into the value tree.

``decode_v2`` decodes one batch of a records field. Its records go first through a fast path
(``_v2_records``: the native ``v2_records`` of records/_native.c when built, else
``_v2_records_fast``), which either decodes the whole batch or gives up without saying why; then,
only when it gave up, through the careful loop (``_decode_v2_records``), which finds and words the
first problem. Both charge the frame budget's records and headers (records/limits.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from crc32c import crc32c as _crc32c

from kwire_cli.errors import CompressionError, DecodeError, DecompressedTooLarge
from kwire_cli.wire import Buffer, read_uvarint

from . import native as records_native
from .compression import Compression, codec_label, decompress
from .forms import LONG, PLAIN, header_key, raw_bytes, show_bytes
from .layout import I64, LOG_OVERHEAD, V2_HEADER, V2_HEADER_SIZE, Bad, batch_error, with_where
from .limits import ITEMS_OPTION, current_budget

_HH = struct.Struct(">hh")
_HI = struct.Struct(">hi")

CONTROL_TYPES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}

# zig-zag value of a one-byte varint, indexed by the byte (< 0x80)
_ZZ1 = tuple((i >> 1) ^ -(i & 1) for i in range(128))
# zig-zag value of a two-byte varint b1 b2 (b1 >= 0x80 > b2), indexed by b1 + (b2 << 7): that is
# 128 + the 14-bit raw value, so the first 128 entries are never used
_ZZ2 = (0,) * 128 + tuple((r >> 1) ^ -(r & 1) for r in range(1 << 14))
# int8 from an unsigned byte
_INT8 = tuple(range(128)) + tuple(range(-128, 0))


def _varint_slow(buf: Buffer, pos: int, base: int = 0, limit: int = 5) -> tuple[int, int]:
    """Zig-zag varint (at most 5 bytes, as Kafka's ByteUtils.readVarint) or, with limit=10, varlong
    starting at ``pos``: the general case of the inlined one- and two-byte reads.

    Raises IndexError when ``buf`` ends first (as an inlined read would) and _Bad when the varint
    is too long; ``base`` is added to the position in that message."""
    try:
        n, pos = read_uvarint(buf, pos, len(buf), limit, strict=False)
    except DecodeError:
        if len(buf) - pos < limit:
            raise IndexError("varint cut short by the end of the buffer") from None
        raise Bad(f"varint longer than {limit} bytes at byte {pos + base}") from None
    return (n >> 1) ^ -(n & 1), pos


def _control(key: Buffer | None, value: Buffer | None) -> dict[str, Any]:
    """Decode a control record's key (version, type) and, for commit/abort markers, its value."""
    if key is None or len(key) < 4:
        return {"error": f"control record key of {0 if key is None else len(key)} bytes (need 4)"}
    version, ctype = _HH.unpack_from(key, 0)
    out: dict[str, Any] = {"Version": version, "Type": CONTROL_TYPES.get(ctype, "UNKNOWN"), "TypeId": ctype}
    if ctype in (0, 1):
        if value is None or len(value) < 6:
            out["error"] = (f"end transaction marker value of {0 if value is None else len(value)} bytes "
                            "(need 6)")
        else:
            mversion, epoch = _HI.unpack_from(value, 0)
            out["MarkerVersion"] = mversion
            out["CoordinatorEpoch"] = epoch
    return out


def _headers_fast(rb: bytes | bytearray, plain: str, p: int, room: int) -> tuple[list[dict[str, Any]], int]:
    """_v2_records_fast's headers from the header count at ``p`` on: (headers, end position).

    Same rules as there; raises _Bad (a negative count or length, or more headers than ``room``,
    what the frame's item budget leaves) or IndexError when anything is off.
    """
    zz1 = _ZZ1
    zz2 = _ZZ2
    b = rb[p]
    if b < 128:
        hc = zz1[b]
        p += 1
    else:
        b2 = rb[p + 1]
        if b2 < 128:
            hc = zz2[b + (b2 << 7)]
            p += 2
        else:
            hc, p = _varint_slow(rb, p)
    if hc < 0 or hc > room:
        raise Bad("negative header count, or more than the frame's budget leaves")
    headers: list[dict[str, Any]] = []
    hk: str | dict[str, str] | None
    for _ in range(hc):
        b = rb[p]
        if b < 128:
            n = zz1[b]
            p += 1
        else:
            b2 = rb[p + 1]
            if b2 < 128:
                n = zz2[b + (b2 << 7)]
                p += 2
            else:
                n, p = _varint_slow(rb, p)
        if n < 0:
            raise Bad("negative header key length")
        e = p + n
        hk = plain[p:e] if e - p < LONG else None
        if hk is None or not hk.isascii():
            hk = header_key(rb[p:e])
        p = e
        b = rb[p]
        if b < 128:
            n = zz1[b]
            p += 1
        else:
            b2 = rb[p + 1]
            if b2 < 128:
                n = zz2[b + (b2 << 7)]
                p += 2
            else:
                n, p = _varint_slow(rb, p)
        if n >= 0:
            e = p + n
            if e - p < LONG and (s := plain[p:e]).isascii():
                headers.append({"Key": hk, "Value": {"text": s}})
            else:
                hv = show_bytes(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                headers.append({"Key": hk, "Value": hv})
            p = e
        elif n == -1:
            headers.append({"Key": hk, "Value": None})
        else:
            raise Bad("negative header value length")
    return headers, p


def _v2_records_fast(rb: bytes | bytearray, count: int, base_offset: int, base_ts: int,
                     room: int = 1 << 62) -> list[dict[str, Any]] | None:
    """The records of a batch (rb: exactly its records section), or None when anything is off.

    The fast path of the records codec, written for CPython's interpreter. It does not say what
    is wrong - on None the caller runs _decode_v2_records, which does the full checks in their
    order and words the error - so it only checks what keeps a successful result right:

    * every read is inside rb (an IndexError means None), lengths are -1 (null) or >= 0 and the
      header count >= 0, so the position only moves forward;
    * each record's fields end exactly at the end its length gives, and the last record ends at
      the end of rb. A field running past its record or past rb therefore always shows up as a
      wrong end, so the per-field checks of _decode_v2_records are not needed for a result that
      is the same as theirs.

    Timestamps are BaseTimestamp + TimestampDelta and there is no Control part: the caller fixes
    both for LogAppendTime and control batches. Other details:

    * varints are decoded inline: one- and two-byte ones by table lookup, longer ones by
      _varint_slow;
    * text detection costs one slice per key/value: ``plain`` is rb decoded as latin-1 after every
      byte that cannot be part of the text form without a closer look (ASCII control bytes other
      than tab, CR, LF, and all non-ASCII bytes) was made 0xff, so ``plain[p:e]`` is either pure
      ASCII - then it is exactly the text of rb[p:e], and CPython has already worked out that it
      is ASCII while slicing, so ``isascii()`` is O(1) - or it is not, and rb[p:e] goes through
      show_bytes;
    * everything it needs is a local.

    ``v2_records`` in kwire_cli/records/_native.c is this function in C (_v2_records_native calls
    it); this one stays the reference and the fallback. Keep the two in step when editing
    (tests/test_records_speedups.py compares them).
    """
    varint = _varint_slow
    show = show_bytes
    zz1 = _ZZ1
    zz2 = _ZZ2
    int8 = _INT8
    headers_fast = _headers_fast
    plain = rb.translate(PLAIN).decode("latin-1")
    recs: list[dict[str, Any]] = []
    hk: str | dict[str, str] | None
    append = recs.append
    p = 0
    try:
        for _ in range(count):
            # length
            b = rb[p]
            if b < 128:
                ln = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    ln = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    ln, p = varint(rb, p)
            rec_end = p + ln
            rattr = int8[rb[p]]
            # timestamp delta
            b = rb[p + 1]
            if b < 128:
                tsd = zz1[b]
                p += 2
            else:
                b2 = rb[p + 2]
                if b2 < 128:
                    tsd = zz2[b + (b2 << 7)]
                    p += 3
                else:
                    tsd, p = varint(rb, p + 1, 0, 10)
            # offset delta
            b = rb[p]
            if b < 128:
                od = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    od = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    od, p = varint(rb, p)
            # key
            b = rb[p]
            if b < 128:
                n = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    n = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    n, p = varint(rb, p)
            if n >= 0:
                e = p + n
                if e - p < LONG and (s := plain[p:e]).isascii():
                    key = {"text": s}
                else:
                    key = show(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                p = e
            elif n == -1:
                key = None
            else:
                return None
            # value
            b = rb[p]
            if b < 128:
                n = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    n = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    n, p = varint(rb, p)
            if n >= 0:
                e = p + n
                if e - p < LONG and (s := plain[p:e]).isascii():
                    value = {"text": s}
                else:
                    value = show(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                p = e
            elif n == -1:
                value = None
            else:
                return None
            # headers: none or one inline, more in _headers_fast
            b = rb[p]
            if b == 0:
                headers: list[dict[str, Any]] = []
                p += 1
            elif b == 2:
                room -= 1
                b = rb[p + 1]
                if b < 128:
                    n = zz1[b]
                    p += 2
                else:
                    b2 = rb[p + 2]
                    if b2 < 128:
                        n = zz2[b + (b2 << 7)]
                        p += 3
                    else:
                        n, p = varint(rb, p + 1)
                if n < 0:
                    return None
                e = p + n
                hk = plain[p:e] if e - p < LONG else None
                if hk is None or not hk.isascii():
                    hk = header_key(rb[p:e])
                p = e
                b = rb[p]
                if b < 128:
                    n = zz1[b]
                    p += 1
                else:
                    b2 = rb[p + 1]
                    if b2 < 128:
                        n = zz2[b + (b2 << 7)]
                        p += 2
                    else:
                        n, p = varint(rb, p)
                if n >= 0:
                    e = p + n
                    if e - p < LONG and (s := plain[p:e]).isascii():
                        headers = [{"Key": hk, "Value": {"text": s}}]
                    else:
                        hv = show(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                        headers = [{"Key": hk, "Value": hv}]
                    p = e
                elif n == -1:
                    headers = [{"Key": hk, "Value": None}]
                else:
                    return None
            else:
                headers, p = headers_fast(rb, plain, p, room)
                room -= len(headers)
            if p != rec_end:
                return None
            append({
                "Length": ln,
                "Attributes": rattr,
                "TimestampDelta": tsd,
                "Timestamp": base_ts + tsd,
                "OffsetDelta": od,
                "Offset": base_offset + od,
                "Key": key,
                "Value": value,
                "Headers": headers,
            })
    except (IndexError, Bad):
        return None
    if p != len(rb) or room < 0:  # room < 0: one-header records went past the frame's budget
        return None
    return recs


# the C function (kwire_cli/records/_native.c), or a stand-in that leaves every batch to Python
_native_v2_records = records_native.v2_records or (lambda *args: NotImplemented)


def _v2_records_native(rb: Buffer, count: int, base_offset: int, base_ts: int,
                       room: int = 1 << 62) -> list[dict[str, Any]] | None:
    """_v2_records_fast in C (``v2_records`` of kwire_cli/records/_native.c): the same result, or
    _v2_records_fast's own when the C function leaves the batch to it (switched off with
    use_speedups(False), arguments it does not take, a Timestamp or Offset outside int64, ...)."""
    recs: list[dict[str, Any]] | None = _native_v2_records(rb, count, base_offset, base_ts, room, show_bytes,
                                                            header_key)
    if recs is NotImplemented:
        return _v2_records_fast(bytes(rb) if type(rb) is memoryview else rb, count, base_offset, base_ts, room)
    return recs


def _pick_v2_records() -> Callable[..., list[dict[str, Any]] | None]:
    """The fast path decode_v2 uses: _v2_records_native when the C function is there (built, and
    not turned off with KWIRE_NO_SPEEDUPS=1), else _v2_records_fast."""
    return _v2_records_fast if records_native.v2_records is None else _v2_records_native


# what decode_v2 calls (tests swap it for a spy)
_v2_records = _pick_v2_records()


def _decode_v2_records(rb: bytes | bytearray, p: int, rend: int, count: int, base_offset: int, base_ts: int,
                       max_ts: int, log_append: int, is_control: int, recs: list[dict[str, Any]], base: int,
                       items: int | None = None) -> int:
    """Append ``count`` decoded records from rb[p:rend] to ``recs``; return the end position.

    ``base`` is added to positions in error messages (rb may be a copy of part of the records
    field). Raises Bad(message) with the record index and byte position.

    The careful loop: run only when _v2_records_fast gave up on a batch (something is wrong, or a
    case the fast path leaves alone), it checks every length against its record and the records
    before reading on, so the first problem is named exactly. Varints and text detection work as
    in _v2_records_fast.

    The checks and their order define the error messages; keep them when editing.
    """
    hk: str | dict[str, str] | None
    append = recs.append
    varint = _varint_slow
    show = show_bytes
    zz1 = _ZZ1
    zz2 = _ZZ2
    int8 = _INT8
    plain = rb.translate(PLAIN).decode("latin-1")
    i = 0
    rec_start = p
    left = items  # records and headers the frame's budget still allows (None: no need to count)
    try:
        for i in range(count):
            rec_start = p
            if p >= rend:
                raise Bad(f"batch says {count} records but the records end after {i}")
            if left is not None:
                left -= 1
                if left < 0:
                    raise Bad(f"the {items} records and headers left of the frame's cap are used up "
                               f"({ITEMS_OPTION} raises it)")
            # length
            b = rb[p]
            if b < 128:
                ln = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    ln = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    ln, p = varint(rb, p, base)
            rec_end = p + ln
            if ln < 6:
                raise Bad(f"record length {ln} is below the 6-byte minimum")
            if rec_end > rend:
                raise Bad(f"record length {ln} runs {rec_end - rend} bytes past the end of the records")
            rattr = int8[rb[p]]
            # timestamp delta
            b = rb[p + 1]
            if b < 128:
                tsd = zz1[b]
                p += 2
            else:
                b2 = rb[p + 2]
                if b2 < 128:
                    tsd = zz2[b + (b2 << 7)]
                    p += 3
                else:
                    tsd, p = varint(rb, p + 1, base, 10)
            # offset delta
            b = rb[p]
            if b < 128:
                od = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    od = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    od, p = varint(rb, p, base)
            # key
            b = rb[p]
            if b < 128:
                kl = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    kl = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    kl, p = varint(rb, p, base)
            if kl >= 0:
                e = p + kl
                if e > rec_end:
                    raise Bad(f"key length {kl} runs past the end of the record")
                if e - p < LONG and (s := plain[p:e]).isascii():
                    key = {"text": s}
                else:
                    key = show(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                p = e
            elif kl == -1:
                key = None
            else:
                raise Bad(f"key length {kl} is negative")
            # value
            b = rb[p]
            if b < 128:
                vl = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    vl = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    vl, p = varint(rb, p, base)
            if vl >= 0:
                e = p + vl
                if e > rec_end:
                    raise Bad(f"value length {vl} runs past the end of the record")
                if e - p < LONG and (s := plain[p:e]).isascii():
                    value = {"text": s}
                else:
                    value = show(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                p = e
            elif vl == -1:
                value = None
            else:
                raise Bad(f"value length {vl} is negative")
            # headers
            b = rb[p]
            if b < 128:
                hc = zz1[b]
                p += 1
            else:
                b2 = rb[p + 1]
                if b2 < 128:
                    hc = zz2[b + (b2 << 7)]
                    p += 2
                else:
                    hc, p = varint(rb, p, base)
            headers: list[dict[str, Any]] = []
            if hc:
                if hc < 0 or 2 * hc > rec_end - p:
                    raise Bad(f"header count {hc} does not fit in the record")
                if left is not None:
                    left -= hc
                    if left < 0:
                        raise Bad(f"{hc} headers are more than the {items} records and headers left "
                                   f"of the frame's cap ({ITEMS_OPTION} raises it)")
                happend = headers.append
                for h in range(hc):
                    b = rb[p]
                    if b < 128:
                        hl = zz1[b]
                        p += 1
                    else:
                        b2 = rb[p + 1]
                        if b2 < 128:
                            hl = zz2[b + (b2 << 7)]
                            p += 2
                        else:
                            hl, p = varint(rb, p, base)
                    e = p + hl
                    if hl < 0 or e > rec_end:
                        raise Bad(f"header {h} key length {hl} is invalid")
                    hk = plain[p:e] if e - p < LONG else None
                    if hk is None or not hk.isascii():
                        hk = header_key(rb[p:e])
                    p = e
                    b = rb[p]
                    if b < 128:
                        hl = zz1[b]
                        p += 1
                    else:
                        b2 = rb[p + 1]
                        if b2 < 128:
                            hl = zz2[b + (b2 << 7)]
                            p += 2
                        else:
                            hl, p = varint(rb, p, base)
                    if hl >= 0:
                        e = p + hl
                        if e > rec_end:
                            raise Bad(f"header {h} value length {hl} runs past the end of the record")
                        if e - p < LONG and (s := plain[p:e]).isascii():
                            hv = {"text": s}
                        else:
                            hv = show(rb[p:e] if e - p < LONG or e > len(rb) else memoryview(rb)[p:e])
                        p = e
                    elif hl == -1:
                        hv = None
                    else:
                        raise Bad(f"header {h} value length {hl} is negative")
                    happend({"Key": hk, "Value": hv})
            if p != rec_end:
                raise Bad(f"record length {ln} but its fields take {p - rec_end + ln} bytes")
            if is_control:
                append({
                    "Length": ln,
                    "Attributes": rattr,
                    "TimestampDelta": tsd,
                    "Timestamp": max_ts if log_append else base_ts + tsd,
                    "OffsetDelta": od,
                    "Offset": base_offset + od,
                    "Key": key,
                    "Value": value,
                    "Headers": headers,
                    "Control": _control(raw_bytes(key), raw_bytes(value)),
                })
            else:
                append({
                    "Length": ln,
                    "Attributes": rattr,
                    "TimestampDelta": tsd,
                    "Timestamp": max_ts if log_append else base_ts + tsd,
                    "OffsetDelta": od,
                    "Offset": base_offset + od,
                    "Key": key,
                    "Value": value,
                    "Headers": headers,
                })
    except Bad as e:
        raise Bad(f"record {i} at byte {rec_start + base}: {e}") from None
    except IndexError:
        raise Bad(f"record {i} at byte {rec_start + base}: cut short by the end of the records") from None
    return p


def decode_v2(buf: bytes, pos: int, end: int, index: int, cap: int) -> dict[str, Any]:
    if end - pos < V2_HEADER_SIZE:
        batch = {"ByteOffset": pos, "BaseOffset": I64.unpack_from(buf, pos)[0],
                 "BatchLength": end - pos - LOG_OVERHEAD, "Magic": 2}
        return batch_error(batch, index, pos, end, buf,
                            f"batch length {end - pos - LOG_OVERHEAD} is shorter than the "
                            f"{V2_HEADER_SIZE - LOG_OVERHEAD} bytes of a v2 batch header")
    (base_offset, batch_length, leader_epoch, magic, crc, attrs, last_offset_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = V2_HEADER.unpack_from(buf, pos)
    computed = _crc32c(memoryview(buf)[pos + 21:end])
    codec = attrs & 7
    batch = {
        "ByteOffset": pos,
        "BaseOffset": base_offset,
        "BatchLength": batch_length,
        "PartitionLeaderEpoch": leader_epoch,
        "Magic": magic,
        "Crc": crc,
        "CrcComputed": computed,
        "CrcValid": crc == computed,
        "Attributes": attrs,
        "Compression": codec_label(codec),
        "TimestampType": "LogAppendTime" if attrs & 0x08 else "CreateTime",
        "IsTransactional": bool(attrs & 0x10),
        "IsControlBatch": bool(attrs & 0x20),
        "HasDeleteHorizonMs": bool(attrs & 0x40),
        "LastOffsetDelta": last_offset_delta,
        "BaseTimestamp": base_ts,
        "MaxTimestamp": max_ts,
        "ProducerId": producer_id,
        "ProducerEpoch": producer_epoch,
        "BaseSequence": base_sequence,
        "RecordCount": count,
    }
    records: list[dict[str, Any]] = []
    batch["Records"] = records
    if count < 0:
        return batch_error(batch, index, pos, end, buf, f"record count {count} is negative")
    start = pos + V2_HEADER_SIZE
    where = ""
    rb: Buffer
    if codec == 0:
        # the batch's records as their own bytes object: the record loop translates and decodes
        # all of rb once, so it must not be the whole records field. A long one, when the native
        # path reads it, is a view of them (a copy would be one more of up to 100 MiB)
        view = end - start >= LONG and _v2_records is _v2_records_native
        rb, p, rend, base = memoryview(buf)[start:end] if view else buf[start:end], 0, end - start, start
    elif Compression.of(codec) is None:
        return batch_error(batch, index, pos, end, buf, f"unknown compression codec {codec}")
    else:
        batch["CompressedSize"] = end - start
        try:
            rb, framing = decompress(codec, buf[start:end], cap)
        except DecompressedTooLarge as e:
            return batch_error(batch, index, pos, end, buf, f"{codec_label(codec)}: {e}")
        except CompressionError as e:
            return batch_error(batch, index, pos, end, buf, f"corrupt {codec_label(codec)} payload: {e}")
        batch["DecompressedSize"] = len(rb)
        if framing is not None:
            batch["CompressionFraming"] = framing
        p, rend, base = 0, len(rb), 0
        where = " of the decompressed payload"
    # the frame's budget of records and headers (each a few hundred bytes of value tree, made of
    # as little as 2 to 7 bytes): a batch that could exceed what is left takes the careful loop,
    # which counts its headers as it goes
    budget = current_budget()
    try:
        if budget is None:
            items = None
            fast = _v2_records(rb, count, base_offset, base_ts)
        else:
            items = budget.items_left
            left = budget.left
            fast = _v2_records(rb, count, base_offset, base_ts, items - count) if count <= items else None
            if fast is None:  # the careful loop makes (and charges) the forms again
                budget.left = left
    except DecompressedTooLarge as e:  # a key or value whose form would take more than is left
        del rb
        return batch_error(batch, index, pos, end, buf, str(e))
    if fast is not None:
        if budget is not None:
            budget.items_left -= len(fast) + sum([len(rec["Headers"]) for rec in fast])
        if attrs & 0x08:  # LogAppendTime: the broker's MaxTimestamp, as clients report
            for rec in fast:
                rec["Timestamp"] = max_ts
        if attrs & 0x20:
            for rec in fast:
                rec["Control"] = _control(raw_bytes(rec["Key"]), raw_bytes(rec["Value"]))
        batch["Records"] = fast
        return batch
    # something is wrong (or unusual): the careful loop finds out what and words it
    if isinstance(rb, memoryview):
        rb = bytes(rb)
    try:
        p = _decode_v2_records(rb, p, rend, count, base_offset, base_ts, max_ts, attrs & 0x08,
                               attrs & 0x20, records, base, items)
    except Bad as e:
        if budget is not None:
            budget.items_left -= len(records) + sum([len(rec["Headers"]) for rec in records])
        return batch_error(batch, index, pos, end, buf, with_where(str(e), where))
    except DecompressedTooLarge as e:
        records.clear()
        del rb
        return batch_error(batch, index, pos, end, buf, str(e))
    if budget is not None:
        budget.items_left -= len(records) + sum([len(rec["Headers"]) for rec in records])
    if p != rend:
        return batch_error(batch, index, pos, end, buf,
                            f"{rend - p} bytes left after the last of {count} records{where}")
    return batch
