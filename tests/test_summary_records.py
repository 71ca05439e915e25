"""The summary's record counts include legacy messages (issue 13.7).

kafka-go's fixtures (fixtures/vectors/kafka-go/*.hex: whole Fetch v10 responses of magic 1
messages, record batches, compressed and not, in the order their names tell) hold the messages
kafka-go's TestMessageFixtures asserts: that many records, whatever their form. An uncompressed
magic 0/1 message is one record; a compressed wrapper holds its inner messages.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capture_util import Conversation, write_pcap
from kwire_cli.codec.message import decode_response, encode_request
from kwire_cli.records.stats import batch_stats, new_batch_stats, records_in

ROOT = Path(__file__).resolve().parents[1]
VEC = ROOT / "fixtures" / "vectors"
MANIFEST = json.loads((VEC / "manifest.json").read_text())["files"]
KAFKA_GO = sorted(n for n in MANIFEST if n.startswith("kafka-go/"))


def _data(name: str) -> bytes:
    return bytes.fromhex((VEC / name).read_text().split()[0])


@pytest.mark.parametrize("name", KAFKA_GO)
def test_kafka_go_fetch_responses_count_every_message_as_a_record(name):
    want = len(MANIFEST[name]["asserts"]["messages"])
    body = decode_response(_data(name), "Fetch", 10).body
    stats = batch_stats(body, new_batch_stats())
    assert stats["records"] == want
    batches = body["Responses"][0]["Partitions"][0]["Records"]["batches"]
    assert stats["batches"] == len(batches)
    assert sum(records_in(b) for b in batches) == want


def test_v1_v1_is_four_records_not_zero():
    stats = batch_stats(decode_response(_data("kafka-go/v1-v1.fetch-v10-response.hex"), "Fetch", 10).body,
                        new_batch_stats())
    assert (stats["batches"], stats["records"]) == (4, 4)


def test_wrappers_hold_their_inner_messages():
    legacy = {"Magic": 1, "Compression": "none", "Key": None, "Value": None}
    wrapper = {"Magic": 1, "Compression": "gzip", "Messages": [dict(legacy), dict(legacy), dict(legacy)]}
    nested = {"Magic": 0, "Compression": "snappy", "Messages": [wrapper, dict(legacy)]}
    assert records_in(legacy) == 1 and records_in(wrapper) == 3 and records_in(nested) == 4
    assert records_in({"Magic": 1, "Compression": "gzip", "error": "gzip: bad data"}) == 0
    assert records_in({"Magic": 2, "Records": [{}, {}]}) == 2
    assert records_in({"Magic": 2, "error": "batch 0 ..."}) == 0


def test_pcap_summary_counts_legacy_messages(tmp_path):
    """kwire pcap --summary over a capture of a consumer's Fetch and kafka-go's v1-v1c-... answer."""
    name = "kafka-go/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.fetch-v10-response.hex"
    req = encode_request("Fetch", 10, {"CorrelationId": 10, "ClientId": "consumer-1"},
                         {"ReplicaId": -1, "MaxWaitMs": 500, "MinBytes": 1, "MaxBytes": 1000000,
                          "IsolationLevel": 0, "SessionId": 0, "SessionEpoch": -1, "Topics": [],
                          "ForgottenTopicsData": []})
    c = Conversation()
    segs = c.handshake() + c.send(0, req) + c.send(1, _data(name), mss=500)
    path = tmp_path / "legacy.pcap"
    path.write_bytes(write_pcap(segs))
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(path), "--summary", "--format", "json"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=dict(os.environ, KWIRE_NO_PROGRESS="1"))
    assert r.returncode == 0, r.stderr
    rb = json.loads(r.stdout)["record_batches"]
    assert rb["records"] == len(MANIFEST[name]["asserts"]["messages"])
    assert rb["batches"] == 15 and rb["batch_errors"] == 0  # 6 top-level legacy messages, 9 batches
    table = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(path), "--summary"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT,
                           env=dict(os.environ, KWIRE_NO_PROGRESS="1", COLUMNS="200")).stdout
    assert f"holding {rb['records']} records" in table
