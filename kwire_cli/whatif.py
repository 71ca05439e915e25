"""Byte sizes of value trees, and the ErrorCode/ErrorMessage-as-tagged-fields what-if.

The proposal: in every flexible RPC, move ErrorCode and ErrorMessage into the tagged-field
section. A tagged field costs nothing when it equals its default, and costs tag varint + size
varint + value when set; a mandatory field always costs its value. So per struct instance that
carries the field:

* ErrorCode 0 saves 2 bytes (int16); a non-zero code costs 2 more (tag 1 + size 1 + 2 = 4).
* ErrorMessage null saves 1 byte (compact null is one 0x00); a message of n bytes costs 2 more.

The tag section itself needs no new byte: every struct of a flexible version already ends with a
tag count, which only grows past one byte beyond 127 tagged fields (counted exactly anyway).
Only flexible versions have tag sections; for other versions the answer is "not applicable".
The proposed default of a field is null when it is nullable at that version, else the spec's
default; the new tag numbers are the next free ones in each struct.

`what_if_tagged` works on the codec's value tree (no re-decoding), so the capture summary can sum
it over real traffic; `sum_what_if` adds results up. `bytes_diff` (kwire diff --bytes) encodes one
message at two versions and compares the bytes of each part.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kwire_cli.codec import decode_body
from kwire_cli.codec.partial import default_value
from kwire_cli.codec.runtime import str_bytes
from kwire_cli.errors import KwireError
from kwire_cli.records import encode_records
from kwire_cli.spec.diff import prune
from kwire_cli.spec.model import PRIMITIVE_SIZES, FieldSpec, FieldType, MessageSpec, StructSpec
from kwire_cli.spec.registry import registry
from kwire_cli.wire import uvarint_size

DEFAULT_FIELDS = ("ErrorCode", "ErrorMessage")


# --------------------------------------------------------------------------- sizes

def _records_len(value: Any) -> int:
    if isinstance(value, str):
        return len(value) // 2
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    return len(encode_records(value))


class Sizer:
    """Encoded sizes of values of one spec at one version (what the codec would write)."""

    def __init__(self, spec: MessageSpec, version: int):
        self.spec = spec
        self.v = version
        self.flexible = spec.flexible(version)

    def value(self, ft: FieldType, value: Any, nullable: bool, compact: bool, f: FieldSpec | None) -> int:
        k = ft.kind
        if k in PRIMITIVE_SIZES:
            return PRIMITIVE_SIZES[k]
        if k in ("string", "bytes", "records"):
            if value is None:
                return 1 if compact else (2 if k == "string" else 4)
            if k == "string":
                n = len(str_bytes(value))  # (lenient decoding's {"invalid_utf8": HEX} too)
            elif k == "bytes":
                n = len(value) // 2 if isinstance(value, str) else len(value)
            else:
                n = _records_len(value)
            return n + (uvarint_size(n + 1) if compact else (2 if k == "string" else 4))
        if k == "struct":
            if value is None:
                return 1
            assert f is not None
            return (1 if nullable else 0) + self.struct(f.struct_spec, value)
        if k == "array":
            if value is None:
                return 1 if compact else 4
            n = uvarint_size(len(value) + 1) if compact else 4
            el = ft.item
            if el.kind in PRIMITIVE_SIZES:
                return n + len(value) * PRIMITIVE_SIZES[el.kind]
            return n + sum(self.value(el, x, False, compact, f) for x in value)
        raise KwireError(f"cannot size a {k}")  # pragma: no cover

    def field(self, f: FieldSpec, value: Any) -> int:
        """Bytes of a mandatory field's value."""
        return self.value(f.type, value, f.nullable_in(self.v), f.compact_in(self.v, self.flexible), f)

    def tagged_field(self, f: FieldSpec, value: Any, tag: int | None = None) -> int:
        """Bytes of a set tagged field: tag varint + size varint + value."""
        n = self.field(f, value)
        return uvarint_size(f.tag_number if tag is None else tag) + uvarint_size(n) + n

    def is_default(self, f: FieldSpec, value: Any) -> bool:
        return value == default_value(f, self.v)

    def written(self, f: FieldSpec, value: dict) -> bool:
        """Whether the codec writes tagged field `f` of struct value `value`."""
        return f.name in value and (not self.is_default(f, value[f.name])
                                    or f.tag in (value.get("_explicit_tags") or ()))

    def tag_section(self, s: StructSpec, value: dict) -> int:
        set_tags = 0
        n = 0
        for f in s.fields:
            if f.tagged_in(self.v) and self.v in f.versions and f.name in value and self.written(f, value):
                set_tags += 1
                n += self.tagged_field(f, value[f.name])
        for tag, h in (value.get("_unknown_tags") or {}).items():
            set_tags += 1
            ln = len(h) // 2
            n += uvarint_size(int(tag)) + uvarint_size(ln) + ln
        return uvarint_size(set_tags) + n

    def struct(self, s: StructSpec, value: dict) -> int:
        total = 0
        for f in s.fields:
            if self.v not in f.versions or f.tagged_in(self.v):
                continue
            total += self.field(f, value.get(f.name, default_value(f, self.v)))
        if self.flexible:
            total += self.tag_section(s, value)
        return total


def body_parts(spec: MessageSpec, version: int, body: dict) -> list[tuple[str, int]]:
    """(part, bytes) for each top-level field of `body` in wire order, then the tag section."""
    sz = Sizer(spec, version)
    parts = []
    for f in spec.fields:
        if version in f.versions and not f.tagged_in(version):
            parts.append((f.name, sz.field(f, body.get(f.name, default_value(f, version)))))
    if sz.flexible:
        parts.append(("tagged fields", sz.tag_section(spec.struct, body)))
    return parts


# --------------------------------------------------------------------------- the what-if

def _proposed_default(f: FieldSpec, version: int) -> Any:
    return None if f.nullable_in(version) else default_value(f, version)


_PLANS: dict[tuple, tuple] = {}


def _plan(s: StructSpec, version: int, fields: tuple[str, ...]) -> tuple:
    """Per (struct, version, fields): the target fields with their proposed default and new tag,
    the tagged fields already there, the struct-valued children, the targets already tagged."""
    key = (id(s), version, fields)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is s:
        return hit[1]
    present = [f for f in s.fields if version in f.versions]
    used = [f.tag for f in s.fields if f.tag is not None]
    next_tag = max(used) + 1 if used else 0
    targets, done = [], []
    for f in present:
        if f.name not in fields:
            continue
        if f.tagged_in(version):
            done.append(f.name)
            continue
        targets.append((f, _proposed_default(f, version), next_tag))
        next_tag += 1
    tagged_now = [f for f in present if f.tagged_in(version)]
    children = [(f.name, f.struct, f.type.kind == "array") for f in present if f.struct is not None]
    plan = (targets, tagged_now, children, done)
    _PLANS[key] = (s, plan)
    return plan


class _Acc:
    def __init__(self, path: str, name: str):
        self.path, self.field = path, name
        self.instances = self.at_default = self.set = 0
        self.bytes_now = self.bytes_tagged = 0

    def to_json(self) -> dict:
        return {"path": self.path, "field": self.field, "instances": self.instances,
                "at_default": self.at_default, "set": self.set, "bytes_now": self.bytes_now,
                "bytes_tagged": self.bytes_tagged, "saving": self.bytes_now - self.bytes_tagged}


def what_if_tagged(spec: MessageSpec, version: int, body: dict, fields: Iterable[str] = DEFAULT_FIELDS, *,
                   size: int | None = None) -> dict:
    """What making `fields` tagged would save (positive) or cost (negative) on this message.

    `body` is the codec's value tree; `size` the message's size in bytes (default: the body's
    encoded size). Returns {"applicable", "reason", "api_name", "kind", "version", "fields",
    "bytes_now", "bytes_tagged", "saving", "tag_count_bytes", "per_field": [{"path", "field",
    "instances", "at_default", "set", "bytes_now", "bytes_tagged", "saving"}]}.
    """
    fields = tuple(fields)
    sz = Sizer(spec, version)
    if size is None:
        size = sz.struct(spec.struct, body)
    out: dict[str, Any] = {"applicable": True, "reason": None, "api_name": spec.api_name, "kind": spec.type,
                           "version": version, "fields": list(fields), "bytes_now": size,
                           "bytes_tagged": size, "saving": 0, "tag_count_bytes": 0, "per_field": []}
    if not sz.flexible:
        out["applicable"] = False
        out["reason"] = (f"{spec.api_name} v{version} {spec.type} is not flexible "
                         f"(flexible versions: {spec.flexible_versions}): it has no tagged fields")
        return out
    accs: dict[str, _Acc] = {}
    already: set[str] = set()
    tag_count_delta = 0

    def visit(s: StructSpec, value: dict, path: str) -> None:
        nonlocal tag_count_delta
        targets, tagged_now, children, done = _plan(s, version, fields)
        for name in done:
            already.add(path + name)
        added = 0
        if targets:
            set_now = sum(1 for f in tagged_now if sz.written(f, value)) + len(value.get("_unknown_tags") or ())
            for f, dflt, tag in targets:
                p = path + f.name
                acc = accs.get(p)
                if acc is None:
                    acc = accs[p] = _Acc(p, f.name)
                v = value.get(f.name, dflt)
                acc.instances += 1
                acc.bytes_now += sz.field(f, v)
                if v == dflt:
                    acc.at_default += 1
                else:
                    acc.set += 1
                    acc.bytes_tagged += sz.tagged_field(f, v, tag)
                    added += 1
            if added:
                tag_count_delta += uvarint_size(set_now + added) - uvarint_size(set_now)
        for name, child_struct, is_array in children:
            child = value.get(name)
            if child is None:
                continue
            if not is_array:
                if isinstance(child, dict):
                    visit(child_struct, child, f"{path}{name}.")
            elif isinstance(child, list):
                sub = f"{path}{name}[]."
                for x in child:
                    if isinstance(x, dict):
                        visit(child_struct, x, sub)

    visit(spec.struct, body, "")
    per = [a.to_json() for a in accs.values()]
    saving = sum(a["saving"] for a in per) - tag_count_delta
    out.update(per_field=per, saving=saving, bytes_tagged=size - saving, tag_count_bytes=tag_count_delta)
    if not per:
        out["applicable"] = False
        out["reason"] = ("the fields are already tagged here" if already else
                         f"{spec.api_name} v{version} {spec.type} has none of the fields {', '.join(fields)}")
    return out


def what_if_totals(spec: MessageSpec, version: int, body: dict, fields: Iterable[str] = DEFAULT_FIELDS, *,
                   size: int | None = None) -> tuple[int, int, int] | None:
    """`what_if_tagged`'s (bytes_now, bytes_tagged, saving), or None where it says not applicable:
    the same sums without its per-field lists and reasons (the capture summary adds them up over
    every response)."""
    fields = tuple(fields)
    sz = Sizer(spec, version)
    if size is None:
        size = sz.struct(spec.struct, body)
    if not sz.flexible:
        return None
    found = False
    saving = 0

    def visit(s: StructSpec, value: dict) -> None:
        nonlocal found, saving
        targets, tagged_now, children, _done = _plan(s, version, fields)
        if targets:
            found = True
            added = 0
            set_now = sum(1 for f in tagged_now if sz.written(f, value)) + len(value.get("_unknown_tags") or ())
            for f, dflt, tag in targets:
                v = value.get(f.name, dflt)
                saving += sz.field(f, v)
                if v != dflt:
                    saving -= sz.tagged_field(f, v, tag)
                    added += 1
            if added:
                saving -= uvarint_size(set_now + added) - uvarint_size(set_now)
        for name, child_struct, is_array in children:
            child = value.get(name)
            if child is None:
                continue
            if not is_array:
                if isinstance(child, dict):
                    visit(child_struct, child)
            elif isinstance(child, list):
                for x in child:
                    if isinstance(x, dict):
                        visit(child_struct, x)

    visit(spec.struct, body)
    if not found:
        return None
    return size, size - saving, saving


def what_if_message(msg: Any, fields: Iterable[str] = DEFAULT_FIELDS) -> dict:
    """`what_if_tagged` for a decoded `Message` (size = header + body, without the size prefix)."""
    spec = registry().api(msg.api_key).spec(msg.kind)
    return what_if_tagged(spec, msg.api_version, msg.body, fields, size=msg.size)


def sum_what_if(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Totals over many `what_if_tagged` results (e.g. every message of a capture)."""
    total: dict[str, Any] = {"messages": 0, "applicable": 0, "bytes_now": 0, "bytes_tagged": 0, "saving": 0,
                             "per_field": {}}
    for r in results:
        total["messages"] += 1
        total["bytes_now"] += r["bytes_now"]
        total["bytes_tagged"] += r["bytes_tagged"]
        total["saving"] += r["saving"]
        if r["applicable"]:
            total["applicable"] += 1
        for p in r["per_field"]:
            t = total["per_field"].setdefault(p["field"], {"field": p["field"], "instances": 0, "at_default": 0,
                                                           "set": 0, "bytes_now": 0, "bytes_tagged": 0,
                                                           "saving": 0})
            for k in ("instances", "at_default", "set", "bytes_now", "bytes_tagged", "saving"):
                t[k] += p[k]
    total["per_field"] = list(total["per_field"].values())
    return total


# --------------------------------------------------------------------------- bytes of two versions

def bytes_diff(doc, v1: int, v2: int) -> dict[str, Any]:
    """Encode the same message at both versions; bytes of each part (size prefix, header, each
    top-level body field, the tag section, total). `doc` is a kwire_cli.inputs.messages.MessageDoc."""
    spec = doc.api.spec(doc.kind)
    per_version = []
    for v in (v1, v2):
        dropped: list[str] = []
        body = prune(spec.struct, doc.body, v, "", dropped)
        header = dict(doc.header or {})
        enc = type(doc)(doc.api, v, doc.kind, header, body, doc.where)
        whole = enc.encode(size_prefix=True)
        body_bytes = enc.encode(header=False)
        tree = decode_body(body_bytes, doc.api.key, v, doc.kind, records="hex").body
        parts = [("size prefix", 4), ("header", len(whole) - 4 - len(body_bytes))]
        parts += body_parts(spec, v, tree)
        per_version.append({"version": v, "flexible": spec.flexible(v), "total": len(whole), "parts": parts,
                            "dropped": dropped})
    names: list[str] = []
    for pv in per_version:
        for n, _ in pv["parts"]:
            if n not in names:
                names.append(n)
    rows = []
    for n in names:
        a = dict(per_version[0]["parts"]).get(n)
        b = dict(per_version[1]["parts"]).get(n)
        rows.append({"part": n, "from": a, "to": b, "delta": (b or 0) - (a or 0)})
    t1, t2 = per_version[0]["total"], per_version[1]["total"]
    return {"api_key": doc.api.key, "api_name": doc.api.name, "kind": doc.kind, "from_version": v1,
            "to_version": v2, "parts": rows, "total": {"from": t1, "to": t2, "delta": t2 - t1},
            "dropped": {"from": per_version[0]["dropped"], "to": per_version[1]["dropped"]}}
