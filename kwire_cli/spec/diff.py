"""What changes in a message's schema between two versions (the bytes: `kwire_cli.whatif.bytes_diff`).

`schema_diff(api, v1, v2)` compares the fields present at each version, recursively through
structs: fields added and removed, wire type changes (e.g. STRING -> COMPACT_STRING when the
message becomes flexible), nullability, mandatory vs tagged (and tag numbers), plus the
message-level facts: flexible or not, and the header version.
"""
from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from kwire_cli.spec.headers import request_header_version, response_header_version
from kwire_cli.spec.model import FieldSpec, FieldType, MessageSpec, StructSpec
from kwire_cli.spec.registry import Api

_FIXED_NAMES = {"bool": "BOOLEAN", "int8": "INT8", "int16": "INT16", "uint16": "UINT16", "int32": "INT32",
                "uint32": "UINT32", "int64": "INT64", "float64": "FLOAT64", "uuid": "UUID"}


def wire_type(ft: FieldType, nullable: bool, compact: bool) -> str:
    """Kafka's protocol-guide name of a wire type (COMPACT_NULLABLE_STRING, ARRAY(INT32), ...)."""
    k = ft.kind
    if k in _FIXED_NAMES:
        return _FIXED_NAMES[k]
    if k in ("string", "bytes", "records"):
        name = k.upper()
        if nullable and k != "records":
            name = "NULLABLE_" + name
        return ("COMPACT_" + name) if compact else name
    if k == "struct":
        return ("NULLABLE " if nullable else "") + (ft.struct_name or "STRUCT")
    if k == "array":
        assert ft.element is not None
        inner = wire_type(ft.element, False, compact)
        name = ("COMPACT_ARRAY" if compact else "ARRAY") + f"({inner})"
        return ("NULLABLE " + name) if nullable else name
    return k  # pragma: no cover


def field_wire_type(f: FieldSpec, version: int, flexible: bool) -> str:
    return wire_type(f.type, f.nullable_in(version), f.compact_in(version, flexible))


@dataclass
class FieldChange:
    path: str
    change: str          # added | removed | wire_type | nullable | tagged | tag
    before: str | None
    after: str | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "change": self.change, "from": self.before, "to": self.after}


@dataclass
class KindDiff:
    kind: str
    spec_name: str
    v1: int
    v2: int
    flexible: tuple[bool, bool]
    header_version: tuple[int, int]
    changes: list[FieldChange] = dc_field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "spec": self.spec_name,
                "flexible": {"from": self.flexible[0], "to": self.flexible[1]},
                "header_version": {"from": self.header_version[0], "to": self.header_version[1]},
                "changes": [c.to_json() for c in self.changes]}


@dataclass
class SchemaDiff:
    api_key: int
    api_name: str
    v1: int
    v2: int
    kinds: list[KindDiff]

    def to_json(self) -> dict[str, Any]:
        return {"api_key": self.api_key, "api_name": self.api_name, "from_version": self.v1,
                "to_version": self.v2, "kinds": {k.kind: k.to_json() for k in self.kinds}}


def _describe_field(f: FieldSpec, version: int, flexible: bool) -> str:
    t = field_wire_type(f, version, flexible)
    if f.tagged_in(version):
        t += f", tag {f.tag}"
    return t


def _tagged_text(f: FieldSpec, v: int) -> str:
    return f"tagged (tag {f.tag})" if f.tagged_in(v) else "mandatory"


def struct_changes(s: StructSpec, v1: int, v2: int, flex1: bool, flex2: bool, prefix: str = "") -> list[FieldChange]:
    out: list[FieldChange] = []
    for f in s.fields:
        in1, in2 = v1 in f.versions, v2 in f.versions
        path = prefix + f.name
        if not in1 and not in2:
            continue
        if in2 and not in1:
            out.append(FieldChange(path, "added", None, _describe_field(f, v2, flex2)))
            continue
        if in1 and not in2:
            out.append(FieldChange(path, "removed", _describe_field(f, v1, flex1), None))
            continue
        w1, w2 = field_wire_type(f, v1, flex1), field_wire_type(f, v2, flex2)
        n1, n2 = f.nullable_in(v1), f.nullable_in(v2)
        if n1 != n2:
            out.append(FieldChange(path, "nullable", "nullable" if n1 else "not nullable",
                                   "nullable" if n2 else "not nullable"))
        if w1 != w2 and not (n1 != n2 and w1.replace("NULLABLE_", "").replace("NULLABLE ", "")
                             == w2.replace("NULLABLE_", "").replace("NULLABLE ", "")):
            out.append(FieldChange(path, "wire_type", w1, w2))
        t1, t2 = f.tagged_in(v1), f.tagged_in(v2)
        if t1 != t2:
            out.append(FieldChange(path, "tagged", _tagged_text(f, v1), _tagged_text(f, v2)))
        if f.struct is not None:
            sub = path + ("[]." if f.type.kind == "array" else ".")
            out.extend(struct_changes(f.struct, v1, v2, flex1, flex2, sub))
    return out


def kind_diff(api: Api, kind: str, v1: int, v2: int) -> KindDiff:
    spec: MessageSpec = api.spec(kind)
    hv = request_header_version if kind == "request" else response_header_version
    f1, f2 = spec.flexible(v1), spec.flexible(v2)
    kd = KindDiff(kind, spec.name, v1, v2, (f1, f2), (hv(api, v1), hv(api, v2)))
    kd.changes = struct_changes(spec.struct, v1, v2, f1, f2)
    return kd


def schema_diff(api: Api, v1: int, v2: int, kinds: tuple[str, ...] = ("request", "response")) -> SchemaDiff:
    """The changes between versions `v1` and `v2` of an API (both must be valid)."""
    return SchemaDiff(api.key, api.name, v1, v2, [kind_diff(api, k, v1, v2) for k in kinds])


# --------------------------------------------------------------------------- a value at another version

def prune(s: StructSpec, value: Any, version: int, path: str = "", dropped: list[str] | None = None) -> Any:
    """A copy of `value` without the fields `version` lacks (their paths go to `dropped`)."""
    if dropped is None:
        dropped = []
    if not isinstance(value, dict):
        return value
    specs = {f.name: f for f in s.fields}
    out = {}
    for k, v in value.items():
        f = specs.get(k)
        if f is None:
            out[k] = v  # unknown: the encoder will name it
            continue
        if version not in f.versions:
            dropped.append(path + k)
            continue
        if f.struct is not None and v is not None:
            if f.type.kind == "array" and isinstance(v, list):
                v = [prune(f.struct, x, version, f"{path}{k}[].", dropped) for x in v]
            else:
                v = prune(f.struct, v, version, f"{path}{k}.", dropped)
        out[k] = v
    dropped[:] = list(dict.fromkeys(dropped))  # de-duplicate paths from array elements, keep order
    return out
