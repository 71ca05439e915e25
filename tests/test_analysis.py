"""The analysis sections (kwire_cli.analysis) on the recorded fixtures: figures recomputed here from
the rows by other means, and parts of a capture (whole connections, as spark-decode's tasks decode
them) merged in any order equal to the whole."""
import json
import random
import subprocess
import sys

import pytest

from conftest import FIXTURES
from conftest import ROOT as REPO
from kwire_cli.analysis import SECTIONS, AnalysedSummary
from kwire_cli.capture import CaptureStats, iter_capture
from kwire_cli.capture.session import Conversation

CAPS = FIXTURES / "captures"


def rows_of(path):
    return list(Conversation().rows(iter_capture(str(path), stats=CaptureStats())))


ROWS = [r for p in sorted(CAPS.glob("*.pcap")) for r in rows_of(p)]


def conn_of(r):
    return (r["file"],) + ((r["dst"], r["src"]) if r["kind"] == "response" else (r["src"], r["dst"]))


def sections(rows, parts=1, seed=0, by_row=False):
    rnd = random.Random(seed)
    conns = sorted({conn_of(r) for r in rows})
    deal = {c: rnd.randrange(parts) for c in conns}
    states = [AnalysedSummary() for _ in range(parts)]
    for pos, r in enumerate(rows):
        states[rnd.randrange(parts) if by_row else deal[conn_of(r)]].add(r, pos)
    rnd.shuffle(states)
    total = states[0]
    for s in states[1:]:
        total.merge(s)
    d = total.to_dict()
    return {k: d[k] for k in SECTIONS}


WHOLE = sections(ROWS)


@pytest.mark.parametrize("parts,seed", [(2, 1), (3, 2), (9, 3)])
def test_parts_of_whole_connections_merge_into_the_whole(parts, seed):
    assert sections(ROWS, parts, seed) == WHOLE


@pytest.mark.parametrize("parts,seed", [(2, 4), (5, 5)])
def test_parts_cutting_connections_between_requests_and_answers_merge_into_the_whole(parts, seed):
    # spark-decode cuts a heavy connection into chunks: an answer can be in another part than its request
    assert sections(ROWS, parts, seed, by_row=True) == WHOLE


def test_lag_is_the_high_watermark_minus_the_fetch_offset_of_each_answered_fetch():
    # recomputed here: each Fetch answer's partitions against its own request's (full fetches only)
    asked, want = {}, {}
    for r in ROWS:
        if r["api_name"] != "Fetch" or r["error"] is not None:
            continue
        if r["kind"] == "request":
            asked[(r["file"], r["src"], r["dst"], r["correlation_id"])] = {
                (t.get("Topic") or r["topic_names"][t["TopicId"]], p["Partition"]): p["FetchOffset"]
                for t in r["body"]["Topics"] for p in t["Partitions"]}
            continue
        req = asked.pop((r["file"], r["dst"], r["src"], r["correlation_id"]))
        for t in r["body"]["Responses"]:
            name = t.get("Topic") or r["topic_names"][t["TopicId"]]
            for p in t["Partitions"]:
                if p["ErrorCode"] == 0 and (name, p["PartitionIndex"]) in req:
                    lag = p["HighWatermark"] - req[(name, p["PartitionIndex"])]
                    w = want.setdefault((r["client_id"], name, p["PartitionIndex"]), [0, lag, lag])
                    w[0] += 1
                    w[1] = max(w[1], lag)
                    w[2] = lag
    got = {(e["client_id"], e["topic"], e["partition"]): [e["samples"], e["max_lag"], e["last_lag"]]
           for e in WHOLE["lag"]}
    assert want and got == want


def test_a_generations_assignment_is_the_one_its_sync_group_answer_carried():
    rows = rows_of(CAPS / "kafka-python-consume.pcap")
    sync = [r for r in rows if r["api_name"] == "SyncGroup" and r["kind"] == "response"]
    (asg,) = [e["value"]["AssignedPartitions"] for e in sync[0]["embedded"]]
    (g,) = sections(rows)["groups"]
    (gen,) = g["generations"]
    (m,) = gen["members"]
    assert m["assignment"] == {a["Topic"]: a["Partitions"] for a in asg}
    assert g["protocol"] == "classic" and g["assignor"] == "range"
    join = [r for r in rows if r["api_name"] == "JoinGroup" and r["kind"] == "request"]
    assert gen["start_ts"] == join[0]["ts"] and gen["end_ts"] == sync[-1]["ts"]
    assert gen["rebalance_ms"] == round((sync[-1]["ts"] - join[0]["ts"]) * 1000, 3)


def test_latency_counts_every_answer_once_with_nearest_rank_percentiles():
    lat = WHOLE["latency"]
    assert sum(e["count"] for e in lat) == sum(1 for r in ROWS if r["kind"] == "response"
                                               and r["latency_ms"] is not None)
    for e in lat:
        vs = sorted(r["latency_ms"] for r in ROWS if r["kind"] == "response" and r["api_name"] == e["api_name"]
                    and r["api_version"] == e["api_version"] and r["src"] == e["broker"]
                    and r["client_id"] == e["client_id"] and r["latency_ms"] is not None)
        assert (e["min_ms"], e["max_ms"], e["count"]) == (vs[0], vs[-1], len(vs))
        assert e["p50_ms"] == vs[-(-len(vs) // 2) - 1]


def test_pcap_summary_json_has_every_section_and_the_tables_print_them():
    env = {"PYTHONPATH": str(REPO)}
    cap = str(CAPS / "kafka-python-consume.pcap")
    out = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", cap, "--summary", "--format", "json"],
                         capture_output=True, text=True, env=env, check=True).stdout
    d = json.loads(out)
    assert all(k in d for k in SECTIONS)
    assert d["lag"] == sections(rows_of(cap))["lag"]
    table = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", cap, "--summary"],
                           capture_output=True, text=True, env=env | {"COLUMNS": "250"}, check=True).stdout
    for title in ("Latency by API", "Connections", "Who did what", "Group kwire-group", "Consumer lag",
                  "Committed offsets", "Expert findings"):
        assert title in table


def test_a_kip848_group_reads_as_member_epochs_with_their_assignments(tmp_path):
    """No client here speaks ConsumerGroupHeartbeat with tansu: frames from tests/ref_encoder.py (the
    bundled specs, not kwire's codec), two members on two connections: A joins (epoch 1), B joins
    (epoch 2, the partitions split), B leaves (MemberEpoch -1), A alone again (epoch 3)."""
    from capture_util import Conversation as Tcp
    from capture_util import write_pcap
    from ref_encoder import Sample, request_frame, response_frame

    def spec(name):
        return json.loads((REPO / "specs" / f"{name}.json").read_text())

    req_spec, resp_spec = spec("ConsumerGroupHeartbeatRequest"), spec("ConsumerGroupHeartbeatResponse")
    tid = Sample(resp_spec, 0).message()["Assignment"]["TopicPartitions"][0]["TopicId"]

    def heartbeat(member, epoch, corr):
        body = Sample(req_spec, 0).message()
        body.update(GroupId="g848", MemberId=member, MemberEpoch=epoch)
        return request_frame(req_spec, 0, body, corr, f"client-{member or 'new'}")

    def answer(member, epoch, corr, parts):
        body = Sample(resp_spec, 0).message()
        body.update(ErrorCode=0, MemberId=member, MemberEpoch=epoch,  # (the encoder writes no nulls)
                    Assignment={"TopicPartitions": [{"TopicId": tid, "Partitions": parts}] if parts else []})
        return response_frame(resp_spec, 0, body, corr)

    a, b = Tcp(client=("10.0.0.1", 50001)), Tcp(client=("10.0.0.3", 50002))
    segs = a.handshake() + b.handshake()
    for conn, req, resp in ((a, heartbeat("", 0, 1), answer("A", 1, 1, [0, 1])),
                            (b, heartbeat("", 0, 1), answer("B", 2, 1, [1])),
                            (a, heartbeat("A", 1, 2), answer("A", 2, 2, [0])),
                            (b, heartbeat("B", -1, 2), answer("B", -1, 2, None)),
                            (a, heartbeat("A", 2, 3), answer("A", 3, 3, [0, 1]))):
        segs += conn.send(0, req) + conn.send(1, resp)
    cap = tmp_path / "kip848.pcap"
    cap.write_bytes(write_pcap(segs))
    (g,) = sections(rows_of(cap))["groups"]
    assert (g["group_id"], g["protocol"]) == ("g848", "consumer")
    got = {gen["generation_id"]: {m["member_id"]: list(m["assignment"].values()) for m in gen["members"]}
           for gen in g["generations"]}
    assert got == {1: {"A": [[0, 1]]}, 2: {"B": [[1]], "A": [[0]]}, 3: {"A": [[0, 1]]}}
    assert [[(c["kind"], c["member_id"]) for c in gen["causes"]] for gen in g["generations"]] == [
        [("first", None)], [("joined", "B")], [("left", "B")]]


@pytest.mark.parametrize("name,version", [("tls12-ecdhe-rsa-aes128-gcm-kafka-python", "TLSv1.2"),
                                          ("tls13-aes128-gcm-kafka-python", "TLSv1.3")])
def test_connections_name_the_tls_version_their_handshake_gave(name, version):
    cap = FIXTURES / "secure" / "tls" / name
    out = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", f"{cap}.pcap", "--tls-keylog", f"{cap}.keylog",
                          "--port", "9093", "--summary", "--format", "json"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO)}, check=True).stdout
    conns = json.loads(out)["connections"]
    assert conns and {c["tls_version"] for c in conns} == {version}


def test_answers_sharing_a_correlation_id_across_parts_pair_as_in_one_pass():
    """An answer whose request is in another part waits for it; two such answers with one correlation
    id (a request that did not decode, answered, then sent again) both wait, and the request meets
    the first answer after it, in whatever order the parts merge."""
    import itertools
    req = next(r for r in ROWS if r["kind"] == "request" and r["api_name"] == "Produce")
    resp = next(r for r in ROWS if r["kind"] == "response" and r["file"] == req["file"]
                and r["src"] == req["dst"] and r["dst"] == req["src"]
                and r["correlation_id"] == req["correlation_id"])
    seq = [dict(resp, frame=1), dict(req, frame=2), dict(resp, frame=3)]  # an answer, then the pair
    one = AnalysedSummary()
    for pos, r in enumerate(seq):
        one.add(r, pos)
    want = {k: one.to_dict()[k] for k in SECTIONS}
    assert not [e for e in want["expert"] if e["kind"] == "unanswered"]
    for order in itertools.permutations(range(3)):
        states = [AnalysedSummary() for _ in range(3)]
        for pos, r in enumerate(seq):
            states[pos].add(r, pos)
        total = states[order[0]]
        for i in order[1:]:
            total.merge(states[i])
        got = total.to_dict()
        assert {k: got[k] for k in SECTIONS} == want, order
