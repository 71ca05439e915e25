"""`kwire pcap -e FIELD`: tab-separated fields per frame, as `tshark -T fields -e`, checked against
tshark's Kafka dissector on the kafkajs captures it decodes whole, and against kwire's own JSON rows."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_run import kwire

ROOT = Path(__file__).resolve().parents[1]
CAPS = ROOT / "fixtures" / "captures"
TSHARK = shutil.which("tshark")


def tshark_fields(cap: Path, display: str, *fields: str) -> list[list[str]]:
    cmd = [TSHARK, "-r", str(cap), "-d", "tcp.port==9092,kafka", "-Y", display, "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def kwire_fields(cap: Path, *args: str) -> list[list[str]]:
    r = kwire("pcap", str(cap), *args)
    assert r.code == 0, r
    return [line.split("\t") for line in r.out.splitlines()]


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (scripts/setup.sh --test installs it)")
@pytest.mark.parametrize("cap", ["kafkajs-consume.pcap", "kafkajs-produce.pcap", "kafkajs-admin.pcap"])
def test_fields_are_the_fields_tshark_prints(cap):
    # every request: frame number, API key, correlation id, client id
    requests = "kafka.request_key && !kafka.request_frame"  # (answers carry their request's key too)
    want = tshark_fields(CAPS / cap, requests, "frame.number", "kafka.request_key", "kafka.correlation_id",
                         "kafka.client_id")
    got = kwire_fields(CAPS / cap, "--filter", "kind=request", "-e", "frame", "-e", "api_key", "-e", "correlation_id",
                       "-e", "header.ClientId")
    assert got == want and len(got) >= 5
    # the topics of Produce requests, several joined with commas as tshark joins them
    want = tshark_fields(CAPS / cap, "kafka.request_key == 0 && !kafka.request_frame", "frame.number",
                         "kafka.topic_name")
    got = kwire_fields(CAPS / cap, "--filter", "api=Produce and kind=request", "-e", "frame", "-e",
                       "body.TopicData.Name")
    assert got == want


def test_fields_are_the_values_of_the_json_rows():
    cap = CAPS / "confluent-kafka-consume.pcap"
    rows = [json.loads(line) for line in kwire("pcap", str(cap), "--format", "jsonl").out.splitlines()]
    got = kwire_fields(cap, "-e", "frame", "-e", "kind", "-e", "api_name", "-e", "latency_ms", "-e", "error_codes",
                       "-e", "body.Topics.Partitions.PartitionIndex")

    def parts(body):
        return [str(p["PartitionIndex"]) for t in (body or {}).get("Topics") or [] for p in t.get("Partitions") or []
                if isinstance(p, dict) and "PartitionIndex" in p]
    want = [[str(r["frame"]), r["kind"], r["api_name"], "" if r["latency_ms"] is None else str(r["latency_ms"]),
             ",".join(r["error_codes"]), ",".join(parts(r["body"]))] for r in rows]
    assert got == want
    assert any(w[5] for w in want) and any(w[3] for w in want)  # the comparison covers real values


def test_field_cells_are_one_line_and_safe():
    """A value with tabs, newlines or terminal controls cannot break the columns or the terminal."""
    from kwire_cli.output.fields import compile_fields
    cells = compile_fields(["client_id", "body.Topics.Name", "body.Topics", "body.Missing"])
    row = {"client_id": "a\tb\nc\x1b]0;title\x07", "body": {"Topics": [{"Name": "x"}, {"Name": "y\u202e"}]}}
    got = cells(row)
    assert got[0] == "a\\tb\\nc\\x1b]0;title\\x07" and got[1] == "x,y\\u202e"
    # a path that ends at a list gives its elements (objects as compact JSON), joined with commas
    assert json.loads(f"[{got[2]}]") == row["body"]["Topics"] and got[3] == ""


def test_field_usage_errors():
    cap = str(CAPS / "kafkajs-produce.pcap")
    for args, says in ((["-e", "bodyy.X"], "-e bodyy.X: not a column"), (["-e", "body..X"], "not a column"),
                       (["--format", "fields"], "needs the fields"), (["-e", "frame", "--format", "jsonl"],
                                                                       "not --format jsonl")):
        r = kwire("pcap", cap, *args)
        assert r.code == 2 and says in r.err and r.out == "", (args, r)


def test_field_layout_options_as_tsharks(tmp_path):
    """-E header=y, separator, aggregator and quote lay the lines out as tshark's -E does; with
    separator=, and quote=d the output is CSV that Python's csv module reads back to the cells."""
    import csv
    import io
    cap = CAPS / "kafkajs-consume.pcap"
    plain = kwire_fields(cap, "-e", "frame", "-e", "api_name", "-e", "body.Topics.Name")
    r = kwire("pcap", str(cap), "-e", "frame", "-e", "api_name", "-e", "body.Topics.Name",
              "-E", "header=y", "-E", "separator=,", "-E", "quote=d")
    assert r.code == 0, r
    rows = list(csv.reader(io.StringIO(r.out)))
    assert rows[0] == ["frame", "api_name", "body.Topics.Name"] and rows[1:] == plain
    assert any("," in row[2] for row in rows[1:])  # a cell with several topics: the quotes matter
    semi = kwire_fields(cap, "-e", "frame", "-e", "body.Topics.Name", "-E", "aggregator=;")
    assert [[f, t.replace(";", ",")] for f, t in semi] == [[f, t] for f, _a, t in plain]
    spaced = kwire("pcap", str(cap), "-e", "frame", "-e", "api_name", "-E", "separator=/s").out.splitlines()
    assert spaced == [f"{f} {a}" for f, a, _t in plain]
    if TSHARK is not None:  # the header line and quoting are tshark's own
        want = subprocess.run([TSHARK, "-r", str(cap), "-d", "tcp.port==9092,kafka", "-Y",
                               "kafka.request_key && !kafka.request_frame", "-T", "fields", "-e", "frame.number",
                               "-e", "kafka.client_id", "-E", "header=y", "-E", "separator=,", "-E", "quote=d"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
        got = kwire("pcap", str(cap), "--filter", "kind=request", "-e", "frame", "-e", "header.ClientId",
                    "-E", "header=y", "-E", "separator=,", "-E", "quote=d").out.splitlines()
        assert got[1:] == want[1:] and want[0] == "frame.number,kafka.client_id"
        assert got[0] == "frame,header.ClientId"


def test_field_layout_errors():
    cap = str(CAPS / "kafkajs-produce.pcap")
    for args, says in ((["-e", "frame", "-E", "bogus=1"], "not a field layout option"),
                       (["-e", "frame", "-E", "header"], "expected KEY=VALUE"),
                       (["-e", "frame", "-E", "separator=ab"], "not a field layout option"),
                       (["-E", "header=y"], "give the fields with -e")):
        r = kwire("pcap", cap, *args)
        assert r.code == 2 and says in r.err and r.out == "", (args, r)
