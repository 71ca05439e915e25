"""The output-row declaration (kwire_cli/capture/rows.py) and what is built from it, on the rows of
the real captures: the rows themselves, JSON order, the pcap table, the filter fields, error kinds
and the summary's count of them, Spark's typed rows and schema, and the docs' column table."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT
from kwire_cli.capture import CaptureStats, KafkaFrame, iter_capture
from kwire_cli.capture import rows as R
from kwire_cli.capture.filter import FIELDS, compile_filter
from kwire_cli.capture.session import Conversation
from kwire_cli.capture.summary import Summary
from kwire_cli.output import table as T
from kwire_cli.output import writers as W

CAPS = FIXTURES / "captures"


def capture_rows(name: str) -> list[dict]:
    return list(Conversation().rows(iter_capture(str(CAPS / name), file_label=name, stats=CaptureStats())))


ROWS = [r for p in sorted(CAPS.glob("*.pcap")) for r in capture_rows(p.name)]


def frames(name: str) -> list[KafkaFrame]:
    return [e for e in iter_capture(str(CAPS / name)) if isinstance(e, KafkaFrame)]


def test_every_row_has_the_declared_columns_in_order():
    assert len(ROWS) > 400
    n = len(R.ROW_KEYS)
    seen_sometimes = set()
    for r in ROWS:
        keys = list(r)
        assert keys[:n] == list(R.ROW_KEYS)
        rest = keys[n:]
        assert rest == [k for k in R.SOMETIMES_KEYS if k in rest]  # only declared ones, in order
        seen_sometimes.update(rest)
        assert R.json_ordered(r) == r and list(R.json_ordered(r)) == keys
    # the fixtures carry topic names, group protocols and violations (librdkafka's Metadata requests with 3
    # trailing bytes); notes (KIP-511 answers, assumed versions) only tests/test_lenient.py's captures
    assert seen_sometimes == set(R.SOMETIMES_KEYS) - {"notes", "captured"}  # (captured: test_capture_snaplen)
    # the typed values match the declared types
    ints = {c.name for c in R.COLUMNS if c.type in (R.INT32, R.INT64)}
    for r in ROWS:
        for k in ints:
            assert r.get(k) is None or type(r[k]) is int, k  # (a SOMETIMES column may be absent)
        assert isinstance(r["ts"], float) and (r["latency_ms"] is None or isinstance(r["latency_ms"], float))
        assert isinstance(r["error_codes"], list)
        assert (r["error"] is None) == (r["error_kind"] is None)


def test_json_order_puts_unknown_keys_last_and_fills_missing_columns():
    row = {"extra_key": 1, "embedded": {"x": 1}, "frame": 7, "kind": "request"}
    out = R.json_ordered(row)
    assert list(out) == [*R.ROW_KEYS, "embedded", "extra_key"]
    assert out["frame"] == 7 and out["file"] is None and out["extra_key"] == 1


def test_the_table_is_built_from_the_headings():
    assert T.table_header() == "frame  time  src -> dst  kind  api  corr  client  size  latency_ms  info"
    r = next(r for r in ROWS if r["kind"] == "response" and r["api_name"] == "Metadata" and r.get("topic_names"))
    cells = T.table_cells(r, r["ts"] - 1.5)
    assert len(cells) == len(T.table_headings())
    assert cells[0] == str(r["frame"]) and cells[1] == "1.500000"
    assert cells[2] == f"{r['src']} -> {r['dst']}" and cells[4] == f"Metadata v{r['api_version']}"
    named = [t["Name"] for t in r["body"]["Topics"]][:3]
    assert all(name in cells[-1] for name in named), cells[-1]  # the answer's topics, as tshark's Info


def test_the_table_aligns_its_columns_and_says_what_each_frame_is_about():
    """Columns line up from the first row (each cell padded to its column; numbers to the right), and
    the info cell names the topics and partitions, the group and member and the records carried."""
    out: list[str] = []
    writer = W.TableWriter(out.append, lambda: None)
    writer.start()
    t0 = ROWS[0]["ts"]
    for r in ROWS[:40]:
        writer.row(r, t0)
    head = out[0]
    starts = [head.index(h) for h in ("kind", "api", "info")]
    for line, r in zip(out[1:], ROWS[:40]):
        assert line[starts[0]:].startswith(r["kind"]), line
        assert line[starts[1]:].startswith(r["api_name"]), line
    frame_end = head.index("frame") + len("frame")
    assert all(line[:frame_end].strip().isdigit() for line in out[1:])  # right-aligned under its heading
    fetch = next(r for r in ROWS if r["api_name"] == "Fetch" and r["kind"] == "response"
                 and R_records(r))
    info = T.table_cells(fetch, t0)[-1]
    assert f"{R_records(fetch)} record" in info and "[" in info, info
    join = next(r for r in ROWS if r["api_name"] == "JoinGroup" and r["kind"] == "request")
    assert f"group {join['body']['GroupId']}" in T.table_cells(join, t0)[-1]


def R_records(row):
    from kwire_cli.records.stats import batch_stats, new_batch_stats
    return batch_stats(row["body"], new_batch_stats())["records"] if row.get("body") else 0


@pytest.mark.parametrize(("fmt", "want"), [("r", "1.500000"), ("e", "1700000001.500000"),
                                           ("ad", "2023-11-14 22:13:21.500000"), ("a", "22:13:21.500000")])
def test_the_time_column_reads_as_tshark_t_says(fmt, want):
    clock = T.Clock(fmt)
    assert clock.cell(1_700_000_001.5, 1_700_000_000.0) == want


def test_the_delta_time_counts_from_the_row_before():
    clock = T.Clock("d")
    assert [clock.cell(t, None) for t in (10.0, 10.25, 11.0)] == ["0.000000", "0.250000", "0.750000"]


def test_every_filter_field_reads_its_declared_columns():
    assert tuple(f.name for f in R.FILTER_FIELDS) == FIELDS
    fields = {f.name: f for f in R.FILTER_FIELDS}
    row = next(r for r in ROWS if r["kind"] == "response" and r["latency_ms"] and r["error_codes"])
    for f in R.FILTER_FIELDS:
        col = f.columns[0]
        if f.match == "number":
            v = row[col]
            assert compile_filter(f"{f.name}={v}")(row), f.name
            assert not compile_filter(f"{f.name}!={v}")(row), f.name
            assert compile_filter(f"{f.name}>={v}")(row) and not compile_filter(f"{f.name}<{v}")(row)
        elif f.match == "text":
            assert compile_filter(f'{f.name}="{row[col]}"')(row), f.name
            assert compile_filter(f'{f.name}~"{row[col][1:]}"')(row), f.name
        elif f.match == "endpoint":
            for c in f.columns:
                assert compile_filter(f"{f.name}={row[c]}")(row), (f.name, c)
    assert fields["error"].columns == ("error_codes",)
    assert compile_filter("error")(row) and compile_filter(f"error={row['error_codes'][0]}")(row)
    assert compile_filter(f"api={row['api_name']}")(row) and compile_filter(f"api={row['api_key']}")(row)
    assert not compile_filter("undecodable")(row)


def test_conversation_remembers_requests_and_topic_names_through_public_methods():
    learned = []
    conv = Conversation(on_topic_name=lambda tid, name: learned.append((tid, name)))
    rows = list(conv.rows(iter_capture(str(CAPS / "kafka-python-admin.pcap"))))
    named = {tid: name for r in rows for tid, name in (r.get("topic_names") or {}).items() if name}
    assert named and all(conv.topic_name(t) == n for t, n in named.items())
    assert len(learned) == len({t for t, _ in learned})  # once per id
    assert {t for t, _ in learned} >= set(named)
    conv.learn_topic_names([("AAAAAAAAAAAAAAAAAAAAAQ", "seeded")])
    assert conv.topic_name("AAAAAAAAAAAAAAAAAAAAAQ") == "seeded" and learned[-1][1] == "seeded"
    # a response decoded with only what its request left: its client id comes from remember_request
    fr = frames("kafka-python-admin.pcap")
    resp = next(f for f in fr if f.kind == "response" and f.api_key is not None)
    alone = Conversation()
    assert alone.take_request(resp.conn, resp.correlation_id) == (None, None)
    alone.remember_request(resp.conn, resp.correlation_id, "someone", None)
    assert alone.row(resp)["client_id"] == "someone"
    assert alone.take_request(resp.conn, resp.correlation_id) == (None, None)  # taken by the row


def _patched(f: KafkaFrame, at: int, value: bytes) -> KafkaFrame:
    data = f.data[:at] + value + f.data[at + len(value):]
    return f._replace(data=data)


def test_error_kinds_come_from_the_typed_errors_and_the_summary_counts_them():
    fr = frames("kafka-python-admin.pcap")
    req = next(f for f in fr if f.kind == "request" and f.api_key == 3)
    resp = next(f for f in fr if f.kind == "response" and f.api_key == 3)
    conv = Conversation()
    rows = {
        "unknown-api-key": conv.row(_patched(req, 0, (999).to_bytes(2, "big"))),
        "unknown-version": conv.row(_patched(req, 2, (-5).to_bytes(2, "big", signed=True))),
        "unpaired-response": conv.row(resp._replace(api_key=None, api_version=None)),
        "decode-error": conv.row(resp._replace(data=resp.data[:12], size=12)),
    }
    # trailing bytes: read leniently, a violation; with strict=True (--strict) an error of that kind
    lenient = [r for r in capture_rows("confluent-kafka-admin.pcap") if r.get("violations")]
    assert lenient and all(r["error"] is None and r["violations"][0]["rule"] == "trailing-bytes" for r in lenient)
    strict = Conversation(strict=True)
    trailing = [r for r in strict.rows(iter_capture(str(CAPS / "confluent-kafka-admin.pcap"))) if r["error"]]
    assert len(trailing) == len(lenient) and all("trailing bytes" in r["error"] for r in trailing)
    rows["trailing-bytes"] = trailing[0]
    for kind, r in rows.items():
        assert r["error"] and r["error_kind"] == kind, (kind, r["error"])
    s = Summary()
    for r in rows.values():
        s.add(r)
    # counted by kind, never by the message: a row whose text says one thing counts as its kind
    s.add(dict(rows["decode-error"], error="unknown API key 5 (not really)"))
    assert s.to_dict()["undecodable_by_reason"] == {"decode-error": 2, "trailing-bytes": 1, "unknown-api-key": 1,
                                                    "unknown-version": 1, "unpaired-response": 1}


def test_spark_rows_and_schema_follow_the_declaration():
    pytest.importorskip("pyspark")
    from kwire_cli.spark.rows import row_schema, to_row
    schema = row_schema("parquet")
    assert [f.name for f in schema.fields] == [c.name for c in R.COLUMNS]
    simple = {f.name: f.dataType.simpleString() for f in schema.fields}
    assert simple["frame"] == "bigint" and simple["api_key"] == "int" and simple["latency_ms"] == "double"
    assert simple["error_codes"] == "array<string>" and simple["body"] == "string"
    pytest.importorskip("pyarrow")
    from pyspark.sql.pandas.types import to_arrow_schema

    from kwire_cli.spark.rows import RowBatcher
    for fmt in ("parquet", "jsonl"):  # the Arrow batches handed to the JVM have the Spark schema's types
        b = RowBatcher(fmt)
        for r in ROWS[:80]:
            b.add(dict(r))
        batch = b.flush()
        assert batch.num_rows == 80
        assert batch.schema.names == row_schema(fmt).names
        want = to_arrow_schema(row_schema(fmt))
        assert [str(f.type).replace("element", "item") for f in want] == [str(f.type) for f in batch.schema]
    for r in ROWS[:80]:
        t = to_row(dict(r, later_key=[1]), "parquet")
        assert len(t) == len(R.COLUMNS)
        got = dict(zip([c.name for c in R.COLUMNS], t, strict=True))
        for c in R.COLUMNS:
            if c.type is R.JSON and c.name != "extra":
                assert (None if got[c.name] is None else json.loads(got[c.name])) == \
                    json.loads(json.dumps(r.get(c.name), default=str)), c.name
        assert json.loads(got["extra"]) == {"later_key": [1]}
        line, api = to_row(r, "jsonl")
        assert api == r["api_name"] and list(json.loads(line)) == list(r)


def test_the_docs_show_the_declared_columns():
    assert R.markdown() in (ROOT / "docs" / "spark.md").read_text()


def test_a_jsonl_batch_is_built_without_pandas():
    """The jsonl batches' columns are made from their buffers: ``pa.array``'s first call imports pandas
    (0.6 s of every Spark Python worker's start). Same values as ``pa.array`` gives, nulls included."""
    pa = pytest.importorskip("pyarrow")
    code = (
        "import sys, json\n"
        "from kwire_cli.spark.rows import RowBatcher, utf8_array\n"
        "import pyarrow as pa\n"
        "rows = [{'api_name': n, 'frame': i} for i, n in enumerate(['Fetch', 'Produce', None, 'Fetch'])]\n"
        "b = RowBatcher('jsonl')\n"
        "for r in rows: b.add(r)\n"
        "batch = b.flush()\n"
        "vals = (b'a', None, b'xyz', None, None, b'', b'q')\n"
        "print(json.dumps([batch.column(1).to_pylist(), batch.column(1).null_count, utf8_array(pa, vals).to_pylist(),"
        " 'pandas' in sys.modules]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    names, nulls, values, pandas = json.loads(r.stdout)
    assert names == ["Fetch", "Produce", None, "Fetch"] and nulls == 1
    assert values == pa.array(["a", None, "xyz", None, None, "", "q"]).to_pylist()
    assert pandas is False
