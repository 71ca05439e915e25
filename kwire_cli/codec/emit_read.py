"""The decoder's half of the code generator: the Python that reads a struct's body (fixed-size
runs of fields with one precompiled unpack, lengths checked against the bytes left, arrays of
structs inlined where they are leaves) and its tag section."""
from __future__ import annotations

import struct

from kwire_cli.codec import runtime as R
from kwire_cli.codec.emitter import Emitter, struct_of
from kwire_cli.spec.model import PRIMITIVE_SIZES, FieldSpec, FieldType, StructSpec


class ReadEmitter(Emitter):
    def dec_body(self, s: StructSpec, ind: int, dvar: str, tags: bool = True) -> None:
        """Decode the fields of `s` at `pos` into the dict `dvar`, advancing `pos`.

        Regular fields go to locals (unique names, so a body can be inlined into an enclosing
        decoder's element loop); the dict is built once, by one literal, in spec order (tagged
        fields hold their defaults there until the tag section overwrites them; a struct's default is one
        dict shared by every tree: ``decoded_default``)."""
        v = self.v
        present = [f for f in s.fields if v in f.versions]
        tagged = [f for f in present if f.tagged_in(v)]
        exprs: dict[str, str] = {}
        group: list[FieldSpec] = []
        for f in present:
            if f.tagged_in(v):
                self.flush_group(group, ind, exprs)
                group = []
                exprs[f.name] = self.decoded_default(f)
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
            sid = self.struct_id(struct_of(f))
            if nullable and tagged:
                self.emit(ind, f"if pos >= {end}: raise _short('struct presence marker', 1, pos, {end})")
                self.emit(ind, f"pres, pos = _ruv(buf, pos, {end})")
                self.emit(ind, f"if pres == 0: {target} = None")
                self.emit(ind, f"else: {target}, pos = dec{sid}(buf, pos, {end}, depth + 1, bud)")
            elif nullable:
                self.emit(ind, f"if pos >= {end}: raise _short('struct presence byte', 1, pos, {end})")
                self.emit(ind, "pos += 1")
                self.emit(ind, f"if buf[pos - 1] >= 128: {target} = None")
                self.emit(ind, f"else: {target}, pos = dec{sid}(buf, pos, {end}, depth + 1, bud)")
            else:
                self.emit(ind, f"{target}, pos = dec{sid}(buf, pos, {end}, depth + 1, bud)")
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
                self.emit(ind + 1, "bud[0] -= b0 - 1")
                self.emit(ind + 1, "if bud[0] < 0: raise _too_many(pos + 1)")  # after the count, as below
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
            self.emit(body, "bud[0] -= cnt")  # the item budget, charged before the elements are made
            self.emit(body, "if bud[0] < 0: raise _too_many(pos)")
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
                flat = self.flat_struct(struct_of(f)) if el.kind == "struct" else None
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
                        and self.leaf_struct(struct_of(f))):
                    self.dec_body(struct_of(f), body + 2, "x")  # inlined: no call per element
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
        self.emit(b + 2, "bud[0] -= 1")  # an unknown tagged field is an item
        self.emit(b + 2, "if bud[0] < 0: raise _too_many(pos)")
        self.emit(b + 2, "if unk is None: unk = {}")
        self.emit(b + 2, "unk[str(tag)] = buf[pos:e2].hex()")
        self.emit(b + 2, "pos = e2")
        self.emit(b, f"if unk: {dname}['_unknown_tags'] = unk")
        self.emit(b, f"if expl: {dname}['_explicit_tags'] = expl")

    # -- writing one value
