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
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwire_cli import wire
from kwire_cli.codec import native
from kwire_cli.codec import runtime as R
from kwire_cli.codec.native import speedups_available, use_speedups
from kwire_cli.codec.runtime import MAX_DEPTH
from kwire_cli.errors import DecodeError, EncodeError, KwireError
from kwire_cli.spec.model import INT_RANGES, PRIMITIVE_SIZES, FieldSpec, FieldType, MessageSpec, StructSpec

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


# ----------------------------------------------------------------------------- code generator

def _struct_of(f: FieldSpec | None) -> StructSpec:
    """The struct of the struct (or array-of-structs) field being generated."""
    if f is None:
        raise AssertionError("a struct type without its field")
    return f.struct_spec


class _Gen:
    def __init__(self, spec: MessageSpec, version: int, records_mode: str, root_tags: bool = True):
        self.spec = spec
        self.v = version
        self.flexible = spec.flexible(version)
        self.records_mode = records_mode
        self.root_tags = root_tags  # False: the root struct's decoder stops after its last field
        self.lines: list[str] = []
        # the generated code's globals: short local names for the runtime helpers
        self.ns: dict[str, Any] = {
            "_DE": DecodeError, "_EE": EncodeError, "_short": R.short, "_short_group": R.short_group,
            "_neg_len": R.neg_len, "_not_nullable": R.not_nullable, "_bad_utf8": R.bad_utf8,
            "_big_array": R.big_array, "_tag_size": R.tag_size, "_tag_order": R.tag_order, "_ruv": wire.read_uvarint,
            "_wuv": wire.write_uvarint, "_uuid_t": R.uuid_text, "_uuid_b": R.uuid_bytes,
            "_hexb": R.hex_bytes, "_strb": R.str_bytes, "_recb": R.records_bytes, "_list": R.as_list,
            "_badkeys": R.bad_keys, "_not_dict": R.not_dict, "_pack_err": R.pack_error,
            "_badbool": R.bad_bool, "_conv_float": R.conv_float, "_unknown_tags": R.collect_unknown_tags,
            "_write_tags": R.write_tags, "_unpack_from": struct.unpack_from, "_pack": struct.pack,
            "_serr": struct.error, "_I16": struct.Struct(">h").unpack_from,
            "_I32": struct.Struct(">i").unpack_from, "_P16": struct.Struct(">h").pack,
            "_P32": struct.Struct(">i").pack, "_KE": KwireError, "_M": R.MISSING, "_too_deep": R.too_deep,
            "_rec": R.records_decoder(records_mode),
        }
        self.struct_ids: dict[int, int] = {}
        self.structs: list[StructSpec] = []  # by struct id
        self.pending: list[tuple[StructSpec, int]] = []
        self.counter = 0
        self.tag_defaults: list[tuple[str, str, Any]] = []
        self.in_tags = 0  # > 0 while generating a tag section: no inlining there
        self.tag_vars: dict[int, tuple[str, str]] = {}

    # -- helpers
    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any, prefix: str = "_c") -> str:
        n = self.name(prefix)
        self.ns[n] = value
        return n

    def struct_id(self, s: StructSpec) -> int:
        key = id(s)
        if key not in self.struct_ids:
            self.struct_ids[key] = len(self.struct_ids)
            self.structs.append(s)
            self.pending.append((s, self.struct_ids[key]))
        return self.struct_ids[key]

    def tag_names(self, f: FieldSpec) -> tuple[str, str]:
        """(encoder function, default-bytes constant) of a tagged field, made once per field."""
        key = id(f)
        if key not in self.tag_vars:
            self.tag_vars[key] = (self.name("enctag"), self.name("_tagdef"))
        return self.tag_vars[key]

    def compact(self, f: FieldSpec) -> bool:
        return f.compact_in(self.v, self.flexible)

    def default_expr(self, f: FieldSpec) -> str:
        d = f.default
        if f.type.kind == "struct":
            return "None" if d is None else f"dflt{self.struct_id(f.struct_spec)}()"
        if isinstance(d, list):
            return "[]"
        if isinstance(d, float):
            return self.const(d)
        return repr(d)

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

    def emit(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)

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
        self.emit(0, f"def dec{sid}(buf, pos, end, depth=0):")
        if sid != 0:
            self.emit(1, f"if depth > {R.MAX_DEPTH}: raise _too_deep(pos)")
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

    def dec_body(self, s: StructSpec, ind: int, dvar: str, tags: bool = True) -> None:
        """Decode the fields of `s` at `pos` into the dict `dvar`, advancing `pos`.

        Regular fields go to locals (unique names, so a body can be inlined into an enclosing
        decoder's element loop); the dict is built once, by one literal, in spec order (tagged
        fields hold their defaults there until the tag section overwrites them)."""
        v = self.v
        present = [f for f in s.fields if v in f.versions]
        tagged = [f for f in present if f.tagged_in(v)]
        exprs: dict[str, str] = {}
        group: list[FieldSpec] = []
        for f in present:
            if f.tagged_in(v):
                self.flush_group(group, ind, exprs)
                group = []
                exprs[f.name] = self.default_expr(f)
            elif f.type.kind in R.FMT:
                group.append(f)
            else:
                self.flush_group(group, ind, exprs)
                group = []
                local = self.name("f")
                self.emit(ind, "try:")
                self.read_value(f.type, f.nullable_in(v), self.compact(f), local, ind + 1, "end", f)
                self.emit(ind, "except _DE as e:")
                self.emit(ind + 1, f"raise e.prefix({f.name!r})")
                exprs[f.name] = local
        self.flush_group(group, ind, exprs)
        items = ", ".join(f"{f.name!r}: {exprs[f.name]}" for f in present)
        self.emit(ind, f"{dvar} = {{{items}}}")
        if self.flexible and tags:
            self.read_tags(tagged, ind, dvar)

    def leaf_struct(self, s: StructSpec) -> bool:
        """No struct (or array of structs) among the fields of `s` in this version: its decoder
        can be inlined into an element loop without recursion or name clashes."""
        for f in s.fields:
            if self.v in f.versions:
                k = f.type.kind
                if k == "struct" or (k == "array" and f.type.item.kind == "struct"):
                    return False
        return True

    def get_value(self, f: FieldSpec, var: str, ind: int) -> None:
        d = f.default
        if isinstance(d, (list, dict)) or (f.type.kind == "struct" and d is not None):
            self.emit(ind, f"{var} = v.get({f.name!r}, _M)")
            self.emit(ind, f"if {var} is _M: {var} = {self.default_expr(f)}")
        else:
            self.emit(ind, f"{var} = v.get({f.name!r}, {self.default_expr(f)})")

    # -- fixed-size groups
    def flush_group(self, group: list[FieldSpec], ind: int, exprs: dict[str, str]) -> None:
        """Consecutive fixed-size fields: one bounds check, one unpack into locals g<n>_<i>."""
        if not group:
            return
        fmt = ">" + "".join(R.FMT[f.type.kind] for f in group)
        st = struct.Struct(fmt)
        un = self.const(st.unpack_from, "_un")
        names = tuple(f.name for f in group)
        sizes = tuple((f.type.kind, PRIMITIVE_SIZES[f.type.kind]) for f in group)
        self.emit(ind, f"if pos + {st.size} > end: raise _short_group({names!r}, {sizes!r}, pos, end)")
        g = self.name("g")
        refs = [f"{g}_{i}" for i in range(len(group))]
        self.emit(ind, f"{', '.join(refs)}, = {un}(buf, pos)")
        for f, r in zip(group, refs, strict=True):
            if f.type.kind == "bool":
                r = f"{r} != 0"
            elif f.type.kind == "uuid":
                r = f"_uuid_t({r})"
            exprs[f.name] = r
        self.emit(ind, f"pos += {st.size}")

    def flush_pack(self, group: list[FieldSpec], ind: int) -> None:
        if not group:
            return
        fmt = ">" + "".join(R.FMT[f.type.kind] for f in group)
        pk = self.const(struct.Struct(fmt).pack, "_pk")
        args = []
        for i, f in enumerate(group):
            get = f"v.get({f.name!r}, {self.default_expr(f)})"
            k = f.type.kind
            if k == "bool":
                args.append(f"(1 if (b{i} := {get}) is True else 0 if b{i} is False else _badbool(b{i}))")
            elif k == "uuid":
                args.append(f"_uuid_b({get})")
            elif k == "float64":
                args.append(f"_conv_float({get})")
            else:  # an int: struct would pack true and false as 1 and 0
                n = self.name("n")
                args.append(f"(_badbool({n}) if ({n} := {get}).__class__ is bool else {n})")
        spec = tuple((f.name, f.type.kind, f.default) for f in group)
        self.emit(ind, "try:")
        self.emit(ind + 1, f"out += {pk}({', '.join(args)})")
        self.emit(ind, "except (_serr, TypeError, ValueError, _EE):")
        self.emit(ind + 1, f"raise _pack_err(v, {self.const(spec, '_grp')})")

    def flat_struct(self, s: StructSpec) -> tuple[int, str, list[str], list[str]] | None:
        """(element size, iter_unpack, field names, value expressions) when every field of `s` in
        this version is fixed-size and untagged; None otherwise. Flexible versions add the tag count
        byte to the format: the fast path is taken only when all of them are zero."""
        present = [f for f in s.fields if self.v in f.versions]
        if not present or any(f.type.kind not in R.FMT or f.tagged_in(self.v) for f in present):
            return None
        fmt = ">" + "".join(R.FMT[f.type.kind] for f in present) + ("B" if self.flexible else "")
        st = struct.Struct(fmt)
        exprs = []
        for j, f in enumerate(present):
            k = f.type.kind
            exprs.append(f"h{j} != 0" if k == "bool" else f"_uuid_t(h{j})" if k == "uuid" else f"h{j}")
        return st.size, self.const(st.iter_unpack, "_it"), [f.name for f in present], exprs

    # -- reading one value
    def read_uvarint(self, var: str, ind: int, end: str, what: str) -> None:
        self.emit(ind, f"if pos >= {end}: raise _short({what!r}, 1, pos, {end})")
        self.emit(ind, f"{var} = buf[pos]")
        self.emit(ind, f"if {var} < 128: pos += 1")
        # two-byte varints (128..16383: record batches, long strings) without a call
        self.emit(ind, f"elif pos + 1 < {end} and buf[pos + 1] < 128: "
                       f"{var} = ({var} & 127) | (buf[pos + 1] << 7); pos += 2")
        self.emit(ind, f"else: {var}, pos = _ruv(buf, pos, {end})")

    def read_length(self, kind: str, nullable: bool, compact: bool, ind: int, end: str) -> None:
        """Leave the length in `n`; n == -1 means null (already checked to be allowed)."""
        if compact:
            self.read_uvarint("n", ind, end, f"{kind} length")
            self.emit(ind, "n -= 1")
            if not nullable:
                self.emit(ind, "if n < 0: raise _not_nullable(pos - 1)")
        else:
            size, un = (2, "_I16") if kind == "string" else (4, "_I32")
            self.emit(ind, f"if pos + {size} > {end}: raise _short({kind + ' length'!r}, {size}, pos, {end})")
            self.emit(ind, f"n = {un}(buf, pos)[0]")
            self.emit(ind, f"pos += {size}")
            self.emit(ind, "if n < 0:")
            if nullable:
                self.emit(ind + 1, f"if n != -1: raise _neg_len(n, pos - {size})")
            else:
                self.emit(ind + 1, f"raise (_not_nullable(pos - {size}) if n == -1 else _neg_len(n, pos - {size}))")

    def read_value(self, ft: FieldType, nullable: bool, compact: bool, target: str, ind: int,
                   end: str, f: FieldSpec | None, tagged: bool = False) -> None:
        """Read one value into `target`. `tagged`: the value is a tagged field's own, where a nullable
        struct's presence marker is an unsigned varint (0: null) instead of an int8 (-1: null)."""
        k = ft.kind
        if k in R.FMT:
            st = struct.Struct(">" + R.FMT[k])
            un = self.const(st.unpack_from, "_un")
            self.emit(ind, f"if pos + {st.size} > {end}: raise _short({k!r}, {st.size}, pos, {end})")
            conv = {"bool": "{} != 0", "uuid": "_uuid_t({})"}.get(k, "{}")
            self.emit(ind, f"{target} = " + conv.format(f"{un}(buf, pos)[0]"))
            self.emit(ind, f"pos += {st.size}")
        elif k in ("string", "bytes", "records"):
            self.read_length(k, nullable, compact, ind, end)
            body = ind
            if nullable:
                self.emit(ind, f"if n < 0: {target} = None")
                self.emit(ind, "else:")
                body = ind + 1
            self.emit(body, "e = pos + n")
            self.emit(body, f"if e > {end}: raise _short('{k} of ' + str(n) + ' bytes', n, pos, {end})")
            if k == "string":
                self.emit(body, "try:")
                self.emit(body + 1, f"{target} = buf[pos:e].decode('utf-8')")
                self.emit(body, "except UnicodeDecodeError as x:")
                self.emit(body + 1, "raise _bad_utf8(pos, x)")
            elif k == "bytes":
                self.emit(body, f"{target} = buf[pos:e].hex()")
            else:
                self.emit(body, "try:")
                self.emit(body + 1, f"{target} = _rec(buf[pos:e])")
                self.emit(body, "except _KE as x:")
                self.emit(body + 1, "raise _DE(str(x), pos)")
            self.emit(body, "pos = e")
        elif k == "struct":
            sid = self.struct_id(_struct_of(f))
            if nullable and tagged:
                self.emit(ind, f"if pos >= {end}: raise _short('struct presence marker', 1, pos, {end})")
                self.emit(ind, f"pres, pos = _ruv(buf, pos, {end})")
                self.emit(ind, f"if pres == 0: {target} = None")
                self.emit(ind, f"else: {target}, pos = dec{sid}(buf, pos, {end}, depth + 1)")
            elif nullable:
                self.emit(ind, f"if pos >= {end}: raise _short('struct presence byte', 1, pos, {end})")
                self.emit(ind, "pos += 1")
                self.emit(ind, f"if buf[pos - 1] >= 128: {target} = None")
                self.emit(ind, f"else: {target}, pos = dec{sid}(buf, pos, {end}, depth + 1)")
            else:
                self.emit(ind, f"{target}, pos = dec{sid}(buf, pos, {end}, depth + 1)")
        elif k == "array":
            el = ft.item
            if compact and el.kind in R.ARRAY_FMT:
                # short numeric arrays: one byte of length, one precompiled unpack; anything else
                # (null, long, cut short) takes the general path below, which names the problem
                ch = R.ARRAY_FMT[el.kind]
                self.ns.setdefault(f"_AV{ch}", (None,) + R.array_unpackers(ch))
                self.ns.setdefault(f"_AZ{ch}", (0,) + tuple(1 + n * struct.calcsize(">" + ch)
                                                             for n in range(R.SMALL_ARRAY)))
                self.emit(ind, f"b0 = buf[pos] if pos < {end} else 0")
                self.emit(ind, f"if 0 < b0 <= {R.SMALL_ARRAY} and pos + _AZ{ch}[b0] <= {end}:")
                self.emit(ind + 1, f"{target} = [*_AV{ch}[b0](buf, pos + 1)]")
                self.emit(ind + 1, f"pos += _AZ{ch}[b0]")
                self.emit(ind, "else:")
                ind += 1
            if compact:
                self.read_uvarint("cnt", ind, end, "array length")
                self.emit(ind, "cnt -= 1")
            else:
                self.emit(ind, f"if pos + 4 > {end}: raise _short('array length', 4, pos, {end})")
                self.emit(ind, "cnt = _I32(buf, pos)[0]")
                self.emit(ind, "pos += 4")
                self.emit(ind, "if cnt < -1: raise _neg_len(cnt, pos - 4)")
            body = ind
            if nullable:
                self.emit(ind, f"if cnt < 0: {target} = None")
                self.emit(ind, "else:")
                body = ind + 1
            else:
                self.emit(ind, f"if cnt < 0: raise _not_nullable(pos - {1 if compact else 4})")
            ms = max(1, R.min_size(el, compact))
            self.emit(body, f"if cnt * {ms} > {end} - pos: raise _big_array(cnt, {ms}, pos, {end})")
            if el.kind in R.ARRAY_FMT:
                ch = R.ARRAY_FMT[el.kind]
                size = struct.calcsize(">" + ch)
                self.ns.setdefault(f"_AU{ch}", R.array_unpackers(ch))
                self.emit(body, f"{target} = list(_AU{ch}[cnt](buf, pos) if cnt < {R.SMALL_ARRAY} "
                                f"else _unpack_from('>%d{ch}' % cnt, buf, pos))")
                self.emit(body, f"pos += cnt * {size}")
            elif el.kind == "bool":
                self.emit(body, f"{target} = [b != 0 for b in buf[pos:pos + cnt]]")
                self.emit(body, "pos += cnt")
            else:
                lst = self.name("lst")
                flat = self.flat_struct(_struct_of(f)) if el.kind == "struct" else None
                if flat is not None:
                    # every element has the same fixed size (and, when flexible, no tagged fields):
                    # one iter_unpack over the whole run; otherwise the element loop below
                    size, it, names, exprs = flat
                    cond = f"cnt * {size} <= {end} - pos"
                    if self.flexible:
                        cond += f" and not any(buf[pos + {size - 1}:pos + cnt * {size}:{size}])"
                    items = ", ".join(f"{n!r}: {x}" for n, x in zip(names, exprs, strict=True))
                    vars_ = ", ".join(f"h{j}" for j in range(len(names))) + (", _" if self.flexible else ",")
                    self.emit(body, f"if {cond}:")
                    self.emit(body + 1, f"{target} = [{{{items}}} for {vars_} in {it}(buf[pos:pos + cnt * {size}])]")
                    self.emit(body + 1, f"pos += cnt * {size}")
                    self.emit(body, "else:")
                    body += 1
                iv = self.name("i")
                self.emit(body, f"{lst} = []")
                self.emit(body, f"{iv} = 0")
                self.emit(body, "try:")
                self.emit(body + 1, f"for {iv} in range(cnt):")
                if (el.kind == "struct" and not self.in_tags and end == "end"
                        and self.leaf_struct(_struct_of(f))):
                    self.dec_body(_struct_of(f), body + 2, "x")  # inlined: no call per element
                else:
                    self.read_value(el, False, compact, "x", body + 2, end, f)
                self.emit(body + 2, f"{lst}.append(x)")
                self.emit(body, "except _DE as e:")
                self.emit(body + 1, f"raise e.prefix('[%d]' % {iv})")
                self.emit(body, f"{target} = {lst}")
        else:  # pragma: no cover
            raise AssertionError(k)

    def read_tags(self, tagged: list[FieldSpec], ind: int, dname: str = "d") -> None:
        self.read_uvarint("nt", ind, "end", "tagged field count")
        self.emit(ind, "if nt:")
        b = ind + 1
        self.emit(b, "if nt * 2 > end - pos: raise _DE('%d tagged fields need at least %d bytes, %d left at "
                     "offset %d' % (nt, nt * 2, end - pos, pos), pos)")
        self.emit(b, "unk = expl = None")
        self.emit(b, "prev = -1")
        self.emit(b, "for _ in range(nt):")
        self.emit(b + 1, "tag, pos = _ruv(buf, pos, end)")
        self.emit(b + 1, "if tag <= prev: raise _tag_order(tag, prev, pos)")
        self.emit(b + 1, "prev = tag")
        self.emit(b + 1, "sz, pos = _ruv(buf, pos, end)")
        self.emit(b + 1, "e2 = pos + sz")
        self.emit(b + 1, "if e2 > end: raise _short('tagged field ' + str(tag), sz, pos, end)")
        first = True
        for f in sorted(tagged, key=lambda f: f.tag_number):
            self.emit(b + 1, f"{'if' if first else 'elif'} tag == {f.tag}:")
            first = False
            self.emit(b + 2, "try:")
            self.in_tags += 1
            self.read_value(f.type, f.nullable_in(self.v), self.compact(f), f"{dname}[{f.name!r}]", b + 3, "e2", f,
                            tagged=True)
            self.in_tags -= 1
            self.emit(b + 3, f"if pos != e2: raise _tag_size({f.name!r}, tag, sz, sz - (e2 - pos), pos)")
            self.emit(b + 2, "except _DE as e:")
            self.emit(b + 3, f"raise e.prefix({f.name!r})")
            _, dvar = self.tag_names(f)
            self.emit(b + 2, f"if buf[e2 - sz:e2] == {dvar}:")
            self.emit(b + 3, "if expl is None: expl = []")
            self.emit(b + 3, f"expl.append({f.tag})")
        if first:
            self.emit(b + 1, "if True:")
        else:
            self.emit(b + 1, "else:")
        self.emit(b + 2, "if unk is None: unk = {}")
        self.emit(b + 2, "unk[str(tag)] = buf[pos:e2].hex()")
        self.emit(b + 2, "pos = e2")
        self.emit(b, f"if unk: {dname}['_unknown_tags'] = unk")
        self.emit(b, f"if expl: {dname}['_explicit_tags'] = expl")

    # -- writing one value
    def write_len(self, n: str, compact: bool, size_kind: str, ind: int, out: str) -> None:
        if compact:
            self.emit(ind, f"ln = {n} + 1")
            self.emit(ind, f"if ln < 128: {out}.append(ln)")
            self.emit(ind, f"elif ln < 16384: {out}.append((ln & 127) | 128); {out}.append(ln >> 7)")
            self.emit(ind, f"else: _wuv({out}, ln)")
        elif size_kind == "string":
            self.emit(ind, f"if {n} > 32767: raise _EE('string of %d bytes is longer than 32767' % {n})")
            self.emit(ind, f"{out} += _P16({n})")
        else:
            self.emit(ind, f"if {n} > 2147483647: raise _EE('too long for an int32 length')")
            self.emit(ind, f"{out} += _P32({n})")

    def write_null(self, kind: str, compact: bool, ind: int, out: str) -> None:
        if compact:
            self.emit(ind, f"{out}.append(0)")
        elif kind == "string":
            self.emit(ind, f"{out} += b'\\xff\\xff'")
        else:
            self.emit(ind, f"{out} += b'\\xff\\xff\\xff\\xff'")

    def write_value(self, ft: FieldType, nullable: bool, compact: bool, var: str, ind: int, out: str,
                    f: FieldSpec | None, tagged: bool = False) -> None:
        k = ft.kind
        nulltext = (f"null is not allowed here (nullable in versions {f.nullable_versions})"
                    if f is not None else "null is not allowed here")
        if k in R.FMT:
            pk = self.const(struct.Struct(">" + R.FMT[k]).pack, "_pk")
            # an int: struct would pack true and false as 1 and 0 (the error comes from _pack_err)
            conv = {"bool": "(1 if {0} is True else 0 if {0} is False else _badbool({0}))",
                    "uuid": "_uuid_b({0})", "float64": "_conv_float({0})"}.get(
                        k, "(_badbool({0}) if {0}.__class__ is bool else {0})")
            spec = self.const((("", k, None),), "_grp")
            self.emit(ind, "try:")
            self.emit(ind + 1, f"{out} += {pk}({conv.format(var)})")
            self.emit(ind, "except (_serr, TypeError, ValueError, _EE):")
            self.emit(ind + 1, f"raise _pack_err({{'': {var}}}, {spec})")
            return
        if k in ("string", "bytes", "records") or k == "array" or k == "struct":
            self.emit(ind, f"if {var} is None:")
            if nullable:
                if k == "struct":
                    self.emit(ind + 1, f"{out}.append({0 if tagged else 255})")
                else:
                    self.write_null(k, compact, ind + 1, out)
            else:
                self.emit(ind + 1, f"raise _EE({nulltext!r})")
            self.emit(ind, "else:")
            b = ind + 1
        if k in ("string", "bytes", "records"):
            # the common cases inline; anything else (and every error) through the helper
            fast = {"string": f"{var}.encode() if {var}.__class__ is str and {var}.isascii() else _strb({var})",
                    "bytes": f"_hexb({var})",
                    "records": f"{var} if {var}.__class__ is bytes else _recb({var})"}[k]
            self.emit(b, f"bb = {fast}")
            self.write_len("len(bb)", compact, k, b, out)
            self.emit(b, f"{out} += bb")
        elif k == "struct":
            sid = self.struct_id(_struct_of(f))
            if nullable:
                self.emit(b, f"{out}.append(1)")
            self.emit(b, f"enc{sid}({var}, {out})")
        elif k == "array":
            el = ft.item
            self.emit(b, f"if {var}.__class__ is not list: {var} = _list({var})")
            self.write_len(f"len({var})", compact, "array", b, out)
            if el.kind in R.ARRAY_FMT and el.kind != "float64":
                ch = R.ARRAY_FMT[el.kind]
                self.emit(b, "try:")
                self.ns.setdefault(f"_AP{ch}", R.array_packers(ch))
                # true and false would pack as 1 and 0: the loop below names the element
                self.emit(b + 1, f"if bool in set(map(type, {var})): raise TypeError")
                self.emit(b + 1, f"{out} += (_AP{ch}[len({var})](*{var}) if len({var}) < {R.SMALL_ARRAY} "
                                 f"else _pack('>%d{ch}' % len({var}), *{var}))")
                self.emit(b, "except (_serr, TypeError):")
                self.emit(b + 1, "pass")
                self.emit(b + 1, f"for i, y in enumerate({var}):")
                self.emit(b + 2, "try:")
                self.emit(b + 3, f"if y is True or y is False or not isinstance(y, int): raise _EE('expected an {el.kind}, got %r' % (y,))")
                lo, hi = INT_RANGES[el.kind]
                self.emit(b + 3, f"if not {lo} <= y <= {hi}: raise _EE('%d is out of range for {el.kind}' % y)")
                self.emit(b + 2, "except _EE as e:")
                self.emit(b + 3, "raise e.prefix('[%d]' % i)")
            else:
                el_var = self.name("y")
                self.emit(b, "i = 0")
                self.emit(b, "try:")
                self.emit(b + 1, f"for i, {el_var} in enumerate({var}):")
                self.write_value(el, False, compact, el_var, b + 2, out, f if el.kind == "struct" else None)
                self.emit(b, "except _EE as e:")
                self.emit(b + 1, "raise e.prefix('[%d]' % i)")

    def _struct_default_factory(self, sid: int) -> Callable[[], dict[str, Any]]:
        """The default of a struct-valued tagged field: a fresh dict from the struct's generated dflt
        function (looked up when called: it is defined once the generated code has run)."""
        def make() -> dict[str, Any]:
            made: dict[str, Any] = self.ns[f"dflt{sid}"]()
            return made
        return make

    def write_tags(self, tagged: list[FieldSpec], ind: int) -> None:
        known = frozenset(f.tag for f in tagged)
        if not tagged:
            self.emit(ind, "unk = v.get('_unknown_tags')")
            self.emit(ind, "if not unk: out.append(0)")
            self.emit(ind, "else:")
            self.emit(ind + 1, "tg = []")
            self.emit(ind + 1, f"_unknown_tags(unk, {self.const(known, '_kn')}, tg)")
            self.emit(ind + 1, "_write_tags(out, tg)")
            return
        self.emit(ind, "tg = []")
        self.emit(ind, "expl = v.get('_explicit_tags') or ()")
        for f in sorted(tagged, key=lambda f: f.tag_number):
            fn, dvar = self.tag_names(f)
            # a small encoder for this field, used for the value and (once) for its default
            saved = self.lines
            self.lines = []
            self.emit(0, f"def {fn}(x, out):")
            self.write_value(f.type, f.nullable_in(self.v), self.compact(f), "x", 1, "out", f, tagged=True)
            fn_lines = self.lines
            self.lines = saved
            self.lines[:0] = fn_lines  # define before use (module level)
            default = f.default
            if f.type.kind == "struct" and default is not None:
                default = self._struct_default_factory(self.struct_id(f.struct_spec))
            self.tag_defaults.append((dvar, fn, default))
            self.emit(ind, f"x = v.get({f.name!r}, _M)")
            self.emit(ind, "if x is not _M:")
            self.emit(ind + 1, "tb = bytearray()")
            self.emit(ind + 1, "try:")
            self.emit(ind + 2, f"{fn}(x, tb)")
            self.emit(ind + 1, "except _EE as e:")
            self.emit(ind + 2, f"raise e.prefix({f.name!r})")
            self.emit(ind + 1, f"if tb != {dvar} or {f.tag} in expl: tg.append(({f.tag}, tb))")
        self.emit(ind, "unk = v.get('_unknown_tags')")
        self.emit(ind, f"if unk: _unknown_tags(unk, {self.const(known, '_kn')}, tg)")
        self.emit(ind, "if tg: _write_tags(out, tg)")
        self.emit(ind, "else: out.append(0)")


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

