"""Where every stage of a ``StreamAssembler`` puts the events a packet produced (frames, damage,
notes); ``take()`` hands them out after each packet."""
from __future__ import annotations

from typing import Any

from .events import CaptureStats, Damage

_EMPTY: tuple[Any, ...] = ()


class Outbox:
    """The events of the packet being processed, and the counters they go with."""

    __slots__ = ("stats", "events")

    def __init__(self, stats: CaptureStats) -> None:
        self.stats = stats
        self.events: list[Any] = []

    def damage(self, file: str, packet: int | None, conn: Any, kind: str, nbytes: int, detail: str,
               ts: float | None = None, corrs: tuple[Any, ...] | None = None) -> None:
        """Count and report damage of ``kind`` on connection ``conn``."""
        self.stats.add_damage(kind, nbytes)
        self.events.append(Damage(file, packet, conn.label, kind, nbytes, detail, ts, corrs))

    def take(self) -> list[Any] | tuple[Any, ...]:
        """The events so far (an empty tuple when none), and a fresh list for the next ones."""
        out = self.events
        if out:
            self.events = []
            return out
        return _EMPTY
