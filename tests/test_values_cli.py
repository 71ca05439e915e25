"""--schema-registry / --schemas / --key-format / --value-format in the commands' outputs, on the
values Confluent's serializers wrote (fixtures/values/): pcap's record lines and JSON, decode's
tree and JSON, dump-log."""
from __future__ import annotations

import json
from pathlib import Path

import dpkt
import pytest

from cli_run import kwire

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "fixtures" / "values"
SCHEMAS = str(VALUES / "schemas")
PCAP = str(VALUES / "values.pcap")
MANIFEST = json.loads((VALUES / "manifest.json").read_text())
FORMAT_KEY = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}


def check_record(record: dict, line: dict) -> None:
    """One record line against what was sent."""
    value = line["value"]
    if record["named_by"] == "none":
        assert value == {"text": "plain text value"}
    elif record["named_by"] == "prefix-unsaved":
        assert value["hex"].startswith("0000000004") and value["note"].startswith("schema id 4 not found in ")
    else:
        assert value[FORMAT_KEY[record["type"]]] == record["value"]
        assert value["schema"]["type"] == record["type"]
        assert ("guid" in value["schema"]) and (("id" in value["schema"]) == (record["named_by"] == "prefix"))
    if record["key"] is not None:
        assert line["key"]["avro"] == record["key"] and line["key"]["schema"]["subject"] == "kwire-avro-key"


def record_lines(*extra: str) -> list[dict]:
    res = kwire("pcap", PCAP, "--format", "records", "--record-format", "json", *extra)
    assert res.code == 0, res
    return [json.loads(line) for line in res.out.splitlines()]


def in_sent_order(lines: list[dict], api: str) -> list[dict]:
    out = []
    for topic in dict.fromkeys(r["topic"] for r in MANIFEST["records"]):
        out += sorted((r for r in lines if r["api"] == api and r["topic"] == topic), key=lambda r: r["offset"])
    return out


def test_pcap_record_json_decodes_every_value_to_the_object_sent():
    lines = record_lines("--schemas", SCHEMAS)
    for api in ("Produce", "Fetch"):
        got = in_sent_order(lines, api)
        assert len(got) == 12
        for record, line in zip(MANIFEST["records"], got, strict=True):
            check_record(record, line)


def test_pcap_record_lines_print_the_objects_as_json_and_keep_sizes():
    res = kwire("pcap", PCAP, "--format", "records", "--schemas", SCHEMAS, "--record-format", r"%a %t %k %S %s\n")
    lines = [line for line in res.out.splitlines() if line.startswith("Produce kwire-protobuf")]
    assert lines[1] == ('Produce kwire-protobuf kwire.orders.Envelope#1 29 '
                        '{"source":"kwire-recorder","sequence":"1099511627777"}')


def test_without_schemas_values_are_bytes_as_before_and_forced_formats():
    plain = in_sent_order(record_lines(), "Produce")
    assert "hex" in plain[0]["value"] and "note" not in plain[0]["value"]
    forced = in_sent_order(record_lines("--value-format", "string", "--key-format", "hex"), "Produce")
    assert forced[4]["value"] == {"string": "plain text value", "bytes": 16}
    assert forced[4]["key"] == {"hex": b"plain".hex(), "bytes": 5}


def produce_frames() -> list[bytes]:
    """The Produce requests librdkafka sent, as whole Kafka frames (size prefix included)."""
    streams: dict[tuple, bytearray] = {}
    with open(PCAP, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = ip.data
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.data:
                streams.setdefault((tcp.sport, tcp.dport), bytearray()).extend(tcp.data)
    frames = []
    for data in streams.values():
        pos = 0
        while pos + 4 <= len(data):
            size = int.from_bytes(data[pos:pos + 4], "big")
            frame = bytes(data[pos:pos + 4 + size])
            # a request of api key 0 (Produce) with librdkafka's client id in its header
            if frame[4:6] == b"\0\0" and frame[12:26] == b"\0\x0ckwire-values":
                frames.append(frame)
            pos += 4 + size
    return frames


def test_decode_tree_and_json_show_the_objects():
    frames = produce_frames()
    assert frames
    avro = next(f for f in frames if b"kwire-avro" in f)
    res = kwire("decode", avro.hex(), "--schemas", SCHEMAS, "--format", "json")
    assert res.code == 0, res
    recs = res.json()["body"]["TopicData"][0]["PartitionData"][0]["Records"]["batches"][0]["Records"]
    sent = [r for r in MANIFEST["records"] if r["topic"] == "kwire-avro"]
    assert [r["Value"].get("avro") for r in recs] == [r["value"] if r["type"] and r["named_by"] != "prefix-unsaved"
                                                      else None for r in sent]
    tree = kwire("decode", avro.hex(), "--schemas", SCHEMAS)
    assert tree.code == 0 and "kwire-avro-value" in tree.out and "1234.50" in tree.out
    assert "(not decoded: schema id 4 not found in schema directory" in tree.out


def test_dump_log_of_a_segment_shows_the_objects(tmp_path):
    frames = produce_frames()
    proto = next(f for f in frames if b"kwire-protobuf" in f)
    res = kwire("decode", proto.hex(), "--records", "hex", "--format", "json")
    records = bytes.fromhex(res.json()["body"]["TopicData"][0]["PartitionData"][0]["Records"])
    part = tmp_path / "kwire-protobuf-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(records)
    out = kwire("dump-log", str(part / "00000000000000000000.log"), "--format", "jsonl", "--schemas", SCHEMAS)
    assert out.code == 0, out
    values = [r["Value"]["protobuf"] for line in out.out.splitlines()
              for r in (json.loads(line).get("batch") or {}).get("Records") or ()]
    assert values == [r["value"] for r in MANIFEST["records"] if r["topic"] == "kwire-protobuf"]


def test_both_sources_at_once_is_a_usage_error():
    res = kwire("pcap", PCAP, "--schemas", SCHEMAS, "--schema-registry", "http://127.0.0.1:1")
    assert res.code == 2 and "give one" in res.err


@pytest.mark.parametrize("url", ["ftp://x", "http://u:p@127.0.0.1:1"])
def test_bad_registry_urls_are_usage_errors(url):
    res = kwire("pcap", PCAP, "--schema-registry", url)
    assert res.code == 2 and "--schema-registry" in res.err and "p@" not in res.err


@pytest.mark.parametrize("expr,keys", [
    ("value.customer.name=c2", {"kwire-avro": 5, "kwire-protobuf": 4}),  # Avro A-2's frame, Protobuf P-2's
    ("key.id~B-", {"kwire-avro": 5}),
    ("value.lines.qty>5", {"kwire-protobuf": 4}),  # P-2's line of 7
    ("value.amount<0 and value.id~J", {"kwire-json": 3}),
    ("value.counts.n=1099511627776", {"kwire-avro": 5}),
    ("value.customer.tier>2", {}),
    ("value.status!=PLACED and api=Produce", {"kwire-json": 3}),  # no record of the frame is PLACED
])
def test_filters_on_decoded_fields_keep_the_frames_holding_such_a_record(expr, keys):
    lines = record_lines("--schemas", SCHEMAS, "--filter", f"api=Produce and ({expr})")
    got: dict[str, int] = {}
    for line in lines:
        got[line["topic"]] = got.get(line["topic"], 0) + 1
    assert got == keys


def test_decoded_fields_match_nothing_without_schemas():
    assert record_lines("--filter", "value.customer.name=c1") == []


def test_reasons_values_were_not_decoded_are_summed_up_on_stderr():
    res = kwire("pcap", PCAP, "--format", "records", "--schemas", SCHEMAS)
    assert f"kwire: note: 2 keys/values: schema id 4 not found in schema directory {SCHEMAS}" in res.err.splitlines()
