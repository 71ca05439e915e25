"""The `series` section (kwire_cli.analysis.series): time series recomputed here from the rows, the
other sections' totals equal to the series' sums, points bounded, and parts merged equal to the whole
at any bucket width."""
import random
from collections import Counter

import pytest

from kwire_cli.analysis import AnalysedSummary, series
from kwire_cli.analysis.dist import percentile
from kwire_cli.capture.names import topic_name
from test_analysis import ROWS, sections


def whole():
    s = AnalysedSummary()
    for pos, r in enumerate(ROWS):
        s.add(r, pos)
    return s.to_dict()


@pytest.mark.parametrize("points,exact", [(4, 2), (16, 64), (240, 1)])
def test_points_stay_bounded_and_parts_merge_into_the_whole_at_any_width(monkeypatch, points, exact):
    monkeypatch.setattr(series, "MAX_POINTS", points)
    monkeypatch.setattr(series, "EXACT", exact)  # (response times counted in bins past it)
    one = whole()["series"]
    stamps = {p["ts"] for kind in ("latency", "throughput", "lag", "commits", "errors")
              for s in one[kind] for p in s["points"]}
    assert 0 < len(stamps) <= points
    if points == 4:
        assert one["bucket_ms"] > 1000  # the captures span days: wide buckets
    for parts in (2, 5):
        assert sections(ROWS, parts=parts, seed=parts)["series"] == one
        assert sections(ROWS, parts=parts, seed=parts, by_row=True)["series"] == one


def test_throughput_is_the_record_batches_bytes_and_records_per_topic():
    want: Counter = Counter()
    for r in ROWS:
        if r.get("error") is not None or not isinstance(r.get("body"), dict):
            continue
        if (r["api_key"], r["kind"]) == (0, "request"):
            where, topics, parts = "produce", "TopicData", "PartitionData"
        elif (r["api_key"], r["kind"]) == (1, "response"):
            where, topics, parts = "fetch", "Responses", "Partitions"
        else:
            continue
        for t in r["body"].get(topics) or []:
            name = topic_name(t, r.get("topic_names"))  # (Fetch v13+ names topics by id)
            for p in t.get(parts) or []:
                for b in (p.get("Records") or {}).get("batches") or []:
                    want[(where, name, "bytes")] += b["BatchLength"] + 12
                    want[(where, name, "records")] += b["RecordCount"]
    got: Counter = Counter()
    for s in whole()["series"]["throughput"]:
        for p in s["points"]:
            got[(s["direction"], s["topic"], "bytes")] += p["bytes"]
            got[(s["direction"], s["topic"], "records")] += p["records"]
    assert got == +want and want[("produce", "kwire-produce-zstd", "records")] > 0


def test_latency_and_lag_series_end_where_their_sections_say():
    d = whole()
    counts: Counter = Counter()
    for e in d["latency"]:
        counts[e["api_name"]] += e["count"]
    assert {s["api_name"]: sum(p["count"] for p in s["points"]) for s in d["series"]["latency"]} == dict(counts)
    maxima = {s["api_name"]: max(p["max_ms"] for p in s["points"]) for s in d["series"]["latency"]}
    for e in d["latency"]:
        assert e["max_ms"] <= maxima[e["api_name"]]
    last = {(s["client_id"], s["topic"], s["partition"]): s["points"][-1] for s in d["series"]["lag"]}
    assert last and {k: p["lag"] for k, p in last.items()} == {
        (e["client_id"], e["topic"], e["partition"]): e["last_lag"] for e in d["lag"]}
    assert {k: max(p["max_lag"] for p in s["points"]) for s in d["series"]["lag"]
            for k in [(s["client_id"], s["topic"], s["partition"])]} == {
        (e["client_id"], e["topic"], e["partition"]): e["max_lag"] for e in d["lag"]}
    commits = {(s["group_id"], s["topic"], s["partition"]): s["points"][-1]["committed_offset"]
               for s in d["series"]["commits"]}
    assert commits == {(e["group_id"], e["topic"], e["partition"]): e["last_committed_offset"] for e in d["commits"]}
    errs = {s["error"]: sum(p["count"] for p in s["points"]) for s in d["series"]["errors"]}
    assert errs == d["error_codes"]


def test_a_busy_buckets_percentiles_are_within_two_percent_and_its_maximum_exact():
    rnd = random.Random(7)
    values = [rnd.lognormvariate(1, 2) for _ in range(5000)] + [0.0]
    parts = [series.Series() for _ in range(3)]
    for pos, v in enumerate(values):
        parts[pos % 3].add({"kind": "response", "api_key": 1, "api_name": "Fetch", "ts": 100.0, "latency_ms": v,
                            "error": None}, pos)
    whole = parts[0].merge(parts[1]).merge(parts[2])
    (point,) = whole.to_dict([])["latency"][0]["points"]
    vs = sorted(values)
    assert point["count"] == len(values) and point["max_ms"] == vs[-1]
    for name, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
        exact = percentile(vs, q)
        assert exact <= point[name] <= exact * 1.02 + 0.001, name


def test_heartbeats_are_the_heartbeat_requests_per_group():
    want: Counter = Counter(r["body"]["GroupId"] for r in ROWS
                            if r["kind"] == "request" and r["api_key"] in (12, 68, 76, 88) and r.get("error") is None)
    got = {s["group_id"]: sum(p["count"] for p in s["points"]) for s in whole()["series"]["heartbeats"]}
    assert got == dict(want) and got
