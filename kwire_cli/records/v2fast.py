"""The fast path of a record batch's records (magic 2): ``v2_records_fast`` decodes a whole batch's
records written for CPython's interpreter, or gives up without saying why (``v2.py``'s careful loop
then finds and words the problem); ``v2_records_native`` is the same in C (records/_native.c) when it
is built; ``pick_v2_records`` chooses. The varint tables and the general varint read are shared with
the careful loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kwire_cli.errors import DecodeError
from kwire_cli.wire import Buffer, read_uvarint

from . import native as records_native
from .forms import LONG, PLAIN, header_key, show_bytes
from .layout import Bad

# zig-zag value of a one-byte varint, indexed by the byte (< 0x80)
ZZ1 = tuple((i >> 1) ^ -(i & 1) for i in range(128))
# zig-zag value of a two-byte varint b1 b2 (b1 >= 0x80 > b2), indexed by b1 + (b2 << 7): that is
# 128 + the 14-bit raw value, so the first 128 entries are never used
ZZ2 = (0,) * 128 + tuple((r >> 1) ^ -(r & 1) for r in range(1 << 14))
# int8 from an unsigned byte
INT8 = tuple(range(128)) + tuple(range(-128, 0))


def varint_slow(buf: Buffer, pos: int, base: int = 0, limit: int = 5) -> tuple[int, int]:
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


def headers_fast(rb: bytes | bytearray, plain: str, p: int, room: int) -> tuple[list[dict[str, Any]], int]:
    """v2_records_fast's headers from the header count at ``p`` on: (headers, end position).

    Same rules as there; raises _Bad (a negative count or length, or more headers than ``room``,
    what the frame's item budget leaves) or IndexError when anything is off.
    """
    zz1 = ZZ1
    zz2 = ZZ2
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
            hc, p = varint_slow(rb, p)
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
                n, p = varint_slow(rb, p)
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
                n, p = varint_slow(rb, p)
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


def v2_records_fast(rb: bytes | bytearray, count: int, base_offset: int, base_ts: int,
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
      varint_slow;
    * text detection costs one slice per key/value: ``plain`` is rb decoded as latin-1 after every
      byte that cannot be part of the text form without a closer look (ASCII control bytes other
      than tab, CR, LF, and all non-ASCII bytes) was made 0xff, so ``plain[p:e]`` is either pure
      ASCII - then it is exactly the text of rb[p:e], and CPython has already worked out that it
      is ASCII while slicing, so ``isascii()`` is O(1) - or it is not, and rb[p:e] goes through
      show_bytes;
    * everything it needs is a local.

    ``v2_records`` in kwire_cli/records/_native.c is this function in C (v2_records_native calls
    it); this one stays the reference and the fallback. Keep the two in step when editing
    (tests/test_records_speedups.py compares them).
    """
    varint = varint_slow
    show = show_bytes
    zz1 = ZZ1
    zz2 = ZZ2
    int8 = INT8
    hfast = headers_fast
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
            # headers: none or one inline, more in headers_fast
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
                headers, p = hfast(rb, plain, p, room)
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
_native = records_native.v2_records or (lambda *args: NotImplemented)


def v2_records_native(rb: Buffer, count: int, base_offset: int, base_ts: int,
                       room: int = 1 << 62) -> list[dict[str, Any]] | None:
    """v2_records_fast in C (``v2_records`` of kwire_cli/records/_native.c): the same result, or
    v2_records_fast's own when the C function leaves the batch to it (switched off with
    use_speedups(False), arguments it does not take, a Timestamp or Offset outside int64, ...)."""
    recs: list[dict[str, Any]] | None = _native(rb, count, base_offset, base_ts, room, show_bytes,
                                                            header_key)
    if recs is NotImplemented:
        return v2_records_fast(bytes(rb) if type(rb) is memoryview else rb, count, base_offset, base_ts, room)
    return recs


def pick_v2_records() -> Callable[..., list[dict[str, Any]] | None]:
    """The fast path decode_v2 uses: v2_records_native when the C function is there (built, and
    not turned off with KWIRE_NO_SPEEDUPS=1), else v2_records_fast."""
    return v2_records_fast if records_native.v2_records is None else v2_records_native
