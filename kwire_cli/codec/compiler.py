"""Compile a message spec at one version into a decoder and an encoder.

Like Kafka's own generator, this turns (message, version) into straight-line code, once: the
generated Python reads consecutive fixed-size fields with one precompiled `struct.Struct`,
arrays of fixed-size integers with one unpack, and checks every length against the bytes left
before slicing or allocating. Plans are cached per (spec, version, records mode) and reused.

Errors travel out as `DecodeError`/`EncodeError`; each enclosing field and array element adds
itself to the error's path on the way, so the message reads
`Topics[2].Partitions[0].ReplicaNodes: array of ... at offset 341`.

What the generated code calls at run time (error constructors, converters, tag writers, tables)
is `runtime.py`; `native.py` describes a plan for the optional C interpreter and wraps it.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwire_cli.codec import native
from kwire_cli.codec import runtime as R
from kwire_cli.codec.emit_read import ReadEmitter
from kwire_cli.codec.emit_write import WriteEmitter
from kwire_cli.codec.native import speedups_available, use_speedups
from kwire_cli.codec.runtime import MAX_DEPTH
from kwire_cli.errors import KwireError
from kwire_cli.spec.model import FieldSpec, MessageSpec, StructSpec

__all__ = ["MAX_DEPTH", "Decoder", "Plan", "compile_plan", "compile_prefix", "speedups_available", "use_speedups"]

Decoder = Callable[[bytes, int, int], tuple[dict[str, Any], int]]

_speedups = native.extension  # the loaded plan interpreter, or None (tests build Programs from it)


@dataclass
class Plan:
    """A compiled codec for one message spec at one version."""
    spec: MessageSpec
    version: int
    flexible: bool
    decode: Decoder
    encode: Callable[[dict[str, Any], bytearray], None]
    default: Callable[[], dict[str, Any]]
    source: str
    py_decode: Decoder | None = None  # the generated Python decoder

    @property
    def native(self) -> bool:
        """True when `decode` is the native decoder (which falls back to `py_decode`)."""
        return self.decode is not self.py_decode


class _Gen(ReadEmitter, WriteEmitter):
    """One (message, version) compiled: each struct's decoder, encoder and default factory, then
    the source compiled and the plan built (with the native decoder where it is there)."""

    # -- driver
    def build(self) -> Plan:
        root = self.spec.struct
        self.struct_id(root)
        done: set[int] = set()
        while self.pending:
            s, sid = self.pending.pop(0)
            if sid in done:
                continue
            done.add(sid)
            self.gen_struct(s, sid)
        src = "\n".join(self.lines)
        code = compile(src, f"<kwire {self.spec.name} v{self.v}>", "exec")
        exec(code, self.ns)
        self.make_shared_defaults()
        for var, fn, default in self.tag_defaults:
            b = bytearray()
            self.ns[fn](default() if callable(default) else default, b)
            self.ns[var] = bytes(b)
        py_decode = self.ns["dec0"]
        if self.records_mode == "decode" and any("_rec(" in line for line in self.lines):
            py_decode = R.in_frame_budget(py_decode)  # one decompression budget per message
        decode = py_decode
        if native.extension is not None and self.root_tags:
            decode = native.wrap(native.describe(self), py_decode)
        return Plan(self.spec, self.v, self.flexible, decode, self.ns["enc0"],
                    self.ns["dflt0"], src, py_decode)

    def gen_struct(self, s: StructSpec, sid: int) -> None:
        v = self.v
        present = [f for f in s.fields if v in f.versions]
        regular = [f for f in present if not f.tagged_in(v)]
        tagged = [f for f in present if f.tagged_in(v)]
        # ---- default value
        self.emit(0, f"def dflt{sid}():")
        items = ", ".join(f"{f.name!r}: {self.default_expr(f)}" for f in present)
        self.emit(1, f"return {{{items}}}")
        # ---- decoder
        # bud: the message's item budget, [items left] (runtime.MAX_ITEMS), shared by its decoders
        self.emit(0, f"def dec{sid}(buf, pos, end, depth=0, bud=None):")
        if sid != 0:
            self.emit(1, f"if depth > {R.MAX_DEPTH}: raise _too_deep(pos)")
        else:
            self.emit(1, "if bud is None: bud = [_MAXI[0]]")
        self.dec_body(s, 1, "d", tags=sid != 0 or self.root_tags)
        self.emit(1, "return d, pos")
        # ---- encoder
        all_fields = {f.name: str(f.versions) for f in s.fields}
        allowed = frozenset([f.name for f in present] + (["_unknown_tags", "_explicit_tags"] if self.flexible else []))
        self.emit(0, f"def enc{sid}(v, out):")
        self.emit(1, "if v.__class__ is not dict: raise _not_dict(v)")
        keys = self.const(allowed, "_keys")
        self.emit(1, f"if not v.keys() <= {keys}: raise _badkeys(v, {keys}, {self.const(all_fields, '_all')})")
        group = []
        for f in regular:
            if f.type.kind in R.FMT:
                group.append(f)
                continue
            self.flush_pack(group, 1)
            group = []
            self.emit(1, "try:")
            self.get_value(f, "x", 2)
            self.write_value(f.type, f.nullable_in(v), self.compact(f), "x", 2, "out", f)
            self.emit(1, "except _EE as e:")
            self.emit(2, f"raise e.prefix({f.name!r})")
        self.flush_pack(group, 1)
        if self.flexible:
            self.write_tags(tagged, 1)


_cache: dict[tuple[int, int, str], tuple[MessageSpec, Plan]] = {}


def compile_plan(spec: MessageSpec, version: int, records_mode: str = "hex") -> Plan:
    """The cached plan for (spec, version, records mode): compiled on first use, then reused."""
    key = (id(spec), version, records_mode)
    hit = _cache.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    plan = _Gen(spec, version, records_mode).build()
    _cache[key] = (spec, plan)
    return plan


_prefixes: dict[tuple[int, int, str], tuple[MessageSpec, Decoder]] = {}


def compile_prefix(spec: MessageSpec, version: int, field: str) -> Decoder:
    """A decoder of the leading fields of a message body, up to and including the top-level field
    ``field`` (not a tagged one): ``decode(buf, pos, end) -> (dict of those fields, position after
    field)``. The rest of the body, its tag section included, is not read. Compiled once per
    (spec, version, field); records fields before ``field`` stay raw bytes.

    Raises KwireError when ``field`` is not a regular field of the body at ``version``."""
    key = (id(spec), version, field)
    hit = _prefixes.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    fields: list[FieldSpec] = []
    for f in spec.struct.fields:
        if version in f.versions and not f.tagged_in(version):
            fields.append(f)
            if f.name == field:
                break
    else:
        raise KwireError(f"{spec.name} v{version} has no field {field} before its tag section")
    head = dataclasses.replace(spec, struct=StructSpec(spec.struct.name, fields, spec.struct.versions))
    decode = _Gen(head, version, "bytes", root_tags=False).build().decode
    _prefixes[key] = (spec, decode)
    return decode

