"""kwire list and kwire describe, checked against the spec files themselves."""
from __future__ import annotations

import json

import pytest

from cli_run import ROOT, kwire
from conftest import REFERENCE_SPECS, REFERENCE_SPECS_43
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
    assert lines[0].split() == ["key", "name", "versions", "flexible", "notes"]
    assert ["3", "Metadata", "0-13", "9+"] in [ln.split() for ln in lines]
    assert ["0", "Produce", "0-13", "9+", "v0-2", "removed", "in", "4.0"] in [ln.split() for ln in lines]


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
    ("describe Metadata 14", 2, "VERSION: Metadata has no version 14 (valid: 0-13)"),
    ("describe 3 -- -1", 2, "VERSION: Metadata has no version -1 (valid: 0-13)"),
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
    ref = REFERENCE_SPECS
    if not ref.is_dir():
        pytest.skip("../shared/kafka-message-specs is not beside the checkout")
    r = kwire("--specs", str(ref), "describe", "Metadata", "12", "--kind", "request")
    assert r.code == 0 and "AllowAutoTopicCreation  BOOLEAN  default true  — If this is true" in r.out
    j = json.loads(kwire("--specs", str(ref), "describe", "Metadata", "12", "--kind", "request",
                         "--format", "json").out)
    assert j["request"]["fields"][0]["about"].startswith("The topics to fetch metadata for")
    # kwire's own specs carry facts only: no descriptions
    assert "—" not in kwire("describe", "Metadata", "12", "--kind", "request").out


def test_list_json_gives_every_key_its_full_range_and_what_releases_removed():
    rows = {r["api_key"]: r for r in kwire("list --format json").json()}
    assert sorted(rows) == list(range(93))
    assert (rows[0]["valid_versions"], rows[0]["removed_versions"], rows[0]["removed_in"]) == ("0-13", "0-2", "4.0")
    assert (rows[1]["min_version"], rows[1]["max_version"]) == (0, 18)
    assert rows[4]["removed_versions"] == "0-7" and rows[4]["api_name"] == "LeaderAndIsr"
    assert rows[22]["unstable_versions"] == [6] and rows[22]["removed_versions"] is None
    assert rows[78]["unstable_versions"] == [0] and rows[78]["removed_in"] == "4.1"
    assert rows[74]["api_name"] == "ListConfigResources" and rows[74]["former_names"] == ["ListClientMetricsResources"]
    assert rows[88]["api_name"] == "StreamsGroupHeartbeat" and rows[92]["api_name"] == "DeleteShareGroupOffsets"


def test_describe_says_a_version_was_removed_and_takes_a_former_name():
    j = kwire("describe Produce 2 --kind request --format json").json()
    assert j["notes"] == "removed in 4.0" and j["request"]["note"] == "removed in 4.0"
    assert kwire("describe Produce 13 --kind request --format json").json()["notes"] is None
    assert "(v0-2 removed in 4.0)" in kwire("describe Produce --kind request").out
    assert "(unstable)" in kwire("describe InitProducerId 6 --kind request").out
    old = kwire("describe ListClientMetricsResources --format json").json()
    assert old["api_key"] == 74 and old["api_name"] == "ListConfigResources"


def test_specs_dir_replaces_the_bundled_union():
    if not REFERENCE_SPECS_43.is_dir():
        pytest.skip("../shared/kafka-message-specs-4.3 is not beside the checkout")
    r = kwire("--specs", str(REFERENCE_SPECS_43), "describe", "Produce", "2")
    assert r.code == 2 and "Produce has no version 2 (valid: 3-13)" in r.err
    assert kwire("describe", "Produce", "2").code == 0  # the bundled union keeps it
