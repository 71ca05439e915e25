"""kwire encode: YAML/JSON in, bytes out; every fixture decodes back to its YAML's values."""
from __future__ import annotations

import pytest
import yaml

from cli_run import ROOT, kwire, pairs, pipeline

YAMLS = sorted((ROOT / "fixtures" / "yaml").glob("*.yaml"))
PAIRS = pairs()


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def _subset(given, got, path="") -> None:
    """Every value the YAML gives is in the decoded tree (records: the decoded batch holds more)."""
    if isinstance(given, dict):
        assert isinstance(got, dict), path
        for k, v in given.items():
            assert k in got, f"{path}.{k} missing"
            _subset(v, got[k], f"{path}.{k}")
    elif isinstance(given, list):
        assert isinstance(got, list) and len(got) == len(given), path
        for i, (a, b) in enumerate(zip(given, got)):
            _subset(a, b, f"{path}[{i}]")
    else:
        assert given == got, f"{path}: {given!r} != {got!r}"


def test_there_are_fixtures():
    assert len(YAMLS) >= 10


@pytest.mark.parametrize("path", YAMLS, ids=[p.stem for p in YAMLS])
def test_every_fixture_decodes_back_to_its_values(path):
    doc = yaml.safe_load(path.read_text())
    r = kwire("encode", str(path))
    assert r.code == 0, r
    hexline = r.out.strip()
    # the committed .hex is what kwire encode makes of the YAML
    assert (ROOT / "fixtures" / "hex" / f"{path.stem}.hex").read_text().strip() == hexline
    args = ["decode", hexline, "--format", "json", "--show-secrets"]  # the values as written: none redacted
    if doc["kind"] == "response":
        args += ["--api", doc["api"], "--version", str(doc["version"])]
    d = kwire(*args).json()
    assert (d["api_name"], d["api_version"], d["kind"]) == (doc["api"], doc["version"], doc["kind"])
    assert d["size"] == len(hexline) // 2 - 4
    _subset(doc["header"], d["header"])
    _subset(doc["body"], d["body"])


@pytest.mark.parametrize("name,pair", PAIRS, ids=[n for n, _ in PAIRS])
def test_decode_json_then_encode_gives_the_recorded_bytes(name, pair):
    # records kept as hex: every byte comes back
    r = pipeline(f"kwire decode {pair['request']} --records hex --format json | kwire encode -")
    assert r.code == 0, r
    assert r.out.strip() == pair["request"]
    if pair["response"]:
        r = pipeline(f"kwire decode {pair['response']} --request {pair['request']} --records hex --format yaml"
                     " | kwire encode -")
        assert r.code == 0, r
        assert r.out.strip() == pair["response"]


def _records(tree):
    """The records (offset, key, value, headers) inside a decoded Produce/Fetch body."""
    out = []
    def walk(x):
        if isinstance(x, dict):
            if "batches" in x and isinstance(x["batches"], list):
                for b in x["batches"]:
                    out.append((b.get("Compression"),
                                [(r["Offset"], r["Key"], r["Value"], r["Headers"]) for r in b.get("Records", [])]))
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(tree)
    return out


PRODUCE_FETCH = [(n, p) for n, p in PAIRS if p["api_key"] in (0, 1)]


@pytest.mark.parametrize("name,pair", PRODUCE_FETCH, ids=[n for n, _ in PRODUCE_FETCH])
def test_decoded_records_encode_back_to_the_same_records(name, pair):
    for side, extra in (("request", ""), ("response", f" --request {pair['request']}")):
        if not pair[side]:
            continue
        first = kwire(*f"decode {pair[side]}{extra} --format json".split())
        again = pipeline(f"kwire decode {pair[side]}{extra} --format json | kwire encode -")
        assert again.code == 0, again
        second = kwire(*f"decode {again.out.strip()}{extra} --format json".split())
        a, b = _records(first.json()["body"]), _records(second.json()["body"])
        assert a == b
        if all(c in (None, "none") for c, _ in a):  # uncompressed: byte for byte
            assert again.out.strip() == pair[side]


def test_fields_left_out_take_the_spec_defaults(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("api: Fetch\nversion: 13\nbody:\n  Topics: [{TopicId: pU9Nc0uzRVWgT7DV1tc8NQ, Partitions: [{Partition: 2}]}]\n")
    d = kwire("decode", kwire("encode", str(f)).out.strip(), "--format", "json").json()
    assert d["header"] == {"RequestApiKey": 1, "RequestApiVersion": 13, "CorrelationId": 0, "ClientId": ""}
    b = d["body"]
    # defaults written in FetchRequest.json: ReplicaId -1, MaxBytes 0x7fffffff, SessionEpoch -1, ...
    assert (b["ReplicaId"], b["MaxBytes"], b["SessionEpoch"], b["ClusterId"]) == (-1, 0x7FFFFFFF, -1, None)
    p = b["Topics"][0]["Partitions"][0]
    assert (p["Partition"], p["CurrentLeaderEpoch"], p["LastFetchedEpoch"], p["LogStartOffset"]) == (2, -1, -1, -1)


def test_options_fill_in_and_output_forms(tmp_path):
    f = tmp_path / "body.yaml"
    f.write_text("body: {GroupId: g, GenerationId: 1, MemberId: m}\n")
    r = kwire("encode", str(f), "--api", "Heartbeat", "--version", "4", "--no-header")
    assert (r.code, r.out) == (0, "0267" "00000001" "026d" "00" "00\n")  # compact strings, null instance id, tags
    r = kwire("encode", str(f), "--api", "12", "--version", "4", "--no-size-prefix")
    # header v2: key, version, correlation id 0, ClientId "" (a non-compact string), empty tag section
    assert r.out == "000c0004" "00000000" "0000" "00" "0267" "00000001" "026d" "00" "00\n"
    out = tmp_path / "m.bin"
    r = kwire("encode", str(f), "--api", "Heartbeat", "--version", "4", "--raw", "-o", str(out))
    assert r.code == 0 and r.out == ""
    raw = out.read_bytes()
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    assert kwire("decode", f"@{out}", "--format", "json").json()["body"]["MemberId"] == "m"
    r = kwire("encode", str(f), "--api", "Heartbeat", "--version", "4", "--raw")
    assert r.code == 0 and r.out_bytes == raw  # raw bytes to a pipe


def test_several_documents_are_several_messages(tmp_path):
    f = tmp_path / "two.yaml"
    f.write_text((ROOT / "fixtures/yaml/heartbeat-request-v4.yaml").read_text() + "---\n"
                 + (ROOT / "fixtures/yaml/apiversions-request-v3.yaml").read_text())
    lines = kwire("encode", str(f)).out.splitlines()
    assert lines == [(ROOT / "fixtures/hex/heartbeat-request-v4.hex").read_text().strip(),
                     (ROOT / "fixtures/hex/apiversions-request-v3.hex").read_text().strip()]


def test_non_finite_floats_round_trip_as_strings(tmp_path):
    # BrokerHeartbeat? no float64 there; DescribeClientQuotas responses carry float64 values
    f = tmp_path / "q.yaml"
    f.write_text("api: DescribeClientQuotas\nversion: 1\nkind: response\nbody:\n  Entries:\n"
                 "    - Entity: [{EntityType: user, EntityName: alice}]\n"
                 "      Values: [{Key: a, Value: NaN}, {Key: b, Value: Infinity}, {Key: c, Value: -Infinity}, {Key: d, Value: 1.5}]\n")
    h = kwire("encode", str(f)).out.strip()
    j = kwire("decode", h, "--api", "DescribeClientQuotas", "--version", "1", "--format", "json")
    assert '"Value": "NaN"' in j.out and '"Value": "Infinity"' in j.out and '"Value": "-Infinity"' in j.out
    vals = [v["Value"] for v in j.json()["body"]["Entries"][0]["Values"]]
    assert vals == ["NaN", "Infinity", "-Infinity", 1.5]
    assert pipeline(f"kwire decode {h} --api DescribeClientQuotas --version 1 --format json | kwire encode -").out.strip() == h


@pytest.mark.parametrize("text,code,line", [
    ("api: Metadata\nversion: 1\nbody: {Topics: [{Name: a, Foo: 1}]}\n", 1,
     "Metadata v1 request Topics[0] has no field Foo in any version"),
    ("api: Metadata\nversion: 1\nbody: {Topics: [{Name: a, TopicId: AAAAAAAAAAAAAAAAAAAAAA}]}\n", 1,
     "Metadata v1 request Topics[0] has no field TopicId (versions 10+)"),
    ("api: Metadata\nversion: 1\nbody: {Bogus: 1}\n", 1,
     "Metadata v1 request has no field Bogus in any version"),
    ("api: Metadata\nversion: 1\nbody: {Topics: [{Name: 5}]}\n", 1,
     "Metadata v1 request: Topics[0].Name: expected a string, got int 5"),
    ("api: Metadata\nversoin: 1\n", 1, "M.yaml: unknown key 'versoin' (expected api, version, kind, header, body)"),
    ("api: Nope\nversion: 1\n", 1, "M.yaml: unknown API 'Nope' (see `kwire list`)"),
    ("api: Metadata\nversion: 14\n", 1, "M.yaml: Metadata has no version 14 (valid: 0-13)"),
    ("api: Metadata\n", 1, "M.yaml: no version given (add `version:` or use --version)"),
    ("api: Metadata\nversion: 1\nbody: [1, 2]\n", 1, "M.yaml: body must be a mapping of fields"),
    ("api: Metadata\nversion: 1\nbody: {Topics: [\n", 1, "M.yaml: not valid YAML or JSON at line 4, column 1"),
    ("api: Metadata\nversion: 1\nkind: reply\n", 1, "M.yaml: kind must be request or response, got 'reply'"),
    ("api: Metadata\nversion: 1\nheader: {CorrelationId: x}\n", 1,
     "Metadata v1 request header: CorrelationId: expected an int32, got 'x'"),
])
def test_bad_yaml_is_one_line_and_an_exit_code(tmp_path, monkeypatch, text, code, line):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "M.yaml").write_text(text)
    r = kwire("encode", "M.yaml")
    assert r.code == code, r
    assert r.out == "" and r.err.count("\n") == 1
    assert r.err.startswith("kwire: error: " + line), r.err


def test_missing_file_is_a_usage_error():
    r = kwire("encode", "no/such.yaml")
    assert (r.code, r.err) == (2, "kwire: error: FILE: file no/such.yaml does not exist\n")


def test_yaml_aliases_are_refused_with_their_line(tmp_path):
    from cli_run import kwire as run
    f = tmp_path / "laughs.yaml"
    f.write_text('api: Metadata\nversion: 4\nbody:\n  Topics: &t [{Name: a}]\n  X: *t\n')
    r = run("encode", str(f))
    assert r.code == 1
    assert r.err.strip() == f"kwire: error: {f}: not valid YAML or JSON at line 5, column 6: YAML aliases (*name) are not accepted"
