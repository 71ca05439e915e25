"""Hypothesis strategies that generate value trees from a spec at one version."""
from __future__ import annotations

from hypothesis import strategies as st

from kwire_cli.codec.primitives import uuid_to_text
from kwire_cli.spec.model import INT_RANGES, FieldSpec, FieldType, MessageSpec, StructSpec

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


def _scalar(kind: str):
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.integers(lo, hi)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": TEXT,
        "bytes": st.binary(max_size=8).map(bytes.hex),
        "records": st.binary(max_size=8).map(bytes.hex),
        "uuid": st.binary(min_size=16, max_size=16).map(uuid_to_text),
    }[kind]


def value_strategy(ft: FieldType, f: FieldSpec, v: int, flexible: bool, depth: int):
    if ft.kind == "array":
        inner = value_strategy(ft.element, f, v, flexible, depth + 1)
        return st.lists(inner, max_size=3 if depth < 2 else 1)
    if ft.kind == "struct":
        return struct_strategy(f.struct, v, flexible, depth + 1)
    return _scalar(ft.kind)


def field_strategy(f: FieldSpec, v: int, flexible: bool, depth: int):
    s = value_strategy(f.type, f, v, flexible, depth)
    if f.nullable_in(v):
        s = st.one_of(st.none(), s)
    return s


def struct_strategy(s: StructSpec, v: int, flexible: bool, depth: int = 0):
    fields = {f.name: field_strategy(f, v, flexible, depth) for f in s.fields if v in f.versions}
    base = st.fixed_dictionaries(fields)
    if not flexible:
        return base
    known = {f.tag for f in s.fields if f.tagged_in(v)}
    unknown = st.dictionaries(st.integers(0, 300).filter(lambda t: t not in known).map(str),
                              st.binary(max_size=4).map(bytes.hex), max_size=2)
    return st.builds(lambda d, u: {**d, "_unknown_tags": u} if u else d, base, unknown)


def message_strategy(spec: MessageSpec, v: int):
    return struct_strategy(spec.struct, v, spec.flexible(v))
