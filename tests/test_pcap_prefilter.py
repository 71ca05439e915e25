"""A --filter on header fields only leaves the frames it rejects undecoded (Conversation.head/skip):
the output must be exactly what decoding every frame and filtering the rows gives."""
import json

import pytest

from cli_run import kwire
from conftest import FIXTURES
from kwire_cli.capture import CaptureStats, KafkaFrame, iter_capture
from kwire_cli.capture import filter as capture_filter
from kwire_cli.capture.filter import compile_filter, header_filter
from kwire_cli.capture.session import ALWAYS_DECODED, Conversation

CAPS = FIXTURES / "captures"
CAPTURES = sorted(p.name for p in CAPS.glob("*.pcap")) + ["rotated"]
FILTERS = ["api=Fetch", "api=Produce and kind=request", "kind=response and api~Offset", "client~python",
           "frame>30 and not api=Heartbeat", "latency>1", "conn=9092 and version>=3", "corr=5-9", "size>500"]


def _out(monkeypatch, *args, prefilter=True, input=None):
    if not prefilter:
        monkeypatch.setattr(capture_filter, "header_filter", lambda text: None)
    res = kwire("pcap", *args, input=input)
    monkeypatch.undo()
    return res


@pytest.mark.parametrize("cap", CAPTURES)
@pytest.mark.parametrize("fmt", [["--format", "jsonl"], ["--format", "table"], ["--format", "records"],
                                 ["-e", "frame", "-e", "client_id", "-e", "latency_ms", "-e", "body.Topics.Name"]])
def test_the_same_output_as_decoding_every_frame(monkeypatch, cap, fmt):
    for flt in FILTERS:
        fast = _out(monkeypatch, str(CAPS / cap), *fmt, "--filter", flt)
        full = _out(monkeypatch, str(CAPS / cap), *fmt, "--filter", flt, prefilter=False)
        assert fast.code == full.code and fast.out == full.out, (cap, fmt, flt)


def test_streamed_input_too(monkeypatch):
    data = (CAPS / "kafkajs-consume.pcap").read_bytes()
    fast = _out(monkeypatch, "-", "--format", "jsonl", "--filter", "api=Fetch", input=data)
    full = _out(monkeypatch, "-", "--format", "jsonl", "--filter", "api=Fetch", prefilter=False, input=data)
    assert fast.out == full.out and fast.out.count("\n") > 5


def _frames(name):
    return list(iter_capture(str(CAPS / name), stats=CaptureStats()))


def test_rejected_frames_are_not_decoded_and_their_requests_still_pair():
    events = _frames("confluent-kafka-consume.pcap")
    frames = [e for e in events if isinstance(e, KafkaFrame)]
    conv = Conversation()
    rows = list(conv.rows(events, header_filter("api=Fetch and kind=response")))
    always = [f for f in frames if f.api_key in ALWAYS_DECODED]
    fetch_answers = [f for f in frames if f.api_key == 1 and f.kind == "response"]
    assert conv.skipped == len(frames) - len(always) - len(fetch_answers) > 0
    assert len(rows) == len(always) + len(fetch_answers)
    # the Fetch answers were decoded, and name the client of the requests left out undecoded
    shown = [r for r in rows if r["api_name"] == "Fetch"]
    assert len(shown) == len(fetch_answers) and all(r["body"] is not None for r in shown)
    reference = [r for r in Conversation().rows(events) if compile_filter("api=Fetch and kind=response")(r)]
    assert [r["body"] for r in shown] == [r["body"] for r in reference]
    assert [r["client_id"] for r in shown] == [r["client_id"] for r in reference] and all(r["client_id"] for r in shown)


@pytest.mark.parametrize("text, header_only", [
    ("api=Produce and version>3", True), ("kind=request or client~rdkafka", True),
    ("not (conn=9092 and latency>5)", True), ("file~rotated, frame<10", True),
    ("topic=orders", False), ("api=Produce or error", False), ("undecodable", False), ("key~k-", False),
    ("", False),
])
def test_which_filters_are_read_before_decoding(text, header_only):
    assert (header_filter(text) is not None) is header_only


def test_record_offsets_survive_a_filter_that_drops_the_answers(monkeypatch):
    """--format records: a Produce answer the filter rejects is still decoded for its offsets."""
    cap = str(CAPS / "kafka-python-produce.pcap")
    fast = _out(monkeypatch, cap, "--record-format", "%t %p %o\\n", "--filter", "kind=request")
    full = _out(monkeypatch, cap, "--record-format", "%t %p %o\\n")
    assert fast.out == full.out and " - " not in fast.out.replace("acks0 0 -", "")


def test_the_summary_counts_every_frame():
    """The summary counts every frame (--summary, and --format json's): no frame is left out
    undecoded there (nor under --strict, which judges every frame)."""
    cap = str(CAPS / "kafkajs-consume.pcap")
    s = kwire("pcap", cap, "--summary", "--format", "jsonl", "--filter", "api=Fetch")
    assert json.loads(s.out)["frames"] == json.loads(kwire("pcap", cap, "--summary", "--format", "jsonl").out)["frames"]
    doc = json.loads(kwire("pcap", cap, "--format", "json", "--filter", "api=Fetch").out)
    assert doc["summary"]["frames"] == json.loads(s.out)["frames"] and doc["summary"]["shown"] == len(doc["frames"])
