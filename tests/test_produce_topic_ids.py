"""Produce v13 (Kafka 4.1+) names topics by id, as Fetch does since v13: kwire pcap names those ids
from the Metadata answers earlier in the capture (the `topic_names` column, the records of
`--format records`, the filter's `topic`), as it names Fetch's."""
from __future__ import annotations

import json

from capture_util import Conversation, write_pcap
from cli_run import kwire
from kwire_cli.codec import encode_request, encode_response
from kwire_cli.records import encode_records

TOPIC_ID = "b3JkZXJzLXRvcGljLWlkMQ"  # 16 bytes as Kafka's Uuid text
UNKNOWN_ID = "dW5rbm93bi10b3BpYy1pZA"


def _capture(tmp_path):
    c = Conversation()
    segs = c.handshake()
    metadata_req = encode_request("Metadata", 13, {"CorrelationId": 1, "ClientId": "java-4.3"},
                                  {"Topics": [{"Name": "orders"}], "AllowAutoTopicCreation": False,
                                   "IncludeTopicAuthorizedOperations": False})
    metadata = encode_response("Metadata", 13, {"CorrelationId": 1}, {
        "Brokers": [{"NodeId": 1, "Host": "h", "Port": 9092}], "ControllerId": 1,
        "Topics": [{"ErrorCode": 0, "Name": "orders", "TopicId": TOPIC_ID, "Partitions": []}]})
    batch = encode_records({"batches": [{"Records": [{"Key": {"text": "k1"}, "Value": {"text": "v1"}}]}]})
    produce = encode_request("Produce", 13, {"CorrelationId": 2, "ClientId": "java-4.3"}, {
        "TransactionalId": None, "Acks": -1, "TimeoutMs": 30000, "TopicData": [
            {"TopicId": TOPIC_ID, "PartitionData": [{"Index": 0, "Records": batch}]},
            {"TopicId": UNKNOWN_ID, "PartitionData": [{"Index": 1, "Records": batch}]}]})
    answer = encode_response("Produce", 13, {"CorrelationId": 2}, {"Responses": [
        {"TopicId": TOPIC_ID, "PartitionResponses": [{"Index": 0, "ErrorCode": 0, "BaseOffset": 41}]},
        {"TopicId": UNKNOWN_ID, "PartitionResponses": [{"Index": 1, "ErrorCode": 100, "BaseOffset": -1}]}]})
    for side, data in ((0, metadata_req), (1, metadata), (0, produce), (1, answer)):
        segs += c.send(side, data)
    p = tmp_path / "produce-v13.pcap"
    p.write_bytes(write_pcap(segs))
    return p


def test_produce_v13_topic_ids_are_named_from_the_metadata_answer(tmp_path):
    r = kwire("pcap", str(_capture(tmp_path)), "--format", "jsonl")
    assert r.code == 0, r
    rows = [json.loads(x) for x in r.out.splitlines()]
    produce = [x for x in rows if x["api_name"] == "Produce"]
    assert [x["api_version"] for x in produce] == [13, 13]
    for x in produce:
        assert x["topic_names"] == {TOPIC_ID: "orders", UNKNOWN_ID: None}
    assert produce[0]["body"]["TopicData"][0]["TopicId"] == TOPIC_ID


def test_produce_v13_records_and_filters_say_the_topic_name(tmp_path):
    path = _capture(tmp_path)
    r = kwire("pcap", str(path), "--format", "records")
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert any("orders" in ln and "v1" in ln for ln in lines), r.out
    assert any(UNKNOWN_ID in ln for ln in lines)  # an id no answer named stays an id
    f = kwire("pcap", str(path), "--format", "jsonl", "--filter", "api=Produce and topic=orders")
    assert f.code == 0 and len(f.out.splitlines()) == 2
