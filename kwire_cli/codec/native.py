"""The optional native decoder (kwire_cli/codec/_speedups.c, a plan interpreter) and the description
of a compiled plan it runs from.

``describe(gen)`` turns what the generator knows about a plan into nested tuples; ``wrap`` builds
the extension's ``Program`` from them around the generated Python decoder, which stays the
reference: the native one hands any input it does not fully accept back to it, so every error is
the Python decoder's.

The extension is loaded once, at import, unless ``KWIRE_NO_SPEEDUPS=1``; ``use_speedups(False)``
turns it (and the records package's own native fast path) off at call time.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

from kwire_cli import speedups
from kwire_cli.codec.runtime import MAX_DEPTH, min_size
from kwire_cli.records import native as records_native
from kwire_cli.records.limits import watch_frame_limits
from kwire_cli.spec.model import FieldSpec, FieldType, StructSpec

__all__ = ["NATIVE_KIND", "PlanSource", "decode_pair", "decode_request_frame", "decode_response_frame", "describe",
           "extension", "frame_setup", "remember_target", "speedups_available", "use_speedups", "wrap"]



# the loaded plan interpreter, or None: pure Python. A build older than the item budget would accept
# what the Python decoder refuses: not used
extension = speedups.load("kwire_cli.codec._speedups", lambda ext: hasattr(ext, "set_max_items"))
if extension is not None:  # its item budget follows the limits in force, as runtime.MAX_ITEMS does
    watch_frame_limits(lambda lim: extension.set_max_items(lim.array_items))  # type: ignore[union-attr]

# decode_pair(header plan's decode, body plan's decode, buf, start, end): (header, body) when both
# are native Programs that read the bytes whole, else None (the caller then runs its usual path)
decode_pair: Callable[[Any, Any, bytes, int, int], tuple[dict[str, Any], dict[str, Any]] | None] | None = (
    getattr(extension, "decode_pair", None))

# The whole-frame entry (message.py): frame_setup(Message, its field names, registry) once;
# remember_target(is_response, records, key, version, registry, header plan's decode, body plan's
# decode, api key, api name, newest version) for each (kind, records, key, version) looked up;
# then decode_request_frame(data, size_prefixed, records) and decode_response_frame(data, api key,
# api version, size_prefixed, records) give the Message, or None where message.py's path decides.
frame_setup: Callable[[type, tuple[str, ...], Callable[[], Any]], None] | None = getattr(extension, "frame_setup", None)
remember_target: Callable[..., bool] | None = getattr(extension, "remember_target", None)
decode_request_frame: Callable[[bytes, bool | None, str | None], Any] | None = (
    getattr(extension, "decode_request_frame", None))
decode_response_frame: Callable[[bytes, int | str, int, bool | None, str | None], Any] | None = (
    getattr(extension, "decode_response_frame", None))

NATIVE_KIND = {"bool": 1, "int8": 2, "int16": 3, "uint16": 4, "int32": 5, "uint32": 6, "int64": 7,
               "float64": 8, "uuid": 9, "string": 10, "bytes": 11, "records": 12, "struct": 13,
               "array": 14}  # the K_* codes of _speedups.c


def speedups_available() -> bool:
    """The native decoder is built and was not turned off with KWIRE_NO_SPEEDUPS=1."""
    return extension is not None


def use_speedups(flag: bool) -> bool:
    """Turn the native decoders on or off (off: each plan runs its generated Python decoder, and
    record batches their Python fast path); returns the previous setting of the plan interpreter.
    Without the extension this is always off."""
    records_native.set_enabled(bool(flag))
    if extension is None:
        return False
    return bool(extension.set_enabled(bool(flag)))


class PlanSource(Protocol):
    """What ``describe`` reads from the generator of one plan (compiler._Gen)."""

    v: int
    flexible: bool
    records_mode: str
    structs: list[StructSpec]
    struct_ids: dict[int, int]
    ns: dict[str, Any]

    def compact(self, f: FieldSpec) -> bool: ...
    def default_expr(self, f: FieldSpec) -> str: ...
    def decoded_default(self, f: FieldSpec) -> str: ...
    def tag_names(self, f: FieldSpec) -> tuple[str, str]: ...
    def leaf_struct(self, s: StructSpec) -> bool: ...


Description = tuple[bool, int, int, tuple[tuple[Any, ...], ...]]


def describe(gen: PlanSource) -> Description | None:
    """(flexible, max depth, records mode, structs) for ``_speedups.Program``, or None when the plan
    has something it does not do: a nullable struct as a tagged field's value (a varint presence
    marker), records decoded into values (kwire_cli.records is called per field and charges a
    per-frame budget, so it must run exactly once, in Python).

    Each struct is a tuple of fields in spec order, (name, type, tagged, tag, default, default
    factory, default's encoding); a type is (kind, nullable, compact, struct index, minimum element
    size, element type, elements inline). Everything mirrors what the generated Python decoder
    does. Call it after the generated code ran (it reads the tagged fields' default encodings)."""
    v = gen.v
    if gen.records_mode not in ("bytes", "hex") and _has_records(gen.structs, v):
        return None
    if any(f.type.kind == "struct" and f.tagged_in(v) and f.nullable_in(v) for s in gen.structs for f in s.fields):
        return None  # a nullable struct in a tagged field (a varint presence marker): Python only
    structs = []
    for s in gen.structs:
        fields = []
        for f in s.fields:
            if v not in f.versions:
                continue
            tagged = f.tagged_in(v)
            t = _type(gen, f.type, f.nullable_in(v), gen.compact(f), f, tagged)
            value = factory = tagdef = None
            if tagged:
                expr = gen.decoded_default(f)
                if expr == "[]":
                    factory = list  # a fresh one each time, as the literal
                else:
                    value = eval(expr, gen.ns)  # a struct's: the one dict the Python decoder shares too
                tagdef = gen.ns[gen.tag_names(f)[1]]
            fields.append((sys.intern(f.name), t, tagged, f.tag if tagged else 0, value, factory, tagdef))
        structs.append(tuple(fields))
    return (gen.flexible, MAX_DEPTH, 0 if gen.records_mode == "bytes" else 1, tuple(structs))


def _type(gen: PlanSource, ft: FieldType, nullable: bool, compact: bool, f: FieldSpec,
          in_tags: bool) -> tuple[Any, ...]:
    k = ft.kind
    if k == "struct":
        assert f.struct is not None
        return (NATIVE_KIND[k], nullable, compact, gen.struct_ids[id(f.struct)], 0, None, False)
    if k == "array":
        el = ft.element
        assert el is not None
        ms = max(1, min_size(el, compact))
        inline = el.kind == "struct" and not in_tags and f.struct is not None and gen.leaf_struct(f.struct)
        return (NATIVE_KIND[k], nullable, compact, 0, ms, _type(gen, el, False, compact, f, in_tags), inline)
    return (NATIVE_KIND[k], nullable, compact, 0, 0, None, False)


def _has_records(structs: list[StructSpec], v: int) -> bool:
    def walk(ft: FieldType | None) -> bool:
        return ft is not None and (ft.kind == "records" or (ft.kind == "array" and walk(ft.element)))
    return any(walk(f.type) for s in structs for f in s.fields if v in f.versions)


Decoder = Callable[[bytes, int, int], tuple[dict[str, Any], int]]


def wrap(description: Description | None, py_decode: Decoder) -> Decoder:
    """The native decoder of a plan (falling back to ``py_decode``), or ``py_decode`` itself when
    there is no extension or the plan has no description."""
    if extension is None or description is None:
        return py_decode
    program: Decoder = extension.Program(description, py_decode)
    return program
