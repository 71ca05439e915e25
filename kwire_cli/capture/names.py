"""The topic an entry of a decoded body's topic list names (the value trees of DESIGN.md): read by the
analysis and by the pcap table's info cell."""
from __future__ import annotations

from typing import Any


def topic_name(t: dict[str, Any], names: dict[str, Any] | None) -> str:
    """The topic of one entry of a body's topic list: its name, else its id named by the row's
    ``topic_names``, else the id itself."""
    n = t.get("Name")
    if n is None:
        n = t.get("Topic")
    if n is None:
        n = t.get("TopicName")
    if n is None:
        tid = t.get("TopicId")
        if tid is not None:
            if names:
                n = names.get(tid)
            if n is None:
                n = tid
    return n if isinstance(n, str) else "?"
