"""A distribution of response times, mergeable: count, min, max and the first values by position.

Percentiles are nearest-rank, the method of the summary's ``latency_p50_ms``/``latency_p99_ms``
(``kwire_cli.capture.summary``): the smallest value with at least a fraction q of the values at or
below it. The first ``RESERVOIR`` values by position are kept (as the summary keeps them), so that
partial distributions of parts of one capture merge into exactly the whole's.
"""
from __future__ import annotations

import math
from typing import Any

from kwire_cli.capture.reservoir import first_by_position

RESERVOIR = 100_000


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of sorted values (None for none)."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


class Dist:
    """Response times of one key: count, min, max and (position, value) pairs for percentiles."""

    __slots__ = ("count", "min", "max", "values")

    def __init__(self) -> None:
        self.count = 0
        self.min: float | None = None
        self.max: float | None = None
        self.values: list[tuple[Any, float]] = []

    def add(self, pos: Any, v: float) -> None:
        self.add_pair((pos, v))

    def add_pair(self, pv: tuple[Any, float]) -> None:
        """``add`` of a (position, value) pair made elsewhere (the summary's: one tuple for both)."""
        v = pv[1]
        self.count += 1
        if self.min is None or v < self.min:
            self.min = v
        if self.max is None or v > self.max:
            self.max = v
        if len(self.values) < RESERVOIR:
            self.values.append(pv)

    def merge(self, o: Dist) -> None:
        self.count += o.count
        if o.min is not None and (self.min is None or o.min < self.min):
            self.min = o.min
        if o.max is not None and (self.max is None or o.max > self.max):
            self.max = o.max
        self.values = first_by_position(self.values, o.values, RESERVOIR)

    def to_dict(self, qs: tuple[tuple[str, float], ...] = (("p50_ms", 0.5), ("p90_ms", 0.9),
                                                           ("p99_ms", 0.99))) -> dict[str, Any]:
        vs = sorted(v for _, v in self.values)
        out: dict[str, Any] = {"count": self.count, "min_ms": self.min}
        for name, q in qs:
            out[name] = percentile(vs, q)
        out["max_ms"] = self.max
        return out
