"""What a row reads from anywhere in its decoded body, in one walk: the names of the non-zero error
codes (fields named ``*ErrorCode``) and the topic ids (``TopicId`` fields, the zero id left out),
records fields' ``Records`` not looked into."""
from __future__ import annotations

from typing import Any

from kwire_cli.spec.error_codes import error_name
from kwire_cli.spec.model import ZERO_UUID


def scan_body(body: Any) -> tuple[list[str], set[str]]:
    """``(error code names, topic ids)`` of a decoded body: the names in the order the codes first
    appear (depth first, each once), the ids as a set."""
    codes: list[str] = []
    ids: set[str] = set()
    t = type(body)
    if t is dict:
        _scan_dict(body, codes, ids)
    elif t is list:
        _scan_list(body, codes, ids)
    elif isinstance(body, (dict, list)):
        _scan_any(body, codes, ids)
    return codes, ids


# values that hold nothing to find (their subclasses are looked at as isinstance sees them)
_PLAIN = frozenset({type(None), bool, float, bytes})


def _scan_dict(node: dict[Any, Any], codes: list[str], ids: set[str]) -> None:
    for k, v in node.items():
        t = type(v)
        if t is int:
            if v and k.endswith("ErrorCode"):
                _add_code(v, codes)
        elif t is str:
            if k == "TopicId" and v != ZERO_UUID:
                ids.add(v)
        elif t is dict or t is list:
            if k != "Records":
                if t is dict:
                    _scan_dict(v, codes, ids)
                else:
                    _scan_list(v, codes, ids)
        elif t not in _PLAIN:
            _scan_item(k, v, codes, ids)


def _scan_item(k: Any, v: Any, codes: list[str], ids: set[str]) -> None:
    if isinstance(v, (dict, list)):
        if k != "Records":
            _scan_any(v, codes, ids)
    elif k == "TopicId":
        if isinstance(v, str) and v != ZERO_UUID:
            ids.add(v)
    elif k.endswith("ErrorCode") and isinstance(v, int) and not isinstance(v, bool) and v:
        _add_code(v, codes)


def _add_code(code: int, codes: list[str]) -> None:
    name = error_name(code)
    if name not in codes:
        codes.append(name)


def _scan_list(node: list[Any], codes: list[str], ids: set[str]) -> None:
    for x in node:
        t = type(x)
        if t is dict:
            _scan_dict(x, codes, ids)
        elif t is list:
            _scan_list(x, codes, ids)
        elif t is not int and t is not str and x is not None and isinstance(x, (dict, list)):
            _scan_any(x, codes, ids)


def _scan_any(node: Any, codes: list[str], ids: set[str]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _scan_item(k, v, codes, ids)
    else:
        for x in node:
            if isinstance(x, (dict, list)):
                _scan_any(x, codes, ids)
