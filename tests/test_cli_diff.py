"""kwire diff: schema changes, bytes per part, and the ErrorCode/ErrorMessage tagged what-if,
checked against a real re-encoding with the fields made tagged."""
from __future__ import annotations

import copy

import pytest
import yaml

from cli_run import ROOT, kwire, pairs
from kwire_cli.codec import compile_plan, decode_request, decode_response
from kwire_cli.spec import build_message_spec, registry
from kwire_cli.spec.jsonc import loads_jsonc
from kwire_cli.whatif import sum_what_if, what_if_message, what_if_tagged

PAIRS = pairs()


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def _raw_spec(name: str) -> dict:
    return loads_jsonc((ROOT / "specs" / f"{name}.json").read_text())


# --------------------------------------------------------------------------- schema diff

def _changes(j, kind):
    return {(c["path"], c["change"]): (c["from"], c["to"]) for c in j["kinds"][kind]["changes"]}


def test_metadata_8_to_12():
    r = kwire("diff Metadata 8 12 --format json")
    assert r.code == 0, r
    j = r.json()
    req = j["kinds"]["request"]
    assert req["flexible"] == {"from": False, "to": True} and req["header_version"] == {"from": 1, "to": 2}
    assert j["kinds"]["response"]["header_version"] == {"from": 0, "to": 1}
    c = _changes(j, "request")
    # MetadataRequest.json: TopicId is "10+", Name nullable "10+", IncludeClusterAuthorizedOperations "8-10"
    assert c[("Topics[].TopicId", "added")] == (None, "UUID")
    assert c[("Topics[].Name", "nullable")] == ("not nullable", "nullable")
    assert c[("Topics[].Name", "wire_type")] == ("STRING", "COMPACT_NULLABLE_STRING")
    assert c[("IncludeClusterAuthorizedOperations", "removed")] == ("BOOLEAN", None)
    assert c[("Topics", "wire_type")] == ("NULLABLE ARRAY(MetadataRequestTopic)",
                                          "NULLABLE COMPACT_ARRAY(MetadataRequestTopic)")
    resp = _changes(j, "response")
    assert resp[("Topics[].Partitions[].ReplicaNodes", "wire_type")] == ("ARRAY(INT32)", "COMPACT_ARRAY(INT32)")
    assert resp[("ClusterAuthorizedOperations", "removed")] == ("INT32", None)


def test_diff_agrees_with_the_spec_file_for_every_field():
    """Every field of ProduceResponse added between v0 and v11 is reported, at its first version."""
    raw = _raw_spec("ProduceResponse")
    j = kwire("diff Produce 0 11 --kind response --format json").json()
    added = {p for (p, ch) in _changes(j, "response") if ch == "added"}

    def walk(fields, prefix):
        out = set()
        for f in fields:
            lo = int(f["versions"].split("+")[0].split("-")[0])
            path = prefix + f["name"]
            if lo > 11:
                continue  # a later version's (v13's topic ids)
            if lo > 0:
                out.add(path)
                continue  # its children come with it
            if f.get("fields"):
                out |= walk(f["fields"], path + ("[]." if f["type"].startswith("[]") else "."))
        return out
    assert added == walk(raw["fields"], "")
    assert set(j["kinds"]) == {"response"}


def test_tagged_fields_show_their_tags():
    c = _changes(kwire("diff Fetch 11 12 --kind request --format json").json(), "request")
    assert c[("ClusterId", "added")] == (None, "COMPACT_NULLABLE_STRING, tag 0")
    c = _changes(kwire("diff ApiVersions 2 3 --kind response --format json").json(), "response")
    assert c[("FinalizedFeaturesEpoch", "added")] == (None, "INT64, tag 1")


def test_pretty_diff_is_a_table():
    r = kwire("diff Produce 8 9 --kind response")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "ProduceResponse v8 → v9, not flexible → flexible, header v0 → v1"
    assert any(ln.split() == ["wire", "type", "Responses[].PartitionResponses[].ErrorMessage", "NULLABLE_STRING",
                              "COMPACT_NULLABLE_STRING"] for ln in lines)
    r = kwire("diff Heartbeat 4 4")
    assert "HeartbeatRequest v4 → v4, flexible, header v2: no field changes" in r.out


@pytest.mark.parametrize("args,code,line", [
    ("diff Nope 1 2", 2, "API: unknown API 'Nope' (see `kwire list`)"),
    ("diff Metadata 1 14", 2, "V2: Metadata has no version 14 (valid: 0-13)"),
    ("diff Metadata x 2", 2, "V1 must be a version number, got 'x'"),
    ("diff Metadata 1", 2, "expected API V1 V2, got 2 arguments"),
    ("diff Metadata 1 2 --api Metadata", 2, "--api, --version and --request go with --what-if-tagged"),
    ("diff --what-if-tagged ErrorCode", 2, "--what-if-tagged needs at least one MESSAGE"),
    ("diff --what-if-tagged ErrorCode 00zz", 1, "not hex: unexpected character 'z'"),
])
def test_diff_errors(args, code, line):
    r = kwire(args)
    assert r.code == code, r
    assert r.err.count("\n") == 1 and r.err.startswith("kwire: error: " + line), r.err


# --------------------------------------------------------------------------- --bytes

def test_bytes_per_part_add_up_to_the_real_encodings():
    r = kwire("diff Metadata 1 12 --bytes fixtures/yaml/metadata-request-v12.yaml --format json")
    assert r.code == 0, r
    j = r.json()
    doc = yaml.safe_load((ROOT / "fixtures/yaml/metadata-request-v12.yaml").read_text())
    from kwire_cli.codec import encode_request
    v12 = encode_request("Metadata", 12, doc["header"], doc["body"])
    v1 = encode_request("Metadata", 1, doc["header"], {"Topics": doc["body"]["Topics"]})
    assert j["total"] == {"from": len(v1), "to": len(v12), "delta": len(v12) - len(v1)}
    parts = {p["part"]: p for p in j["parts"]}
    assert sum(p["from"] or 0 for p in j["parts"]) == len(v1)
    assert sum(p["to"] or 0 for p in j["parts"]) == len(v12)
    assert parts["header"]["from"] == 2 + 2 + 4 + 2 + len("kwire")          # header v1
    assert parts["header"]["to"] == 2 + 2 + 4 + 2 + len("kwire") + 1        # header v2: + tag section
    # v1 topics: int32 count + (int16 + name) each; v12: varint count + (uuid + varint + name + tags) each
    assert parts["Topics"]["from"] == 4 + (2 + 6) + (2 + 8)
    assert parts["Topics"]["to"] == 1 + (16 + 1 + 6 + 1) + (16 + 1 + 8 + 1)
    assert j["dropped"]["from"] == ["AllowAutoTopicCreation", "IncludeTopicAuthorizedOperations"]
    pretty = kwire("diff Metadata 1 12 --bytes fixtures/yaml/metadata-request-v12.yaml").out
    assert "left out at v1: AllowAutoTopicCreation, IncludeTopicAuthorizedOperations" in pretty


# --------------------------------------------------------------------------- what-if

def test_produce_response_what_if_matches_the_rule_of_thumb():
    j = kwire("diff --what-if-tagged ErrorCode,ErrorMessage fixtures/yaml/produce-response-v9.yaml "
              "--format json").json()
    m = j["messages"][0]
    per = {p["field"]: p for p in m["per_field"]}
    # 3 partitions: codes 0, 0, 87; messages null, null, a 38-byte string
    assert (per["ErrorCode"]["instances"], per["ErrorCode"]["at_default"], per["ErrorCode"]["set"]) == (3, 2, 1)
    assert per["ErrorCode"]["saving"] == 2 * 2 - 2                  # two zeros save 2 each, a code costs 2
    assert per["ErrorMessage"]["saving"] == 2 * 1 - 2               # two nulls save 1 each, a message costs 2
    assert m["saving"] == 2 and m["bytes_tagged"] == m["bytes_now"] - 2
    assert j["total"]["saving"] == 2


def test_what_if_on_hex_not_applicable_and_totals():
    r = kwire("diff --what-if-tagged ErrorCode,ErrorMessage fixtures/yaml/produce-response-v7.yaml "
              "@fixtures/hex/findcoordinator-response-v4.hex --api FindCoordinator --version 4 --format json")
    assert r.code == 0, r
    j = r.json()
    v7, fc = j["messages"]
    assert v7["applicable"] is False and v7["saving"] == 0
    assert v7["reason"] == "Produce v7 response is not flexible (flexible versions: 9+): it has no tagged fields"
    # FindCoordinator v4: a found coordinator (0, null) saves 3; an error (15, 33-byte text) costs 4
    assert fc["saving"] == 3 - 4
    assert j["total"]["saving"] == -1 and j["total"]["messages"] == 2 and j["total"]["applicable"] == 1
    pretty = kwire("diff --what-if-tagged ErrorCode,ErrorMessage fixtures/yaml/produce-response-v7.yaml "
                   "@fixtures/hex/findcoordinator-response-v4.hex --api FindCoordinator --version 4").out
    assert "not applicable" in pretty and "costs 1" in pretty and "total over 2 messages" in pretty


def _tagged_variant(spec_name: str, fields: tuple[str, ...], version: int):
    """The spec with `fields` moved into the tagged section (next free tag per struct) at the
    message's flexible versions, defaulting to null when nullable: the proposal, as a spec."""
    raw = copy.deepcopy(_raw_spec(spec_name))
    flex = raw["flexibleVersions"]

    def fix(field_list):
        used = [int(f["tag"]) for f in field_list if "tag" in f]
        nxt = max(used) + 1 if used else 0
        for f in field_list:
            if f["name"] in fields and "tag" not in f:
                lo = f["versions"].split("+")[0].split("-")[0]
                f["versions"] = f"{lo}+"
                f["tag"] = nxt
                f["taggedVersions"] = flex if int(flex.rstrip("+")) >= int(lo) else f"{lo}+"
                nullable = f.get("nullableVersions")
                if nullable and version >= int(nullable.rstrip("+").split("-")[0]):
                    f["default"] = "null"
                    f["nullableVersions"] = nullable.split("-")[0].rstrip("+") + "+"
                nxt += 1
            if f.get("fields"):
                fix(f["fields"])
    fix(raw["fields"])
    for s in raw.get("commonStructs", []):
        fix(s["fields"])
    return build_message_spec(raw, f"{spec_name} (tagged variant)")


def _flexible_messages():
    out = []
    for name, p in PAIRS:
        if p["response"]:
            m = decode_response(bytes.fromhex(p["response"]), p["api_key"], p["api_version"], records="hex")
            out.append((name + ":response", m))
        out.append((name + ":request", decode_request(bytes.fromhex(p["request"]), records="hex")))
    for h in sorted((ROOT / "fixtures/yaml").glob("*.yaml")):
        d = yaml.safe_load(h.read_text())
        data = bytes.fromhex((ROOT / "fixtures/hex" / f"{h.stem}.hex").read_text().strip())
        m = (decode_request(data, records="hex") if d["kind"] == "request"
             else decode_response(data, d["api"], d["version"], records="hex"))
        out.append((h.name, m))
    return [(n, m) for n, m in out
            if registry().api(m.api_key).spec(m.kind).flexible(m.api_version)]


FLEX = _flexible_messages()


@pytest.mark.parametrize("name,msg", FLEX, ids=[n for n, _ in FLEX])
def test_what_if_equals_a_real_encoding_with_the_fields_tagged(name, msg):
    fields = ("ErrorCode", "ErrorMessage")
    spec = registry().api(msg.api_key).spec(msg.kind)
    now = bytearray()
    compile_plan(spec, msg.api_version, "hex").encode(msg.body, now)
    r = what_if_tagged(spec, msg.api_version, msg.body, fields)
    assert r["bytes_now"] == len(now)
    tagged = bytearray()
    compile_plan(_tagged_variant(spec.name, fields, msg.api_version), msg.api_version, "hex").encode(msg.body, tagged)
    assert r["saving"] == len(now) - len(tagged), r
    assert r["bytes_tagged"] == len(tagged)
    assert what_if_message(msg, fields)["saving"] == r["saving"]


def test_flexible_recorded_responses_carry_error_codes():
    carrying = [n for n, m in FLEX if what_if_message(m)["per_field"]]
    assert len(carrying) >= 20


def test_sum_what_if_adds_up():
    results = [what_if_message(m) for _, m in FLEX]
    total = sum_what_if(results)
    assert total["messages"] == len(results)
    assert total["saving"] == sum(r["saving"] for r in results)
    assert total["bytes_now"] - total["bytes_tagged"] == total["saving"]


def test_diff_across_the_old_and_new_layouts_of_produce():
    """Produce 12 -> 13 (Kafka 4.1+): topics by id instead of by name, in request and response; a
    version 4.0 removed says so."""
    j = kwire("diff Produce 12 13 --format json").json()
    assert set(_changes(j, "request")) == {("TopicData[].Name", "removed"), ("TopicData[].TopicId", "added")}
    assert set(_changes(j, "response")) == {("Responses[].Name", "removed"), ("Responses[].TopicId", "added")}
    assert j["version_notes"] == {}
    j = kwire("diff Produce 2 13 --kind request --format json").json()
    assert j["version_notes"] == {"v2": "removed in 4.0"}
    assert ("TransactionalId", "added") in _changes(j, "request")
    assert "ProduceRequest v2 → v13 (v2 removed in 4.0)" in kwire("diff Produce 2 13 --kind request").out


def test_what_if_sizes_a_string_that_is_not_utf8_as_its_bytes():
    """Lenient decoding shows such a string as {"invalid_utf8": HEX}: the what-if counts its bytes
    (kwire pcap --summary stopped on it with an internal error)."""
    from kwire_cli.codec import encode_body
    from kwire_cli.codec.lenient import decode_lenient
    body = {"ThrottleTimeMs": 0, "Results": [{"ErrorCode": 0, "ErrorMessage": "Nerror.", "ResourceType": 4,
                                              "ResourceName": "111", "Configs": []}]}
    data = bytearray(encode_body("DescribeConfigs", 4, "response", body))
    data[data.index(b"Nerror.") + 1] = 0xFF
    msg = decode_lenient(bytes(data), "response", "DescribeConfigs", 4, header=False)
    assert msg.body["Results"][0]["ErrorMessage"] == {"invalid_utf8": bytes.fromhex("4eff72726f722e").hex()}
    spec = registry().api("DescribeConfigs").response
    out = what_if_tagged(spec, 4, msg.body, size=len(data))
    plain = what_if_tagged(spec, 4, body, size=len(data))
    assert out["applicable"] and out["bytes_tagged"] == plain["bytes_tagged"] and out["saving"] == plain["saving"]


def test_what_if_totals_are_what_if_tagged_sums_on_every_captured_response():
    """The capture summary's what-if (``what_if_totals``: the sums alone) gives what
    ``what_if_tagged`` gives, applicable or not, on every decoded response of the recorded captures."""
    from kwire_cli.capture import CaptureStats, iter_capture
    from kwire_cli.capture.session import Conversation
    from kwire_cli.whatif import what_if_totals
    seen = applicable = 0
    for cap in sorted((ROOT / "fixtures" / "captures").glob("*.pcap")):
        for r in Conversation().rows(iter_capture(str(cap), stats=CaptureStats())):
            if r["kind"] != "response" or r.get("error") is not None or r.get("body") is None:
                continue
            spec = registry().api(r["api_key"]).response
            full = what_if_tagged(spec, r["api_version"], r["body"], size=r.get("size"))
            sums = what_if_totals(spec, r["api_version"], r["body"], size=r.get("size"))
            assert sums == ((full["bytes_now"], full["bytes_tagged"], full["saving"]) if full["applicable"] else None)
            seen += 1
            applicable += full["applicable"]
    assert seen > 200 and 0 < applicable < seen
