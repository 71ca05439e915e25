"""Encoding of a Kafka ``records`` field from the decode shape or the YAML authoring shape.

See the package docstring (``kwire_cli.records``) for the accepted shapes and defaults.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
import time
import zlib
from typing import Any, overload

from crc32c import crc32c as _crc32c

from kwire_cli.errors import CompressionError, RecordsError
from kwire_cli.wire import varlong_bytes as _varint  # zig-zag varint/varlong bytes

from .compression import Compression, codec_labels, compress
from .layout import V2_CRC_AT, V2_CRC_FROM, V2_HEADER

_LEGACY_PREFIX = struct.Struct(">qiI")   # offset, message size, crc
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _now_ms() -> int:
    return int(time.time() * 1000)


def to_bytes(v: Any, path: str) -> bytes | None:
    """Bytes for a key / value / header value in any accepted form; None for null."""
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, dict) and len(v) == 1:
        (form, x), = v.items()
        try:
            if form == "text":
                if not isinstance(x, str):
                    raise RecordsError(f"records encode: {path}.text: expected a string, got {type(x).__name__}")
                return x.encode()
            if form == "hex":
                return bytes.fromhex(x)
            if form == "base64":
                return base64.b64decode(x, validate=True)
            if form == "json":
                try:
                    return json.dumps(x, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
                except ValueError:  # NaN or an infinity: Python would write NaN, which is not JSON
                    raise RecordsError(f"records encode: {path}.json: NaN and infinities are not JSON "
                                       "(write them as strings)") from None
        except (ValueError, TypeError, binascii.Error) as e:
            raise RecordsError(f"records encode: {path}.{form}: {e}") from None
    if isinstance(v, bool):
        return b"true" if v else b"false"
    if isinstance(v, float) and not math.isfinite(v):
        raise RecordsError(f"records encode: {path}: {v} is not a number a value can be written as "
                           "(write NaN or an infinity as a string)")
    if isinstance(v, (int, float)):
        return str(v).encode()
    raise RecordsError(
        f"records encode: {path}: expected null, a string, or one of {{text|hex|base64|json: ...}}, "
        f"got {type(v).__name__}")


@overload
def _int(d: dict[str, Any], name: str, default: int, path: str, lo: int, hi: int) -> int: ...
@overload
def _int(d: dict[str, Any], name: str, default: None, path: str, lo: int, hi: int) -> int | None: ...


def _int(d: dict[str, Any], name: str, default: int | None, path: str, lo: int, hi: int) -> int | None:
    v = d.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise RecordsError(f"records encode: {path}.{name}: expected an integer, got {v!r}")
    if not lo <= v <= hi:
        raise RecordsError(f"records encode: {path}.{name}: {v} is out of range [{lo}, {hi}]")
    return v


_I8 = (-(1 << 7), (1 << 7) - 1)
_I16 = (-(1 << 15), (1 << 15) - 1)
_I32R = (-(1 << 31), (1 << 31) - 1)
_I64R = (-(1 << 63), (1 << 63) - 1)
_U32 = (0, (1 << 32) - 1)


def _codec(b: dict[str, Any], path: str, default: int) -> int:
    c = b.get("Compression")
    if c is None:
        return default
    if isinstance(c, str):
        key = c.strip().lower()
        known = Compression.named(key)
        if known is not None:
            return known.value
        if key.startswith("unknown(") and key.endswith(")") and key[8:-1].isdigit():
            return int(key[8:-1])
    elif isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 7:
        return c
    raise RecordsError(f"records encode: {path}.Compression: {c!r} is not one of {', '.join(codec_labels())}")


_TS_TYPES = {"createtime": 0, "create_time": 0, "logappendtime": 1, "log_append_time": 1}


def _flag(b: dict[str, Any], name: str, path: str) -> bool | None:
    v = b.get(name)
    if v is None or isinstance(v, bool):
        return v
    raise RecordsError(f"records encode: {path}.{name}: expected true/false, got {v!r}")


def _ts_type(b: dict[str, Any], path: str) -> int | None:
    v = b.get("TimestampType")
    if v is None:
        return None
    if isinstance(v, str) and v.strip().lower() in _TS_TYPES:
        return _TS_TYPES[v.strip().lower()]
    if v in (0, 1) and not isinstance(v, bool):
        return int(v)
    raise RecordsError(f"records encode: {path}.TimestampType: {v!r} is not CreateTime or LogAppendTime")


def _header_key(k: Any, path: str) -> bytes:
    if isinstance(k, str):
        return k.encode()
    if isinstance(k, dict):
        b = to_bytes(k, path)
        if b is not None:
            return b
    raise RecordsError(f"records encode: {path}: a header key must be a string (or {{hex: ...}})")


def _headers(hs: Any, path: str) -> bytes:
    if hs is None:
        return b"\x00"
    if isinstance(hs, dict):  # {"k": "v", ...}: convenient when keys are unique
        hs = [{"Key": k, "Value": v} for k, v in hs.items()]
    if not isinstance(hs, list):
        raise RecordsError(f"records encode: {path}: expected a list of {{Key, Value}}")
    out = [_varint(len(hs))]
    for i, h in enumerate(hs):
        hp = f"{path}[{i}]"
        if isinstance(h, dict):
            if "Key" not in h:
                raise RecordsError(f"records encode: {hp}: a header needs a Key")
            k, v = h["Key"], h.get("Value")
        elif isinstance(h, (list, tuple)) and len(h) == 2:
            k, v = h
        else:
            raise RecordsError(f"records encode: {hp}: expected {{Key, Value}} or [key, value]")
        kb = _header_key(k, hp + ".Key")
        vb = to_bytes(v, hp + ".Value")
        out.append(_varint(len(kb)))
        out.append(kb)
        if vb is None:
            out.append(b"\x01")
        else:
            out.append(_varint(len(vb)))
            out.append(vb)
    return b"".join(out)


_CONTROL_IDS = {"ABORT": 0, "COMMIT": 1, "LEADER_CHANGE": 2, "SNAPSHOT_HEADER": 3, "SNAPSHOT_FOOTER": 4,
                "KRAFT_VERSION": 5, "KRAFT_VOTERS": 6}


def _control_bytes(c: Any, path: str) -> tuple[bytes, bytes | None]:
    """Key (and, for ABORT/COMMIT markers, value) of a control record from its decoded form."""
    if not isinstance(c, dict):
        raise RecordsError(f"records encode: {path}: expected {{Type, CoordinatorEpoch, ...}}")
    ctype = _int(c, "TypeId", None, path, *_I16)
    if ctype is None:
        name = c.get("Type")
        if not isinstance(name, str) or name.upper() not in _CONTROL_IDS:
            raise RecordsError(f"records encode: {path}.Type: {name!r} is not one of {', '.join(_CONTROL_IDS)}")
        ctype = _CONTROL_IDS[name.upper()]
    key = struct.pack(">hh", _int(c, "Version", 0, path, *_I16), ctype)
    value = None
    if ctype in (0, 1):
        value = struct.pack(">hi", _int(c, "MarkerVersion", 0, path, *_I16),
                            _int(c, "CoordinatorEpoch", 0, path, *_I32R))
    return key, value


def _attrs_v2(b: dict[str, Any], path: str) -> int:
    raw = _int(b, "Attributes", 0, path, *_I16)
    codec = _codec(b, path, raw & 7)
    attrs = (raw & ~0x07) | codec
    ts = _ts_type(b, path)
    if ts is not None:
        attrs = (attrs & ~0x08) | (ts << 3)
    for name, bit in (("IsTransactional", 0x10), ("IsControlBatch", 0x20), ("HasDeleteHorizonMs", 0x40)):
        f = _flag(b, name, path)
        if f is not None:
            attrs = (attrs | bit) if f else (attrs & ~bit)
    return attrs


def _encode_v2(b: dict[str, Any], path: str) -> bytes:
    attrs = _attrs_v2(b, path)
    recs = b.get("Records")
    if (b.get("IsControlBatch") is None and not (attrs & 0x20) and isinstance(recs, list) and recs
            and all(isinstance(r, dict) and r.get("Control") is not None for r in recs)):
        attrs |= 0x20  # authoring shape: records given as Control markers make a control batch
    codec = attrs & 7
    records = b.get("Records")
    if records is None:
        records = []
    if not isinstance(records, list):
        raise RecordsError(f"records encode: {path}.Records: expected a list")
    base_offset = _int(b, "BaseOffset", 0, path, *_I64R)
    base_ts = _int(b, "BaseTimestamp", None, path, *_I64R)
    if base_ts is None:
        base_ts = None
        for r in records:
            if isinstance(r, dict) and isinstance(r.get("Timestamp"), int):
                base_ts = r["Timestamp"]
                break
        if base_ts is None:
            base_ts = _now_ms()
    parts = []
    max_ts = None
    last_od = None
    for j, r in enumerate(records):
        rp = f"{path}.Records[{j}]"
        if not isinstance(r, dict):
            raise RecordsError(f"records encode: {rp}: expected a mapping")
        od = _int(r, "OffsetDelta", None, rp, *_I32R)
        if od is None:
            off = _int(r, "Offset", None, rp, *_I64R)
            od = j if off is None else off - base_offset
        tsd = _int(r, "TimestampDelta", None, rp, *_I64R)
        if tsd is None:
            ts = _int(r, "Timestamp", None, rp, *_I64R)
            tsd = 0 if ts is None else ts - base_ts
        rattr = _int(r, "Attributes", 0, rp, *_I8)
        control = r.get("Control")
        if control is not None and ("Key" not in r or "Value" not in r):
            ckey, cvalue = _control_bytes(control, rp + ".Control")
            key = to_bytes(r["Key"], rp + ".Key") if "Key" in r else ckey
            value = to_bytes(r["Value"], rp + ".Value") if "Value" in r else cvalue
        else:
            key = to_bytes(r.get("Key"), rp + ".Key")
            value = to_bytes(r.get("Value"), rp + ".Value")
        body = [bytes((rattr & 0xFF,)), _varint(tsd), _varint(od)]
        if key is None:
            body.append(b"\x01")
        else:
            body.append(_varint(len(key)))
            body.append(key)
        if value is None:
            body.append(b"\x01")
        else:
            body.append(_varint(len(value)))
            body.append(value)
        body.append(_headers(r.get("Headers"), rp + ".Headers"))
        record = b"".join(body)
        parts.append(_varint(len(record)))
        parts.append(record)
        ts = base_ts + tsd
        if max_ts is None or ts > max_ts:
            max_ts = ts
        if last_od is None or od > last_od:
            last_od = od
    payload = b"".join(parts)
    if codec:
        if Compression.of(codec) is None:
            raise RecordsError(f"records encode: {path}.Compression: codec {codec} is unknown")
        try:
            payload = compress(codec, payload, magic=2, framing=b.get("CompressionFraming"))
        except CompressionError as e:
            raise RecordsError(f"records encode: {path}: {e}") from None
    max_ts = _int(b, "MaxTimestamp", base_ts if max_ts is None else max_ts, path, *_I64R)
    last_od = _int(b, "LastOffsetDelta", 0 if last_od is None else last_od, path, *_I32R)
    if not -(1 << 31) <= len(records) < (1 << 31) or not -(1 << 31) <= last_od < (1 << 31):
        raise RecordsError(f"records encode: {path}: too many records")
    out = bytearray(V2_HEADER.size + len(payload))
    try:
        V2_HEADER.pack_into(
            out, 0, base_offset, len(out) - 12,
            _int(b, "PartitionLeaderEpoch", -1, path, *_I32R), 2, 0, attrs, last_od, base_ts, max_ts,
            _int(b, "ProducerId", -1, path, *_I64R), _int(b, "ProducerEpoch", -1, path, *_I16),
            _int(b, "BaseSequence", -1, path, *_I32R), len(records))
    except struct.error as e:  # pragma: no cover - every field is range-checked above
        raise RecordsError(f"records encode: {path}: {e}") from None
    out[V2_HEADER.size:] = payload
    stored = _int(b, "Crc", None, path, *_U32)
    if stored is not None and b.get("CrcValid") is False:
        crc = stored  # keep a wrong CRC as it was, so a re-encode reproduces the bytes
    else:
        crc = _crc32c(memoryview(out)[V2_CRC_FROM:])
    struct.pack_into(">I", out, V2_CRC_AT, crc)
    return bytes(out)


def _legacy(m: dict[str, Any], path: str, magic: int, nested: bool, default_offset: int,
            default_ts: int | None) -> bytes:
    raw = _int(m, "Attributes", 0, path, *_I8)
    codec = _codec(m, path, raw & 7)
    known = Compression.of(codec)
    if known is None or not known.legacy:
        raise RecordsError(f"records encode: {path}.Compression: {codec if known is None else known.label} "
                           f"is not available for magic {magic} (gzip, snappy, lz4 only)")
    attrs = (raw & ~0x07) | codec
    if magic == 1:
        ts = _ts_type(m, path)
        if ts is not None:
            attrs = (attrs & ~0x08) | (ts << 3)
    key = to_bytes(m.get("Key"), path + ".Key")
    inner = m.get("Messages")
    if codec:
        if nested:
            raise RecordsError(f"records encode: {path}: a compressed message cannot sit inside another")
        if not isinstance(inner, list):
            raise RecordsError(f"records encode: {path}.Messages: a compressed message needs a list of messages")
        inner_ts = _int(m, "Timestamp", None, path, *_I64R) if magic == 1 else None
        if magic == 1 and inner_ts is None:
            inner_ts = _now_ms()
        parts = []
        last = 0
        for j, im in enumerate(inner):
            ip = f"{path}.Messages[{j}]"
            if not isinstance(im, dict):
                raise RecordsError(f"records encode: {ip}: expected a mapping")
            im_magic = _int(im, "Magic", magic, ip, 0, 1)
            last = _int(im, "Offset", j, ip, *_I64R)
            parts.append(_legacy(im, ip, im_magic, True, j, inner_ts))
        try:
            value: bytes | None = compress(codec, b"".join(parts), magic=magic, framing=m.get("CompressionFraming"))
        except CompressionError as e:
            raise RecordsError(f"records encode: {path}: {e}") from None
        offset = _int(m, "Offset", last, path, *_I64R)
    else:
        if inner is not None:
            raise RecordsError(f"records encode: {path}: Messages given but Compression is none")
        value = to_bytes(m.get("Value"), path + ".Value")
        offset = _int(m, "Offset", default_offset, path, *_I64R)
    body = [struct.pack(">bb", magic, attrs if attrs < 128 else attrs - 256)]
    if magic == 1:
        ts = _int(m, "Timestamp", None, path, *_I64R)
        if ts is None:
            ts = default_ts if default_ts is not None else _now_ms()
        body.append(_I64.pack(ts))
    for x in (key, value):
        if x is None:
            body.append(b"\xff\xff\xff\xff")
        else:
            body.append(_I32.pack(len(x)))
            body.append(x)
    message = b"".join(body)
    stored = _int(m, "Crc", None, path, *_U32)
    if stored is not None and m.get("CrcValid") is False:
        crc = stored
    else:
        crc = zlib.crc32(message)
    return _LEGACY_PREFIX.pack(offset, len(message) + 4, crc) + message


def _encode_batch(b: Any, path: str, index: int) -> bytes:
    if not isinstance(b, dict):
        raise RecordsError(f"records encode: {path}: expected a mapping")
    if b.get("RawHex") is not None:
        try:
            return bytes.fromhex(b["RawHex"])
        except (ValueError, TypeError) as e:
            raise RecordsError(f"records encode: {path}.RawHex: {e}") from None
    magic = _int(b, "Magic", 2, path, -128, 127)
    if magic == 2:
        return _encode_v2(b, path)
    if magic in (0, 1):
        return _legacy(b, path, magic, False, index, None)
    raise RecordsError(f"records encode: {path}.Magic: {magic} is not 0, 1 or 2")


def encode_records(value: Any) -> bytes:
    """Encode a records value (decode shape or authoring shape) into the bytes of a records field."""
    if value is None:
        raise RecordsError("records encode: value is null (a null records field is written by the message codec)")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return bytes.fromhex(value)
        except ValueError as e:
            raise RecordsError(f"records encode: raw hex records: {e}") from None
    if isinstance(value, list):
        value = {"batches": value}
    if not isinstance(value, dict):
        raise RecordsError(f"records encode: expected a mapping with batches, got {type(value).__name__}")
    batches = value.get("batches")
    if batches is None:
        batches = []
    if not isinstance(batches, list):
        raise RecordsError("records encode: batches: expected a list")
    parts = [_encode_batch(b, f"batches[{i}]", i) for i, b in enumerate(batches)]
    partial = value.get("partial_trailing_batch")
    if isinstance(partial, dict) and partial.get("hex"):
        try:
            parts.append(bytes.fromhex(partial["hex"]))
        except (ValueError, TypeError) as e:
            raise RecordsError(f"records encode: partial_trailing_batch.hex: {e}") from None
    return b"".join(parts)
