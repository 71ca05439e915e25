"""The one-walk body scan, the RunCounts summary and json_ordered's no-copy case agree with the
plain definitions on every row of the recorded captures."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kwire_cli.capture import iter_capture
from kwire_cli.capture.bodyfields import may_hold_records
from kwire_cli.capture.bodyscan import scan_body
from kwire_cli.capture.rows import JSON_KEYS, ROW_KEYS, json_ordered
from kwire_cli.capture.session import ZERO_UUID, Conversation
from kwire_cli.capture.summary import RunCounts, Summary, count_batches
from kwire_cli.records.stats import batch_stats, new_batch_stats
from kwire_cli.spec.error_codes import error_name

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CAPTURES = sorted(str(p) for p in (FIXTURES / "captures").glob("*.pcap")) + [
    str(FIXTURES / "analysis" / "analysis-producers.pcap"), str(FIXTURES / "values" / "values.pcap")]


def _walk(node: Any, found: Any, pick: Any) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if not pick(k, v, found) and isinstance(v, (dict, list)) and k != "Records":
                _walk(v, found, pick)
    elif isinstance(node, list):
        for x in node:
            _walk(x, found, pick)


def _code(k: str, v: Any, found: list[str]) -> bool:
    if k.endswith("ErrorCode") and isinstance(v, int) and not isinstance(v, bool):
        if v and error_name(v) not in found:
            found.append(error_name(v))
        return True
    return False


def _topic_id(k: str, v: Any, found: set[str]) -> bool:
    if k == "TopicId" and isinstance(v, str):
        if v != ZERO_UUID:
            found.add(v)
        return True
    return False


def plain_scan(body: Any) -> tuple[list[str], set[str]]:
    """The definition, a walk each: every *ErrorCode int (not bool) that is not 0, every TopicId
    string that is not the zero id, anywhere but under Records."""
    codes: list[str] = []
    ids: set[str] = set()
    _walk(body, codes, _code)
    _walk(body, ids, _topic_id)
    return codes, ids


def rows(path: str) -> list[dict[str, Any]]:
    return list(Conversation().rows(iter_capture(path)))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: Path(p).name)
def test_the_scan_runcounts_and_json_order_agree_with_their_definitions(path):
    got = rows(path)
    assert got
    full, light = Summary(), RunCounts()
    for r in got:
        assert tuple(r)[:len(ROW_KEYS)] == ROW_KEYS  # every ALWAYS column, in declared order
        assert (r["error_codes"], set(r.get("topic_names") or ())) == plain_scan(r["body"])
        if not may_hold_records(r):
            assert batch_stats(r["body"], new_batch_stats()) == new_batch_stats()
        elif r["body"] is not None:  # the records fields where the spec puts them: what the walk finds
            at = new_batch_stats()
            count_batches(r, at)
            assert at == batch_stats(r["body"], new_batch_stats())
        out = json_ordered(r)
        assert list(out) == list(JSON_KEYS[:len(ROW_KEYS)]) + [k for k in JSON_KEYS[len(ROW_KEYS):] if k in r]
        assert all(out[k] is r.get(k) for k in out)
        full.add(r)
        light.add(r)
    a, b = full.to_dict(), light.to_dict()
    for k in ("frames", "decoded", "undecodable", "undecodable_by_reason", "record_batches"):
        assert a[k] == b[k], k
    assert a["record_batches"]["batches"] or "produce" not in path


def test_a_body_with_codes_ids_and_records_is_scanned_as_defined():
    body = {"ErrorCode": 0, "Topics": [
        {"TopicId": "x" * 22, "Partitions": [{"ErrorCode": 3, "Records": {"batches": [{"ErrorCode": 5}]}}]},
        {"TopicId": ZERO_UUID, "ErrorCode": True, "Nested": [[{"FooErrorCode": 3, "TopicId": "y" * 22}]]}]}
    assert scan_body(body) == plain_scan(body) == (["UNKNOWN_TOPIC_OR_PARTITION"], {"x" * 22, "y" * 22})
    assert scan_body(None) == ([], set())


def test_a_row_out_of_order_is_copied_in_order_and_one_in_order_is_not():
    r = dict.fromkeys(ROW_KEYS)
    assert json_ordered(r) is r
    r["notes"] = ["n"]
    r["violations"] = []
    out = json_ordered(r)
    assert out is not r and list(out)[-2:] == ["violations", "notes"]
    assert json_ordered(out) is out
