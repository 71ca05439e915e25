"""kwire pcap on real captures (kafka-python, librdkafka, kafkajs against tansu) and on damaged
copies of them: every Kafka frame accounted for, known values where the clients put them."""
import json
import struct
from collections import Counter

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from kwire_cli.capture import CaptureStats, iter_capture
from kwire_cli.capture.session import Conversation
from kwire_cli.capture.summary import Summary
from kwire_cli.cli import cli

CAPS = FIXTURES / "captures"
MANIFEST = json.loads((CAPS / "manifest.json").read_text())
FILES = sorted(MANIFEST["captures"])
# Known peer quirks: (client, api_key, version, kind) -> the error kwire rightly reports
QUIRK_ERRORS = {
    ("confluent-kafka", 3, 12, "request"): "3 trailing bytes",   # librdkafka's Metadata v12 request
}


def decode(paths):
    stats = CaptureStats()
    conv = Conversation()
    recs = list(conv.rows(iter_capture([str(p) for p in paths] if isinstance(paths, list) else str(paths),
                                          stats=stats)))
    return recs, conv, stats


@pytest.mark.parametrize("name", FILES)
def test_every_frame_decodes_and_requests_match_what_the_recorder_counted(name):
    info = MANIFEST["captures"][name]
    recs, conv, stats = decode(CAPS / name)
    for r in recs:
        if r["error"] is None:
            continue
        quirk = QUIRK_ERRORS.get((info["client"], r["api_key"], r["api_version"], r["kind"]))
        assert quirk and quirk in r["error"], r["error"]
        assert r["body"] is not None  # a quirky frame still shows what decoded
    requests = Counter(f"{r['api_key']}:v{r['api_version']}" for r in recs if r["kind"] == "request")
    assert dict(requests) == info["requests"]
    assert stats.reconcile()["ok"]
    # every request is answered, or is an acks=0 Produce, or is reported unanswered with its id
    answered = {(r["dst"], r["correlation_id"]) for r in recs if r["kind"] == "response"}
    reported = " ".join(d["detail"] for d in conv.damage if d["kind"] == "unanswered-request")
    for r in recs:
        if r["kind"] == "request" and (r["src"], r["correlation_id"]) not in answered:
            assert (r["api_name"] == "Produce" and r["body"]["Acks"] == 0) or str(r["correlation_id"]) in reported
    client_id = MANIFEST["record_plan"]["client_ids"][info["client"]]
    assert {r["client_id"] for r in recs if r["kind"] == "request"} == {client_id}
    summary = Summary()
    for r in recs:
        summary.add(r)
    s = summary.to_dict()
    assert s["reconciled"] and s["frames"] == len(recs)


def _sent_records(recs):
    """(topic, partition, key, value, headers) of every record in decoded Produce requests."""
    out = []
    for r in recs:
        if r["api_name"] != "Produce" or r["kind"] != "request":
            continue
        for t in r["body"]["TopicData"]:
            for p in t["PartitionData"]:
                for b in p["Records"]["batches"]:
                    for rec in b["Records"]:
                        def txt(v):
                            return None if v is None else v.get("text", v.get("hex"))
                        out.append((t["Name"], p["Index"], txt(rec["Key"]), txt(rec["Value"]),
                                    [[h["Key"], txt(h["Value"])] for h in rec["Headers"]]))
    return out


def _batch_codecs(recs):
    return {(t["Name"], b["Compression"]) for r in recs if r["api_name"] == "Produce" and r["kind"] == "request"
            for t in r["body"]["TopicData"] for p in t["PartitionData"] for b in p["Records"]["batches"]}


@pytest.mark.parametrize("name", [n for n in FILES if MANIFEST["captures"][n]["scenario"] == "produce"])
def test_produced_records_and_headers_are_exactly_what_the_client_sent(name):
    info = MANIFEST["captures"][name]
    recs, _, _ = decode(CAPS / name)
    got = Counter(json.dumps(x) for x in _sent_records(recs))
    want = Counter(json.dumps((s["topic"], s["partition"], s["key"], s["value"],
                               [list(h) for h in s.get("headers") or []]))
                   for s in info["sent"])
    assert got == want
    # every codec the producer was set to is on the wire (a client may leave a tiny batch uncompressed)
    assert {(s["topic"], s["compression"]) for s in info["sent"]} <= _batch_codecs(recs) | {
        (s["topic"], "none") for s in info["sent"]}
    assert {c for _, c in _batch_codecs(recs)} >= {s["compression"] for s in info["sent"]}
    # duplicate header keys keep their order
    dup = [x for x in _sent_records(recs) if any(h[0] == "dup" for h in x[4])]
    assert dup and all([h[0] for h in x[4]][:3] == ["trace", "dup", "dup"] for x in dup)


def test_consumer_group_protocol_is_decoded_inside_join_and_sync():
    recs, _, _ = decode(CAPS / "kafka-python-consume.pcap")
    joins = [r for r in recs if r["api_name"] == "JoinGroup" and r["kind"] == "request"]
    subs = [e for r in joins for e in r.get("embedded", [])]
    assert subs and subs[0]["schema"] == "ConsumerProtocolSubscription"
    assert any(t.startswith("kwire-produce") for t in subs[0]["value"]["Topics"])
    syncs = [e for r in recs if r["api_name"] == "SyncGroup" for e in r.get("embedded", [])]
    assert any(e["schema"] == "ConsumerProtocolAssignment" and e["value"]["AssignedPartitions"] for e in syncs)


def test_topic_ids_resolve_to_names_from_earlier_metadata():
    recs, _, _ = decode(CAPS / "confluent-kafka-consume.pcap")
    fetches = [r for r in recs if r["api_name"] == "Fetch" and r.get("topic_names")]
    assert fetches and all(v and v.startswith("kwire-") for r in fetches for v in r["topic_names"].values())


def test_rotated_files_reassemble_one_connection_across_both():
    files = [CAPS / f for f in MANIFEST["rotated"]["files"]]
    recs, conv, stats = decode(files)
    assert all(r["error"] is None for r in recs)
    big = [r for r in recs if r["api_name"] == "Produce" and r["kind"] == "request" and r["size"] > 100000]
    assert len(big) == 1 and big[0]["file"].endswith("rotated-1.pcap")
    assert Counter(f"{r['api_key']}:v{r['api_version']}" for r in recs if r["kind"] == "request") == \
        Counter(MANIFEST["rotated"]["requests"])
    alone, _, _ = decode(files[1])  # the second file alone starts mid-frame: picked up at the next frame
    assert all(r["error"] is None for r in alone if r["kind"] == "request")


# ------------------------------------------------------------------- damaged captures

def _pcap_records(data: bytes):
    head, pos, out = data[:24], 24, []
    while pos + 16 <= len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        out.append(data[pos:pos + 16 + incl])
        pos += 16 + incl
    return head, out


def _frames_by_key(recs):
    return {(r["src"], r["dst"], r["kind"], r["correlation_id"]): r for r in recs if r["error"] is None}


def test_truncated_file_still_gives_every_complete_frame(tmp_path):
    path = CAPS / "kafka-python-consume.pcap"
    data = path.read_bytes()
    full, _, _ = decode(path)
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3 + 7])  # mid-record
    recs, conv, stats = decode(cut)
    assert any(d["kind"] == "truncated-record" for d in conv.damage)
    good = _frames_by_key(full)
    for r in recs:
        if r["error"] is None:
            assert good[(r["src"], r["dst"], r["kind"], r["correlation_id"])]["body"] == r["body"]
    assert len(recs) >= len(full) // 2


def test_dropped_duplicated_and_reordered_packets(tmp_path):
    path = CAPS / "kafka-python-produce.pcap"
    head, pkts = _pcap_records(path.read_bytes())
    full, _, _ = decode(path)
    # duplicate every packet and swap some neighbours: same frames, nothing lost
    mixed = []
    for i, p in enumerate(pkts):
        mixed += [p, p]
    sport = lambda p: struct.unpack_from(">H", p, 16 + 14 + 20)[0]
    for i in range(10, len(mixed) - 2, 7):  # reorder within one direction of one connection
        if sport(mixed[i]) == sport(mixed[i + 2]):
            mixed[i], mixed[i + 2] = mixed[i + 2], mixed[i]
    f = tmp_path / "mixed.pcap"
    f.write_bytes(head + b"".join(mixed))
    recs, conv, stats = decode(f)
    assert {k: v["body"] for k, v in _frames_by_key(recs).items()} == \
        {k: v["body"] for k, v in _frames_by_key(full).items()}
    assert stats.duplicate_bytes > 0 and stats.reconcile()["ok"]
    # drop the packet carrying the most payload: that frame is lost, reported, every other decodes
    # (a request packet in the middle of its connection, so later bytes of that direction show the gap)
    sizes = [len(p) if sport(p) != 9092 else 0 for p in pkts[: len(pkts) // 2]]
    victim = sizes.index(max(sizes))
    f2 = tmp_path / "dropped.pcap"
    f2.write_bytes(head + b"".join(p for i, p in enumerate(pkts) if i != victim))
    recs2, conv2, stats2 = decode(f2)
    assert any(d["kind"] == "gap" for d in conv2.damage)
    ok2 = _frames_by_key(recs2)
    assert len(ok2) >= len(_frames_by_key(full)) - 2
    for k, r in ok2.items():
        assert _frames_by_key(full)[k]["body"] == r["body"]


# ------------------------------------------------------------------- the command

def test_cli_jsonl_has_the_documented_keys_and_filters():
    res = CliRunner().invoke(cli, ["pcap", str(CAPS / "kafka-python-produce.pcap"), "--format", "jsonl",
                                                   "--filter", "api=Produce and kind=request"])
    assert res.exit_code == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 6
    assert list(rows[0])[:17] == ["file", "frame", "ts", "src", "dst", "kind", "api_key", "api_name", "api_version",
                                  "correlation_id", "client_id", "size", "latency_ms", "header", "body",
                                  "error_codes", "error"]


def test_cli_summary_json_reconciles():
    res = CliRunner().invoke(cli, ["pcap", str(CAPS / "kafka-python-admin.pcap"), "--summary",
                                                   "--format", "json"])
    assert res.exit_code == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["reconciled"] and s["frames"] == s["decoded"] and s["negotiation_audit"] == []
    assert "kwire-kafka-python" in s["clients"]


def test_cli_not_a_capture_is_one_line_and_exit_1(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello world, not a capture\n")
    res = CliRunner().invoke(cli, ["pcap", str(bad), str(CAPS / "kafkajs-produce.pcap"),
                                                   "--format", "jsonl"])
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines() == [f"kwire: error: {bad}: not a pcap or pcapng file: magic 0x68656c6c at offset 0"]
    assert len(res.stdout.splitlines()) == 10  # the good file still decoded


def test_cli_bad_filter_is_a_one_line_error():
    res = CliRunner().invoke(cli, ["pcap", str(CAPS / "kafkajs-produce.pcap"), "--filter", "bogus=1"])
    assert res.exit_code == 2 and "unknown field 'bogus'" in res.stderr


def test_a_frame_that_breaks_the_decoder_is_reported_and_the_rest_still_decode(monkeypatch):
    import kwire_cli.capture.session as session
    real = session.decode_lenient

    def flaky(data, kind, *a, **kw):
        msg = real(data, kind, *a, **kw)
        if msg.api_name == "Metadata" and kind == "request":
            raise ValueError("boom")
        return msg

    monkeypatch.setattr(session, "decode_lenient", flaky)
    recs, _, _ = decode(CAPS / "kafka-python-admin.pcap")
    bad = [r for r in recs if r["error"]]
    assert bad and all(r["error"] == "internal error: ValueError: boom" for r in bad)
    assert all(r["api_name"] == "Metadata" for r in bad)
    assert sum(1 for r in recs if r["error"] is None) == len(recs) - len(bad)
    s = Summary()
    for r in recs:
        s.add(r)
    assert s.to_dict()["undecodable_by_reason"] == {"internal-error": len(bad)}


def test_a_directory_stands_for_its_files_in_path_order(tmp_path):
    """kwire pcap DIR reads every file under DIR (hidden ones skipped) in path order: the same
    records as naming the files; an empty directory is a one-line usage error."""
    import shutil
    d = tmp_path / "caps"
    (d / "sub").mkdir(parents=True)
    names = ["kafkajs-admin.pcap", "kafka-python-consume.pcap"]
    shutil.copy(CAPS / names[0], d / "b.pcap")
    shutil.copy(CAPS / names[1], d / "sub" / "a.pcap")
    (d / ".hidden.pcap").write_bytes(b"not a capture")
    r_dir = CliRunner().invoke(cli, ["pcap", str(d), "--format", "jsonl"])
    r_files = CliRunner().invoke(cli, ["pcap", str(d / "b.pcap"), str(d / "sub" / "a.pcap"), "--format", "jsonl"])
    assert r_dir.exit_code == 0 and r_dir.output == r_files.output and r_dir.output.count("\n") > 50
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(cli, ["pcap", str(tmp_path / "empty")])
    assert r.exit_code == 2 and r.output.strip() == "kwire: error: FILES: the directories given hold no files"


def _summary(*args):
    r = CliRunner().invoke(cli, ["pcap", *args, "--summary", "--format", "json"])
    out = r.output[r.output.index("{"):]
    return json.loads(out[:out.rindex("}") + 1])   # warnings on stderr may follow


@pytest.mark.parametrize("name", [n for n in FILES if MANIFEST["captures"][n]["scenario"] == "produce"])
def test_summary_counts_the_record_batches_the_clients_sent(name):
    sent = MANIFEST["captures"][name]["sent"]
    rb = _summary(str(CAPS / name))["record_batches"]
    # every record the client produced is in a decoded Produce request (a Fetch is not in these)
    assert rb["records"] == len(sent) > 0
    assert set(rb["compression"]) == {s["compression"] for s in sent}
    assert rb["batches"] == sum(rb["compression"].values())
    assert rb["crc_invalid"] == rb["batch_errors"] == rb["partial_trailing_batches"] == 0


def test_summary_and_table_show_bad_crcs_and_undecoded_batches(tmp_path):
    # one byte of a record value changed in an uncompressed batch: its CRC no longer matches
    name = "kafka-python-produce.pcap"
    raw = (CAPS / name).read_bytes()
    value = MANIFEST["captures"][name]["sent"][0]["value"].encode()
    at = raw.index(value) + 2
    bad = tmp_path / "crc.pcap"
    bad.write_bytes(raw[:at] + bytes([raw[at] ^ 0x20]) + raw[at + 1:])
    assert _summary(str(bad))["record_batches"]["crc_invalid"] == 1
    table = CliRunner().invoke(cli, ["pcap", str(bad)]).output
    assert sum("1 batch(es) with a bad CRC" in line for line in table.splitlines()) == 1
    assert "bad CRC 1," in CliRunner().invoke(cli, ["pcap", str(bad), "--summary"]).output
    # a records cap just below a Fetch frame's records (65 and headers, 10 batches counting 2
    # each): its last batch is cut, named in the table, the summary and a warning
    consume = str(CAPS / "kafka-python-consume.pcap")
    rb = _summary(consume, "--max-records", "84")["record_batches"]
    assert rb["batch_errors"] == rb["item_cap"] == 1
    assert _summary(consume)["record_batches"]["batch_errors"] == 0
    r = CliRunner().invoke(cli, ["pcap", consume, "--max-records", "84"])
    assert sum("1 batch(es) cut at the frame's cap of records and headers (--max-records raises it)" in line
               for line in r.output.splitlines()) == 1
    assert "kwire: warning: 1 record batch(es) cut at a frame's cap of records and headers " \
           "(--max-records raises it)" in r.output
    r = CliRunner().invoke(cli, ["pcap", consume, "--max-records", "84", "--summary"])
    assert "1 of them cut at a frame's cap of records and headers (--max-records raises it)" in r.output


def test_frame_prints_that_frames_tree():
    from cli_run import kwire
    cap = str(CAPS / "kafkajs-produce.pcap")
    rows = [json.loads(x) for x in kwire("pcap", cap, "--format", "jsonl").out.splitlines()]
    row = next(r for r in rows if r["api_name"] == "Produce" and r["kind"] == "request")
    r = kwire("pcap", cap, "--frame", str(row["frame"]))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].endswith(f"frame {row['frame']}  {row['src']} -> {row['dst']}")
    assert lines[1].startswith(f"Produce v{row['api_version']} request")
    assert f"CorrelationId: {row['correlation_id']}" in r.out and "TopicData" in r.out
    none = kwire("pcap", cap, "--frame", "1")  # a packet that completes no frame: one line saying so
    assert none.code == 1 and none.out == "" and none.err.startswith("kwire: error: --frame: no Kafka frame")
    assert len(none.err.splitlines()) == 1
    assert kwire("pcap", cap, "--frame", "4", "--format", "jsonl").code == 2
