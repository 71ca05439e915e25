"""kwire decode on real recorded bytes, every input form, and every bad-input path."""
from __future__ import annotations

import json

import pytest

from cli_run import ROOT, kwire, pairs
from kwire_cli.codec import encode_request

PAIRS = pairs()
HEX = ROOT / "fixtures" / "hex"
DUMPS = HEX / "dumps"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_recorded_pairs_are_present():
    assert len(PAIRS) >= 30  # kafka-python, confluent-kafka, kafkajs


@pytest.mark.parametrize("name,pair", PAIRS, ids=[n for n, _ in PAIRS])
def test_recorded_requests_and_responses_decode(name, pair):
    r = kwire("decode", pair["request"], "--format", "json")
    assert r.code == 0, r
    got = r.json()
    assert set(got) == {"api_key", "api_name", "api_version", "kind", "header", "body", "size"}
    assert (got["api_key"], got["api_version"], got["kind"]) == (pair["api_key"], pair["api_version"], "request")
    assert got["size"] == len(pair["request"]) // 2 - 4
    assert got["header"]["CorrelationId"] == pair["correlation_id"]
    if pair["response"] is None:
        return
    r = kwire("decode", pair["response"], "--request", pair["request"], "--format", "json")
    assert r.code == 0, r
    resp = r.json()
    assert (resp["api_key"], resp["api_version"], resp["kind"]) == (pair["api_key"], pair["api_version"], "response")
    assert resp["header"]["CorrelationId"] == pair["correlation_id"]
    assert resp["size"] == len(pair["response"]) // 2 - 4
    assert r.err == ""  # correlation ids agree: no warning
    # --api by name and by key give the same answer as --request
    for api in (got["api_name"], str(got["api_key"])):
        r2 = kwire("decode", pair["response"], "--api", api, "--version", str(pair["api_version"]), "--format", "json")
        assert r2.json() == resp


def test_pretty_tree_names_error_codes_and_api_keys():
    r = kwire("decode @fixtures/hex/heartbeat-response-v4.hex --api Heartbeat --version 4")
    assert r.code == 0 and r.err == ""
    assert "ErrorCode: 27 REBALANCE_IN_PROGRESS  int16" in r.out
    assert r.out.splitlines()[0] == "Heartbeat v4 response  api key 12, 12 bytes"
    v3 = next(p for n, p in PAIRS if p["api_key"] == 18 and p["response"])
    r = kwire("decode", v3["response"], "--request", v3["request"])
    assert "ApiKey: 3 Metadata  int16" in r.out and "ErrorCode: 0 NONE  int16" in r.out


def test_pretty_output_prints_brackets_literally():
    data = encode_request("Metadata", 12, {"CorrelationId": 1, "ClientId": "[bold]me[/bold]"},
                          {"Topics": [{"Name": "[red]t"}]})
    r = kwire("decode", data.hex())
    assert r.code == 0, r
    assert 'ClientId: "[bold]me[/bold]"' in r.out and 'Name: "[red]t"' in r.out


def test_yaml_output_is_the_same_tree_as_json():
    import yaml
    a = kwire("decode @fixtures/hex/fetch-response-v13.hex --api Fetch --version 13 --format json").json()
    b = yaml.safe_load(kwire("decode @fixtures/hex/fetch-response-v13.hex --api Fetch --version 13 --format yaml").out)
    assert a == b
    assert a["body"]["Responses"][0]["Partitions"][0]["Records"]["batches"][0]["Records"][0]["Key"] == {"text": "order-1"}


def test_records_can_stay_hex():
    j = kwire("decode @fixtures/hex/produce-request-v9.hex --records hex --format json").json()
    rec = j["body"]["TopicData"][0]["PartitionData"][0]["Records"]
    assert isinstance(rec, str) and bytes.fromhex(rec)[16] == 2  # magic 2 record batch
    r = kwire("decode @fixtures/hex/produce-request-v9.hex --records hex")
    assert "Records: 0000000000000000" in r.out and "records?" in r.out


# --------------------------------------------------------------------------- input forms

EXPECTED_MR = bytes.fromhex((HEX / "metadata-request-v12.hex").read_text().strip())


def _decoded(*args, input=None):
    r = kwire("decode", *args, "--format", "json", input=input)
    assert r.code == 0, r
    return r.json()


@pytest.mark.parametrize("dump", ["metadata-request-v12.xxd.txt", "metadata-request-v12.xxd-g1.txt",
                                  "metadata-request-v12.xxd-p.txt", "metadata-request-v12.hexdump-C.txt",
                                  "metadata-request-v12.bin"])
def test_dump_files_of_the_same_message_decode_alike(dump):
    want = _decoded(EXPECTED_MR.hex())
    assert _decoded(f"@{DUMPS / dump}") == want
    assert _decoded("-", input=(DUMPS / dump).read_bytes()) == want


def test_hex_argument_forms():
    want = _decoded(EXPECTED_MR.hex())
    h = EXPECTED_MR.hex()
    spaced = " ".join(h[i:i + 2] for i in range(0, len(h), 2))
    assert _decoded(spaced) == want
    assert _decoded(":".join(h[i:i + 2] for i in range(0, len(h), 2))) == want
    assert _decoded(", ".join("0x" + h[i:i + 2] for i in range(0, len(h), 2))) == want
    assert _decoded("0x" + h.upper()) == want
    assert _decoded("-", input="\n".join(h[i:i + 32] for i in range(0, len(h), 32)) + "\n") == want


def test_hexdump_star_lines_are_expanded():
    want = bytes.fromhex((HEX / "saslauthenticate-request-v2.hex").read_text().strip())
    # --show-secrets: an opaque SASL token is redacted by default (tests/test_secrets.py)
    j = _decoded(f"@{DUMPS / 'saslauthenticate-request-v2.hexdump-C.txt'}", "--show-secrets")
    assert j["body"]["AuthBytes"] == "00" * 80 and j["size"] == len(want) - 4


def test_tshark_frame_dump_is_cut_to_the_tcp_payload():
    # recorded: kafka-python's Metadata v12 request, frame 8 of kafka-python-admin.pcap
    j = _decoded(f"@{DUMPS / 'metadata-request-v12.tshark.txt'}")
    assert (j["api_name"], j["api_version"], j["header"]["ClientId"]) == ("Metadata", 12, "kwire-kafka-python")
    assert j["size"] == 0x21


def test_tshark_reassembled_block_is_used():
    want = _decoded("@fixtures/hex/metadata-response-v12.hex", "--api", "Metadata", "--version", "12")
    got = _decoded(f"@{DUMPS / 'metadata-response-v12.tshark-reassembled.txt'}", "--api", "Metadata", "--version", "12")
    assert got == want


def test_bare_body_and_size_prefix_options():
    j = _decoded("ffffffff", "--api", "Metadata", "--version", "1", "--kind", "request", "--no-header")
    assert j["header"] is None and j["body"] == {"Topics": None} and j["size"] == 4
    full = EXPECTED_MR.hex()
    assert _decoded(full[8:], "--no-size-prefix") == _decoded(full)
    assert _decoded(full, "--size-prefix") == _decoded(full)


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("args,code,line", [
    (["00zz"], 1, "not hex: unexpected character 'z' at line 1, column 3"),
    (["000"], 1, "odd number of hex digits (3): a byte needs two"),
    ([""], 1, "empty input: no hex digits"),
    (["@fixtures/hex/produce-response-v9.hex", "--api", "Nope", "--version", "1"], 2,
     "--api: unknown API 'Nope' (see `kwire list`)"),
    (["@fixtures/hex/produce-response-v9.hex", "--api", "999", "--version", "1"], 2,
     "--api: unknown API key 999 (known: 0-" ),
    (["@fixtures/hex/produce-response-v9.hex", "--api", "Produce", "--version", "-1"], 2,
     "--version: Produce has no version -1 (valid: 0-13)"),
    (["0000000603e700000001"], 1, "unknown API key 999 in the request header at offset 4"),
    (["00000006000300630000"], 1, "Metadata v99 is newer than the specs in use (Metadata 0-13 in "),
    (["@fixtures/hex/produce-response-v9.hex", "--kind", "response"], 2,
     "a response does not name its API: give --api NAME --version N, or --request HEX"),
    (["@no/such/file.hex"], 2, "INPUT: file no/such/file.hex does not exist"),
    (["00", "--no-header", "--api", "Metadata"], 2, "a bare body does not name its API: give --api NAME --version N"),
])
def test_bad_input_is_one_line_and_an_exit_code(args, code, line):
    r = kwire("decode", *args)
    assert r.code == code, r
    assert r.out == ""
    assert r.err.count("\n") == 1
    assert r.err.startswith("kwire: error: " + line)


def test_truncated_message_names_sizes_and_field():
    full = EXPECTED_MR.hex()
    r = kwire("decode", full[:-6])
    assert r.code == 1
    # the prefix no longer fits and the bytes do not decode without it either: the size prefix is
    # blamed (issue 14; it used to read "Produce v70 is not a valid version ... (read without a size
    # prefix: the first 4 bytes say 70 bytes follow, but 67 do)")
    assert r.err == ("kwire: error: size prefix says 70 bytes, only 67 follow (the input is cut short; if it "
                     "has no size prefix, give --no-size-prefix)\n")
    r = kwire("decode", full[:-6], "--size-prefix")
    assert (r.code, r.err) == (1, "kwire: error: size prefix says 70 bytes, only 67 follow\n")
    r = kwire("decode", full[8:-6], "--no-size-prefix")
    assert r.code == 1
    assert r.err == "kwire: error: Metadata v12 request: AllowAutoTopicCreation: bool needs 1 bytes, 0 left at offset 67\n"
    # header 16 bytes, topic count at 16, topic 0 at 17..41, topic 1's name length at 57
    r = kwire("decode", full[8:8 + 2 * 62], "--no-size-prefix")
    assert r.err == ("kwire: error: Metadata v12 request: Topics[1].Name: string of 8 bytes needs 8 bytes, "
                     "4 left at offset 58\n")


def test_response_without_api_hints_at_the_options():
    r = kwire("decode @fixtures/hex/produce-response-v9.hex")
    assert r.code == 1
    assert r.err.endswith("(if this is a response, give --api NAME --version N, or --request HEX)\n")


def test_request_mismatch_and_correlation_warning():
    r = kwire("decode @fixtures/hex/produce-response-v9.hex --request @fixtures/hex/produce-request-v9.hex --api Fetch")
    assert (r.code, r.err) == (2, "kwire: error: --api Fetch does not match the request, which is Produce (api key 0)\n")
    other = encode_request("Produce", 9, {"CorrelationId": 99, "ClientId": "x"}, {"Acks": 1, "TimeoutMs": 1})
    r = kwire("decode", "@fixtures/hex/produce-response-v9.hex", "--request", other.hex())
    assert r.code == 0
    assert r.err == "kwire: warning: the response's CorrelationId 11 differs from the request's 99\n"


def test_partial_shows_the_tree_up_to_the_failure():
    h = (HEX / "produce-response-v9.hex").read_text().strip()
    cut = h[8:-80]
    r = kwire("decode", cut, "--api", "Produce", "--version", "9", "--no-size-prefix", "--partial")
    assert r.code == 1
    assert r.err.count("\n") == 1 and r.err.startswith("kwire: error: Produce v9 response: Responses[0].PartitionResponses[2]")
    assert "Index: 1  int32" in r.out and "ErrorCode: 87 INVALID_RECORD  int16" in r.out
    assert "✗ decoding stopped: Produce v9 response: Responses[0].PartitionResponses[2]" in r.out
    r = kwire("decode", cut, "--api", "Produce", "--version", "9", "--no-size-prefix", "--partial", "--format", "json")
    assert r.code == 1
    j = r.json()
    assert j["partial"] is True and j["error"]["path"].startswith("Responses[0].PartitionResponses[2]")
    parts = j["body"]["Responses"][0]["PartitionResponses"]
    assert [p["Index"] for p in parts] == [0, 1, 2] and parts[1]["BaseOffset"] == 977
    # without --partial: nothing on stdout
    r = kwire("decode", cut, "--api", "Produce", "--version", "9", "--no-size-prefix")
    assert r.code == 1 and r.out == ""


def test_pretty_records_one_line_per_record_and_unsent_tags_folded():
    r = kwire("decode @fixtures/hex/fetch-response-v13.hex --api Fetch --version 13")
    assert "Records: 1 batch, 1 record  records?" in r.out
    assert "batch 0  offsets 1041..1041, 1 record, none, CreateTime  CRC ok" in r.out
    assert '[0] offset 1041  ts 1700000000000  key "order-1"  value "{\\"qty\\": 2}"' in r.out
    assert "CurrentLeader  LeaderIdAndEpoch tag 1" in r.out  # sent: shown
    assert "(not sent, at their defaults: DivergingEpoch, SnapshotId)" in r.out
    r = kwire("decode @fixtures/hex/produce-request-v9.hex")
    assert 'header "source": "web"' in r.out


def test_recorded_compressed_batches_render():
    for name, p in PAIRS:
        if name.startswith("kafka-python/") and p["api_key"] == 0:
            r = kwire("decode", p["request"])
            assert r.code == 0
            if "gzip" in r.out or "zstd" in r.out or "lz4" in r.out or "snappy" in r.out:
                assert "CRC ok" in r.out and "key " in r.out
                return
    pytest.fail("no compressed produce request among the recorded pairs")


@pytest.mark.parametrize("text,line", [
    ("00000000: 0000 0006 0003\n00000010: 0000\n", "hex dump skips bytes at line 2 (offset 0x10, expected 0x6)"),
    (("0000  00 00 00 06 00 03 00 0c 00 00 00 01 00 00 00 00  ................\n0010  00 00\n"
      "0020  00 00\n"), "hex dump skips bytes at line 3 (offset 0x20, expected 0x12)"),
    ("00 01 # a comment\n02 xyz\n", "not hex: unexpected character 'x' at line 2, column 4"),
])
def test_malformed_dumps(tmp_path, text, line):
    f = tmp_path / "d.txt"
    f.write_text(text)
    r = kwire("decode", f"@{f}")
    assert r.code == 1
    assert r.err == f"kwire: error: {f}: {line}\n"


# --------------------------------------------------------------------------- issue 14: dump forms

DUMP_FORMS = {  # dump -> the message it holds (recorded: fixtures/hex/dumps/README.md)
    "kafkajs-apiversions-request-v2.tcpdump-x.txt": ("ApiVersions", 2),
    "kafkajs-apiversions-request-v2.tcpdump-xx.txt": ("ApiVersions", 2),
    "kafkajs-apiversions-request-v2.tcpdump-X.txt": ("ApiVersions", 2),
    "kafkajs-produce-request-v7.tcpdump-X.txt": ("Produce", 7),
    "kafkajs-produce-request-v7.sll.tshark-x.txt": ("Produce", 7),
    "kafkajs-produce-request-v7.sll2.tshark-x.txt": ("Produce", 7),
    "kafkajs-produce-request-v7.rawip.tshark-x.txt": ("Produce", 7),
    "kafkajs-produce-request-v7.null.tshark-x.txt": ("Produce", 7),
    "metadata-request-v12.od-Ax-tx1.txt": ("Metadata", 12),
    "saslauthenticate-request-v2.od-Ax-tx1.txt": ("SaslAuthenticate", 2),
    "produce-request-v9.od-tx1.txt": ("Produce", 9),
    "metadata-request-v12.xxd-i.txt": ("Metadata", 12),
    "produce-request-v9.go-sharp-v.txt": ("Produce", 9),
    "produce-request-v9.go-v.txt": ("Produce", 9),
    "produce-request-v9.java-arrays-tostring.txt": ("Produce", 9),
    "produce-request-v9.node-buffer-json.txt": ("Produce", 9),
    "produce-request-v9.python-bytes-repr.txt": ("Produce", 9),
    "produce-request-v9.python-str-repr.txt": ("Produce", 9),
    "produce-request-v9.base64.txt": ("Produce", 9),
}


@pytest.mark.parametrize("dump", sorted(DUMP_FORMS))
def test_every_single_message_dump_decodes_like_its_hex(dump):
    api, version = DUMP_FORMS[dump]
    j = _decoded(f"@{DUMPS / dump}")
    assert (j["api_name"], j["api_version"], j["kind"]) == (api, version, "request")
    stem = dump.split(".")[0]
    if (HEX / f"{stem}.hex").exists():
        assert j == _decoded(f"@{HEX / stem}.hex")
    # a single frame's output is today's exact output: the same tree as its plain hex
    frame = (DUMPS / f"{stem}.bin") if (DUMPS / f"{stem}.bin").exists() else None
    if frame is not None:
        assert kwire("decode", f"@{DUMPS / dump}").out == kwire("decode", frame.read_bytes().hex()).out


def test_node_inspect_output_is_one_line_error_naming_what_is_missing():
    r = kwire("decode", f"@{DUMPS / 'produce-request-v9.node-buffer-inspect.txt'}")
    assert r.code == 1 and r.out == ""
    assert r.err == (f"kwire: error: {DUMPS / 'produce-request-v9.node-buffer-inspect.txt'}: the <Buffer> at "
                     "line 1 shows 50 bytes and leaves out 114 more: Node prints only the first 50 bytes; print "
                     "buffer.toString('hex') instead\n")


def test_a_conversation_decodes_frame_after_frame_with_responses_paired():
    r = kwire("decode", f"@{DUMPS / 'kafkajs-packets-4-9.tcpdump-X.txt'}")
    assert r.code == 0 and r.err == "", r
    heads = [line for line in r.out.splitlines() if line.startswith("── ")]
    assert heads == [
        "── frame 1 of 4: lines 1-6 (127.0.0.1:52206 > 127.0.0.1:9092)",
        "── frame 2 of 4: lines 12-30 (127.0.0.1:9092 > 127.0.0.1:52206), the answer to frame 1",
        "── frame 3 of 4: lines 36-43 (127.0.0.1:52206 > 127.0.0.1:9092)",
        "── frame 4 of 4: lines 44-57 (127.0.0.1:9092 > 127.0.0.1:52206), the answer to frame 3"]
    assert "ApiVersions v2 response  api key 18, 230 bytes" in r.out
    j = kwire("decode", f"@{DUMPS / 'kafkajs-produce.follow-tcp-hex.txt'}", "--format", "json").json()
    assert [(m["api_name"], m["kind"], m["input"].get("answers_frame")) for m in j] == [
        ("ApiVersions", "request", None), ("ApiVersions", "response", 1), ("Metadata", "request", None),
        ("Metadata", "response", 3), ("Produce", "request", None), ("Produce", "response", 5),
        ("Metadata", "request", None), ("Metadata", "response", 7), ("Produce", "request", None),
        ("Produce", "response", 9)]
    assert j[1]["input"] == {"frame": 2, "first_line": 9, "last_line": 23, "form": "follow-tcp-hex",
                             "label": "node 1", "direction": "127.0.0.1:9092 > 127.0.0.1:52206", "bytes": 234,
                             "answers_frame": 1}
    y = kwire("decode", f"@{DUMPS / 'kafkajs-produce.follow-tcp-hex.txt'}", "--format", "yaml")
    import yaml
    docs = list(yaml.safe_load_all(y.out))
    assert docs == j
    # a decoded frame is a message document again: kwire encode gives its bytes back
    back = kwire("encode", "-", input=json.dumps(j[4]))
    assert back.code == 0, back
    assert bytes.fromhex(back.out.strip()) == split_follow()[4]


def split_follow() -> list[bytes]:
    from kwire_cli.inputs import read_blocks
    from kwire_cli.inputs.frames import split_frames
    return [f.data for f in split_frames(read_blocks((DUMPS / "kafkajs-produce.follow-tcp-hex.txt").read_text()))]


def test_two_frames_in_one_file_are_two_messages(tmp_path):
    """Two requests back to back in one binary file used to read as one "Produce v77" message."""
    two = tmp_path / "two.bin"
    two.write_bytes(EXPECTED_MR + (DUMPS / "produce-request-v9.bin").read_bytes())
    j = _decoded(f"@{two}")
    assert [(m["api_name"], m["api_version"], m["input"]["first_line"]) for m in j] == [
        ("Metadata", 12, 0), ("Produce", 9, 0)]
    r = kwire("decode", f"@{two}")
    assert "── frame 2 of 2: bytes 74-237" in r.out
    # a response without its request needs --api/--version, as one alone does
    resp = (HEX / "produce-response-v9.hex").read_text().strip()
    r = kwire("decode", EXPECTED_MR.hex() + resp)
    assert r.code == 1
    assert r.err.startswith("kwire: error: 1 of 2 frames do not decode; frame 2 (line 1): ")
    assert "── frame 2 of 2: line 1: does not decode: " in r.out and "Metadata v12 request" in r.out
    r = kwire("decode", (HEX / "produce-request-v9.hex").read_text().strip() + resp, "--format", "json")
    assert r.code == 0 and [m["kind"] for m in r.json()] == ["request", "response"]


def test_one_byte_short_blames_the_size_prefix():
    h = (HEX / "saslauthenticate-request-v2.hex").read_text().strip()
    r = kwire("decode", h[:-2])
    assert (r.code, r.out) == (1, "")
    assert r.err == ("kwire: error: size prefix says 98 bytes, only 97 follow (the input is cut short; if it has "
                     "no size prefix, give --no-size-prefix)\n")
    r = kwire("decode", h + "0000", "--strict")  # two bytes after the frame: not a frame of their own
    assert r.err == ("kwire: error: 2 bytes after the 98-byte frame at offset 102, which are not a whole Kafka "
                     "frame (the size prefix says 98 bytes, 100 follow)\n")
    # without --strict: the frame, and the two bytes as a named violation
    r = kwire("decode", h + "0000", "--format", "json")
    assert r.code == 0 and json.loads(r.out)["violations"] == [
        {"path": "", "offset": 102, "rule": "trailing-bytes",
         "detail": "2 bytes after the 98-byte frame at offset 102, which are not a whole Kafka frame (the size "
                   "prefix says 98 bytes, 100 follow)"}]
    assert json.loads(r.out)["body"] == json.loads(kwire("decode", h, "--format", "json").out)["body"]


def test_a_missing_file_is_named_as_one():
    for args, line in ((["decode", "fixtures/hex/nope.hex"], "INPUT: no such file: fixtures/hex/nope.hex"),
                       (["decode", "./nope"], "INPUT: no such file: ./nope"),
                       (["decode", "fixtures/hex"], "INPUT: is a directory: fixtures/hex"),
                       (["diff", "--what-if-tagged", "ErrorCode", "fixtures/hex/nope.hex"],
                        "MESSAGE: no such file: fixtures/hex/nope.hex")):
        r = kwire(*args)
        assert (r.code, r.out, r.err) == (2, "", f"kwire: error: {line} (give a file as @FILE)\n")
    # a bare path that exists is read
    assert _decoded("fixtures/hex/metadata-request-v12.hex") == _decoded(EXPECTED_MR.hex())


def test_diff_what_if_tagged_reads_long_hex_with_several_frames():
    h = (HEX / "findcoordinator-response-v4.hex").read_text().strip()
    r = kwire("diff", "--what-if-tagged", "ErrorCode,ErrorMessage", h * 40, "--api", "FindCoordinator",
              "--version", "4", "--format", "json")
    assert r.code == 0, r   # once "File name too long" as an internal error
    j = r.json()
    assert j["total"]["messages"] == 40 and len({m["bytes_now"] for m in j["messages"]}) == 1
    assert j["messages"][39]["source"].endswith("#40 (line 1)")


# ------------------------------------------------------------------ pasted forms
def _kafka_python_packet(n: int):
    from kwire_cli.capture import Packet, iter_packets
    (pkt,) = [p for p in iter_packets(str(ROOT / "fixtures" / "captures" / "kafka-python-admin.pcap"))
              if p.__class__ is Packet and p.packet == n]
    return pkt


def test_a_packet_copied_as_a_hex_stream_is_cut_to_its_tcp_payload():
    """Wireshark's Copy as Hex Stream of packet 8 of kafka-python-admin.pcap (Ethernet, IP, TCP,
    then a Metadata request): decoded as the request it carries, as a tcpdump -x dump of it is
    (it was read as a Produce v0 request of 4,784,129 topics)."""
    from kwire_cli.capture.reader import iter_records
    pkt = _kafka_python_packet(8)
    (whole,) = [bytes(r[3][r[4]:r[5]]) for r in iter_records(str(ROOT / "fixtures" / "captures" / "kafka-python-admin.pcap"))
                if isinstance(r, tuple) and r[0] == 8]
    assert len(whole) > len(pkt.payload) and whole.endswith(pkt.payload)
    for text in (whole.hex(), " ".join(f"{b:02x}" for b in whole)):
        got = kwire("decode", text, "--format", "json")
        want = kwire("decode", pkt.payload.hex(), "--format", "json")
        assert got.code == 0 and got.json() == want.json() and got.json()["api_name"] == "Metadata", got
    # a Kafka frame whose size prefix fits is never taken for a packet
    assert kwire("decode", pkt.payload.hex(), "--format", "json").json()["api_name"] == "Metadata"


def test_bytes_given_as_separate_arguments_are_joined():
    words = "00 00 00 1d 00 12 00 03 00 00 00 01 00 05 6b 77 69 72 65 00 06 6b 77 69 72 65 06 30 2e 31 2e 30 00"
    got = kwire("decode", *words.split(), "--format", "json")
    assert got.code == 0, got
    assert got.json() == kwire("decode", words.replace(" ", ""), "--format", "json").json()
    assert got.json()["body"]["ClientSoftwareName"] == "kwire"
    r = kwire("decode", "@fixtures/hex/metadata-request-v12.hex", "00")
    assert r.code == 2 and "give it alone" in r.err


def test_a_byte_string_pasted_without_its_quotes_is_read():
    bare = "\\x00\\x00\\x00\\x1d\\x00\\x12\\x00\\x03\\x00\\x00\\x00\\x01\\x00\\x05kwire\\x00\\x06kwire\\x060.1.0\\x00"
    got = kwire("decode", bare, "--format", "json")
    assert got.code == 0, got
    assert got.json() == kwire("decode", f"b'{bare}'", "--format", "json").json()
    assert got.json()["body"]["ClientSoftwareVersion"] == "0.1.0"
    # escapes alone read as plain hex, as before: \x0012 is the bytes 00 12 there
    assert kwire("decode", "\\x00\\x00\\x00\\x0a\\x00\\x12\\x00\\x00\\x00\\x00\\x00\\x07\\xff\\xff",
                 "--format", "json").json()["api_name"] == "ApiVersions"


def test_an_empty_body_with_no_header_decodes():
    """A message with no fields at its version has no bytes (sarama's test vectors; kio and
    kafka-python read it)."""
    got = kwire("decode", "", "--api", "ListGroups", "--version", "2", "--kind", "request", "--no-header",
                "--format", "json")
    assert got.code == 0, got
    assert (got.json()["api_name"], got.json()["body"], got.json()["size"]) == ("ListGroups", {}, 0)
    # at a version whose body is not empty, the empty body breaks the format: listed, or with --strict an error
    bad = kwire("decode", "", "--api", "ListGroups", "--version", "3", "--kind", "request", "--no-header")
    assert bad.code == 0 and "missing-tags" in bad.out
    bad = kwire("decode", "", "--api", "ListGroups", "--version", "3", "--kind", "request", "--no-header", "--strict")
    assert bad.code == 1 and "tagged field count" in bad.err
    # without --no-header nothing is read from no bytes
    assert "empty input" in kwire("decode", "").err
