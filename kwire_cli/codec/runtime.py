"""What compiled plans call while they run: the codec's runtime helpers.

The generator (``compiler.py``) writes straight-line Python for each (message, version); that code
and the interpreted walker of ``--partial`` (``partial.py``) share everything here, so both read
the same way and word every error the same way:

* tables: ``FMT`` (struct format of each fixed-size type), ``ARRAY_FMT``, ``SMALL_ARRAY``,
  ``MAX_DEPTH``; ``min_size`` (the bytes an array element needs at least);
* decode errors, made (not raised) so that the generated code stays short: ``short``,
  ``short_group``, ``neg_len``, ``not_nullable``, ``bad_utf8``, ``big_array``, ``too_deep``,
  ``tag_size``;
* encode converters and their errors: ``conv_float``, ``conv_fixed``, ``bad_bool``, ``uuid_bytes``,
  ``hex_bytes``, ``str_bytes``, ``records_bytes``, ``as_list``, ``bad_keys``, ``not_dict``,
  ``pack_error``;
* tag sections: ``collect_unknown_tags``, ``write_tags``;
* records fields: ``records_decoder`` (per records mode) and ``in_frame_budget`` (one
  decompression budget per decoded message);
* the item budget: ``MAX_ITEMS`` (the cap in force, a one-element list the generated decoders
  read once per message) and ``too_many``.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from kwire_cli import wire
from kwire_cli.errors import DecodeError, EncodeError, KwireError
from kwire_cli.records.limits import (
    ITEMS_OPTION,
    FrameLimits,
    close_frame,
    current_budget,
    open_frame,
    watch_frame_limits,
)
from kwire_cli.spec.model import INT_RANGES, PRIMITIVE_SIZES, FieldType

__all__ = ["ARRAY_FMT", "FMT", "MAX_DEPTH", "MAX_ITEMS", "MISSING", "SMALL_ARRAY", "array_packers", "array_unpackers",
           "as_list", "bad_bool", "bad_keys", "bad_utf8", "big_array", "collect_unknown_tags", "conv_fixed",
           "conv_float", "hex_bytes", "in_frame_budget", "min_size", "neg_len", "not_dict", "not_nullable",
           "pack_error", "records_bytes", "records_decoder", "short", "short_group", "short_repr", "str_bytes",
           "tag_order", "tag_size", "too_deep", "too_many", "uuid_bytes", "uuid_text", "write_tags"]

# struct format of each fixed-size type, and of the elements of numeric arrays
FMT = {"bool": "B", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
       "int64": "q", "float64": "d", "uuid": "16s"}
ARRAY_FMT = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
             "int64": "q", "float64": "d"}
MAX_DEPTH = 64  # nesting bound for decoded structs (specs nest far less)
SMALL_ARRAY = 64  # arrays of fixed-size numbers shorter than this use a precompiled Struct per length

# The item budget of one decoded message (a header, a body): array elements and unknown tagged
# fields together, at most FrameLimits.array_items (the records cap in force, --max-records, when
# above 400,000; else 400,000). What a value tree holds is a bounded tree per item (the spec fixes what one
# element holds but its arrays, which count too), so this bounds a message's tree: a 70 MB
# ApiVersions answer of ten million entries stops at its array's length, before allocating. Each
# array charges its count once its bytes are checked, before its elements are made; the native
# decoder (_speedups.c, set_max_items) charges the same and leaves the error to these decoders.
MAX_ITEMS = [0]


def _watch_limits(lim: FrameLimits) -> None:
    MAX_ITEMS[0] = lim.array_items


watch_frame_limits(_watch_limits)

uuid_text = wire.uuid_to_text  # the decoded form of a uuid: Kafka's 22-character text


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()  # "no such key" for dict.get in the generated encoders


def array_unpackers(ch: str) -> tuple[Callable[..., tuple[Any, ...]], ...]:
    """``unpack_from`` of ``n`` elements of format ``ch``, for n in 0..SMALL_ARRAY-1."""
    return tuple(struct.Struct(f">{n}{ch}").unpack_from for n in range(SMALL_ARRAY))


def array_packers(ch: str) -> tuple[Callable[..., bytes], ...]:
    """``pack`` of ``n`` elements of format ``ch``, for n in 0..SMALL_ARRAY-1."""
    return tuple(struct.Struct(f">{n}{ch}").pack for n in range(SMALL_ARRAY))


def min_size(ft: FieldType, compact: bool) -> int:
    """The fewest bytes a value of type ``ft`` can take (an array's count is checked against it
    before anything is allocated)."""
    if ft.kind in PRIMITIVE_SIZES:
        return PRIMITIVE_SIZES[ft.kind]
    if ft.kind == "string":
        return 1 if compact else 2
    if ft.kind in ("bytes", "records", "array"):
        return 1 if compact else 4
    return 1  # structs: at least a presence byte or a field; kept at 1 so counts stay bounded


# ----------------------------------------------------------------------------- decode errors

def _ruled(rule: str, e: DecodeError) -> DecodeError:
    e.rule = rule
    return e


def short(what: str, need: int, pos: int, end: int) -> DecodeError:
    return _ruled("truncated",
                  DecodeError(f"{what} needs {need} bytes, {max(end - pos, 0)} left at offset {pos}", pos))


def short_group(names: tuple[str, ...], sizes: tuple[tuple[str, int], ...], pos: int, end: int) -> DecodeError:
    """A group of fixed-size fields read with one unpack did not fit: name the first one that did not."""
    p = pos
    for name, (kind, size) in zip(names, sizes, strict=True):
        if p + size > end:
            e = short(kind, size, p, end)
            e.prefix(name)
            return e
        p += size
    return short("fields", sum(s for _, s in sizes), pos, end)  # pragma: no cover


def neg_len(n: int, pos: int) -> DecodeError:
    return _ruled("bad-length", DecodeError(f"negative length {n} at offset {pos} (only -1 means null)", pos))


def not_nullable(pos: int) -> DecodeError:
    return _ruled("null-not-nullable",
                  DecodeError(f"null at offset {pos}, but the field is not nullable in this version", pos))


def bad_utf8(pos: int, exc: UnicodeDecodeError) -> DecodeError:
    return _ruled("invalid-utf8",
                  DecodeError(f"invalid UTF-8 at offset {pos + exc.start}: {exc.reason}", pos + exc.start))


def big_array(n: int, minsize: int, pos: int, end: int) -> DecodeError:
    return _ruled("truncated", DecodeError(f"array of {n} elements needs at least {n * minsize} bytes, "
                                           f"{max(end - pos, 0)} left at offset {pos}", pos))


def too_many(pos: int) -> DecodeError:
    """The message's item budget (MAX_ITEMS) ran out at ``pos``: an array, or an unknown tagged field."""
    return _ruled("too-many-items", DecodeError(f"more than {MAX_ITEMS[0]:,} array items in one frame at offset "
                                                f"{pos} ({ITEMS_OPTION} raises it)", pos))


def too_deep(pos: int) -> DecodeError:
    return _ruled("too-deep", DecodeError(f"structs nested deeper than {MAX_DEPTH} levels at offset {pos}", pos))


def tag_order(tag: int, prev: int, pos: int) -> DecodeError:
    what = "repeats" if tag == prev else "comes after"
    return _ruled("tag-order", DecodeError(f"tag {tag} {what} tag {prev}: tagged fields must be in ascending "
                                           f"tag order, each once", pos))


def tag_size(name: str, tag: int, size: int, used: int, pos: int) -> DecodeError:
    return _ruled("tag-size", DecodeError(f"tagged field {name} (tag {tag}) declares {size} bytes but its value "
                                          f"uses {used}", pos))


# ----------------------------------------------------------------------------- encode converters

def short_repr(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def bad_keys(v: dict[Any, Any], allowed: frozenset[str], all_fields: dict[str, str]) -> EncodeError:
    """A field the version lacks; the message reads '<message> [<path>] has no field X (versions ...)'."""
    for k in v:
        if k not in allowed:
            if k in all_fields:
                return EncodeError(f"has no field {k} (versions {all_fields[k]})")
            if not isinstance(k, str):
                return EncodeError(f"field names must be strings, got {k!r}")
            import difflib
            close = difflib.get_close_matches(k.lower(), [n.lower() for n in all_fields], n=1, cutoff=0.6)
            hint = ""
            if close:
                name = next(n for n in all_fields if n.lower() == close[0])
                hint = f" (did you mean {name}?)"
            return EncodeError(f"has no field {k} in any version{hint}")
    return EncodeError("unexpected fields")  # pragma: no cover


def not_dict(v: Any) -> EncodeError:
    return EncodeError(f"expected a mapping of fields, got {type(v).__name__} {short_repr(v)}")


_FLOAT_WORDS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def conv_float(x: Any) -> Any:
    """A float64 value: a number, or its JSON text form ("NaN", "Infinity", "-Infinity", digits)."""
    if isinstance(x, str):
        if x in _FLOAT_WORDS:
            return _FLOAT_WORDS[x]
        return float(x)
    return x


def conv_fixed(kind: str, x: Any) -> Any:
    """The packable value of a fixed-size field, or EncodeError saying why not."""
    if kind == "bool":
        if x is True or x is False:
            return x
        raise EncodeError(f"expected true or false, got {short_repr(x)}")
    if kind == "uuid":
        return uuid_bytes(x)
    if kind == "float64":
        try:
            return float(conv_float(x))
        except (TypeError, ValueError):
            raise EncodeError(f"expected a float64, got {short_repr(x)}") from None
    lo, hi = INT_RANGES[kind]
    if isinstance(x, bool) or not isinstance(x, int):
        raise EncodeError(f"expected an {kind}, got {short_repr(x)}")
    if not lo <= x <= hi:
        raise EncodeError(f"{x} is out of range for {kind} ({lo}..{hi})")
    return x


def pack_error(v: dict[str, Any], fields: tuple[tuple[str, str, Any], ...]) -> EncodeError:
    """Find which field of a fixed-size group could not be packed, and why."""
    for name, kind, default in fields:
        x = v.get(name, default)
        try:
            conv_fixed(kind, x)
        except EncodeError as e:
            if name:
                e.prefix(name)
            return e
    return EncodeError("could not pack fixed-size fields")  # pragma: no cover


def bad_bool(x: Any) -> int:
    raise EncodeError(f"expected true or false, got {short_repr(x)}")


def uuid_bytes(x: Any) -> bytes:
    """The 16 bytes of a uuid value: its text (Kafka's base64 or dashed hex) or 16 bytes."""
    try:
        return wire.uuid_from_text(x)
    except ValueError as e:
        if isinstance(x, (bytes, bytearray)) and len(x) == 16:
            return bytes(x)
        raise EncodeError(str(e)) from None


def hex_bytes(x: Any) -> bytes:
    """A bytes field's value: hex text (the value tree's form) or bytes."""
    if isinstance(x, str):
        try:
            return bytes.fromhex(x)
        except ValueError:
            raise EncodeError(f"bytes must be written as hex, got {short_repr(x)}") from None
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise EncodeError(f"expected hex bytes, got {type(x).__name__} {short_repr(x)}")


def str_bytes(x: Any) -> bytes:
    """A string field's value: text, or ``{"invalid_utf8": HEX}`` (what lenient decoding shows for
    bytes that are not UTF-8: written back as those bytes, so a capture's frame re-encodes exactly)."""
    if isinstance(x, str):
        try:
            return x.encode("utf-8")
        except UnicodeEncodeError as e:
            raise EncodeError(f"string cannot be encoded as UTF-8: {e.reason}") from None
    if isinstance(x, dict) and len(x) == 1 and isinstance(x.get("invalid_utf8"), str):
        try:
            return bytes.fromhex(x["invalid_utf8"])
        except ValueError:
            raise EncodeError(f"invalid_utf8 must be hex, got {short_repr(x['invalid_utf8'])}") from None
    raise EncodeError(f"expected a string, got {type(x).__name__} {short_repr(x)}")


def records_bytes(x: Any) -> bytes:
    """A records field's value: hex, bytes, or a records value tree (kwire_cli.records encodes it)."""
    if isinstance(x, (str, bytes, bytearray, memoryview)):
        return hex_bytes(x)
    if isinstance(x, (dict, list)):
        from kwire_cli.records import encode_records  # imported when a message has records (start-up time)
        try:
            return encode_records(x)
        except KwireError as e:
            raise EncodeError(str(e)) from None
    raise EncodeError(f"records must be hex or a records value, got {type(x).__name__}")


def as_list(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return x  # type: ignore[return-value]  # a tuple is written as a list would be
    raise EncodeError(f"expected a list, got {type(x).__name__} {short_repr(x)}")


# ----------------------------------------------------------------------------- tag sections

def collect_unknown_tags(unk: Any, known: frozenset[int], tags: list[tuple[int, bytes]]) -> None:
    """Add the ``_unknown_tags`` of a value (tag number -> hex) to ``tags``, checking each."""
    if not isinstance(unk, dict):
        raise EncodeError("_unknown_tags must map tag numbers to hex", ["_unknown_tags"])
    for k, h in unk.items():
        try:
            t = int(k)
        except (TypeError, ValueError):
            raise EncodeError(f"tag {k!r} is not a number", ["_unknown_tags"]) from None
        if t < 0 or t > 0xFFFFFFFF:
            raise EncodeError(f"tag {t} is out of range", ["_unknown_tags"])
        if t in known:
            raise EncodeError(f"tag {t} belongs to a known field; set the field instead", ["_unknown_tags"])
        tags.append((t, hex_bytes(h)))


def write_tags(out: bytearray, tags: list[tuple[int, bytes]]) -> None:
    """A tag section: the count, then (tag, size, data) in tag order."""
    tags.sort(key=lambda t: t[0])
    wire.write_uvarint(out, len(tags))
    last = -1
    for t, b in tags:
        if t == last:
            raise EncodeError(f"tag {t} appears twice")
        last = t
        wire.write_uvarint(out, t)
        wire.write_uvarint(out, len(b))
        out += b


# ----------------------------------------------------------------------------- records fields

def records_decoder(mode: str) -> Callable[[bytes], Any]:
    """What a records field becomes in the value tree, by records mode: "hex" (the JSON value
    tree's raw form), "bytes" (raw `bytes`, for callers that hand records on to kwire_cli.records
    themselves; not JSON-serialisable), or "decode" (decoded by kwire_cli.records; each batch capped
    by the frame limit in force)."""
    if mode == "hex":
        return bytes.hex
    if mode == "bytes":
        return bytes
    return _decode_records


def _decode_records(data: bytes) -> Any:
    """kwire_cli.records.decode_records, imported on the first records field decoded (a message
    without one never loads the record decoders, the compression libraries or crc32c)."""
    global _decode_records_impl
    if _decode_records_impl is None:
        from kwire_cli.records import decode_records
        _decode_records_impl = decode_records
    return _decode_records_impl(data)


_decode_records_impl: Callable[[bytes], Any] | None = None


_Decode = TypeVar("_Decode", bound=Callable[..., Any])


def in_frame_budget(decode: _Decode) -> _Decode:
    """``decode`` run in one kwire_cli.records frame budget per call, unless the caller opened one:
    all records fields of one message together stay under the per-frame decompression cap, not
    just each batch under the per-batch one. The budget takes the limits in force when the message
    is decoded (set_frame_limits), not those of when the plan was compiled."""
    def framed(buf: bytes, pos: int, end: int, depth: int = 0) -> Any:
        if current_budget() is not None:
            return decode(buf, pos, end, depth)
        token = open_frame()
        try:
            return decode(buf, pos, end, depth)
        finally:
            close_frame(token)
    return framed  # type: ignore[return-value]
