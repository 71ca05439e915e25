"""Reading topics, partitions and names out of decoded bodies (the value trees of DESIGN.md)."""
from __future__ import annotations

from typing import Any


def topic_name(t: dict[str, Any], names: dict[str, Any] | None) -> str:
    """The topic of one entry of a body's topic list: its name, else its id named by the row's
    ``topic_names``, else the id itself."""
    n = t.get("Name")
    if n is None:
        n = t.get("Topic")
    if n is None:
        tid = t.get("TopicId")
        if tid is not None:
            if names:
                n = names.get(tid)
            if n is None:
                n = tid
    return n if isinstance(n, str) else "?"


def endpoints(r: dict[str, Any]) -> tuple[str, str]:
    """(client endpoint, broker endpoint) of a row's connection."""
    if r["kind"] == "response":
        return r["dst"], r["src"]
    body = r.get("body")
    if r["kind"] != "request" and isinstance(body, dict) and body.get("Side") == "broker":
        return r["dst"], r["src"]
    return r["src"], r["dst"]


def error_code(body: Any) -> int:
    """A body's top-level ErrorCode (0 when none)."""
    if isinstance(body, dict):
        c = body.get("ErrorCode")
        if isinstance(c, int):
            return c
    return 0
