"""`kwire pcap --format records`: one line per record produced or fetched, as kcat prints them.

The bundled captures were recorded against one tansu broker per client: each client produced,
then its consumer fetched the same topics. So the records a Produce put in (with the offsets the
broker's answers gave them) must be exactly the records the Fetch answers handed out."""
import json
import shutil
import subprocess

import pytest

from cli_run import kwire
from conftest import FIXTURES
from kwire_cli.output.records import RecordLines

CAPS = FIXTURES / "captures"
FMT = "%a %t %p %o %k|%K %s|%S %h\\n"
CLIENTS = ["kafka-python", "confluent-kafka", "kafkajs"]


def _lines(*args):
    res = kwire("pcap", *args)
    assert res.code in (0, 1), res.err
    return res.out.splitlines()


def _fields(lines):
    out = []
    for line in lines:
        api, topic, part, off, rest = line.split(" ", 4)
        out.append((api, topic, int(part), off, rest))
    return out


@pytest.mark.parametrize("client", CLIENTS)
def test_produced_records_are_the_fetched_ones(client):
    produced = _fields(_lines(str(CAPS / f"{client}-produce.pcap"), "--record-format", FMT))
    fetched = _fields(_lines(str(CAPS / f"{client}-consume.pcap"), "--record-format", FMT))
    assert produced and fetched
    assert {p[0] for p in produced} == {"Produce"} and {f[0] for f in fetched} == {"Fetch"}
    fetched_set = {f[1:] for f in fetched}
    acks0 = [p for p in produced if p[3] == "-"]
    answered = [p for p in produced if p[3] != "-"]
    # every answered record is fetched at the offset the Produce answer gave it, with its key,
    # value and headers, and nothing else was fetched (the consumers do not read the acks=0 topic)
    assert {p[1:] for p in answered} == fetched_set
    assert len({p[1:] for p in answered}) == len(answered)  # no two records at one offset
    assert all(p[1].endswith("acks0") for p in acks0)
    if client == "kafkajs":
        assert not acks0
    else:
        assert len(acks0) == 1  # an acks=0 request: printed at once, its offset unknown


def test_default_line_and_sizes():
    lines = _lines(str(CAPS / "kafkajs-produce.pcap"), "--format", "records")
    assert lines[0] == ("Produce  kwire-produce-none [0] @0  ts 1700000000000  key k-0  value v-0 none "
                        + "kwire-" * 16 + "  headers trace=t-0,dup=dup-0-first,dup=dup-0-second,nullhdr=")
    assert "key -  value v-3 none no key" in lines[3]  # a null key
    # sizes: a null key or value is -1 (kcat's); %% and \t
    sized = _lines(str(CAPS / "kafkajs-produce.pcap"), "--record-format", "%K\\t%S\\t%%%k\\n")
    assert sized[2] == "3\t-1\t%k-2" and sized[3] == "-1\t15\t%"


def test_a_dropped_answer_still_gives_the_offsets():
    """--filter selects frames: the Produce requests shown, answered by responses it does not show."""
    cap = str(CAPS / "kafka-python-produce.pcap")
    assert _lines(cap, "--record-format", FMT, "--filter", "kind=request") == _lines(cap, "--record-format", FMT)
    assert _lines(cap, "--record-format", FMT, "--filter", "kind=response") == []


@pytest.mark.skipif(not shutil.which("editcap"), reason="editcap not installed")
def test_an_unanswered_produce_prints_at_the_end_offsets_unknown(tmp_path):
    cap = CAPS / "kafkajs-produce.pcap"
    frames = [int(x) for x in _lines(str(cap), "--format", "fields", "-e", "frame", "--filter",
                                     "api=Produce and kind=response")]
    cut = tmp_path / "cut.pcap"
    subprocess.run(["editcap", str(cap), str(cut), str(frames[-1])], check=True, capture_output=True)
    full = _lines(str(cap), "--record-format", FMT)
    got = _lines(str(cut), "--record-format", FMT)
    assert len(got) == len(full)
    changed = [(a, b) for a, b in zip(full, got, strict=True) if a != b]
    assert changed and all(b.split(" ")[3] == "-" for _a, b in changed)
    assert all(a.split(" ")[3] != "-" for a, _b in changed)


def test_streamed_input_gives_the_same_lines():
    cap = CAPS / "confluent-kafka-consume.pcap"
    res = kwire("pcap", "-", "--record-format", FMT, input=cap.read_bytes())
    assert res.out.splitlines() == _lines(str(cap), "--record-format", FMT)


def test_usage_errors_are_one_line():
    bad = kwire("pcap", str(CAPS / "kafkajs-produce.pcap"), "--record-format", "%q")
    assert bad.code == 2 and "%q at position 0 is not a token" in bad.err and bad.err.count("\n") == 1
    both = kwire("pcap", str(CAPS / "kafkajs-produce.pcap"), "--record-format", "%t", "--format", "jsonl")
    assert both.code == 2 and both.err.count("\n") == 1


def test_a_record_is_one_line_whatever_its_bytes():
    """Keys, values and header keys from the wire are escaped for a terminal; bytes that are not
    text are hex."""
    row = {"api_name": "Fetch", "kind": "response", "client_id": "c", "frame": 1, "body": {"Responses": [
        {"Topic": "t\x1b[2J", "Partitions": [{"PartitionIndex": 0, "ErrorCode": 0, "Records": {"batches": [
            {"LastOffsetDelta": 0, "Records": [{"Offset": 5, "Timestamp": 1, "Key": {"hex": "00ff"},
                                                "Value": {"text": "a\nb\u202e"},
                                                "Headers": [{"Key": "h\r", "Value": None}]}]}]}}]}]}}
    (line,) = RecordLines("%t|%k|%K|%s|%S|%h\n").feed(row)
    assert line == "t\\x1b[2J|0x00ff|2|a\\nb\\u202e|6|h\\r=\n"  # U+202E: 3 bytes of UTF-8


def test_offsets_are_the_answers_base_offsets_across_rotated_files():
    """Six Produce requests of one record each, across tcpdump's rotated files: each record's offset
    is the BaseOffset its answer gave (0 to 5)."""
    rot = str(CAPS / "rotated")
    offsets = [int(x) for x in _lines(rot, "--record-format", "%o\\n")]
    answers = [int(x) for x in _lines(rot, "-e", "body.Responses.PartitionResponses.BaseOffset", "--filter",
                                      "api=Produce and kind=response")]
    assert offsets == answers == list(range(6))


@pytest.mark.parametrize("client", CLIENTS)
def test_json_records_are_the_text_ones(client):
    """--record-format json (kcat -J): one JSON object per record, the same records, in the same
    order, with the rows' key and value forms and null for an unknown offset."""
    cap = str(CAPS / f"{client}-produce.pcap")
    objs = [json.loads(line) for line in _lines(cap, "--record-format", "json")]
    text = _lines(cap, "--record-format", "%t|%p|%o|%k|%s|%T|%c|%f\\n")
    assert len(objs) == len(text) > 0
    for o, t in zip(objs, text, strict=True):
        k = "" if o["key"] is None else o["key"]["text"]
        v = "" if o["value"] is None else o["value"]["text"]
        off = "-" if o["offset"] is None else str(o["offset"])
        assert t == "|".join([o["topic"], str(o["partition"]), off, k, v, str(o["timestamp"]), o["client_id"],
                              str(o["frame"])])
        assert o["api"] == "Produce" and o["error"] is None and o["file"] == cap
        assert all(set(h) == {"key", "value"} for h in o["headers"])


def test_json_records_keep_controls_out_of_the_terminal():
    row = {"api_name": "Fetch", "kind": "response", "client_id": "c", "frame": 1, "body": {"Responses": [
        {"Topic": "t", "Partitions": [{"PartitionIndex": 0, "ErrorCode": 0, "Records": {"batches": [
            {"LastOffsetDelta": 0, "Records": [{"Offset": 5, "Timestamp": 1, "Key": None,
                                                "Value": {"text": "a\x1b[2J\u202e"}, "Headers": []}]}]}}]}]}}
    (line,) = RecordLines("json").feed(row)
    assert "\x1b" not in line and "\u202e" not in line and line.count("\n") == 1
    assert json.loads(line)["value"] == {"text": "a\x1b[2J\u202e"}


def test_a_null_key_and_a_null_value_show_alike():
    row = {"api_name": "Produce", "kind": "request", "src": "a:1", "dst": "b:2", "correlation_id": 1,
           "client_id": "c", "frame": 1, "body": {"Acks": 0, "TopicData": [{"Name": "t", "PartitionData": [
               {"Index": 0, "Records": {"batches": [{"LastOffsetDelta": 1, "Records": [
                   {"OffsetDelta": 0, "Timestamp": 5, "Key": None, "Value": {"text": "v"}},
                   {"OffsetDelta": 1, "Timestamp": 6, "Key": {"text": "k"}, "Value": None}]}]}}]}]}}
    lines = list(RecordLines().feed(row))
    assert lines == ["Produce  t [0] @-  ts 5  key -  value v\n", "Produce  t [0] @-  ts 6  key k  value -\n"]


def test_the_proxys_records_are_kwire_pcaps():
    """kwire proxy --format records: its decoding side (output.show.FrameRows) hands each frame to
    the records writer, as kwire pcap --format records does for the same frames."""
    import io

    from kwire_cli.analysis import AnalysedSummary
    from kwire_cli.capture import KafkaFrame, iter_capture
    from kwire_cli.capture.session import Conversation
    from kwire_cli.output.show import FrameRows, RowPrinter
    from kwire_cli.output.writers import RecordsWriter
    cap = CAPS / "kafkajs-produce.pcap"
    out = io.StringIO()
    writer = RecordsWriter(out, None)
    sink = FrameRows(Conversation(), RowPrinter(writer, lambda r: True, live=True, summary=AnalysedSummary()))
    for ev in iter_capture(str(cap), file_label=str(cap)):
        if isinstance(ev, KafkaFrame):
            sink.frame(ev, [])
    writer.finish({})
    assert out.getvalue().splitlines() == _lines(str(cap), "--format", "records") != []
