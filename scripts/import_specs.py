#!/usr/bin/env python3
"""Derive kwire's bundled specs/ from folders of Kafka message specs.

Kafka's message definitions carry comments and `about` sentences that are not ours to ship.
This script keeps the protocol's facts only: names, types, version ranges, nullability, tags,
defaults, map keys and entity types, in the same JSON format, laid out one field per line.

Given two folders (a newer release's first, an older one's second), it writes their union
(scripts/spec_union.py): every version either defines, the newer layout for the versions the
newer folder has, the older layout kept for the versions a release removed, and checks every
version of every spec against the folder it came from.

    python scripts/import_specs.py ../shared/kafka-message-specs-4.3 ../shared/kafka-message-specs specs/
    python scripts/import_specs.py ../shared/kafka-message-specs specs/     # one folder as it is
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kwire_cli.spec.jsonc import loads_jsonc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spec_union import RENAMED, check_union, merge_spec, removed_in

# Top-level keys that are facts about the message.
TOP_KEYS = ("apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions",
            "deprecatedVersions", "latestVersionUnstable",
            # kwire's own facts about a union of releases (scripts/spec_union.py)
            "removedVersions", "removedIn", "unstableVersions", "formerNames")
FIELD_KEYS = ("name", "type", "versions", "nullableVersions", "flexibleVersions", "tag",
              "taggedVersions", "default", "ignorable", "mapKey", "entityType", "zeroCopy")


def _facts(field: dict) -> dict:
    out = {k: field[k] for k in FIELD_KEYS if k in field}
    if "fields" in field:
        out["fields"] = [_facts(f) for f in field["fields"]]
    return out


def _dump_fields(fields: list[dict], indent: int) -> str:
    pad = " " * indent
    lines = []
    for i, f in enumerate(fields):
        comma = "," if i < len(fields) - 1 else ""
        flat = {k: v for k, v in f.items() if k != "fields"}
        head = json.dumps(flat, ensure_ascii=False)
        if "fields" in f:
            head = head[:-1] + ', "fields": [\n'
            lines.append(pad + head + _dump_fields(f["fields"], indent + 2) + "\n" + pad + "]}" + comma)
        else:
            lines.append(pad + head + comma)
    return "\n".join(lines)


def render(spec: dict) -> str:
    parts = []
    for k in TOP_KEYS:
        if k in spec:
            parts.append(f'  "{k}": {json.dumps(spec[k])}')
    parts.append('  "fields": [\n' + _dump_fields([_facts(f) for f in spec.get("fields", [])], 4) + "\n  ]")
    if spec.get("commonStructs"):
        structs = []
        for i, s in enumerate(spec["commonStructs"]):
            comma = "," if i < len(spec["commonStructs"]) - 1 else ""
            flat = {k: s[k] for k in ("name", "versions") if k in s}
            structs.append("    " + json.dumps(flat)[:-1] + ', "fields": [\n'
                           + _dump_fields([_facts(f) for f in s["fields"]], 6) + "\n    ]}" + comma)
        parts.append('  "commonStructs": [\n' + "\n".join(structs) + "\n  ]")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def facts(spec: dict) -> dict:
    """A spec with its facts only (what render writes), as plain data."""
    out = {k: spec[k] for k in TOP_KEYS if k in spec}
    out["fields"] = [_facts(f) for f in spec.get("fields", [])]
    if spec.get("commonStructs"):
        out["commonStructs"] = [{**{k: s[k] for k in ("name", "versions") if k in s},
                                 "fields": [_facts(f) for f in s["fields"]]} for s in spec["commonStructs"]]
    return out


def _read(folder: Path) -> dict[str, tuple[dict, str]]:
    """Each spec of a folder by file stem: its facts and its text (comments and all)."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        text = path.read_text(encoding="utf-8")
        out[path.stem] = (facts(loads_jsonc(text, source=str(path))), text)
    return out


def union(newer: Path, older: Path) -> dict[str, dict]:
    """The union of two folders, by file stem, each spec checked against both."""
    new, old = _read(newer), _read(older)
    renamed = {RENAMED.get(stem, stem): stem for stem in old}
    out = {}
    for stem in sorted(set(new) | set(renamed)):
        n = new.get(stem)
        o = old.get(renamed[stem]) if stem in renamed else None
        merged = merge_spec(n[0] if n else None, o[0] if o else None, removed_in(n[1]) if n else None)
        if o is not None and o[0]["name"] != merged["name"]:
            merged["formerNames"] = [o[0]["name"]]
        merged = facts(merged)
        check_union(merged, n[0] if n else None, o[0] if o else None)
        out[stem] = merged
    return out


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    dst = Path(argv[-1])
    if len(argv) == 4:
        specs = union(Path(argv[1]), Path(argv[2]))
    else:
        specs = {stem: spec for stem, (spec, _) in _read(Path(argv[1])).items()}
    dst.mkdir(parents=True, exist_ok=True)
    for stem, spec in specs.items():
        text = render(spec)
        assert json.loads(text)  # what we write is plain JSON
        (dst / f"{stem}.json").write_text(text, encoding="utf-8")
    print(f"wrote {len(specs)} specs to {dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
