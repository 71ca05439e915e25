"""Schemas as trees and JSON: what `kwire describe` and `kwire list` show."""
from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from rich.tree import Tree

from kwire_cli.render.safe import escape, quoted
from kwire_cli.spec.model import FieldSpec, MessageSpec, StructSpec


def _default_json(f: FieldSpec) -> Any:
    if f.type.kind == "struct":
        return None if f.default is None else {}
    return f.default


def field_json(f: FieldSpec, version: int | None, flexible: bool | None) -> dict[str, Any]:
    from kwire_cli.spec.diff import field_wire_type
    if version is None:
        out = {"name": f.name, "type": str(f.type), "versions": str(f.versions),
               "nullable_versions": None if f.nullable_versions.empty else str(f.nullable_versions),
               "tag": f.tag, "tagged_versions": None if f.tagged_versions.empty else str(f.tagged_versions),
               "default": _default_json(f)}
    else:
        out = {"name": f.name, "type": str(f.type), "wire_type": field_wire_type(f, version, bool(flexible)),
               "nullable": f.nullable_in(version), "tag": f.tag if f.tagged_in(version) else None,
               "default": _default_json(f)}
    if f.about:
        out["about"] = f.about
    if f.struct is not None:
        out["fields"] = struct_json(f.struct, version, flexible)
    return out


def struct_json(s: StructSpec, version: int | None, flexible: bool | None) -> list[dict[str, Any]]:
    return [field_json(f, version, flexible) for f in s.fields if version is None or version in f.versions]


def message_json(api, spec: MessageSpec, kind: str, version: int | None) -> dict[str, Any]:
    from kwire_cli.codec.headers import request_header_version, response_header_version
    out: dict[str, Any] = {"spec": spec.name}
    if version is not None:
        hv = request_header_version if kind == "request" else response_header_version
        out["flexible"] = spec.flexible(version)
        out["header_version"] = hv(api, version)
        out["note"] = spec.version_note(version)
    else:
        out["valid_versions"] = str(spec.valid_versions)
        out["flexible_versions"] = str(spec.flexible_versions)
        out["notes"] = spec.lifecycle()
    out["fields"] = struct_json(spec.struct, version, spec.flexible(version) if version is not None else None)
    return out


def _default_text(f: FieldSpec) -> str:
    d = f.default
    if f.type.kind == "struct":
        return "null" if d is None else ""
    if f.default_text is None and d in (0, False, "", [], 0.0) and f.type.kind != "uuid":
        return ""  # the type's zero value: not worth a column
    return quoted(d) if isinstance(d, str) else escape(json.dumps(d, ensure_ascii=False))


def field_label(f: FieldSpec, version: int | None, flexible: bool | None) -> Text:
    from kwire_cli.spec.diff import field_wire_type
    t = Text(escape(f.name), style="bold")  # names, types and defaults from --specs DIR are input too
    if version is not None:
        t.append("  " + escape(field_wire_type(f, version, bool(flexible))), style="cyan")
        if f.nullable_in(version):
            t.append("  nullable", style="yellow")
        if f.tagged_in(version):
            t.append(f"  tag {f.tag}", style="magenta")
    else:
        t.append("  " + escape(f.type), style="cyan")
        t.append(f"  v{f.versions}", style="dim")
        if not f.nullable_versions.empty:
            t.append(f"  nullable v{f.nullable_versions}", style="yellow")
        if f.tag is not None:
            t.append(f"  tag {f.tag} v{f.tagged_versions}", style="magenta")
    d = _default_text(f)
    if d:
        t.append(f"  default {d}", style="green")
    if f.about:  # only specs that carry descriptions (--specs at a Kafka checkout): kwire's are facts only
        t.append("  — " + escape(" ".join(f.about.split())), style="dim")
    return t


def add_fields(node: Tree, s: StructSpec, version: int | None, flexible: bool | None) -> None:
    for f in s.fields:
        if version is not None and version not in f.versions:
            continue
        child = node.add(field_label(f, version, flexible))
        if f.struct is not None:
            add_fields(child, f.struct, version, flexible)


def message_schema_tree(api, spec: MessageSpec, kind: str, version: int | None) -> Tree:
    from kwire_cli.codec.headers import request_header_version, response_header_version
    if version is not None:
        hv = (request_header_version if kind == "request" else response_header_version)(api, version)
        flex = spec.flexible(version)
        title = Text(escape(f"{spec.name} v{version}"), style="bold")
        title.append(f"  {'flexible' if flex else 'not flexible'}, header v{hv}", style="dim")
        note = spec.version_note(version)
        if note:
            title.append(f"  ({note})", style="yellow")
    else:
        flex = None
        title = Text(escape(spec.name), style="bold")
        title.append(f"  versions {spec.valid_versions}, flexible {spec.flexible_versions}", style="dim")
        if spec.lifecycle():
            title.append(escape(f"  ({'; '.join(spec.lifecycle())})"), style="yellow")
    root = Tree(title)
    add_fields(root, spec.struct, version, flex)
    if not spec.struct.fields or (version is not None and not any(version in f.versions for f in spec.fields)):
        root.add(Text("(no fields)", style="dim"))
    return root
