"""kwire proxy --schemas: the values Confluent's serializers wrote (fixtures/values/), produced again
through the proxy to a real broker (tansu), come out of its rows decoded."""
from __future__ import annotations

import json
from pathlib import Path

from test_proxy import Running
from test_values_cli import MANIFEST, SCHEMAS, in_sent_order, record_lines

ROOT = Path(__file__).resolve().parents[1]


def raw(form):
    return None if form is None else bytes.fromhex(form["hex"]) if "hex" in form else form["text"].encode()


def test_proxy_rows_show_the_values_decoded(tansu_port, tmp_path):
    from kafka import KafkaProducer

    produced = in_sent_order(record_lines(), "Produce")  # the recorded bytes, as kwire pcap reads them
    px = Running(tansu_port, tmp_path, "--schemas", SCHEMAS)
    try:
        p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{px.port}", client_id="kwire-values-proxy", acks=1)
        for line in produced:
            headers = [(h["key"], raw(h["value"])) for h in line["headers"]]
            p.send("proxy-" + line["topic"], key=raw(line["key"]), value=raw(line["value"]), headers=headers)
            p.flush()
        p.close()
    finally:
        rows, _summary = px.stop()
    values = [r["Value"] for row in rows if row["api_name"] == "Produce" and row["kind"] == "request"
              for t in row["body"]["TopicData"] for pd in t["PartitionData"] for b in pd["Records"]["batches"]
              for r in b["Records"]]
    assert len(values) == len(MANIFEST["records"])
    for record, value in zip(MANIFEST["records"], values, strict=True):
        if record["named_by"] in ("prefix", "header"):
            assert value[{"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}[record["type"]]] == record["value"]
        elif record["named_by"] == "prefix-unsaved":
            assert value["note"].startswith("schema id 4 not found")
    assert json.dumps(values)  # JSON all through
