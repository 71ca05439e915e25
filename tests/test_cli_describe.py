"""kwire list and kwire describe, checked against the spec files themselves."""
from __future__ import annotations

import json

import pytest

from cli_run import ROOT, kwire
from kwire_cli.spec.jsonc import loads_jsonc

SPECS = ROOT / "specs"


def _raw(name):
    return loads_jsonc((SPECS / f"{name}.json").read_text())


def test_list_has_every_request_spec_with_its_versions():
    j = kwire("list --format json").json()
    requests = {}
    for p in SPECS.glob("*Request.json"):
        raw = loads_jsonc(p.read_text())
        if raw.get("type") == "request":
            requests[raw["apiKey"]] = raw
    assert [e["api_key"] for e in j] == sorted(requests)
    for e in j:
        raw = requests[e["api_key"]]
        assert e["api_name"] + "Request" == raw["name"]
        assert e["valid_versions"] == raw["validVersions"]
        lo, hi = (int(x) for x in raw["validVersions"].split("-")) if "-" in raw["validVersions"] else \
            (int(raw["validVersions"]),) * 2
        assert (e["min_version"], e["max_version"]) == (lo, hi)
    meta = next(e for e in j if e["api_name"] == "Metadata")
    assert (meta["flexible_versions"], meta["first_flexible_version"]) == ("9+", 9)


def test_list_pretty_is_a_table():
    lines = kwire("list").out.splitlines()
    assert lines[0].split() == ["key", "name", "versions", "flexible"]
    assert ["3", "Metadata", "0-12", "9+"] in [ln.split() for ln in lines]


def test_describe_at_a_version_has_types_nullability_tags_defaults():
    j = kwire("describe ApiVersions 3 --format json").json()
    assert j["api_key"] == 18 and j["version"] == 3
    resp = j["response"]
    assert resp["flexible"] is True and resp["header_version"] == 0  # ApiVersions answers with header v0
    f = {x["name"]: x for x in resp["fields"]}
    # ApiVersionsResponse.json: FinalizedFeaturesEpoch int64, tag 1, default -1
    assert f["FinalizedFeaturesEpoch"] == {"name": "FinalizedFeaturesEpoch", "type": "int64", "wire_type": "INT64",
                                           "nullable": False, "tag": 1, "default": -1}
    assert f["ApiKeys"]["wire_type"] == "COMPACT_ARRAY(ApiVersion)"
    assert [x["name"] for x in f["ApiKeys"]["fields"]] == ["ApiKey", "MinVersion", "MaxVersion"]
    req = {x["name"]: x for x in j["request"]["fields"]}
    assert req["ClientSoftwareName"]["wire_type"] == "COMPACT_STRING"


def test_describe_without_version_lists_version_ranges():
    j = kwire("describe Metadata --kind request --format json").json()
    assert "response" not in j and j["version"] is None
    raw = {f["name"]: f for f in _raw("MetadataRequest")["fields"]}
    for f in j["request"]["fields"]:
        assert f["versions"] == raw[f["name"]]["versions"]
        assert f["nullable_versions"] == raw[f["name"]].get("nullableVersions")


def test_describe_pretty_tree():
    out = kwire("describe Produce 9 --kind response").out
    assert out.splitlines()[0] == "ProduceResponse v9  flexible, header v1"
    assert "ErrorMessage  COMPACT_NULLABLE_STRING  nullable  default null" in out
    assert "LogAppendTimeMs  INT64  default -1" in out
    out = kwire("describe Fetch 13 --kind request").out
    assert "ClusterId  COMPACT_NULLABLE_STRING  nullable  tag 0  default null" in out


@pytest.mark.parametrize("args,code,line", [
    ("describe Nope", 2, "API: unknown API 'Nope' (see `kwire list`)"),
    ("describe Metadata 13", 2, "VERSION: Metadata has no version 13 (valid: 0-12)"),
    ("describe 3 -- -1", 2, "VERSION: Metadata has no version -1 (valid: 0-12)"),
])
def test_describe_errors(args, code, line):
    r = kwire(args)
    assert (r.code, r.err) == (code, f"kwire: error: {line}\n")


def test_click_usage_errors_exit_2():
    r = kwire("describe Metadata x")
    assert r.code == 2 and r.err == ("kwire: error: Invalid value for '[VERSION]': 'x' is not a valid integer. "
                                     "(see kwire describe --help)\n")
    r = kwire("describe")
    assert r.code == 2 and r.err == "kwire: error: Missing argument 'API'. (see kwire describe --help)\n"


def test_describe_shows_the_descriptions_a_kafka_checkouts_specs_carry():
    ref = ROOT.parent / "shared" / "kafka-message-specs"
    if not ref.is_dir():
        pytest.skip("../shared/kafka-message-specs is not beside the checkout")
    r = kwire("--specs", str(ref), "describe", "Metadata", "12", "--kind", "request")
    assert r.code == 0 and "AllowAutoTopicCreation  BOOLEAN  default true  — If this is true" in r.out
    j = json.loads(kwire("--specs", str(ref), "describe", "Metadata", "12", "--kind", "request",
                         "--format", "json").out)
    assert j["request"]["fields"][0]["about"].startswith("The topics to fetch metadata for")
    # kwire's own specs carry facts only: no descriptions
    assert "—" not in kwire("describe", "Metadata", "12", "--kind", "request").out
