"""kwire_cli.records on real bytes: what real clients sent to, and fetched from, a real broker.

fixtures/captures/*.pcap and fixtures/pairs/ were recorded by scripts/record_fixtures.py with
kafka-python, confluent-kafka (librdkafka) and kafkajs against tansu; fixtures/captures/manifest.json
says what each client sent ("sent") and what each consumer got back ("consumed"). These tests decode
the Produce request records and the Fetch response records and assert exactly those records,
headers (duplicates, order, null values) and tombstones, batch by batch with valid CRCs.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from kwire_cli.records import decode_records, encode_records, to_bytes

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "fixtures" / "captures"
PAIRS = ROOT / "fixtures" / "pairs"
MANIFEST = CAPTURES / "manifest.json"

if not MANIFEST.exists():
    pytest.skip("fixtures/captures/manifest.json not recorded yet", allow_module_level=True)

codec = pytest.importorskip("kwire_cli.codec")
MAN = json.loads(MANIFEST.read_text())
CLIENTS = sorted({c["client"] for c in MAN["captures"].values() if "client" in c})


def _b(s):
    return None if s is None else s.encode()


def _sent_tuple(s):
    return (_b(s["key"]), _b(s["value"]), s["timestamp"], [(k, _b(v)) for k, v in s["headers"]])


def _rec_tuple(r):
    return (to_bytes(r["Key"], "Key"), to_bytes(r["Value"], "Value"), r["Timestamp"],
            [(h["Key"], to_bytes(h["Value"], "Header")) for h in r["Headers"]])


def _capture(client, scenario):
    entry = MAN["captures"].get(f"{client}-{scenario}.pcap")
    path = CAPTURES / f"{client}-{scenario}.pcap"
    if entry is None or not path.exists():
        pytest.skip(f"no {scenario} capture for {client}")
    return entry, path


def _frames(path):
    capture = pytest.importorskip("kwire_cli.capture")
    return [f for f in capture.iter_capture(str(path)) if isinstance(f, capture.KafkaFrame)]


def _produce_records(requests):
    """(topic, partition) -> [(batch, record)] from decoded Produce requests, plus raw records."""
    out = collections.defaultdict(list)
    raw = []
    for data in requests:
        msg = codec.decode_request(data, size_prefixed=False)
        hexmsg = codec.decode_request(data, size_prefixed=False, records="hex")
        assert msg.api_key == 0
        for t, ht in zip(msg.body["TopicData"], hexmsg.body["TopicData"], strict=False):
            for p, hp in zip(t["PartitionData"], ht["PartitionData"], strict=False):
                records = p["Records"]
                raw.append((bytes.fromhex(hp["Records"]), records))
                assert records["partial_trailing_batch"] is None
                for batch in records["batches"]:
                    assert "error" not in batch, batch["error"]
                    assert batch["CrcValid"] is True and batch["Crc"] == batch["CrcComputed"]
                    assert batch["RecordCount"] == len(batch["Records"])
                    for r in batch["Records"]:
                        out[(t["Name"], p["Index"])].append((batch, r))
    return out, raw


def _check_reencode(raw):
    for data, decoded in raw:
        assert decode_records(data) == decoded
        again = encode_records(decoded)
        if all(b["Compression"] == "none" for b in decoded["batches"]):
            assert again == data  # byte-exact
        else:
            assert [[_rec_tuple(r) for r in b["Records"]] for b in decode_records(again)["batches"]] == \
                [[_rec_tuple(r) for r in b["Records"]] for b in decoded["batches"]]


def _check_against_sent(entry, got):
    sent = collections.defaultdict(list)
    for s in entry["sent"]:
        sent[(s["topic"], s["partition"])].append(s)
    assert sorted(got) == sorted(sent)
    for tp, items in sent.items():
        assert [_rec_tuple(r) for _, r in got[tp]] == [_sent_tuple(s) for s in items], tp
        # the codec each record travelled with: the one asked for, except that clients send a batch
        # uncompressed when compression does not make it smaller (single tiny records)
        for (batch, _), s in zip(got[tp], items, strict=False):
            if batch["RecordCount"] > 1:
                assert batch["Compression"] == s["compression"], (tp, batch["Compression"])
            else:
                assert batch["Compression"] in (s["compression"], "none")


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_requests_in_capture_hold_exactly_what_the_client_sent(client):
    entry, path = _capture(client, "produce")
    frames = [f.data for f in _frames(path) if f.kind == "request" and f.api_key == 0]
    assert frames, "no Produce request in the capture"
    got, raw = _produce_records(frames)
    _check_against_sent(entry, got)
    _check_reencode(raw)
    # every codec the client was asked to use shows up, with the framing that client writes
    seen = {(b["Compression"], b.get("CompressionFraming")) for items in got.values() for b, _ in items}
    asked = {s["compression"] for s in entry["sent"]}
    assert asked <= {c for c, _ in seen}
    if "snappy" in asked:
        framing = {f for c, f in seen if c == "snappy"}
        # librdkafka writes raw snappy; kafka-python (like the Java client) the xerial framing
        assert framing == ({"raw"} if client == "confluent-kafka" else {"xerial"})


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_request_pairs(client):
    entry = MAN["captures"].get(f"{client}-produce.pcap")
    files = sorted((PAIRS / client).glob("*.json")) if (PAIRS / client).exists() else []
    pairs = [json.loads(f.read_text()) for f in files]
    pairs = [p for p in pairs if p["api_key"] == 0 and p.get("scenario") == "produce"]
    if entry is None or not pairs:
        pytest.skip(f"no Produce pairs for {client}")
    # pairs carry the size-prefixed frame
    got, raw = _produce_records([bytes.fromhex(p["request"])[4:] for p in pairs])
    _check_reencode(raw)
    sent = collections.defaultdict(list)
    for s in entry["sent"]:
        sent[(s["topic"], s["partition"])].append(_sent_tuple(s))
    for tp, items in got.items():
        recs = [_rec_tuple(r) for _, r in items]
        assert all(r in sent[tp] for r in recs), tp
    total_pairs = sum(len(v) for v in got.values())
    if total_pairs == len(entry["sent"]):  # a client whose every Produce was kept as a pair
        _check_against_sent(entry, got)


@pytest.mark.parametrize("client", CLIENTS)
def test_fetch_responses_in_capture_hold_what_the_consumer_got(client):
    entry, path = _capture(client, "consume")
    consumed = entry.get("consumed") or []
    if not consumed:
        pytest.skip(f"{client}: the manifest lists nothing consumed")
    fetched = {}
    frames = _frames(path)
    names = {}  # Fetch v13+ names topics by id: the Metadata answers in the same capture map them
    for f in frames:
        if f.kind == "response" and f.api_key == 3:
            msg = codec.decode_response(f.data, api_key=3, api_version=f.api_version, size_prefixed=False)
            for t in msg.body["Topics"]:
                if t.get("TopicId") is not None:
                    names[t["TopicId"]] = t["Name"]
    for f in frames:
        if f.kind != "response" or f.api_key != 1:
            continue
        msg = codec.decode_response(f.data, api_key=1, api_version=f.api_version, size_prefixed=False)
        for t in msg.body["Responses"]:
            topic = t["Topic"] if "Topic" in t else names.get(t["TopicId"], t["TopicId"])
            for p in t["Partitions"]:
                records = p["Records"]
                if not records:
                    continue
                for batch in records["batches"]:
                    assert "error" not in batch, batch["error"]
                    assert batch["CrcValid"] is True
                    for r in batch["Records"]:
                        fetched[(topic, p["PartitionIndex"], r["Offset"])] = _rec_tuple(r)
    assert fetched, "no records in any Fetch response"
    for c in consumed:
        assert fetched[(c["topic"], c["partition"], c["offset"])] == _sent_tuple(c), c
