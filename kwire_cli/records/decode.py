"""Decoding of a Kafka ``records`` field: record batches (magic 2) and legacy message sets (magic 0/1).

See the package docstring (``kwire_cli.records``) for the output shape.
"""

from __future__ import annotations

import struct
import zlib
from gc import disable as _gc_disable, enable as _gc_enable, isenabled as _gc_isenabled

from crc32c import crc32c as _crc32c

from .compression import Compression, CompressionError, DecompressedTooLarge, codec_label, decompress
from .limits import ITEMS_OPTION, current_budget, frame_budget, frame_limits
from kwire_cli.errors import DecodeError, RecordsError
from kwire_cli.wire import read_uvarint

from . import native as records_native

_NOGC_MIN_BYTES = 4096   # smaller records fields make too few containers for the GC to matter

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")   # 61 bytes, through the record count
_V2_HEADER_SIZE = _V2_HEADER.size
_LEGACY_HEADER = struct.Struct(">qiIbb")        # offset, message size, crc, magic, attributes: 18 bytes
_LOG_OVERHEAD = 12                              # offset int64 + length int32, common to every magic
_MIN_MESSAGE_SIZE = 14                          # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HH = struct.Struct(">hh")
_HI = struct.Struct(">hi")

CONTROL_TYPES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}

# \t \n \r count as printable for the text form (str.isprintable() says they are not)
_WS_STRIP = str.maketrans("", "", "\t\n\r")
# the ASCII bytes str.isprintable() rejects, less \t \n \r: an ASCII key/value is text iff it has none
_ASCII_CONTROL = bytes([c for c in range(32) if c not in (9, 10, 13)] + [127])
# bytes.translate table: printable ASCII (and tab, CR, LF) kept, every other byte made 0xff
_PLAIN = bytes(c if 32 <= c < 127 or c in (9, 10, 13) else 0xFF for c in range(256))

# zig-zag value of a one-byte varint, indexed by the byte (< 0x80)
_ZZ1 = tuple((i >> 1) ^ -(i & 1) for i in range(128))
# zig-zag value of a two-byte varint b1 b2 (b1 >= 0x80 > b2), indexed by b1 + (b2 << 7): that is
# 128 + the 14-bit raw value, so the first 128 entries are never used
_ZZ2 = (0,) * 128 + tuple((r >> 1) ^ -(r & 1) for r in range(1 << 14))
# int8 from an unsigned byte
_INT8 = tuple(range(128)) + tuple(range(-128, 0))


class _Bad(Exception):
    """Internal: one record / message could not be decoded; (message, byte position)."""


def show_bytes(b: bytes):
    """Key/value form: {"text": s} for valid, printable UTF-8; {"hex": ...} otherwise."""
    if b.isascii():
        # ASCII: printable iff no control byte (tab, CR, LF allowed); bytes.translate is far
        # cheaper than str.isprintable() per character
        if len(b.translate(None, _ASCII_CONTROL)) == len(b):
            return {"text": b.decode()}
        return {"hex": b.hex()}
    try:
        s = b.decode()
    except UnicodeDecodeError:
        return {"hex": b.hex()}
    if s.isprintable() or s.translate(_WS_STRIP).isprintable():
        return {"text": s}
    return {"hex": b.hex()}


def _varint_slow(buf, pos, base=0, limit=5):
    """Zig-zag varint (at most 5 bytes, as Kafka's ByteUtils.readVarint) or, with limit=10, varlong
    starting at ``pos``: the general case of the inlined one- and two-byte reads.

    Raises IndexError when ``buf`` ends first (as an inlined read would) and _Bad when the varint
    is too long; ``base`` is added to the position in that message."""
    try:
        n, pos = read_uvarint(buf, pos, len(buf), limit, strict=False)
    except DecodeError:
        if len(buf) - pos < limit:
            raise IndexError("varint cut short by the end of the buffer") from None
        raise _Bad(f"varint longer than {limit} bytes at byte {pos + base}") from None
    return (n >> 1) ^ -(n & 1), pos


def _control(key, value):
    """Decode a control record's key (version, type) and, for commit/abort markers, its value."""
    if key is None or len(key) < 4:
        return {"error": f"control record key of {0 if key is None else len(key)} bytes (need 4)"}
    version, ctype = _HH.unpack_from(key, 0)
    out = {"Version": version, "Type": CONTROL_TYPES.get(ctype, "UNKNOWN"), "TypeId": ctype}
    if ctype in (0, 1):
        if value is None or len(value) < 6:
            out["error"] = (f"end transaction marker value of {0 if value is None else len(value)} bytes "
                            "(need 6)")
        else:
            mversion, epoch = _HI.unpack_from(value, 0)
            out["MarkerVersion"] = mversion
            out["CoordinatorEpoch"] = epoch
    return out


def _raw(form):
    """The bytes behind a decoded key/value form (None, {"text": s} or {"hex": h})."""
    if form is None:
        return None
    if "text" in form:
        return form["text"].encode()
    return bytes.fromhex(form["hex"])


def _header_key(b):
    """A header key that is not plain ASCII: its UTF-8 text, or {"hex": ...}."""
    try:
        return b.decode()
    except UnicodeDecodeError:
        return {"hex": b.hex()}


def _headers_fast(rb, plain, p, room):
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
        raise _Bad("negative header count, or more than the frame's budget leaves")
    headers = []
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
            raise _Bad("negative header key length")
        e = p + n
        hk = plain[p:e]
        if not hk.isascii():
            hk = _header_key(rb[p:e])
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
            s = plain[p:e]
            if s.isascii():
                headers.append({"Key": hk, "Value": {"text": s}})
            else:
                headers.append({"Key": hk, "Value": show_bytes(rb[p:e])})
            p = e
        elif n == -1:
            headers.append({"Key": hk, "Value": None})
        else:
            raise _Bad("negative header value length")
    return headers, p


def _v2_records_fast(rb, count, base_offset, base_ts, room=1 << 62):
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

    ``v2_records`` in kwire_cli/codec/_speedups.c is this function in C (_v2_records_native calls
    it); this one stays the reference and the fallback. Keep the two in step when editing
    (tests/test_records_speedups.py compares them).
    """
    varint = _varint_slow
    show = show_bytes
    zz1 = _ZZ1
    zz2 = _ZZ2
    int8 = _INT8
    headers_fast = _headers_fast
    plain = rb.translate(_PLAIN).decode("latin-1")
    recs = []
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
                s = plain[p:e]
                if s.isascii():
                    key = {"text": s}
                else:
                    key = show(rb[p:e])
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
                s = plain[p:e]
                if s.isascii():
                    value = {"text": s}
                else:
                    value = show(rb[p:e])
                p = e
            elif n == -1:
                value = None
            else:
                return None
            # headers: none or one inline, more in _headers_fast
            b = rb[p]
            if b == 0:
                headers = []
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
                hk = plain[p:e]
                if not hk.isascii():
                    hk = _header_key(rb[p:e])
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
                    s = plain[p:e]
                    if s.isascii():
                        headers = [{"Key": hk, "Value": {"text": s}}]
                    else:
                        headers = [{"Key": hk, "Value": show(rb[p:e])}]
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
    except (IndexError, _Bad):
        return None
    if p != len(rb) or room < 0:  # room < 0: one-header records went past the frame's budget
        return None
    return recs


def _v2_records_native(rb, count, base_offset, base_ts, room=1 << 62):
    """_v2_records_fast in C (``v2_records`` of kwire_cli/codec/_speedups.c): the same result, or
    _v2_records_fast's own when the C function leaves the batch to it (the native decoders turned
    off with compiler.use_speedups(False), a Timestamp or Offset outside int64, ...)."""
    recs = _native_v2_records(rb, count, base_offset, base_ts, room, show_bytes, _header_key)
    if recs is NotImplemented:
        return _v2_records_fast(rb, count, base_offset, base_ts, room)
    return recs


def _find_native():
    """The C function when the native records fast path is built and not turned off with
    KWIRE_NO_SPEEDUPS=1, else None."""
    return records_native.v2_records


def _native_v2_records(*args):
    """Until the first call: binds the C function here (or, without one, a stand-in that leaves
    every batch to _v2_records_fast) and calls it."""
    global _native_v2_records
    native = _find_native()
    _native_v2_records = native if native is not None else (lambda *a: NotImplemented)
    return _native_v2_records(*args)


def _pick_v2_records():
    """The fast path _decode_v2 uses: _v2_records_native when there is a C function, else
    _v2_records_fast."""
    return _v2_records_fast if _find_native() is None else _v2_records_native


def _v2_records_first(rb, count, base_offset, base_ts, room=1 << 62):
    global _v2_records
    _v2_records = _pick_v2_records()
    return _v2_records(rb, count, base_offset, base_ts, room)


# what _decode_v2 calls: _v2_records_native or _v2_records_fast, chosen at the first batch
_v2_records = _v2_records_first


def _decode_v2_records(rb, p, rend, count, base_offset, base_ts, max_ts, log_append, is_control,
                       recs, base, items=None):
    """Append ``count`` decoded records from rb[p:rend] to ``recs``; return the end position.

    ``base`` is added to positions in error messages (rb may be a copy of part of the records
    field). Raises _Bad(message) with the record index and byte position.

    The careful loop: run only when _v2_records_fast gave up on a batch (something is wrong, or a
    case the fast path leaves alone), it checks every length against its record and the records
    before reading on, so the first problem is named exactly. Varints and text detection work as
    in _v2_records_fast.

    The checks and their order define the error messages; keep them when editing.
    """
    append = recs.append
    varint = _varint_slow
    show = show_bytes
    zz1 = _ZZ1
    zz2 = _ZZ2
    int8 = _INT8
    plain = rb.translate(_PLAIN).decode("latin-1")
    i = 0
    rec_start = p
    left = items  # records and headers the frame's budget still allows (None: no need to count)
    try:
        for i in range(count):
            rec_start = p
            if p >= rend:
                raise _Bad(f"batch says {count} records but the records end after {i}")
            if left is not None:
                left -= 1
                if left < 0:
                    raise _Bad(f"the {items} records and headers left of the frame's cap are used up "
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
                raise _Bad(f"record length {ln} is below the 6-byte minimum")
            if rec_end > rend:
                raise _Bad(f"record length {ln} runs {rec_end - rend} bytes past the end of the records")
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
                    raise _Bad(f"key length {kl} runs past the end of the record")
                s = plain[p:e]
                if s.isascii():
                    key = {"text": s}
                else:
                    key = show(rb[p:e])
                p = e
            elif kl == -1:
                key = None
            else:
                raise _Bad(f"key length {kl} is negative")
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
                    raise _Bad(f"value length {vl} runs past the end of the record")
                s = plain[p:e]
                if s.isascii():
                    value = {"text": s}
                else:
                    value = show(rb[p:e])
                p = e
            elif vl == -1:
                value = None
            else:
                raise _Bad(f"value length {vl} is negative")
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
            headers = []
            if hc:
                if hc < 0 or 2 * hc > rec_end - p:
                    raise _Bad(f"header count {hc} does not fit in the record")
                if left is not None:
                    left -= hc
                    if left < 0:
                        raise _Bad(f"{hc} headers are more than the {items} records and headers left "
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
                        raise _Bad(f"header {h} key length {hl} is invalid")
                    hk = plain[p:e]
                    if not hk.isascii():
                        hkb = rb[p:e]
                        try:
                            hk = hkb.decode()
                        except UnicodeDecodeError:
                            hk = {"hex": hkb.hex()}
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
                            raise _Bad(f"header {h} value length {hl} runs past the end of the record")
                        s = plain[p:e]
                        if s.isascii():
                            hv = {"text": s}
                        else:
                            hv = show(rb[p:e])
                        p = e
                    elif hl == -1:
                        hv = None
                    else:
                        raise _Bad(f"header {h} value length {hl} is negative")
                    happend({"Key": hk, "Value": hv})
            if p != rec_end:
                raise _Bad(f"record length {ln} but its fields take {p - rec_end + ln} bytes")
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
                    "Control": _control(_raw(key), _raw(value)),
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
    except _Bad as e:
        raise _Bad(f"record {i} at byte {rec_start + base}: {e}") from None
    except IndexError:
        raise _Bad(f"record {i} at byte {rec_start + base}: cut short by the end of the records") from None
    return p


def _batch_error(batch, index, pos, end, buf, msg):
    offset = batch.get("BaseOffset", batch.get("Offset"))
    batch["error"] = f"batch {index} at byte {pos} (offset {offset}): {msg}"
    batch["RawHex"] = buf[pos:end].hex()
    return batch


def _decode_v2(buf, pos, end, index, cap):
    if end - pos < _V2_HEADER_SIZE:
        batch = {"ByteOffset": pos, "BaseOffset": _I64.unpack_from(buf, pos)[0],
                 "BatchLength": end - pos - _LOG_OVERHEAD, "Magic": 2}
        return _batch_error(batch, index, pos, end, buf,
                            f"batch length {end - pos - _LOG_OVERHEAD} is shorter than the "
                            f"{_V2_HEADER_SIZE - _LOG_OVERHEAD} bytes of a v2 batch header")
    (base_offset, batch_length, leader_epoch, magic, crc, attrs, last_offset_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = _V2_HEADER.unpack_from(buf, pos)
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
    records = []
    batch["Records"] = records
    if count < 0:
        return _batch_error(batch, index, pos, end, buf, f"record count {count} is negative")
    start = pos + _V2_HEADER_SIZE
    where = ""
    if codec == 0:
        # the batch's records as their own bytes object: the record loop translates and decodes
        # all of rb once, so it must not be the whole records field
        rb, p, rend, base = buf[start:end], 0, end - start, start
    elif Compression.of(codec) is None:
        return _batch_error(batch, index, pos, end, buf, f"unknown compression codec {codec}")
    else:
        batch["CompressedSize"] = end - start
        try:
            rb, framing = decompress(codec, buf[start:end], cap)
        except DecompressedTooLarge as e:
            return _batch_error(batch, index, pos, end, buf, f"{codec_label(codec)}: {e}")
        except CompressionError as e:
            return _batch_error(batch, index, pos, end, buf, f"corrupt {codec_label(codec)} payload: {e}")
        batch["DecompressedSize"] = len(rb)
        if framing is not None:
            batch["CompressionFraming"] = framing
        p, rend, base = 0, len(rb), 0
        where = " of the decompressed payload"
    # the frame's budget of records and headers (each a few hundred bytes of value tree, made of
    # as little as 2 to 7 bytes): a batch that could exceed what is left takes the careful loop,
    # which counts its headers as it goes
    budget = current_budget()
    if budget is None:
        items = None
        fast = _v2_records(rb, count, base_offset, base_ts)
    else:
        items = budget.items_left
        fast = _v2_records(rb, count, base_offset, base_ts, items - count) if count <= items else None
    if fast is not None:
        if budget is not None:
            budget.items_left -= len(fast) + sum([len(rec["Headers"]) for rec in fast])
        if attrs & 0x08:  # LogAppendTime: the broker's MaxTimestamp, as clients report
            for rec in fast:
                rec["Timestamp"] = max_ts
        if attrs & 0x20:
            for rec in fast:
                rec["Control"] = _control(_raw(rec["Key"]), _raw(rec["Value"]))
        batch["Records"] = fast
        return batch
    # something is wrong (or unusual): the careful loop finds out what and words it
    try:
        p = _decode_v2_records(rb, p, rend, count, base_offset, base_ts, max_ts, attrs & 0x08,
                               attrs & 0x20, records, base, items)
    except _Bad as e:
        if budget is not None:
            budget.items_left -= len(records) + sum([len(rec["Headers"]) for rec in records])
        return _batch_error(batch, index, pos, end, buf, _where(str(e), where))
    if budget is not None:
        budget.items_left -= len(records) + sum([len(rec["Headers"]) for rec in records])
    if p != rend:
        return _batch_error(batch, index, pos, end, buf,
                            f"{rend - p} bytes left after the last of {count} records{where}")
    return batch


def _where(msg, where):
    """Insert ``where`` (" of the decompressed payload") after the first byte position."""
    if not where:
        return msg
    head, sep, tail = msg.partition(": ")
    return f"{head}{where}{sep}{tail}"


# ---------------------------------------------------------------------------------------------
# legacy message sets (magic 0 and 1)

def _legacy_message(buf, pos, end, cap, nested):
    """Decode one legacy message occupying buf[pos:end]. Raises _Bad(msg) on a broken message;
    returns the dict otherwise (which may carry "error" for a failed decompression)."""
    offset, size, crc, magic, attrs = _LEGACY_HEADER.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise _Bad(f"magic {magic} inside a legacy message set")
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
            raise _Bad("message too short for its timestamp")
        m["TimestampType"] = "LogAppendTime" if attrs & 0x08 else "CreateTime"
        m["Timestamp"] = _I64.unpack_from(buf, p)[0]
        p += 8
    fields = {}
    for name in ("Key", "Value"):
        if p + 4 > end:
            raise _Bad(f"{name.lower()} length cut short by the end of the message")
        (ln,) = _I32.unpack_from(buf, p)
        p += 4
        if ln == -1:
            fields[name] = None
        elif ln < 0 or p + ln > end:
            raise _Bad(f"{name.lower()} length {ln} runs past the end of the {size}-byte message")
        else:
            fields[name] = buf[p:p + ln]
            p += ln
    if p != end:
        raise _Bad(f"{end - p} bytes left after the value")
    m["Key"] = None if fields["Key"] is None else show_bytes(fields["Key"])
    if codec == 0:
        m["Value"] = None if fields["Value"] is None else show_bytes(fields["Value"])
        return m
    if nested:
        raise _Bad("compressed message inside a compressed message set")
    known = Compression.of(codec)
    if known is None or not known.legacy:
        raise _Bad(f"compression codec {codec} is not valid for magic {magic}")
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
    inner = []
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
        if q + _LOG_OVERHEAD > n:
            m["error"] = f"inner message {j} at byte {q} of the decompressed payload: cut short"
            return m
        (isize,) = _I32.unpack_from(inner_buf, q + 8)
        iend = q + _LOG_OVERHEAD + isize
        if isize < _MIN_MESSAGE_SIZE or iend > n:
            m["error"] = (f"inner message {j} at byte {q} of the decompressed payload: "
                          f"size {isize} is invalid for the {n - q} bytes left")
            return m
        try:
            inner.append(_legacy_message(inner_buf, q, iend, cap, True))
        except _Bad as e:
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


def _decode_legacy(buf, pos, end, index, cap):
    budget = current_budget()
    if budget is not None:
        if budget.items_left <= 0:
            offset, size, crc, magic, attrs = _LEGACY_HEADER.unpack_from(buf, pos)
            return _batch_error({"ByteOffset": pos, "Offset": offset, "MessageSize": size, "Magic": magic,
                                 "Attributes": attrs}, index, pos, end, buf,
                                f"the frame's cap of {budget.max_items} records and headers is reached "
                                f"({ITEMS_OPTION} raises it)")
        budget.items_left -= 1
    try:
        m = _legacy_message(buf, pos, end, cap, False)
    except _Bad as e:
        offset, size, crc, magic, attrs = _LEGACY_HEADER.unpack_from(buf, pos)
        batch = {"ByteOffset": pos, "Offset": offset, "MessageSize": size, "Magic": magic,
                 "Attributes": attrs}
        return _batch_error(batch, index, pos, end, buf, str(e))
    if "error" in m:
        m["error"] = f"batch {index} at byte {pos} (offset {m['Offset']}): {m['error']}"
        m["RawHex"] = buf[pos:end].hex()
    return m


# ---------------------------------------------------------------------------------------------

def decode_records(data, *, max_decompressed: int | None = None,
                   max_frame_decompressed: int | None = None) -> dict:
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


def _decode_batches(buf, cap):
    n = len(buf)
    pos = 0
    index = 0
    batches = []
    partial = None
    unpack_i32 = _I32.unpack_from
    while pos < n:
        remaining = n - pos
        if remaining < _LOG_OVERHEAD:
            partial = {"offset": pos, "bytes": remaining, "hex": buf[pos:].hex()}
            break
        (length,) = unpack_i32(buf, pos + 8)
        if length < _MIN_MESSAGE_SIZE:
            raise RecordsError(
                f"records: batch {index} at byte {pos}: length {length} is below the minimum of "
                f"{_MIN_MESSAGE_SIZE} bytes, so the batches after it cannot be found")
        end = pos + _LOG_OVERHEAD + length
        if end > n:
            partial = {"offset": pos, "bytes": remaining, "hex": buf[pos:].hex()}
            break
        magic = buf[pos + 16]
        if magic == 2:
            batches.append(_decode_v2(buf, pos, end, index, cap))
        elif magic < 2:
            batches.append(_decode_legacy(buf, pos, end, index, cap))
        else:
            magic = magic - 256 if magic > 127 else magic
            batch = {"ByteOffset": pos, "BaseOffset": _I64.unpack_from(buf, pos)[0],
                     "BatchLength": length, "Magic": magic}
            batches.append(_batch_error(batch, index, pos, end, buf, f"unknown magic {magic}"))
        pos = end
        index += 1
    return {"batches": batches, "partial_trailing_batch": partial}
