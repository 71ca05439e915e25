"""Issue 15, item 2: no control, C1 or bidi character taken from input reaches a terminal raw.

The inputs are real: kafka-python's admin capture (and the hex fixtures, and kafka-broker-api-versions
output) with a client id, topic name, cluster id, broker host, error message, rack and file name
replaced by same-length strings carrying set-title, clear-screen and colour sequences, C1 CSI
(U+009B), bidi overrides and isolates (U+202E, U+2066) and Rich markup. Every human-readable output
shows them escaped (``kwire_cli.render.safe.escape``); JSON, JSON lines and YAML keep the exact
value.
"""
from __future__ import annotations

import json
import os
import shutil
import unicodedata
from pathlib import Path

import pytest
import yaml

from cli_run import kwire
from kwire_cli.render.safe import escape

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "fixtures" / "captures"
HEX = ROOT / "fixtures" / "hex"

# same byte length as what they replace, so every size and length in the capture stays right
CLIENT = "\x1b]0;pwn\x07\x9b2J\u202e[b]"          # kwire-kafka-python (18 bytes)
CLUSTER = "\x1b[31m\u202e[/x]c"                      # tansu_cluster (13)
ERROR_MESSAGE = "\x1b[2J\u2066\\x"                   # No error. (9)
HOST = "\x1b[2J\x9b\u202e"                           # 127.0.0.1 in Kafka payloads (9)
TOPIC = "[bold]\x1b[5m\u202e"                        # kwire-admin-a (13)
SUBSTITUTIONS = {"kwire-kafka-python": CLIENT, "tansu_cluster": CLUSTER, "No error.": ERROR_MESSAGE,
                 "127.0.0.1": HOST, "kwire-admin-a": TOPIC}
FILE_NAME = "admin\x1b]0;t\x07\u202e.pcap"


def raw_danger(text: str) -> list[str]:
    """Characters a terminal would act on (controls but newline, C1, format characters such as the
    bidi controls, line/paragraph separators, lone surrogates)."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def assert_safe(r) -> None:
    assert "internal error" not in r.err and "Traceback" not in r.err + r.out, r
    assert raw_danger(r.out) == [], r.out
    assert raw_danger(r.err) == [], r.err


def hostile_bytes(data: bytes) -> bytes:
    for old, new in SUBSTITUTIONS.items():
        enc = new.encode()
        assert len(enc) == len(old) and old.encode() in data
        data = data.replace(old.encode(), enc)
    return data


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    p = d / FILE_NAME
    p.write_bytes(hostile_bytes((CAPTURES / "kafka-python-admin.pcap").read_bytes()))
    return p


def frames(path: Path) -> list:
    from kwire_cli.capture import iter_capture
    from kwire_cli.capture.events import KafkaFrame
    return [e for e in iter_capture(str(path)) if isinstance(e, KafkaFrame)]


# --------------------------------------------------------------------------- kwire pcap

def test_pcap_table_escapes_client_ids_and_topics(hostile):
    r = kwire("pcap", str(hostile))
    assert r.code == 0, r
    assert_safe(r)
    assert escape(CLIENT) in r.out and "\\x1b]0;pwn\\x07\\u009b2J\\u202e[b]" in r.out
    assert escape(TOPIC) in r.out  # the topic names the Metadata answers gave, in the note cell


def test_pcap_summary_escapes_client_ids(hostile):
    r = kwire("pcap", str(hostile), "--summary")
    assert r.code == 0, r
    assert_safe(r)
    assert escape(CLIENT) in r.out


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_pcap_json_keeps_the_exact_values(hostile, fmt):
    r = kwire("pcap", str(hostile), "--format", fmt)
    assert r.code == 0, r
    assert_safe(r)
    rows = [json.loads(x) for x in r.out.splitlines()] if fmt == "jsonl" else r.json()["frames"]
    assert {row["client_id"] for row in rows} == {CLIENT}
    assert {row["file"] for row in rows} == {str(hostile)}
    text = json.dumps([row["body"] for row in rows], ensure_ascii=False)
    for value in (CLUSTER, ERROR_MESSAGE, HOST, TOPIC):
        assert json.dumps(value, ensure_ascii=False)[1:-1] in text, value
    if fmt == "json":
        assert CLIENT in r.json()["summary"]["clients"]


def test_pcap_summary_json_keeps_the_exact_client_id(hostile):
    r = kwire("pcap", str(hostile), "--summary", "--format", "json")
    assert r.code == 0, r
    assert_safe(r)
    assert list(r.json()["clients"]) == [CLIENT]


def test_damage_lines_and_error_lines_escape_file_names(hostile, tmp_path):
    cut = tmp_path / "cut\x1b[2J\u202e.pcap"
    cut.write_bytes(hostile.read_bytes()[:3000])  # ends inside a packet: truncated-record damage
    bad = tmp_path / "bad\x1b]0;x\x07\x9b.pcap"
    bad.write_bytes(b"not a capture at all")
    r = kwire("pcap", str(cut), str(bad), "--summary")
    assert r.code == 1, r
    assert_safe(r)
    assert f"  {escape(str(cut))} packet 20 : truncated-record:" in r.out
    assert f"kwire: error: {escape(str(bad))}: not a pcap or pcapng file" in r.err
    assert "kwire: warning: " in r.err
    r = kwire("pcap", str(cut), "--format", "jsonl")
    assert_safe(r)
    assert {json.loads(x)["file"] for x in r.out.splitlines()} == {str(cut)}


def test_file_names_that_are_not_utf8(tmp_path):
    name = os.fsencode(tmp_path) + b"/\xff\x9b.pcap"  # read back as lone surrogates
    with open(name, "wb") as f:
        f.write((CAPTURES / "kafka-python-produce.pcap").read_bytes())
    path = os.fsdecode(name)
    for args in ((), ("--summary",), ("--format", "jsonl"), ("--format", "json"), ("--summary", "--format", "json")):
        r = kwire("pcap", path, *args)
        assert r.code == 0, (args, r)
        assert_safe(r)
    r = kwire("pcap", path, "--format", "jsonl")
    assert {json.loads(x)["file"] for x in r.out.splitlines()} == {path}  # \udcff\udc9b, exactly


def test_progress_bar_file_names(hostile, monkeypatch):
    # the progress bar shows on a terminal only: a console that believes stderr is one (it writes
    # Rich's own cursor and colour sequences, so look for the file name's characters, not for ESC)
    import sys

    from rich.console import Console

    import kwire_cli.output.progress as progress
    import kwire_cli.render.console as console
    monkeypatch.setattr(progress, "enabled", lambda rows_to_stdout=True: True)
    monkeypatch.setattr(console, "make_console", lambda stderr=False: Console(
        file=sys.stderr if stderr else sys.stdout, force_terminal=True, markup=False, highlight=False, width=200))
    r = kwire("pcap", str(hostile), "--format", "jsonl")
    assert r.code == 0, r
    assert escape(hostile.name) in r.err  # the bar ran and named the file, escaped
    assert "\x1b]0;t\x07" not in r.err and "\u202e" not in r.err  # the raw name never


# --------------------------------------------------------------------------- kwire decode

@pytest.fixture(scope="module")
def hostile_frames(hostile) -> dict:
    """Frames of the hostile capture: the first request (client id), the Metadata response (host,
    cluster id, topic), the first response carrying "No error." (now the hostile message)."""
    fs = frames(hostile)
    out = {"request": fs[0]}
    for f in fs:
        if f.kind == "response" and f.api_key == 3 and HOST.encode() in f.data:
            out.setdefault("metadata", f)
        if f.kind == "response" and ERROR_MESSAGE.encode() in f.data:
            out.setdefault("error_message", f)
    assert set(out) == {"request", "metadata", "error_message"}
    return out


def _frame_hex(f) -> str:
    return (f.size.to_bytes(4, "big") + f.data).hex()


@pytest.mark.parametrize("which", ["request", "metadata", "error_message"])
def test_decode_tree_escapes_and_json_yaml_keep_exact_values(hostile_frames, which):
    f = hostile_frames[which]
    args = [_frame_hex(f)]
    if f.kind == "response":
        args += ["--api", str(f.api_key), "--version", str(f.api_version)]
    values = {"request": [CLIENT], "metadata": [HOST, CLUSTER], "error_message": [ERROR_MESSAGE]}[which]
    r = kwire("decode", *args)
    assert r.code == 0, r
    assert_safe(r)
    for v in values:
        assert escape(v) in r.out, v
    j = kwire("decode", *args, "--format", "json")
    y = kwire("decode", *args, "--format", "yaml")
    assert_safe(j)
    assert_safe(y)
    assert j.json() == yaml.safe_load(y.out)
    text = json.dumps(j.json(), ensure_ascii=False)
    for v in values:
        assert json.dumps(v, ensure_ascii=False)[1:-1] in text, v
    if which == "request":
        assert j.json()["header"]["ClientId"] == CLIENT
        # the exact value round-trips through kwire encode
        e = kwire("encode", "-", input=j.out)
        assert e.code == 0, e
        assert e.out.strip() == args[0]


def test_decode_partial_escapes_the_tree_and_the_error(hostile_frames):
    f = hostile_frames["metadata"]
    cut = f.data[:-20]
    r = kwire("decode", cut.hex(), "--api", "3", "--version", str(f.api_version), "--no-size-prefix", "--partial")
    assert r.code == 1, r
    assert_safe(r)
    assert escape(HOST) in r.out and "decoding stopped" in r.out


def test_decode_records_keys_values_and_headers():
    # a real Produce request whose record value, key and header key now carry controls
    h = (HEX / "produce-request-v9.hex").read_text().strip()
    data = bytes.fromhex(h)
    key, header = "\x1b[2J\u202e", "\x9b\u2069b"
    for old, new in ((b"order-1", key.encode()), (b"source", header.encode())):
        assert len(old) == len(new)
        data = data.replace(old, new)
    r = kwire("decode", data.hex())
    assert r.code == 0, r
    assert_safe(r)
    assert "key 0x1b5b324ae280ae" in r.out  # a key that is not text shows as hex
    assert f"header {escape(header)}" in r.out.replace('"', "")
    j = kwire("decode", data.hex(), "--format", "json")
    assert_safe(j)
    batch = j.json()["body"]["TopicData"][0]["PartitionData"][0]["Records"]["batches"][0]
    assert batch["Records"][0]["Headers"][0]["Key"] == header


def test_error_lines_escape_what_they_quote(tmp_path):
    r = kwire("decode", "@" + str(tmp_path / "nope\x1b]0;x\x07\u202e.hex"))
    assert r.code == 2, r
    assert_safe(r)
    assert "\\x1b]0;x\\x07\\u202e" in r.err
    r = kwire("pcap", "--port", "1\x1b[2J\u202e", "x.pcap")  # Click's own usage error
    assert r.code == 2, r
    assert_safe(r)
    r = kwire("pcap", "--filter", "client=\x1b[2J\u202e(", str(CAPTURES / "kafka-python-produce.pcap"))
    assert r.code == 2, r  # a filter that does not parse: a usage error
    assert_safe(r)
    r = kwire("decode", "00", "--api", "\x1b]0;x\x07\u202e")
    assert r.code == 2, r
    assert_safe(r)
    assert r.err.startswith("kwire: error: --api: unknown API")


# --------------------------------------------------------------------------- negotiate, describe, diff

def test_negotiate_table_escapes_hosts_racks_errors_and_file_names(tmp_path):
    t = (ROOT / "fixtures" / "negotiate" / "kafka-broker-api-versions-sample.txt").read_text()
    host, rack, err = "k2\x1b]0;x\x07\x9b\u202e[b]", "r\x1b[2J\u202e", "Disc\x1b[31m\u2066"
    t = t.replace("kafka-2.example", host).replace("rack-b", rack).replace("DisconnectException", err)
    p = tmp_path / "versions\x1b[2J\u202e.txt"
    p.write_text(t)
    r = kwire("negotiate", str(p))
    assert r.code == 0, r
    assert_safe(r)
    for v in (host, rack, err, str(p)):
        assert escape(v) in r.out, v
    for fmt in ("json", "yaml"):
        r = kwire("negotiate", str(p), "--format", fmt)
        assert r.code == 0, r
        assert_safe(r)
        d = yaml.safe_load(r.out)
        b = {x["address"]: x for x in d["brokers"]}
        assert b[f"{host}:9092"]["rack"] == rack
        assert err in b["kafka-3.example:9092"]["error"]
        assert b[f"{host}:9092"]["source"].startswith(str(p))


@pytest.fixture(scope="module")
def hostile_specs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("specs") / "specs"
    shutil.copytree(ROOT / "specs", d)
    p = d / "ApiVersionsRequest.json"
    spec = json.loads(p.read_text())
    spec["fields"][1]["default"] = "\x1b]0;x\x07\x9b\u202e"  # ClientSoftwareVersion
    p.write_text(json.dumps(spec))
    return d


def test_describe_escapes_what_specs_say(hostile_specs):
    r = kwire("--specs", str(hostile_specs), "describe", "ApiVersions", "3", "--kind", "request")
    assert r.code == 0, r
    assert_safe(r)
    assert escape("\x1b]0;x\x07\x9b\u202e") in r.out
    for fmt in ("json", "yaml"):
        r = kwire("--specs", str(hostile_specs), "describe", "ApiVersions", "--kind", "request", "--format", fmt)
        assert_safe(r)
        assert yaml.safe_load(r.out)["request"]["fields"][1]["default"] == "\x1b]0;x\x07\x9b\u202e"


def test_diff_what_if_escapes_file_names(tmp_path):
    p = tmp_path / "resp\x1b]0;x\x07\u202e.yaml"
    shutil.copy(ROOT / "fixtures" / "yaml" / "produce-response-v9.yaml", p)
    r = kwire("diff", "--what-if-tagged", "ErrorCode,ErrorMessage", str(p))
    assert r.code == 0, r
    assert_safe(r)
    assert escape(str(p)) in r.out
    r = kwire("diff", "--what-if-tagged", "ErrorCode,ErrorMessage", str(p), "--format", "json")
    assert_safe(r)
    assert r.json()["messages"][0]["source"] == str(p)
