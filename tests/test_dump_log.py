"""`kwire dump-log`: segments built from the real record batches of fixtures/captures (as a broker
appends them: scripts/make_log_fixtures.py), cross-checked with kafka-python's independent reader;
indexes and their --verify; KRaft snapshots; internal topics' records; damaged tails; errors."""
import importlib.util
import json
import shutil
import struct

import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from cli_run import kwire
from conftest import FIXTURES, ROOT
from kwire_cli.codec.compiler import compile_plan
from kwire_cli.logs import iter_segment
from kwire_cli.records import encode_records
from kwire_cli.records.forms import raw_bytes
from kwire_cli.spec.records import record_specs
from kwire_cli.wire import write_uvarint

LOGS = FIXTURES / "logs"
_spec = importlib.util.spec_from_file_location("make_log_fixtures", ROOT / "scripts" / "make_log_fixtures.py")
make_log_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_log_fixtures)

CAPTURE_PARTITIONS = sorted(p.name for p in LOGS.iterdir() if p.name.startswith("kwire-produce-"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("logs")
    make_log_fixtures.main(["make_log_fixtures", str(out)])
    return out


def _jsonl(res):
    return [json.loads(line) for line in res.out.splitlines() if line.strip()]


def _batches(res):
    return [e for e in _jsonl(res) if e["type"] == "batch"]


def test_the_fixtures_are_what_the_script_builds_from_the_captures(built):
    ours = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(LOGS) for p in LOGS.rglob("*") if p.is_file())
    assert ours == committed and len(CAPTURE_PARTITIONS) == 11
    for rel in ours:
        assert (built / rel).read_bytes() == (LOGS / rel).read_bytes(), rel


@pytest.mark.parametrize("partition", CAPTURE_PARTITIONS)
def test_segment_from_a_capture_agrees_with_kafka_python(partition):
    log = LOGS / partition / ("0" * 20 + ".log")
    res = kwire("dump-log", str(log), "--format", "jsonl")
    assert res.code == 0 and res.err == ""
    ours = _batches(res)
    theirs = MemoryRecords(log.read_bytes())
    pos = 0
    for entry in ours:
        b = entry["batch"]
        kb = theirs.next_batch()
        assert kb is not None
        assert (b["Position"], b["BaseOffset"], b["Magic"], b["CrcValid"]) == (pos, kb.base_offset, kb.magic,
                                                                               kb.validate_crc())
        assert entry["topic"] == partition.rsplit("-", 1)[0] and entry["partition"] == int(partition.rsplit("-", 1)[1])
        krecs = list(kb)
        assert len(krecs) == len(b["Records"]) == b["RecordCount"]
        for r, k in zip(b["Records"], krecs):
            assert (r["Offset"], r["Timestamp"]) == (k.offset, k.timestamp)
            assert raw_bytes(r["Key"]) == k.key and raw_bytes(r["Value"]) == k.value
            assert [(h["Key"], raw_bytes(h["Value"])) for h in r["Headers"]] == list(k.headers)
            assert "Internal" not in r
        pos += entry["size"]
    assert theirs.next_batch() is None
    assert pos == log.stat().st_size
    summary = _jsonl(res)[-1]
    assert summary["type"] == "summary" and summary["batches"] == len(ours) and summary["damage"] == 0


@pytest.mark.parametrize("partition", CAPTURE_PARTITIONS)
def test_indexes_list_and_verify(partition):
    res = kwire("dump-log", str(LOGS / partition), "--verify", "--format", "jsonl")
    assert res.code == 0, res
    entries = [e for e in _jsonl(res) if e["type"] == "index-entry"]
    kinds = {e["kind"] for e in entries}
    assert kinds == {"offset-index", "time-index"}
    assert not any("problem" in e for e in entries)
    batches = _batches(res)
    by_pos = {b["batch"]["Position"]: b["batch"]["BaseOffset"] + b["batch"]["LastOffsetDelta"] for b in batches}
    assert {e["position"]: e["offset"] for e in entries if e["kind"] == "offset-index"} == by_pos


def test_verify_reports_index_entries_the_segment_contradicts(tmp_path):
    part = tmp_path / "orders-0"
    shutil.copytree(LOGS / "kwire-produce-gzip-0", part)
    index = part / ("0" * 20 + ".index")
    data = bytearray(index.read_bytes())
    struct.pack_into(">ii", data, 8, 5, 190)  # entry 1: position one byte off the batch boundary
    index.write_bytes(bytes(data))
    tindex = part / ("0" * 20 + ".timeindex")
    tindex.write_bytes(struct.pack(">qi", 1700000001003, 2))  # a timestamp no record has
    res = kwire("dump-log", str(part), "--verify")
    assert res.code == 1
    assert "MISMATCH position 190 is not a batch boundary of the segment" in res.out
    assert "MISMATCH the batch ending at offset 2 has largest timestamp 1700000001002, not 1700000001003" in res.out
    assert "index_problems 2" in res.out
    # without --verify the entries are listed and nothing is checked
    assert kwire("dump-log", str(part)).code == 0
    # an index without its segment cannot be verified
    (part / ("0" * 20 + ".log")).unlink()
    res = kwire("dump-log", str(index), "--verify")
    assert res.code == 1 and res.err.startswith("kwire: error: ") and "does not exist" in res.err
    assert res.err.count("\n") == 1


@pytest.mark.parametrize("cut", [5, 12, 100, 190])
def test_a_truncated_tail_is_one_damage_line(tmp_path, cut):
    part = tmp_path / "orders-0"
    part.mkdir()
    src = (LOGS / "kwire-produce-gzip-0" / ("0" * 20 + ".log")).read_bytes()
    log = part / ("0" * 20 + ".log")
    log.write_bytes(src[:191 + cut])  # the first batch whole, the second cut
    res = kwire("dump-log", str(log), "--format", "jsonl")
    assert res.code == 0
    lines = _jsonl(res)
    assert [e["type"] for e in lines] == ["batch", "damage", "summary"]
    assert lines[1]["position"] == 191
    assert ("too few for an entry header" if cut < 12 else "truncated entry at position 191") in lines[1]["reason"]
    assert res.err.startswith("kwire: warning: ") and res.err.count("\n") == 1 and "Traceback" not in res.err


def test_zero_padding_of_a_preallocated_segment_ends_the_read(tmp_path):
    log = tmp_path / ("0" * 20 + ".log")
    src = (LOGS / "kwire-produce-none-1" / ("0" * 20 + ".log")).read_bytes()
    log.write_bytes(src + bytes(4096))
    res = kwire("dump-log", str(log), "--format", "jsonl")
    lines = _jsonl(res)
    assert lines[-2]["type"] == "damage" and "zero padding" in lines[-2]["reason"]
    assert lines[-2]["size"] == 4096
    assert sum(e["type"] == "batch" for e in lines) == 3


def test_a_corrupt_batch_is_shown_and_reading_goes_on(tmp_path):
    log = tmp_path / ("0" * 20 + ".log")
    src = bytearray((LOGS / "kwire-produce-gzip-0" / ("0" * 20 + ".log")).read_bytes())
    src[100] ^= 0xFF  # inside the first batch's gzip payload
    log.write_bytes(bytes(src))
    res = kwire("dump-log", str(log), "--format", "jsonl")
    batches = _batches(res)
    assert len(batches) == 3 and batches[0]["batch"]["CrcValid"] is False
    assert all(b["batch"]["CrcValid"] for b in batches[1:])


def test_legacy_message_sets_from_kafka_python(tmp_path):
    data = bytearray()
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        for i in range(3):
            builder.append(i, timestamp=1700000000000 + i if magic else None, key=b"k%d" % i, value=b"v%d" % i)
        data += builder.build()
    log = tmp_path / ("0" * 20 + ".log")
    log.write_bytes(bytes(data))
    res = kwire("dump-log", str(log), "--format", "jsonl")
    entries = _batches(res)
    assert [(e["batch"]["Magic"], e["batch"]["Offset"]) for e in entries] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [raw_bytes(e["batch"]["Value"]) for e in entries] == [b"v0", b"v1", b"v2"] * 2
    assert entries[4]["batch"]["Timestamp"] == 1700000000001
    theirs = MemoryRecords(bytes(data))
    pos = []
    while (b := theirs.next_batch()) is not None:
        pos.append(b)
    assert len(pos) == len(entries)


# ------------------------------------------------------------------------------------ internal topics
def test_consumer_offsets_records_are_decoded_with_their_vectors_values():
    res = kwire("dump-log", str(LOGS / "__consumer_offsets-12"), "--format", "jsonl")
    assert res.code == 0
    recs = [r for b in _batches(res) for r in b["batch"]["Records"]]
    manifest = json.loads((FIXTURES / "vectors" / "internal" / "manifest.json").read_text())
    vectors = [v for v in manifest["vectors"] if v["topic"] == "__consumer_offsets" and v["valid"]
               and v["key_form"] == v["value_form"] == "prefixed"]
    assert len(recs) == len(vectors) + 1
    for r, v in zip(recs, vectors):
        internal = r["Internal"]
        assert "error" not in internal, (v["id"], internal["error"])
        assert internal["key"]["schema"] == v["record"]["key_schema"]
        assert internal["value"]["schema"] == v["record"]["value_schema"]
        for k, want in v["asserts"].get("key", {}).items():
            assert internal["key"]["data"][k] == want
    tomb = recs[-1]["Internal"]
    assert tomb["tombstone"] is True and tomb["value"] is None
    # embedded consumer-protocol bytes of classic groups
    assert any(e["schema"] == "ConsumerProtocolAssignment" for r in recs for e in r["Internal"].get("embedded", []))
    # --record-type keeps only those records
    res = kwire("dump-log", str(LOGS / "__consumer_offsets-12"), "--format", "jsonl", "--record-type", "GroupMetadata")
    kept = [r for b in _batches(res) for r in b["batch"]["Records"]]
    assert kept and all(r["Internal"]["key"]["schema"] == "GroupMetadataKey" for r in kept)


def test_cluster_metadata_log_and_snapshot():
    res = kwire("dump-log", str(LOGS / "__cluster_metadata-0"), "--verify", "--format", "json")
    assert res.code == 0, res
    doc = res.json()
    batches = [e for e in doc["entries"] if e["type"] == "batch"]
    names = [r["Internal"].get("schema") for b in batches for r in b["batch"]["Records"]]
    assert names[:4] == ["BeginTransactionRecord", "FeatureLevelRecord", "ZkMigrationStateRecord",
                         "EndTransactionRecord"]
    assert "LeaderChangeMessage" in names
    snap = [b for b in batches if b["kind"] == "snapshot"]
    assert [r["Internal"]["schema"] for b in snap for r in b["batch"]["Records"]] == [
        "SnapshotHeaderRecord", "TopicRecord", "PartitionRecord", "SnapshotFooterRecord"]
    assert doc["summary"]["snapshot_problems"] == 0 and doc["summary"]["damage"] == 0


def test_a_snapshot_without_its_footer_fails_verify(tmp_path):
    src = next((LOGS / "__cluster_metadata-0").glob("*.checkpoint"))
    data = src.read_bytes()
    entries = [e for e in iter_segment(open(src, "rb"))]
    cut = tmp_path / src.name
    cut.write_bytes(data[:entries[-1].position])
    res = kwire("dump-log", str(cut), "--verify")
    assert res.code == 1 and "ends with a data batch, not a SnapshotFooterRecord" in res.out
    assert kwire("dump-log", str(cut)).code == 0


def test_topic_comes_from_the_directory_or_topic_option(tmp_path):
    log = tmp_path / ("0" * 20 + ".log")
    shutil.copy(LOGS / "__consumer_offsets-12" / ("0" * 20 + ".log"), log)
    plain = _batches(kwire("dump-log", str(log), "--format", "jsonl"))
    assert plain[0]["topic"] is None and "Internal" not in plain[0]["batch"]["Records"][0]
    named = _batches(kwire("dump-log", str(log), "--format", "jsonl", "--topic", "__consumer_offsets"))
    assert named[0]["batch"]["Records"][0]["Internal"]["key"]["schema"] == "OffsetCommitKey"


def _metadata_value(name, value):
    spec = record_specs().by_name[name]
    plan = compile_plan(spec, spec.valid_versions.hi)
    full = plan.default()
    full.update(value)
    out = bytearray()
    write_uvarint(out, 1)
    write_uvarint(out, spec.api_key)
    write_uvarint(out, spec.valid_versions.hi)
    plan.encode(full, out)
    return {"hex": bytes(out).hex()}


def test_metadata_secrets_are_redacted_unless_shown(tmp_path):
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    recs = [{"Key": None, "Value": _metadata_value("UserScramCredentialRecord", {
                "Name": "alice", "Mechanism": 1, "Salt": "0011", "StoredKey": "aabbcc", "ServerKey": "ddeeff",
                "Iterations": 4096})},
            {"Key": None, "Value": _metadata_value("ConfigRecord", {
                "ResourceType": 4, "ResourceName": "0", "Name": "listener.name.sasl.ssl.keystore.password",
                "Value": "hunter2"})}]
    (part / ("0" * 20 + ".log")).write_bytes(encode_records({"batches": [{"Records": recs}]}))
    res = kwire("dump-log", str(part), "--format", "jsonl")
    assert "hunter2" not in res.out and "aabbcc" not in res.out
    data = [r["Internal"]["data"] for r in _batches(res)[0]["batch"]["Records"]]
    assert data[0]["StoredKey"] == {"redacted": "scram-stored-key", "bytes": 3}
    assert data[1]["Value"] == {"redacted": "sensitive-config", "bytes": 7}
    shown = kwire("dump-log", str(part), "--format", "jsonl", "--show-secrets")
    assert "hunter2" in shown.out and "aabbcc" in shown.out
    # and in the table
    table = kwire("dump-log", str(part))
    assert "hunter2" not in table.out and "UserScramCredentialRecord v0" in table.out


# --------------------------------------------------------------------------------------- the command
def test_offsets_filter():
    res = kwire("dump-log", str(LOGS / "kwire-produce-none-0" / ("0" * 20 + ".log")), "--format", "jsonl",
                "--offsets", "2-4")
    offsets = [r["Offset"] for b in _batches(res) for r in b["batch"]["Records"]]
    assert offsets == [2, 3, 4]
    bad = kwire("dump-log", str(LOGS / "kwire-produce-none-0"), "--offsets", "x")
    assert bad.code == 2 and bad.err.startswith("kwire: error: --offsets")


@pytest.mark.parametrize("partition", CAPTURE_PARTITIONS)
def test_producer_snapshot_agrees_with_the_segment(partition):
    """Each partition's producer state snapshot (written as the broker's producer state manager
    keeps it: scripts/make_log_fixtures.py) names, per producer id, the last batch kafka-python's
    reader finds in the segment: epoch, last sequence, last offset, offset delta, timestamp."""
    folder = LOGS / partition
    (snap,) = folder.glob("*.snapshot")
    res = kwire("dump-log", str(snap), "--format", "jsonl")
    assert res.code == 0 and res.err == ""
    entries = _jsonl(res)
    head = entries[0]
    assert head["type"] == "producer-snapshot" and head["version"] == 1 and head["problems"] == []
    assert head["crc"] == head["computed_crc"]
    ours = {e["producer_id"]: e for e in entries if e["type"] == "producer"}
    theirs = {}
    records = MemoryRecords((folder / ("0" * 20 + ".log")).read_bytes())
    next_offset = 0
    while records.has_next():
        b = records.next_batch()
        last = b.base_offset + b.last_offset_delta
        if b.producer_id >= 0:
            theirs[b.producer_id] = {"producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                                     "last_sequence": b.base_sequence + b.last_offset_delta, "last_offset": last,
                                     "offset_delta": b.last_offset_delta, "timestamp": b.max_timestamp,
                                     "coordinator_epoch": -1, "current_txn_first_offset": -1}
        next_offset = last + 1
    assert {k: {f: v for f, v in e.items() if f in theirs[k]} for k, e in ours.items()} == theirs
    assert snap.name == f"{next_offset:020d}.snapshot"  # written at the log end offset
    assert res.out.endswith(f'"producers":{len(theirs)},"aborted_txns":0,"snapshot_problems":0}}\n')


def _snapshot(tmp_path, data: bytes):
    path = tmp_path / ("0" * 20 + ".snapshot")
    path.write_bytes(data)
    return path


def test_a_damaged_producer_snapshot_is_shown_with_what_the_broker_would_refuse(tmp_path):
    good = next((LOGS / "kwire-produce-none-0").glob("*.snapshot")).read_bytes()
    bad = bytearray(good)
    bad[-1] ^= 0x01  # the last entry's open-transaction offset: the CRC no longer matches
    path = _snapshot(tmp_path, bytes(bad))
    res = kwire("dump-log", str(path), "--format", "jsonl")
    assert res.code == 0  # shown, with the damage named
    entries = _jsonl(res)
    assert [e["type"] for e in entries] == ["producer-snapshot", "producer", "damage", "summary"]
    assert entries[1]["current_txn_first_offset"] == -2  # what the file says
    assert "CRC" in entries[2]["reason"] and "discard" in entries[2]["reason"]
    assert res.err.count("\n") == 1 and "CRC" in res.err
    assert kwire("dump-log", str(path), "--verify").code == 1
    # cut inside the entry: the count names more entries than the bytes hold
    res = kwire("dump-log", str(_snapshot(tmp_path, good[:-5])))
    assert res.code == 0 and "entry count 1 at byte 6" in res.out and "0 producers" in res.out
    # another version; and too short for a header
    res = kwire("dump-log", str(_snapshot(tmp_path, b"\x00\x02" + good[2:])), "--format", "jsonl")
    assert any("version 2" in p for p in _jsonl(res)[0]["problems"])
    res = kwire("dump-log", str(_snapshot(tmp_path, b"\x00\x01")))
    assert res.code == 0 and "shorter than the 10-byte header" in res.out


def test_transaction_index(tmp_path):
    """A ``.txnindex``: 34-byte aborted-transaction entries (version 0, producer id, first and last
    offset, last stable offset), as the broker's transaction index writes them."""
    entries = [(0, 7, 10, 20, 5), (0, 8, 30, 31, 21)]
    path = tmp_path / ("0" * 20 + ".txnindex")
    path.write_bytes(b"".join(struct.pack(">hqqqq", *e) for e in entries))
    res = kwire("dump-log", str(path), "--format", "jsonl")
    assert res.code == 0 and res.err == ""
    got = [(e["version"], e["producer_id"], e["first_offset"], e["last_offset"], e["last_stable_offset"])
           for e in _jsonl(res) if e["type"] == "aborted-txn"]
    assert got == entries and _jsonl(res)[-1]["aborted_txns"] == 2
    res = kwire("dump-log", str(path))
    assert "aborted transaction  producer 8  offsets 30-31  last stable offset 21" in res.out
    path.write_bytes(path.read_bytes() + b"\x00" * 9)
    res = kwire("dump-log", str(path))
    assert res.code == 0 and "damage: 9 bytes at byte 68: a partial entry" in res.out
    path.write_bytes(struct.pack(">hqqqq", 1, 7, 10, 20, 5))
    res = kwire("dump-log", str(path), "--verify")
    assert res.code == 1 and "version 1" in res.out


def test_kafka_dump_log_spellings():
    """kafka-dump-log's options give what kwire's own give."""
    seg = str(LOGS / "__consumer_offsets-12" / ("0" * 20 + ".log"))
    idx = str(LOGS / "kwire-produce-lz4-0" / ("0" * 20 + ".index"))
    ours = kwire("dump-log", seg, idx, "--topic", "__consumer_offsets", "--verify", "--format", "jsonl")
    kafka = kwire("dump-log", "--files", f"{seg},{idx}", "--offsets-decoder", "--print-data-log",
                  "--deep-iteration", "--verify-index-only", "--format", "jsonl")
    assert kafka.code == ours.code == 0 and kafka.out == ours.out and '"OffsetCommit' in ours.out
    assert kwire("dump-log", "--files", idx, "--index-sanity-check").out == kwire("dump-log", idx, "--verify").out
    for flag, topic in [("--transaction-log-decoder", "__transaction_state"),
                        ("--cluster-metadata-decoder", "__cluster_metadata"),
                        ("--share-group-state-decoder", "__share_group_state")]:
        res = kwire("dump-log", "--files", seg, flag, "--format", "jsonl")
        assert _jsonl(res)[0]["topic"] == topic
    both = kwire("dump-log", seg, "--offsets-decoder", "--transaction-log-decoder")
    assert both.code == 2 and "one topic" in both.err
    none = kwire("dump-log")
    assert none.code == 2 and none.err.count("\n") == 1


@pytest.mark.parametrize("args, message, code", [
    (["/no/such/file.log"], "/no/such/file.log: no such file or directory", 2),  # cannot be read: usage
    (["README.md"], "README.md: not a log file", 1),
    ([str(FIXTURES / "captures")], "no log files", 1),
])
def test_errors_are_one_line(args, message, code):
    res = kwire("dump-log", *args)
    assert res.code == code
    assert res.err.startswith("kwire: error: ") and message in res.err and res.err.count("\n") == 1


def test_streaming_reads_one_entry_at_a_time(tmp_path):
    # a segment of many batches: the reader holds one entry, never the file
    one = (LOGS / "kwire-produce-none-1" / ("0" * 20 + ".log")).read_bytes()
    log = tmp_path / ("0" * 20 + ".log")
    log.write_bytes(one * 200)

    class Reads:
        def __init__(self, f):
            self.f, self.biggest = f, 0

        def read(self, n):
            self.biggest = max(self.biggest, n)
            return self.f.read(n)

        def fileno(self):
            return self.f.fileno()

    with open(log, "rb") as f:
        r = Reads(f)
        n = sum(1 for e in iter_segment(r) if e.kind == "batch")
    assert n == 600 and r.biggest < 200


def test_memory_stays_flat_on_a_large_segment(tmp_path):
    # ~2 MB of the captures' batches, offsets continuing: the reader's peak allocation stays small
    import tracemalloc
    src = b"".join((LOGS / p / ("0" * 20 + ".log")).read_bytes() for p in CAPTURE_PARTITIONS)
    entries = make_log_fixtures.split_entries(src)
    log = tmp_path / ("0" * 20 + ".log")
    with open(log, "wb") as f:
        nxt, written = 0, 0
        while written < 2 << 20:
            for e in entries:
                data = bytearray(e)
                struct.pack_into(">q", data, 0, nxt)
                nxt += struct.unpack_from(">i", data, 23)[0] + 1
                f.write(data)
                written += len(data)
    tracemalloc.start()
    try:
        with open(log, "rb") as f:
            n = sum(1 for e in iter_segment(f, topic="__consumer_offsets") if e.kind == "batch")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n > 5_000
    assert peak < 2 << 20, peak


def test_table_shows_internal_records_on_one_line_each():
    res = kwire("dump-log", str(LOGS / "__consumer_offsets-12" / ("0" * 20 + ".log")))
    assert res.code == 0
    assert ('  offset 0  ts 1700000000000  OffsetCommitKey {"group":"testgroup","topic":"testtopic","partition":11}'
            ' -> OffsetCommitValue v0 {"offset":8372,"metadata":"testdata","commitTimestamp":1637}') in res.out
    assert "OffsetCommitKey" in res.out.splitlines()[-2] and res.out.splitlines()[-2].endswith("tombstone")


def test_legacy_messages_of_consumer_offsets_are_decoded(tmp_path):
    # old brokers wrote __consumer_offsets as magic 0/1 message sets: the same keys and values
    manifest = json.loads((FIXTURES / "vectors" / "internal" / "manifest.json").read_text())
    v = next(v for v in manifest["vectors"] if v["id"] == "konsumer-offsets-offset-commit-03")
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1672788047244, key=bytes.fromhex(v["key_hex"]), value=bytes.fromhex(v["value_hex"]))
    part = tmp_path / "__consumer_offsets-3"
    part.mkdir()
    (part / ("0" * 20 + ".log")).write_bytes(bytes(builder.build()))
    entry = _batches(kwire("dump-log", str(part), "--format", "jsonl"))[0]["batch"]
    assert entry["Magic"] == 1
    assert entry["Internal"]["key"]["data"] == v["asserts"]["key"]
    assert entry["Internal"]["value"]["data"]["offset"] == 106


@pytest.mark.skipif(not (ROOT.parent / "shared" / "kafka-record-specs").is_dir()
                    and not (ROOT.parent.parent / "shared" / "kafka-record-specs").is_dir(),
                    reason="reference record specs not present")
def test_record_specs_option_reads_kafkas_own_files():
    from conftest import REFERENCE_RECORD_SPECS
    res = kwire("dump-log", str(LOGS / "__consumer_offsets-12"), "--format", "jsonl",
                "--record-specs", str(REFERENCE_RECORD_SPECS))
    assert res.code == 0
    ours = kwire("dump-log", str(LOGS / "__consumer_offsets-12"), "--format", "jsonl")
    assert res.out == ours.out
    bad = kwire("dump-log", str(LOGS / "__consumer_offsets-12"), "--record-specs", str(FIXTURES / "captures"))
    assert bad.code == 1 and "holds no record specs" in bad.err


def _records(out: str) -> list[dict]:
    recs = []
    for line in out.splitlines():
        e = json.loads(line)
        if e.get("type") == "batch":
            recs += e["batch"].get("Records") or []
    return recs


@pytest.mark.parametrize("part", ["kwire-produce-none-0", "kwire-produce-gzip-0", "kwire-produce-zstd-0"])
def test_key_and_header_filters_keep_the_records_that_match(part):
    from kwire_cli.logs.walk import match_text as _text
    d = str(ROOT / "fixtures" / "logs" / part)
    every = _records(kwire("dump-log", d, "--format", "jsonl").out)
    assert every
    keys = sorted({_text(r["Key"]) for r in every if r.get("Key") is not None})
    k = keys[len(keys) // 2]
    got = _records(kwire("dump-log", d, "--format", "jsonl", "--key", k).out)
    assert got == [r for r in every if _text(r.get("Key")) == k] != []
    part_of = k[:2]
    got = _records(kwire("dump-log", d, "--format", "jsonl", "--key", "~" + part_of).out)
    assert got == [r for r in every if part_of in (_text(r.get("Key")) or "")]
    with_headers = [r for r in every if r.get("Headers")]
    if with_headers:
        hk = with_headers[0]["Headers"][0]["Key"]
        got = _records(kwire("dump-log", d, "--format", "jsonl", "--header", hk).out)
        assert got == [r for r in every if any(_text(h.get("Key")) == hk or _text(h.get("Value")) == hk
                                               for h in r.get("Headers") or ())] != []
    assert _records(kwire("dump-log", d, "--format", "jsonl", "--key", "no-such-key").out) == []


def test_max_bytes_reads_only_the_start_of_a_segment():
    """--max-bytes (kafka-dump-log's): the entries that end within the first N bytes, then one line
    saying where it stopped; the rest of the file is not read."""
    log = str(LOGS / "kwire-produce-none-0" / ("0" * 20 + ".log"))
    full = _jsonl(kwire("dump-log", log, "--format", "jsonl"))
    batches = [e for e in full if e["type"] == "batch"]
    ends = [b["position"] + b["size"] for b in batches]
    assert len(batches) == 3
    cut = _jsonl(kwire("dump-log", log, "--format", "jsonl", "--max-bytes", str(ends[1] + 10)))
    assert [e for e in cut if e["type"] == "batch"] == batches[:2]
    (stop,) = [e for e in cut if e["type"] == "stopped"]
    assert stop["position"] == ends[1] and f"--max-bytes {ends[1] + 10}" in stop["reason"]
    assert cut[-1]["batches"] == 2 and cut[-1]["damage"] == 0
    exact = kwire("dump-log", log, "--format", "jsonl", "--max-bytes", str(ends[2]))
    assert exact.out == kwire("dump-log", log, "--format", "jsonl").out  # the last batch ends exactly there
    none = kwire("dump-log", log, "--max-bytes", "1")
    assert none.code == 0 and "stopped at --max-bytes 1: the entry at position 0" in none.out
    bad = kwire("dump-log", log, "--max-bytes", "lots")
    assert bad.code == 2 and bad.err.count("\n") == 1
