"""Latency reservoirs: the first values by position of a capture, kept so that parts merge exactly.

The summary (``kwire_cli.capture.summary``) and the analysis' distributions (``kwire_cli.analysis.dist``)
keep, per key, the first N (position, value) pairs by position; the percentiles read them in value
order, so a reservoir's own order does not matter, only which pairs are in it.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any

POS = itemgetter(0)


def first_by_position(a: list[tuple[Any, float]], b: list[tuple[Any, float]], n: int) -> list[tuple[Any, float]]:
    """The first ``n`` by position of two lists of (position, value) pairs, in no particular order
    (what percentiles need; at equal positions ``a``'s first, as a stable sort of ``a + b`` keeps
    them). ``a`` is extended in place when both fit, and returned as it is when ``b`` holds nothing
    before its last: most merges of parts in capture order then sort nothing."""
    if not b:
        return a
    if not a:
        return list(b)
    if len(a) + len(b) <= n:
        a.extend(b)
        return a
    if len(a) >= n and min(b, key=POS)[0] >= max(a, key=POS)[0]:
        return a
    if len(b) >= n and max(b, key=POS)[0] < min(a, key=POS)[0]:
        return list(b)
    both = a + b
    both.sort(key=POS)
    del both[n:]
    return both
