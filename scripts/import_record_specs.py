#!/usr/bin/env python3
"""Derive kwire's bundled record-specs/ from a folder of Kafka record specs.

The records Kafka keeps in its internal topics (__consumer_offsets, __transaction_state,
__share_group_state, __cluster_metadata) are defined in Kafka's own JSON format, one folder per
coordinator. Only the folders of internal topics are taken (FOLDERS: not raft/'s quorum-state
file or streams/' subscription userdata). As for the message specs (scripts/import_specs.py),
kwire keeps the protocol's facts only: names, types, version ranges, nullability, tags, defaults
and apiKeys, never comments or `about` sentences. The folder layout (group-coordinator/, metadata/, ...) is kept.

    python scripts/import_record_specs.py ../shared/kafka-record-specs record-specs/
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from import_specs import render

from kwire_cli.spec.jsonc import loads_jsonc

# the folders of Kafka's record specs that define records of internal topics
FOLDERS = ("group-coordinator", "transaction-coordinator", "share-coordinator", "metadata")


def main(argv: list[str]) -> int:
    src, dst = Path(argv[1]), Path(argv[2])
    n = 0
    for path in sorted(p for folder in FOLDERS for p in (src / folder).glob("*.json")):
        spec = loads_jsonc(path.read_text(encoding="utf-8"), source=str(path))
        text = render(spec)
        assert json.loads(text)  # what we write is plain JSON
        out = dst / path.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        n += 1
    print(f"wrote {n} record specs to {dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
