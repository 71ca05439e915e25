"""Issue 14, item 4: --filter on values inside bodies (topic, partition, group, member, producer_id,
transactional_id, record key and header), checked against tshark's Kafka dissector on the real
captures it decodes whole (kafkajs speaks versions tshark 4.0 knows), and on frames built here;
unknown fields and API names are usage errors (exit 2)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from capture_util import Conversation, write_pcap
from cli_run import kwire
from kwire_cli.capture.filter import compile_filter
from kwire_cli.codec import encode_request, encode_response
from kwire_cli.errors import FilterError

ROOT = Path(__file__).resolve().parents[1]
CAPS = ROOT / "fixtures" / "captures"
TSHARK = shutil.which("tshark")


def kwire_frames(cap: Path, expr: str) -> list[int]:
    r = kwire("pcap", str(cap), "--filter", expr, "--format", "jsonl")
    assert r.code == 0, r
    return [json.loads(line)["frame"] for line in r.out.splitlines()]


def tshark_frames(cap: Path, display: str) -> list[int]:
    out = subprocess.run([TSHARK, "-r", str(cap), "-d", "tcp.port==9092,kafka", "-Y", display, "-T", "fields",
                          "-e", "frame.number"], capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


CROSS = [  # (kwire filter, tshark display filter)
    ("topic~gzip", 'kafka.topic_name contains "gzip"'),
    ("topic=kwire-produce-none", 'kafka.topic_name == "kwire-produce-none"'),
    ("partition=1", "kafka.partition_id == 1"),
    ("group=kwire-group", 'kafka.consumer_group == "kwire-group"'),
    ("member~kwire", 'kafka.member_id contains "kwire"'),
    ("key=k-1", 'kafka.message_key == "k-1"'),
    ("header=trace", 'kafka.header_key == "trace"'),
    ("header=t-0", 'kafka.header_value == "t-0"'),
    ("producer_id=-1", "kafka.producer_id == -1"),
]


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (scripts/setup.sh --test installs it)")
@pytest.mark.parametrize("cap", ["kafkajs-consume.pcap", "kafkajs-produce.pcap", "kafkajs-admin.pcap"])
@pytest.mark.parametrize("expr,display", CROSS)
def test_body_filters_pick_the_frames_tshark_picks(cap, expr, display):
    want = tshark_frames(CAPS / cap, display)
    assert kwire_frames(CAPS / cap, expr) == want


def test_the_cross_check_is_not_empty():
    """The comparison above means something: on kafkajs-consume every filter picks some frames."""
    got = {expr: kwire_frames(CAPS / "kafkajs-consume.pcap", expr) for expr, _ in CROSS}
    assert all(got.values()), got


def test_not_equal_and_ranges():
    cap = CAPS / "kafkajs-consume.pcap"
    every = kwire_frames(cap, "")
    with_topic = set(kwire_frames(cap, "topic"))
    gzip = set(kwire_frames(cap, "topic=kwire-produce-gzip"))
    assert set(kwire_frames(cap, "topic!=kwire-produce-gzip")) == set(every) - gzip
    assert gzip < with_topic < set(every)
    p01 = set(kwire_frames(cap, "partition=0-1"))
    assert p01 == set(kwire_frames(cap, "partition=0")) | set(kwire_frames(cap, "partition=1"))
    assert set(kwire_frames(cap, "partition>0")) == set(kwire_frames(cap, "partition>=1"))


def test_topic_ids_match_by_the_name_an_earlier_answer_gave_them():
    """kafka-python's Fetch v12 names its topics; librdkafka's Fetch (v13+) sends topic ids only: the
    filter matches those frames through the topic_names column."""
    cap = CAPS / "confluent-kafka-consume.pcap"
    r = kwire("pcap", str(cap), "--format", "jsonl", "--filter", "api=Fetch and topic=kwire-produce-gzip")
    rows = [json.loads(line) for line in r.out.splitlines()]
    assert rows and all(x["api_version"] >= 13 for x in rows)
    assert all("kwire-produce-gzip" in x["topic_names"].values() for x in rows)


def _one_connection(*frames: tuple[int, bytes]) -> bytes:
    c = Conversation()
    segs = c.handshake()
    for side, data in frames:
        segs += c.send(side, data)
    return write_pcap(segs)


def test_transactional_and_producer_ids(tmp_path):
    req = encode_request("InitProducerId", 4, {"CorrelationId": 1, "ClientId": "tx-client"},
                         {"TransactionalId": "tx-1", "TransactionTimeoutMs": 60000, "ProducerId": -1,
                          "ProducerEpoch": -1})
    resp = encode_response("InitProducerId", 4, {"CorrelationId": 1},
                           {"ThrottleTimeMs": 0, "ErrorCode": 0, "ProducerId": 4242, "ProducerEpoch": 0})
    p = tmp_path / "tx.pcap"
    p.write_bytes(_one_connection((0, req), (1, resp)))
    assert kwire_frames(p, "transactional_id=tx-1") == kwire_frames(p, "kind=request") != []
    assert kwire_frames(p, "transactional_id~tx") == kwire_frames(p, "kind=request")
    assert kwire_frames(p, "transactional_id=tx-2") == []
    assert kwire_frames(p, "producer_id=4242") == kwire_frames(p, "kind=response") != []
    assert kwire_frames(p, "producer_id=-1") == kwire_frames(p, "kind=request")


@pytest.mark.parametrize("expr,msg", [
    ("bogus=1", "filter: unknown field 'bogus' at position 0"),
    ("api=Nope", "filter: unknown API 'Nope' at position 0 (see `kwire list`; api~Nope matches a part of a name)"),
    ("partition~1", "filter: partition takes =, !=, <, >, <=, >= or a range a-b, not ~ (position 0)"),
    ("producer_id=abc", "filter: producer_id takes a number, got 'abc' (position 0)"),
    ("topic=a and (", "filter: expression ends too early"),
])
def test_filter_errors_are_usage_errors(expr, msg):
    with pytest.raises(FilterError):
        compile_filter(expr)
    r = kwire("pcap", str(CAPS / "kafkajs-produce.pcap"), "--filter", expr)
    assert (r.code, r.out) == (2, "")
    assert r.err.startswith(f"kwire: error: {msg}") and len(r.err.splitlines()) == 1


def test_api_names_are_read_as_kwire_list_names_them():
    cap = CAPS / "kafkajs-produce.pcap"
    assert kwire_frames(cap, "api=metadata") == kwire_frames(cap, "api=MetadataRequest") == \
        kwire_frames(cap, "api=3") != []
