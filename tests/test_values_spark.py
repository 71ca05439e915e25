"""spark-decode with --schemas and --schema-registry: the schemas read once on the driver and
shipped to the tasks, the rows' keys and values the objects Confluent's serializers were given,
as kwire pcap shows them."""
from __future__ import annotations

import base64
import glob
import json
import os
import threading
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from cli_run import kwire
from registry_server import Registry

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "fixtures" / "values"
PCAP = str(VALUES / "values.pcap")


def rows_of(out: str) -> list[dict]:
    rows = []
    for part in glob.glob(os.path.join(out, "api_name=*", "part-*")):
        with open(part) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def record_values(rows: list[dict]) -> list:
    """(api, topic, value form) of every record in the rows' bodies, sorted."""
    out = []
    for row in rows:
        body = row.get("body") if isinstance(row.get("body"), dict) else json.loads(row.get("body") or "null")
        if not isinstance(body, dict):
            continue
        for t in body.get("TopicData") or body.get("Responses") or ():
            for p in t.get("PartitionData") or t.get("Partitions") or ():
                for b in (p.get("Records") or {}).get("batches") or ():
                    for r in b.get("Records") or ():
                        out.append(json.dumps([row.get("api_name") or "", t.get("Name") or t.get("Topic"),
                                               r.get("Key"), r.get("Value")], sort_keys=True))
    return sorted(out)


def test_spark_rows_hold_the_decoded_values_from_saved_answers_and_a_registry(tmp_path):
    pcap = kwire("pcap", PCAP, "--format", "jsonl", "--schemas", str(VALUES / "schemas"))
    want = record_values([json.loads(line) for line in pcap.out.splitlines()])
    assert len(want) == 24 and any('"avro"' in w for w in want)
    out = str(tmp_path / "dir")
    r = kwire("spark-decode", PCAP, "--out", out, "--format", "jsonl", "--summary-format", "none",
              "--schemas", str(VALUES / "schemas"))
    assert r.code == 0, r
    assert record_values(rows_of(out)) == want

    server = Registry("Basic " + base64.b64encode(b"kwire:s3cret").decode())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = str(tmp_path / "registry")
        r = kwire("spark-decode", PCAP, "--out", out, "--format", "jsonl", "--summary-format", "none",
                  "--schema-registry", server.url, env={"KWIRE_SCHEMA_REGISTRY_USER_INFO": "kwire:s3cret"})
        assert r.code == 0, r
        got = record_values(rows_of(out))
    finally:
        server.shutdown()
        server.server_close()
    # one listing on the driver, no lookup from a task
    assert [p.split("?")[0] for p in server.requests] == ["/schemas"]
    assert [g.replace("registry " + server.url, "X") for g in got] == \
        [w.replace("directory " + str(VALUES / "schemas"), "X") for w in want]
