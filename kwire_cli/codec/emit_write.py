"""The encoder's half of the code generator: the Python that writes a struct's fields, lengths and
nulls, and its tag section (tagged fields written only when they differ from their default or
were written explicitly)."""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kwire_cli.codec import runtime as R
from kwire_cli.codec.emitter import Emitter, struct_of
from kwire_cli.spec.model import INT_RANGES, FieldSpec, FieldType


class WriteEmitter(Emitter):
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
            sid = self.struct_id(struct_of(f))
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
