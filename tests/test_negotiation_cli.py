"""`kwire negotiate` end to end on the fixtures (click.testing.CliRunner and the real entry point)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cli_run import kwire
from kwire_cli.cli import cli, main
from kwire_cli.negotiation import NegotiationError, kwire_api_names

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "negotiate"
B1, B2 = str(FIX / "kip35-brokers-b1.yaml"), str(FIX / "kip35-brokers-b2.yaml")
FEATURES = str(FIX / "kip35-features.yaml")
SAMPLE = str(FIX / "kafka-broker-api-versions-sample.txt")


def run(*args, input=None):
    return CliRunner().invoke(cli, ["negotiate", *args], input=input)


def _api(result, key):
    return next(a for a in result["apis"] if a["api_key"] == key)


def test_kip35_example_json():
    r = run(B1, B2, "--require", FEATURES, "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert set(out) == {"apis", "features", "brokers", "finalized_features"}
    assert _api(out, 0) == {"api_key": 0, "api_name": "Produce", "client": [0, 13],
                            "brokers": {"B1": [0, 3], "B2": [1, 2]}, "common": [1, 2], "chosen": 2,
                            "reason": None}
    assert _api(out, 2)["reason"] == "not supported by broker B1"
    f = {x["name"]: x for x in out["features"]}
    assert f["Feature1"]["usable"] is False and f["Feature2"]["usable"] is True
    assert f["Feature1"]["reason"] == "Produce(0) needs v3, the brokers' common range is v1-2"


def test_kip35_example_table():
    r = run(B1, B2, "--require", FEATURES)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    produce = next(line for line in lines if line.startswith("│ Produce(0)"))
    assert [c.strip() for c in produce.split("│")[1:-1]] == ["Produce(0)", "0-13", "0-3", "1-2", "1-2",
                                                              "2", ""]
    f1 = next(line for line in lines if line.startswith("│ Feature1"))
    assert [c.strip() for c in f1.split("│")[1:-1]] == [
        "Feature1", "no", "Produce(0) needs v3, the brokers' common range is v1-2"]
    f2 = next(line for line in lines if line.startswith("│ Feature2"))
    assert "Produce(0) v1, Fetch(1) v3" in f2
    n = len(set(kwire_api_names()))  # every API kwire's specs know, plus none extra from B1/B2
    assert lines[-1] == f"2 of {n} APIs have a version to use; 1 of 2 features usable"


def test_yaml_output_equals_json_output():
    j = json.loads(run(B1, B2, "--require", FEATURES, "--format", "json").output)
    y = yaml.safe_load(run(B1, B2, "--require", FEATURES, "--format", "yaml").output)
    assert j == y


def test_sample_text_and_recorded_hex_together():
    r = run(SAMPLE, str(FIX / "tansu-apiversions-v3.hex"), "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert list(_api(out, 0)["brokers"]) == ["kafka-2.example:9092", "kafka-1.example:9092",
                                             "tansu-apiversions-v3.hex"]
    assert _api(out, 0)["common"] == [0, 9] and _api(out, 0)["chosen"] == 9
    errors = {b["address"]: b["error"] for b in out["brokers"]}
    assert errors["kafka-3.example:9092"].startswith("ERROR: ")


def test_table_hides_apis_no_broker_lists_unless_all():
    short = run(str(FIX / "tansu-apiversions-v0.hex"))
    full = run(str(FIX / "tansu-apiversions-v0.hex"), "--all")
    assert short.exit_code == full.exit_code == 0
    assert "│ LeaderAndIsr(4)" not in short.output and "│ LeaderAndIsr(4)" in full.output
    assert "APIs that no broker lists are not shown (--all shows them)" in short.output


def test_unsupported_version_answer_is_explained_in_the_table():
    r = run(str(FIX / "kip511-unsupported-version.hex"), "--all")
    assert r.exit_code == 0, r.output
    assert "error: UNSUPPORTED_VERSION (35)" in r.output
    assert "KIP-511" in r.output
    assert "? = the broker's answer is incomplete and does not list this API" in r.output


def test_client_file_and_inline_hex_and_stdin():
    hex_text = (FIX / "tansu-apiversions-v1.hex").read_text().strip()
    r = run(hex_text, "--client", B1, "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [a["api_key"] for a in out["apis"] if a["client"] is not None] == [0, 1]
    assert out["brokers"][0]["address"] == "argument 1" and out["brokers"][0]["source"] == "argument 1"
    r2 = run("-", "--format", "json", input=Path(SAMPLE).read_text())
    assert r2.exit_code == 0 and len(json.loads(r2.output)["brokers"]) == 3


def test_decode_failure_exit_1_one_line(tmp_path, capsys):
    bad = tmp_path / "pasted.txt"
    bad.write_text("h:9092 (id: 1 rack: null) -> (\n\tProduce(0): 0 to 9 [usable: 9],\n"
                   "\tFetch(1): 0 to twelve,\n)\n")
    r = run(str(bad))
    assert r.exit_code == 1 and isinstance(r.exception, NegotiationError)
    expected = (f"{bad}:3: cannot read API entry 'Fetch(1): 0 to twelve,' in the block of broker "
                "h:9092 (expected e.g. 'Produce(0): 0 to 9 [usable: 9],')")
    assert str(r.exception) == expected
    with pytest.raises(SystemExit) as e:
        main(["negotiate", str(bad)])
    assert e.value.code == 1
    assert capsys.readouterr().err == f"kwire: error: {expected}\n"


def test_not_an_apiversions_response_exit_1(tmp_path, capsys):
    p = tmp_path / "req.hex"
    # ApiVersionsRequest v0 from client "kwire": a request, not an answer
    p.write_text("0000000f001200000000000100056b77697265\n")
    with pytest.raises(SystemExit) as e:
        main(["negotiate", str(p)])
    assert e.value.code == 1
    assert capsys.readouterr().err == (f"kwire: error: {p}: this is a request: ApiVersions v0 (api key 18), "
                                       "not an ApiVersionsResponse\n")


def test_usage_errors_exit_2():
    assert run().exit_code == 2
    r = run("no-such-file.hex")
    assert r.exit_code == 2 and "no such file: no-such-file.hex" in r.output
    r = run(B1, "--require", "missing.yaml")
    assert r.exit_code == 2 and "no such file: missing.yaml" in r.output


def test_missing_files_are_one_line_usage_errors():
    # through the real entry point: exactly one line on stderr, exit 2, nothing on stdout
    for args, line in ((["nonsense-arg"], "kwire: error: broker 1: no such file: nonsense-arg (and not inline hex)"),
                       ([B1, "--require", "missing.yaml"], "kwire: error: --require: no such file: missing.yaml"),
                       ([B1, "--client", "nope"], "kwire: error: --client: no such file: nope")):
        p = subprocess.run([sys.executable, "-m", "kwire_cli", "negotiate", *args], capture_output=True, text=True)
        assert (p.returncode, p.stdout, p.stderr) == (2, "", line + "\n")
    r = run(B1, "--format", "xml")
    assert r.exit_code == 2


def test_same_file_name_twice_gets_distinct_columns(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "broker.yaml").write_text(Path(B1).read_text().replace("address: B1\n", ""))
    r = run(str(tmp_path / "a" / "broker.yaml"), str(tmp_path / "b" / "broker.yaml"), "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert list(_api(out, 0)["brokers"]) == ["broker.yaml", "broker.yaml#2"]
    assert _api(out, 0)["chosen"] == 3


def test_broker_features_are_shown(tmp_path):
    p = tmp_path / "kraft.yaml"
    p.write_text("address: k1:9092\nErrorCode: 0\n"
                 "ApiKeys: [{ApiKey: 18, MinVersion: 0, MaxVersion: 4}]\n"
                 "SupportedFeatures: [{Name: metadata.version, MinVersion: 1, MaxVersion: 25},\n"
                 "                    {Name: kraft.version, MinVersion: 0, MaxVersion: 1}]\n"
                 "FinalizedFeaturesEpoch: 17\n"
                 "FinalizedFeatures: [{Name: metadata.version, MaxVersionLevel: 22, MinVersionLevel: 22}]\n")
    r = run(str(p))
    assert r.exit_code == 0, r.output
    assert "  SupportedFeatures: metadata.version 1-25, kraft.version 0-1" in r.output.splitlines()
    assert "  FinalizedFeatures (epoch 17): metadata.version 22" in r.output.splitlines()
    out = json.loads(run(str(p), "--format", "json").output)
    assert out["brokers"][0]["finalized_features"] == {"metadata.version": [22, 22]}


def test_a_directory_argument_says_it_is_one(tmp_path):
    r = kwire("negotiate", str(tmp_path))
    line = f"kwire: error: broker 1: {tmp_path} is a directory (give the files in it)\n"
    assert (r.code, r.out, r.err) == (2, "", line)


DUMPS = Path(__file__).resolve().parent.parent / "fixtures" / "hex" / "dumps"


@pytest.mark.parametrize("dump", ["kafkajs-produce.follow-tcp-hex.txt", "kafkajs-packets-4-9.tcpdump-X.txt"])
def test_the_apiversions_answer_of_a_dumped_conversation(dump):
    """tcpdump -X and Follow TCP Stream of kafkajs's conversation with tansu: the answer to its
    ApiVersions v2 request, found among the frames, is what the capture itself gives."""
    r = kwire("negotiate", str(DUMPS / dump), "--format", "json")
    assert r.code == 0, r
    (b,) = r.json()["brokers"]
    assert b["address"] == "127.0.0.1:9092" and b["api_version"] == 2
    assert b["notes"][0].startswith("ApiVersionsResponse v2 to the request of lines ")
    cap = kwire("negotiate", str(DUMPS.parent.parent / "captures" / "kafkajs-produce.pcap"), "--format", "json")
    assert [a["brokers"] for a in r.json()["apis"]] == [a["brokers"] for a in cap.json()["apis"]]


@pytest.mark.parametrize("form", ["base64", "python", "java", "go", "xxd-i", "node-json", "escaped", "od"])
def test_an_apiversions_answer_in_each_literal_form(form, tmp_path):
    import base64
    data = bytes.fromhex((FIX / "tansu-apiversions-v3.hex").read_text().strip())
    text = {
        "base64": base64.b64encode(data).decode(),
        "python": repr(data),
        "java": "new byte[]{" + ", ".join(str(b - 256 if b > 127 else b) for b in data) + "};",
        "go": "[]byte{" + ", ".join(f"{b:#x}" for b in data) + "}",
        "xxd-i": "unsigned char a[] = {" + ", ".join(f"0x{b:02x}" for b in data) + f"}};\nunsigned int a_len = {len(data)};",
        "node-json": '{"type":"Buffer","data":[' + ",".join(map(str, data)) + "]}",
        "escaped": '"' + "".join(f"\\x{b:02x}" for b in data) + '"',
        "od": "".join(f"{i:06x} " + " ".join(f"{b:02x}" for b in data[i:i + 16]) + "\n"
                      for i in range(0, len(data), 16)) + f"{len(data):06x}\n",
    }[form]
    f = tmp_path / "answer.txt"
    f.write_text(text)
    want = kwire("negotiate", str(FIX / "tansu-apiversions-v3.hex"), "--format", "json").json()
    got = kwire("negotiate", str(f), "--format", "json").json()
    def view(result):
        return [(a["api_key"], list(a["brokers"].values()), a["common"], a["chosen"]) for a in result["apis"]]
    assert view(got) == view(want) and got["brokers"][0]["address"] == "answer.txt"


def test_broker_inputs_are_read_as_every_command_reads_inputs():
    """BROKER arguments go through kwire_cli.inputs like decode's INPUT: @FILE is a file (it was
    taken for inline text: 'no such file: @...'), a missing one names the argument (exit 2)."""
    by_path = kwire("negotiate", B1, "--format", "json")
    by_at = kwire("negotiate", "@" + B1, "--format", "json")
    assert by_at.code == 0 and by_at.json() == by_path.json()
    r = kwire("negotiate", "@/no/such.hex")
    assert (r.code, r.err) == (2, "kwire: error: broker 1: file /no/such.hex does not exist\n")
