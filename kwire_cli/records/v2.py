"""Record batches (magic 2): the batch header, then its records, decoded into the value tree.

``decode_v2`` decodes one batch of a records field. Its records go first through a fast path
(``_v2_records``, from v2fast.py: the native ``v2_records`` of records/_native.c when built, else
``v2_records_fast``), which either decodes the whole batch or gives up without saying why; then,
only when it gave up, through the careful loop (``_decode_v2_records``), which finds and words the
first problem. Both charge the frame budget's records and headers (records/limits.py).
"""

from __future__ import annotations

import struct
from typing import Any

from crc32c import crc32c as _crc32c

from kwire_cli.errors import CompressionError, DecompressedTooLarge
from kwire_cli.wire import Buffer

from .compression import Compression, codec_label, decompress
from .forms import LONG, PLAIN, header_key, raw_bytes, show_bytes
from .layout import I64, LOG_OVERHEAD, V2_HEADER, V2_HEADER_SIZE, Bad, batch_error, with_where
from .limits import ITEMS_OPTION, current_budget
from .v2fast import INT8 as _INT8
from .v2fast import ZZ1 as _ZZ1
from .v2fast import ZZ2 as _ZZ2
from .v2fast import pick_v2_records as _pick_v2_records
from .v2fast import v2_records_native as _v2_records_native
from .v2fast import varint_slow as _varint_slow

_HH = struct.Struct(">hh")
_HI = struct.Struct(">hi")

CONTROL_TYPES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}


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
