"""Issue 13, items 4-6: KIP-511 fallback answers, lenient decoding with named violations, and
versions newer than the specs, on peers' vectors (fixtures/vectors) and on bytes built here, through
the codec, `kwire decode` and `kwire pcap`."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from capture_util import Conversation, write_pcap
from cli_run import kwire
from kwire_cli.codec import DecodeError, decode_request, decode_response, encode_request, encode_response
from kwire_cli.codec.lenient import decode_lenient
from kwire_cli.errors import UnknownVersion

ROOT = Path(__file__).resolve().parents[1]
VEC = ROOT / "fixtures" / "vectors"
FILES = json.loads((VEC / "manifest.json").read_text())["files"]


def vec(name: str) -> bytes:
    return bytes.fromhex((VEC / name).read_text().strip())


def pcap_of(*frames: tuple[int, bytes]) -> bytes:
    """One connection carrying ``frames`` ((0 client | 1 server, size-prefixed bytes) each)."""
    c = Conversation()
    segs = c.handshake()
    for side, data in frames:
        segs += c.send(side, data)
    return write_pcap(segs)


def rows(tmp_path, pcap: bytes, *args: str) -> list[dict]:
    p = tmp_path / "c.pcap"
    p.write_bytes(pcap)
    r = kwire("pcap", str(p), "--format", "jsonl", *args)
    assert r.code == 0, r
    return [json.loads(line) for line in r.out.splitlines()]


# ------------------------------------------------------------------------------------------------
# 4. KIP-511 fallback answers

KIP511 = ["kafka-python/api-versions-1.0.apiversions-v4-response.hex",
          "kafka-python/api-versions-2.0.apiversions-v4-response.hex"]
SARAMA_KIP511 = sorted(n for n in FILES if n.startswith("sarama/apiversions-unsupported-version"))


@pytest.mark.parametrize("name", KIP511)
def test_kafka_python_kip511_answers_decode_as_clients_read_them(name):
    e = FILES[name]
    req = FILES[name]["answers"]
    r = kwire("decode", "@" + str(VEC / name), "--request", "@" + str(VEC / req), "--format", "json")
    assert r.code == 0 and r.err == "", r
    out = json.loads(r.out)
    assert (out["api_name"], out["api_version"], out["layout_version"]) == ("ApiVersions", 4, 0)
    assert out["header"]["CorrelationId"] == e["asserts"]["correlation_id"]
    assert out["body"]["ErrorCode"] == e["asserts"]["fields"]["error_code"] == 35
    assert [[k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in out["body"]["ApiKeys"]] == \
        e["asserts"]["fields"]["api_keys"]
    assert out["notes"][0].startswith("KIP-511: the broker does not support ApiVersions v4")
    # the tree says how it was read
    r = kwire("decode", "@" + str(VEC / name), "--request", "@" + str(VEC / req))
    assert r.code == 0 and "ApiVersions v4 response (read as v0)" in r.out and "note: KIP-511" in r.out


@pytest.mark.parametrize("name", SARAMA_KIP511)
def test_sarama_kip511_bodies_decode_with_the_request_version(name):
    e = FILES[name]
    v = e["asserts"]["decoded_with_request_version"]
    r = kwire("decode", vec(name).hex(), "--no-header", "--api", "ApiVersions", "--version", str(v), "--format", "json")
    assert r.code == 0, r
    out = json.loads(r.out)
    assert out["layout_version"] == 0 and out["body"]["ErrorCode"] == e["asserts"]["error_code"]
    assert [[k["ApiKey"], k["MinVersion"], k["MaxVersion"]] for k in out["body"]["ApiKeys"]] == e["asserts"]["api_keys"]


def test_kip511_is_only_for_unsupported_version_answers():
    """The v0 layout is the fallback of an UNSUPPORTED_VERSION answer only: any other error code in
    bytes the asked version cannot read stays an error (strict) or a listed violation."""
    body = struct.pack(">hi", 0, 0)  # ErrorCode 0 in the v0 layout, answered to a v3 request
    with pytest.raises(DecodeError):
        decode_response(struct.pack(">i", 1) + body, "ApiVersions", 3, size_prefixed=False)
    ok = decode_response(struct.pack(">i", 1) + struct.pack(">hi", 35, 0), "ApiVersions", 3, size_prefixed=False)
    assert ok.layout_version == 0 and ok.body == {"ErrorCode": 35, "ApiKeys": []}


def test_pcap_pairs_and_decodes_a_kip511_answer(tmp_path):
    name = KIP511[0]
    req = vec(FILES[name]["answers"])
    resp = vec(name)
    rs = rows(tmp_path, pcap_of((0, req), (1, resp)))
    assert [r["kind"] for r in rs] == ["request", "response"]
    r = rs[1]
    assert r["error"] is None and r["api_version"] == 4 and r["body"]["ErrorCode"] == 35
    assert r["notes"][0].startswith("KIP-511") and "violations" not in r
    table = kwire("pcap", str(tmp_path / "c.pcap"))
    assert "KIP-511" in table.out.splitlines()[-1]


# ------------------------------------------------------------------------------------------------
# 5. lenient decoding, named violations

def test_sarama_null_results_show_the_null_and_name_the_rule():
    for name in ("sarama/describelogdirs-v2-empty-null-results-response.body.hex",
                 "sarama/describelogdirs-v4-empty-null-results-response.body.hex"):
        v = FILES[name]["api_version"]
        with pytest.raises(DecodeError, match="not nullable"):
            decode_lenient(vec(name), "response", "DescribeLogDirs", v, header=False, strict=True)
        m = decode_lenient(vec(name), "response", "DescribeLogDirs", v, header=False)
        assert m.body["Results"] is None
        assert [(x.path, x.rule) for x in m.violations] == [("Results", "null-not-nullable")]
        r = kwire("decode", vec(name).hex(), "--no-header", "--api", "DescribeLogDirs", "--version", str(v),
                  "--format", "json")
        assert r.code == 0 and json.loads(r.out)["violations"][0]["rule"] == "null-not-nullable"
        assert "1 violation of the Kafka protocol format (null-not-nullable)" in r.err
        r = kwire("decode", vec(name).hex(), "--no-header", "--api", "DescribeLogDirs", "--version", str(v),
                  "--strict")
        assert r.code == 1 and r.out == "" and "Results: null at offset" in r.err


def test_sarama_missing_tag_byte_is_read_as_no_tags_and_named():
    """sarama leaves out a config entry's tag section: read by the spec, the body is one byte short at
    its very end, where the message's own tag section should be; leniently that is read as no tagged
    fields (missing-tags), and the values sarama's test asserts are the ones shown."""
    name = "sarama/alterconfigs-v2-missing-tag-byte-request.body.hex"
    args = ("decode", vec(name).hex(), "--no-header", "--api", "AlterConfigs", "--version", "2", "--kind", "request")
    r = kwire(*args, "--format", "json")
    assert r.code == 0, r
    out = json.loads(r.out)
    want = FILES[name]["asserts"]
    assert out["body"]["ValidateOnly"] is want["validate_only"] is False
    assert out["body"]["Resources"][0]["Configs"] == [{"Name": "segment.ms", "Value": "1000"}]
    assert out["violations"] == [{"path": "", "offset": 26, "rule": "missing-tags",
                                  "detail": "the tagged-field section is missing at offset 26, where the bytes "
                                            "end (read as none)"}]
    r = kwire(*args, "--strict", "--partial", "--format", "json")
    assert r.code == 1 and json.loads(r.out)["error"]["offset"] == 26
    assert "tagged field count needs 1 bytes, 0 left at offset 26" in r.err


TANSU = ROOT / "fixtures" / "violations"


@pytest.mark.parametrize("name,api,version", [("createacls-v3", "CreateAcls", 3),
                                              ("describeuserscramcredentials-v0", "DescribeUserScramCredentials", 0)])
def test_a_real_brokers_null_results_decode_with_their_violations(name, api, version):
    req = "@" + str(TANSU / f"tansu-{name}-request.hex")
    resp = "@" + str(TANSU / f"tansu-{name}-response.hex")
    r = kwire("decode", resp, "--request", req, "--format", "json")
    assert r.code == 0, r
    out = json.loads(r.out)
    assert out["body"]["Results"] is None and out["body"]["ThrottleTimeMs"] == 0
    assert [(v["path"], v["rule"]) for v in out["violations"]] == [("Results", "null-not-nullable"),
                                                                   ("", "missing-tags")]
    assert kwire("decode", resp, "--request", req, "--strict").code == 1


def test_a_real_brokers_capture_counts_the_violations_by_rule():
    rs = [json.loads(line) for line in kwire("pcap", str(TANSU / "tansu.pcap"), "--format", "jsonl").out.splitlines()]
    assert [(x["api_name"], x["kind"], x["error"]) for x in rs] == [
        ("CreateAcls", "request", None), ("CreateAcls", "response", None),
        ("DescribeUserScramCredentials", "request", None), ("DescribeUserScramCredentials", "response", None)]
    assert [len(x.get("violations") or []) for x in rs] == [0, 2, 0, 2]
    r = kwire("pcap", str(TANSU / "tansu.pcap"), "--summary")
    assert "decoded with violations of the format 2" in r.out
    assert "violations by rule: missing-tags 2, null-not-nullable 2" in r.out
    r = kwire("pcap", str(TANSU / "tansu.pcap"), "--strict", "--summary")
    assert r.code == 1 and "undecodable 2" in r.out


def latin1_request() -> bytes:
    req = bytearray(encode_request("Metadata", 1, {"CorrelationId": 7, "ClientId": "cafX"}, {"Topics": None}))
    req[req.index(b"cafX") + 3] = 0xE9  # Latin-1 é: a Java broker takes it
    return bytes(req)


def test_a_latin1_client_id_is_shown_as_its_bytes_and_named():
    m = decode_lenient(latin1_request(), "request")
    assert m.header["ClientId"] == {"invalid_utf8": "636166e9"}
    assert [x.to_json() for x in m.violations] == [
        {"path": "ClientId", "offset": 17, "rule": "invalid-utf8",
         "detail": "invalid UTF-8 at offset 17: unexpected end of data"}]
    r = kwire("decode", latin1_request().hex())
    assert r.code == 0 and "636166e9" in r.out and "not UTF-8" in r.out and "⚠ violation invalid-utf8" in r.out
    # what was on the wire is what encodes back
    assert encode_request("Metadata", 1, {"CorrelationId": 7, "ClientId": m.header["ClientId"]},
                          m.body) == latin1_request()


def test_pcap_reads_every_request_of_a_latin1_client_and_counts_the_violations(tmp_path):
    req = latin1_request()
    resp = encode_response("Metadata", 1, {"CorrelationId": 7},
                           {"Brokers": [], "ControllerId": 1, "Topics": []})
    pcap = pcap_of((0, req), (1, resp))
    rs = rows(tmp_path, pcap)
    assert rs[0]["error"] is None and rs[0]["client_id"] == "caf\\xe9"
    assert rs[0]["violations"][0]["rule"] == "invalid-utf8"
    assert rs[1]["error"] is None and rs[1]["client_id"] == "caf\\xe9"  # the response pairs with it
    r = kwire("pcap", str(tmp_path / "c.pcap"), "--summary", "--format", "jsonl")
    assert r.code == 0
    r = kwire("pcap", str(tmp_path / "c.pcap"), "--summary")
    assert "decoded with violations of the format 1" in r.out and "invalid-utf8 1" in r.out
    # --strict: that request is undecodable, and the command says so with exit 1
    r = kwire("pcap", str(tmp_path / "c.pcap"), "--strict", "--format", "jsonl")
    assert r.code == 1
    strict = [json.loads(line) for line in r.out.splitlines()]
    assert strict[0]["error"].endswith("invalid UTF-8 at offset 13: unexpected end of data")
    assert "violations" not in strict[0]


def test_tags_out_of_order_and_a_short_tag_value_are_read_and_named():
    base = b"\x02a\x02b"  # ApiVersions v3 request: ClientSoftwareName "a", ClientSoftwareVersion "b"
    two = b"\x02" + b"\x09\x01\xbb" + b"\x05\x01\xaa"  # unknown tags 9 then 5
    m = decode_lenient(base + two, "request", "ApiVersions", 3, header=False)
    assert m.body["_unknown_tags"] == {"9": "bb", "5": "aa"}
    assert [(x.rule, x.detail) for x in m.violations] == [
        ("tag-order", "tag 5 comes after tag 9: tagged fields must be in ascending tag order, each once")]
    # ApiVersions v3 response: SupportedFeatures (tag 0) declares 3 bytes; its value (an empty array) uses 1
    resp = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x01" + b"\x00\x03" + b"\x01\xff\xff"
    with pytest.raises(DecodeError):
        decode_response(struct.pack(">i", 1) + resp, "ApiVersions", 3, size_prefixed=False)
    m = decode_lenient(resp, "response", "ApiVersions", 3, header=False)
    assert m.body["SupportedFeatures"] == []
    assert [(x.path, x.rule) for x in m.violations] == [("SupportedFeatures", "tag-size")]


def test_a_records_field_that_does_not_frame_is_kept_as_hex():
    good = decode_request(bytes.fromhex((ROOT / "fixtures/hex/produce-request-v9.hex").read_text().strip()))
    body = good.body
    body["TopicData"][0]["PartitionData"][0]["Records"] = "00000000000000000000000aff"  # batch length 10 < 14
    data = encode_request("Produce", 9, good.header, body)
    with pytest.raises(DecodeError, match="length 10 is below the minimum of 14 bytes"):
        decode_request(data)
    m = decode_lenient(data, "request")
    assert m.body["TopicData"][0]["PartitionData"][0]["Records"] == "00000000000000000000000aff"
    assert [(v.path, v.rule) for v in m.violations] == [("TopicData[0].PartitionData[0].Records", "records")]
    assert "length 10 is below the minimum of 14 bytes" in m.violations[0].detail
    assert m.body["TopicData"][0]["Name"] == good.body["TopicData"][0]["Name"]  # the rest as it is


def test_a_frame_cut_short_is_never_read_from_its_size_prefix():
    """The --partial view of a response cut short: the header after the size prefix, not the size
    prefix read as a correlation id (CorrelationId: 156, Brokers: 0 items)."""
    h = (ROOT / "fixtures/hex/metadata-response-v12.hex").read_text().split()
    h = "".join(h)
    cut = h[:120]
    for extra in ([], ["--size-prefix"]):
        r = kwire("decode", cut, "--api", "Metadata", "--version", "12", "--partial", "--format", "json", *extra)
        assert r.code == 1
        out = json.loads(r.out)
        assert out["header"]["CorrelationId"] == struct.unpack(">i", bytes.fromhex(h[8:16]))[0]
        assert out["body"]["Brokers"][0]["Host"] == "broker-1.example"
        assert "size prefix says" in r.err
    r = kwire("decode", cut, "--api", "Metadata", "--version", "12")
    assert (r.code, r.out) == (1, "") and "the input is cut short" in r.err


# ------------------------------------------------------------------------------------------------
# 6. versions newer than the specs

def newer(api: str, version: int, newest: int, header: dict, body: dict, extra: bytes = b"") -> bytes:
    data = bytearray(encode_request(api, newest, header, body))
    data[6:8] = struct.pack(">h", version)
    data += extra
    data[0:4] = struct.pack(">i", len(data) - 4)
    return bytes(data)


def test_a_metadata_v14_request_reads_as_an_assumed_version():
    data = newer("Metadata", 14, 13, {"CorrelationId": 3, "ClientId": "kafka-4.4"},
                 {"Topics": [{"TopicId": "AAAAAAAAAAAAAAAAAAAAAA", "Name": "t"}], "AllowAutoTopicCreation": False,
                  "IncludeTopicAuthorizedOperations": False})
    m = decode_request(data)
    assert (m.api_version, m.layout_version) == (14, 13) and m.body["Topics"][0]["Name"] == "t"
    assert m.notes == ["assumed version: Metadata v14 is newer than the specs in use (newest v13); its bytes read "
                       "whole with the v13 layout, shown here"]
    r = kwire("decode", data.hex())
    assert r.code == 0 and r.out.startswith("Metadata v14 request (read as v13)") and "assumed version" in r.out


def test_a_newer_version_that_does_not_read_says_which_specs_and_what_to_do():
    data = newer("Metadata", 14, 13, {"CorrelationId": 3, "ClientId": "c"}, {"Topics": None}, extra=b"\x07\x00")
    with pytest.raises(UnknownVersion) as ei:
        decode_request(data)
    msg = str(ei.value)
    assert "Metadata v14 is newer than the specs in use (Metadata 0-13 in " in msg
    assert "--specs DIR reads a newer Kafka checkout's" in msg
    r = kwire("decode", data.hex())
    assert r.code == 1 and "newer than the specs in use" in r.err and len(r.err.splitlines()) == 1


def test_pcap_labels_an_assumed_version_and_pairs_its_response(tmp_path):
    req = newer("Metadata", 14, 13, {"CorrelationId": 9, "ClientId": "kafka-4.4"},
                {"Topics": None, "AllowAutoTopicCreation": False, "IncludeTopicAuthorizedOperations": False})
    resp = encode_response("Metadata", 13, {"CorrelationId": 9},
                           {"Brokers": [{"NodeId": 1, "Host": "h", "Port": 9092}], "ControllerId": 1, "Topics": []})
    rs = rows(tmp_path, pcap_of((0, req), (1, resp)))
    assert [(r["kind"], r["api_version"], r["error"]) for r in rs] == [("request", 14, None), ("response", 14, None)]
    assert all(r["notes"][0].startswith("assumed version: Metadata v14") for r in rs)
    assert rs[1]["body"]["Brokers"][0]["Host"] == "h"
