"""Summary.merge: summaries of parts of a capture, merged in any order, equal the summary of the
whole (what kwire spark-decode relies on: each task summarises its own records)."""
import random

import pytest

from conftest import FIXTURES
from kwire_cli.capture import CaptureStats, iter_capture
from kwire_cli.capture.reservoir import first_by_position
from kwire_cli.capture.session import Conversation
from kwire_cli.capture.summary import Summary

CAPS = FIXTURES / "captures"


def records():
    out = []
    for name in sorted(p.name for p in CAPS.glob("*.pcap")):
        conv = Conversation()
        out += list(conv.rows(iter_capture(str(CAPS / name), stats=CaptureStats())))
    return out


RECS = records()


def whole(recs, reservoir=None):
    s = Summary()
    if reservoir:
        s.RESERVOIR = reservoir
    for r in recs:
        s.add(r)
    return s.to_dict()


def merged(recs, parts, seed, reservoir=None):
    rnd = random.Random(seed)
    summaries = [Summary() for _ in range(parts)]
    for s in summaries:
        if reservoir:
            s.RESERVOIR = reservoir
    for pos, r in enumerate(recs):  # records dealt to parts at random, positions kept
        summaries[rnd.randrange(parts)].add(r, pos)
    rnd.shuffle(summaries)          # and merged in any order
    total = summaries[0]
    for s in summaries[1:]:
        total.merge(s)
    return total.to_dict()


def test_the_fixtures_exercise_what_merge_must_get_right():
    s = whole(RECS)
    assert len(RECS) > 400
    assert s["error_codes"]
    assert s["advertised_by"] and s["clients"] and s["what_if_tagged_error_fields"]["responses"] > 100
    assert sum(1 for r in RECS if r["kind"] == "response" and r["api_name"] == "ApiVersions") > 3


@pytest.mark.parametrize("parts,seed", [(1, 0), (2, 1), (3, 2), (7, 3), (40, 4)])
def test_merged_parts_equal_the_whole(parts, seed):
    assert merged(RECS, parts, seed) == whole(RECS)


@pytest.mark.parametrize("parts,seed", [(2, 5), (5, 6), (40, 7)])
def test_latency_reservoir_keeps_the_first_by_position(parts, seed):
    # a reservoir of 3 latencies per (API, version): the merged percentiles are those of the first 3
    want = whole(RECS, reservoir=3)
    assert want != whole(RECS)  # the small reservoir changes some percentile
    assert merged(RECS, parts, seed, reservoir=3) == want


def test_error_codes_keep_kwire_pcap_order_count_then_first_seen():
    # real responses, error codes rewritten so that counts tie: first seen breaks the tie
    resp = [r for r in RECS if r["kind"] == "response" and r["error"] is None][:60]
    names = ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION", "REQUEST_TIMED_OUT", "COORDINATOR_NOT_AVAILABLE"]
    recs = [dict(r, error_codes=[names[(i * 7) % 4]] + ([names[0]] if i % 9 == 0 else [])) for i, r in enumerate(resp)]
    want = whole(recs)
    assert list(want["error_codes"].items()) == [(names[0], 22), (names[3], 15), (names[2], 15), (names[1], 15)]
    for parts, seed in ((2, 8), (6, 9), (30, 10)):
        got = merged(recs, parts, seed)
        assert got == want and list(got["error_codes"]) == list(want["error_codes"])


def test_last_apiversions_answer_by_position_wins():
    av = [r for r in RECS if r["kind"] == "response" and r["api_name"] == "ApiVersions" and r["error"] is None]
    a, b = Summary(), Summary()
    changed = dict(av[0], body=dict(av[0]["body"], ApiKeys=[{"ApiKey": 0, "MinVersion": 3, "MaxVersion": 3}]))
    b.add(av[0], 10)
    a.add(changed, 5)          # earlier by position, merged last: must not win
    b.merge(a)
    assert b.advertised[av[0]["src"]] != {0: (3, 3)} and len(b.advertised[av[0]["src"]]) > 10
    a2, b2 = Summary(), Summary()
    a2.add(av[0], 5)
    b2.add(changed, 10)        # later by position: wins whichever side it is merged from
    a2.merge(b2)
    assert a2.advertised[av[0]["src"]] == {0: (3, 3)}


@pytest.mark.parametrize("seed", range(6))
def test_first_by_position_keeps_what_a_stable_sort_of_both_keeps(seed):
    # lists of (position, value) pairs, in and out of order, full or not, overlapping or in turn,
    # with positions shared between the two: the pairs kept are those of sorted(a + b)[:n]
    rnd = random.Random(seed)
    for _ in range(300):
        n = rnd.randint(1, 12)
        lo = rnd.choice([0, 0, 20])
        a = [(rnd.randint(0, 30), rnd.random()) for _ in range(rnd.randint(0, n))]
        b = [(rnd.randint(lo, lo + 30), rnd.random()) for _ in range(rnd.randint(0, n))]
        if rnd.random() < 0.5:
            a.sort()
        want = sorted(a + b, key=lambda pv: pv[0])[:n]
        got = first_by_position(list(a), list(b), n)
        assert sorted(got) == sorted(want)
