"""Issue 19, item 3: records of internal topics decoded in kwire pcap and spark-decode rows, as
kwire dump-log decodes them: a Produce to __consumer_offsets (peer vectors from Burrow's decoder
tests as key and value), a Fetch answer of __cluster_metadata named by its topic id through an
earlier Metadata answer, secrets of metadata records redacted unless --show-secrets, and
--raw-records keeping hex."""
from __future__ import annotations

import json
from pathlib import Path

from capture_util import Conversation, write_pcap
from cli_run import kwire
from kwire_cli.codec import encode_request, encode_response
from kwire_cli.codec.compiler import compile_plan
from kwire_cli.codec.internal import decode_internal
from kwire_cli.records import encode_records
from kwire_cli.spec.records import record_specs
from kwire_cli.wire import write_uvarint

ROOT = Path(__file__).resolve().parents[1]
VEC = ROOT / "fixtures" / "vectors" / "internal" / "burrow"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def vec(name: str) -> bytes:
    return bytes.fromhex((VEC / name).read_text().strip())


def scram_record_value() -> bytes:
    spec = record_specs().by_name["UserScramCredentialRecord"]
    v = spec.valid_versions.hi
    plan = compile_plan(spec, v)
    body = plan.default()
    body.update({"Name": "alice", "Mechanism": 1, "Salt": "0011", "StoredKey": "aabbcc", "ServerKey": "ddeeff",
                 "Iterations": 4096})
    out = bytearray()
    write_uvarint(out, 1)
    write_uvarint(out, spec.api_key)
    write_uvarint(out, v)
    plan.encode(body, out)
    return bytes(out)


def records(*kv: tuple[bytes | None, bytes | None]) -> bytes:
    return encode_records({"batches": [{"Records": [{"Key": None if k is None else {"hex": k.hex()},
                                                     "Value": None if v is None else {"hex": v.hex()}}
                                                    for k, v in kv]}]})


def capture(tmp_path) -> Path:
    c = Conversation()
    segs = c.handshake()
    offsets_key, offsets_value = vec("burrow-offset-commit-k1-v0.key.hex"), vec("burrow-offset-commit-k1-v0.value.hex")
    produce = encode_request("Produce", 9, {"CorrelationId": 1, "ClientId": "coordinator"},
                             {"TransactionalId": None, "Acks": -1, "TimeoutMs": 1000, "TopicData": [
                                 {"Name": "__consumer_offsets", "PartitionData": [
                                     {"Index": 12, "Records": records((offsets_key, offsets_value))}]}]})
    metadata_req = encode_request("Metadata", 12, {"CorrelationId": 2, "ClientId": "replica"},
                                  {"Topics": None, "AllowAutoTopicCreation": False,
                                   "IncludeTopicAuthorizedOperations": False})
    metadata = encode_response("Metadata", 12, {"CorrelationId": 2}, {
        "Brokers": [{"NodeId": 1, "Host": "h", "Port": 9092}], "ControllerId": 1,
        "Topics": [{"ErrorCode": 0, "Name": "__cluster_metadata", "TopicId": TOPIC_ID, "Partitions": []}]})
    fetch_req = encode_request("Fetch", 13, {"CorrelationId": 3, "ClientId": "replica"},
                               {"ReplicaId": 2, "MaxWaitMs": 500, "MinBytes": 1, "Topics": [
                                   {"TopicId": TOPIC_ID, "Partitions": [{"Partition": 0, "FetchOffset": 0,
                                                                         "PartitionMaxBytes": 1 << 20}]}]})
    fetch = encode_response("Fetch", 13, {"CorrelationId": 3}, {"Responses": [
        {"TopicId": TOPIC_ID, "Partitions": [{"PartitionIndex": 0, "HighWatermark": 1,
                                              "Records": records((None, scram_record_value()))}]}]})
    for side, data in ((0, produce), (0, metadata_req), (1, metadata), (0, fetch_req), (1, fetch)):
        segs += c.send(side, data)
    p = tmp_path / "internal.pcap"
    p.write_bytes(write_pcap(segs))
    return p


def rows(path: Path, *args: str) -> list[dict]:
    r = kwire("pcap", str(path), "--format", "jsonl", *args)
    assert r.code == 0, r
    return [json.loads(x) for x in r.out.splitlines()]


def first_record(row: dict) -> dict:
    body = row["body"]
    parts = body["TopicData"][0]["PartitionData"] if "TopicData" in body else body["Responses"][0]["Partitions"]
    return parts[0]["Records"]["batches"][0]["Records"][0]


def test_a_produce_to_consumer_offsets_carries_its_offset_commit_decoded(tmp_path):
    (produce,) = [r for r in rows(capture(tmp_path)) if r["api_name"] == "Produce"]
    rec = first_record(produce)
    want = decode_internal("__consumer_offsets", vec("burrow-offset-commit-k1-v0.key.hex"),
                           vec("burrow-offset-commit-k1-v0.value.hex"))
    assert rec["Internal"] == want
    assert rec["Internal"]["key"]["schema"] == "OffsetCommitKey" and "error" not in rec["Internal"]


def test_a_fetch_of_cluster_metadata_by_topic_id_is_decoded_and_its_secrets_hidden(tmp_path):
    path = capture(tmp_path)
    (fetch,) = [r for r in rows(path) if r["api_name"] == "Fetch" and r["kind"] == "response"]
    assert fetch["topic_names"] == {TOPIC_ID: "__cluster_metadata"}
    rec = first_record(fetch)
    assert rec["Internal"]["schema"] == "UserScramCredentialRecord"
    data = rec["Internal"]["data"]
    assert data["Name"] == "alice" and data["Iterations"] == 4096
    assert all(data[k]["redacted"] for k in ("Salt", "StoredKey", "ServerKey"))
    assert rec["Value"]["redacted"]  # the raw record bytes hold the same secrets
    out = kwire("pcap", str(path), "--format", "jsonl").out
    assert "aabbcc" not in out and "ddeeff" not in out
    (shown,) = [r for r in rows(path, "--show-secrets") if r["api_name"] == "Fetch" and r["kind"] == "response"]
    assert first_record(shown)["Internal"]["data"]["StoredKey"] == "aabbcc"


def test_raw_records_keep_hex_and_other_topics_are_left_alone(tmp_path):
    path = capture(tmp_path)
    raw = rows(path, "--raw-records")
    produce = next(r for r in raw if r["api_name"] == "Produce")
    assert isinstance(produce["body"]["TopicData"][0]["PartitionData"][0]["Records"], str)
    assert "\"Internal\":" not in json.dumps(raw)
    # the kafkajs capture's topics are not internal: nothing added
    assert "\"Internal\":" not in kwire("pcap", str(ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap"),
                                   "--format", "jsonl").out


def test_record_specs_of_a_kafka_checkout_decode_the_same(tmp_path):
    ref = ROOT.parent / "shared" / "kafka-record-specs"
    if not ref.is_dir():
        import pytest
        pytest.skip("../shared/kafka-record-specs is not beside the checkout")
    path = capture(tmp_path)
    bundled = [first_record(r)["Internal"] for r in rows(path) if r["api_name"] in ("Produce", "Fetch")
               and r["kind"] == ("request" if r["api_name"] == "Produce" else "response")]
    r = kwire("--record-specs", str(ref), "pcap", str(path), "--format", "jsonl")
    assert r.code == 0, r
    theirs = [first_record(x)["Internal"] for x in map(json.loads, r.out.splitlines())
              if x["api_name"] in ("Produce", "Fetch") and x["kind"] == ("request" if x["api_name"] == "Produce"
                                                                        else "response")]
    assert theirs == bundled and len(theirs) == 2
    bad = kwire("--record-specs", str(tmp_path / "nope"), "pcap", str(path))
    assert bad.code == 2 and "--record-specs" in bad.err and "not a directory" in bad.err
