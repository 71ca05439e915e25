"""Reading a row's connection ends and error code out of decoded bodies (the value trees of DESIGN.md)."""
from __future__ import annotations

from typing import Any


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
