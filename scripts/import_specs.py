#!/usr/bin/env python3
"""Derive kwire's bundled specs/ from a folder of Kafka message specs.

Kafka's message definitions carry comments and `about` sentences that are not ours to ship.
This script keeps the protocol's facts only: names, types, version ranges, nullability, tags,
defaults, map keys and entity types, in the same JSON format, laid out one field per line.

    python scripts/import_specs.py ../shared/kafka-message-specs specs/
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kwire_cli.spec.jsonc import loads_jsonc

# Top-level keys that are facts about the message.
TOP_KEYS = ("apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions",
            "deprecatedVersions", "latestVersionUnstable")
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


def main(argv: list[str]) -> int:
    src, dst = Path(argv[1]), Path(argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for path in sorted(src.glob("*.json")):
        spec = loads_jsonc(path.read_text(encoding="utf-8"), source=str(path))
        text = render(spec)
        assert json.loads(text)  # what we write is plain JSON
        (dst / path.name).write_text(text, encoding="utf-8")
        n += 1
    print(f"wrote {n} specs to {dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
