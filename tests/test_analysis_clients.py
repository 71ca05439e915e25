"""kwire's summary sections against what the clients themselves saw (fixtures/analysis,
recorded by scripts/record_analysis.py): generations, members and assignments as kafka-python's
rebalance listener was given them, offsets as its highwater()/position()/committed() said,
producers as confluent-kafka's statistics callback counted them."""
import json

from conftest import FIXTURES
from kwire_cli.analysis import AnalysedSummary
from kwire_cli.capture import CaptureStats, iter_capture
from kwire_cli.capture.session import Conversation

HERE = FIXTURES / "analysis"


def summary(name):
    s = AnalysedSummary()
    for r in Conversation().rows(iter_capture(str(HERE / f"{name}.pcap"), stats=CaptureStats())):
        s.add(r)
    return s.to_dict(), json.loads((HERE / f"{name}.json").read_text())


def test_generations_members_and_assignments_are_what_each_member_was_given():
    d, seen = summary("analysis-group")
    (g,) = d["groups"]
    assert g["group_id"] == seen["group_id"] and g["protocol"] == "classic"
    clients = {}  # generation -> {member id: assignment}, from the clients' own listeners
    for evs in seen["members"].values():
        for e in evs:
            if e["event"] == "generation":
                clients.setdefault(e["generation_id"], {})[e["member_id"]] = e["assignment"]
    kwire = {gen["generation_id"]: {m["member_id"]: m["assignment"] for m in gen["members"]}
             for gen in g["generations"]}
    assert kwire == clients
    assert len(kwire) == 5


def test_each_rebalance_names_the_member_that_joined_left_or_timed_out():
    d, seen = summary("analysis-group")
    (g,) = d["groups"]
    ids = {name: next(e["member_id"] for e in evs if e["event"] == "generation")
           for name, evs in seen["members"].items()}
    causes = [[(c["kind"], c["member_id"]) for c in gen["causes"]] for gen in g["generations"]]
    assert causes == [[("first", None)], [("joined", ids["member-b"])], [("joined", ids["member-c"])],
                      [("left", ids["member-b"])], [("timed_out", ids[seen["killed"]])]]
    for gen in g["generations"]:
        assert gen["start_ts"] <= gen["end_ts"] and gen["rebalance_ms"] > 0
        assert gen["cause"]
    left = [e["member_id"] for e in g["events"] if e["kind"] == "left"]
    assert left == [ids[n] for n in seen["closed"]]


def test_lag_and_commits_are_the_consumers_own_figures():
    d, seen = summary("analysis-lag")
    offsets = next(e for e in seen["consumer"] if e["event"] == "offsets")
    (p,) = offsets["partitions"]
    (lag,) = [e for e in d["lag"] if e["group_id"] == seen["group_id"]]
    assert (lag["topic"], lag["partition"], lag["group_id"]) == (p["topic"], p["partition"], seen["group_id"])
    # the consumer fetched once: from its first record's offset, when highwater() said the first figure
    assert lag["max_lag"] == offsets["first"]["highwater"] - offsets["first"]["offset"]
    assert lag["last_high_watermark"] == p["highwater"]
    (c,) = [e for e in d["commits"] if e["group_id"] == seen["group_id"]]
    assert c["last_committed_offset"] == p["committed"] == p["position"]
    assert c["high_watermark"] == p["highwater"]
    assert c["committed_lag"] == p["highwater"] - p["committed"]


def test_lag_and_commits_are_what_librdkafkas_statistics_said():
    d, seen = summary("analysis-lag")
    rd = seen["rdkafka_consumer"]
    (st,) = rd["partitions"].values()
    (lag,) = [e for e in d["lag"] if e["group_id"] == seen["rdkafka_group_id"]]
    # librdkafka fetched ahead of what it handed over: its fetch position is next_offset
    assert lag["last_fetch_offset"] == st["next_offset"]
    assert lag["last_high_watermark"] == st["hi_offset"]
    assert lag["last_lag"] == st["hi_offset"] - st["next_offset"]
    assert lag["max_lag"] == st["hi_offset"] - rd["first_offset"]
    (c,) = [e for e in d["commits"] if e["group_id"] == seen["rdkafka_group_id"]]
    assert c["last_committed_offset"] == st["committed_offset"] == rd["records"]
    assert c["committed_lag"] == st["consumer_lag"]


def test_producers_are_what_librdkafkas_statistics_counted():
    d, seen = summary("analysis-producers")
    by_pid = {p["producer_id"]: p for p in d["producers"]}
    for kind in ("idempotent", "transactional"):
        st = seen[kind]
        p = by_pid[st["eos"]["producer_id"]]
        assert p["producer_epoch"] == st["eos"]["producer_epoch"]
        parts = {str(x["partition"]): x for x in p["partitions"]}
        assert sorted(parts) == sorted(st["partitions"])
        for idx, s in st["partitions"].items():
            assert parts[idx]["records"] == s["txmsgs"]
            assert parts[idx]["last_sequence"] + 1 == s["next_ack_seq"]
        assert p["anomalies"] == []
    tx = by_pid[seen["transactional"]["eos"]["producer_id"]]
    done = seen["transactional"]["transactions"]
    assert tx["transactional_id"] == "an-tx"
    assert tx["transactions"] == {"begun": len(done), "committed": done.count("commit"),
                                  "aborted": done.count("abort")}
    assert by_pid[seen["idempotent"]["eos"]["producer_id"]]["transactional_id"] is None
