"""What the tasks report besides rows, merged on the driver by Spark accumulators: capture counters,
damage, failures, the partial summaries, the topic names learned on every connection and their uses."""
from __future__ import annotations

import gc
import pickle
from typing import Any

from kwire_cli.analysis import AnalysedSummary
from kwire_cli.capture import CaptureStats
from kwire_cli.capture.summary import Summary
from kwire_cli.render.jsonlines import GC_TUNED

MAX_DAMAGE_EVENTS = 200


class Totals:
    """What the tasks report besides rows; merged by an accumulator (``totals_param``)."""

    def __init__(self) -> None:
        self.stats = CaptureStats()
        self.damage_kinds: dict[str, list[int]] = {}
        self.damage_events: list[tuple] = []   # (rank, position, seq, dict), the first MAX by position
        self.tls_handshakes: list[tuple] = []  # (rank, packet, index, seq, {conn, detail}), the first MAX by position
        self.failures: list[str] = []
        self.summary: Summary = AnalysedSummary()  # the part of kwire pcap's summary this task's rows make
        self.rows = 0
        self.executor_code: set[str] = set()
        self.learned: dict = {}     # topic id -> (position, name): the earliest answer naming it
        self.topic_uses: dict = {}  # topic id -> the latest row that found no name for it
        self.renamed: set = set()   # topic ids that answers gave more than one name

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        """Pickled as one bytes object, its contents unpickled by ``unpacked`` with the garbage
        collector paused: a task's part is a tree of tuples, lists and dicts (0.66 MB pickled per
        task on the 2 GB set), which the driver's accumulator thread unpickled while the collector
        scanned the growing merged total again and again (72 parts: 0.47 s -> 0.25 s of CPU)."""
        return unpacked, (pickle.dumps(self.__dict__, pickle.HIGHEST_PROTOCOL),)

    def learn(self, tid: str, pn: tuple) -> bool:
        """An answer at ``pn[0]`` named ``tid`` ``pn[1]``: the earliest answer kept (True when this
        one is), another name noted."""
        mine = self.learned.get(tid)
        if mine is not None and mine[1] != pn[1]:
            self.renamed.add(tid)
        if mine is None or pn[0] < mine[0]:
            self.learned[tid] = pn
            return True
        return False

    def add_damage(self, key: tuple, d: dict) -> None:
        k = self.damage_kinds.setdefault(d["kind"], [0, 0])
        k[0] += 1
        k[1] += d["bytes"]
        self.damage_events.append(key + (d,))
        if len(self.damage_events) > 2 * MAX_DAMAGE_EVENTS:
            self._trim()

    def _trim(self) -> None:
        self.damage_events.sort(key=lambda e: e[:3])
        del self.damage_events[MAX_DAMAGE_EVENTS:]

    def add_handshake(self, key: tuple, note: dict) -> None:
        """A TLS connection's handshake note (``tls_section`` lists the first 200 by position; the
        connections table takes each connection's TLS version from them)."""
        self.tls_handshakes.append(key + (note,))
        if len(self.tls_handshakes) > 2 * MAX_DAMAGE_EVENTS:
            self._trim_handshakes()

    def _trim_handshakes(self) -> None:
        self.tls_handshakes.sort(key=lambda e: e[:4])
        del self.tls_handshakes[MAX_DAMAGE_EVENTS:]

    def handshake_notes(self) -> list[dict]:
        """The handshakes in capture order, as ``Summary.to_dict``'s notes."""
        self._trim_handshakes()
        return [dict(e[4], kind="tls") for e in self.tls_handshakes]

    def merge(self, o: Totals) -> Totals:
        self.stats.merge(o.stats)
        for k, (n, b) in o.damage_kinds.items():
            m = self.damage_kinds.setdefault(k, [0, 0])
            m[0] += n
            m[1] += b
        self.damage_events += o.damage_events
        self._trim()
        if o.tls_handshakes:
            self.tls_handshakes += o.tls_handshakes
            self._trim_handshakes()
        self.failures += o.failures
        self.summary.merge(o.summary)
        self.rows += o.rows
        self.executor_code |= o.executor_code
        for tid, pn in o.learned.items():
            self.learn(tid, pn)
        self.renamed |= o.renamed
        for tid, missed in o.topic_uses.items():
            mine = self.topic_uses.get(tid)
            if mine is None or missed > mine:
                self.topic_uses[tid] = missed
        return self


def unpacked(blob: bytes) -> Totals:
    """A ``Totals`` from its pickled form (``Totals.__reduce__``), the garbage collector paused
    meanwhile. Where the collector is tuned (``gc_tuned``, which the driver runs the job in: it has
    frozen the specs), the part is frozen too: out of the collections' sight until the job ends (it
    holds no cycles); elsewhere the next collections see it as usual."""
    out = Totals.__new__(Totals)
    was = gc.isenabled()
    gc.disable()
    try:
        out.__dict__.update(pickle.loads(blob))
        if gc.get_threshold() == GC_TUNED:
            gc.freeze()
    finally:
        if was:
            gc.enable()
    return out


class TotalsParts:
    """The accumulator's value: the tasks' ``Totals``, merged pairwise as they come, as a binary
    counter adds (two parts of the same level make one of the next), and into one by ``total``.

    A partial summary's merge costs about the size of both parts (connections and series walked,
    latency reservoirs joined), so merging each task's part into one growing total costs about
    N/2 x the total for N tasks; pairwise, about log2(N) x: the 72 tasks' parts of the 2 GB set
    (0.66 MB pickled each), merged in one process, took 2.23-2.64 s one by one and 0.68-0.77 s
    pairwise (0.46-0.59 s with reservoirs and series merged without sorting or copying). The merge
    is exact (``Totals.merge``) in any order, as Spark's tasks end in any order."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, Totals]] = []  # (level, part): a part of level L merges 2**L tasks'

    def add(self, part: Totals, level: int = 0) -> None:
        stack = self.stack
        while stack and stack[-1][0] == level:
            part = stack.pop()[1].merge(part)
            level += 1
        stack.append((level, part))

    def total(self) -> Totals:
        """Every part merged into one (the smallest first), taken out: the parts are left empty.
        (PySpark keeps every accumulator, and so its value, until the interpreter exits, whose
        clean-up of a merged total left there cost the driver 1.0 s of CPU on the 2 GB set.)"""
        out: Totals | None = None
        while self.stack:
            _, part = self.stack.pop()
            out = part if out is None else part.merge(out)
        return out if out is not None else Totals()


def totals_param():
    """The accumulator parameter that gathers the tasks' ``Totals`` (``TotalsParts``)."""
    from pyspark.accumulators import AccumulatorParam

    class TotalsParam(AccumulatorParam):
        def zero(self, value):  # noqa: ARG002 - AccumulatorParam's signature
            return TotalsParts()

        def addInPlace(self, a, b):
            if isinstance(b, Totals):  # a task's own (TaskRows.finish)
                a.add(b)
            else:  # a task's accumulator, to the driver's
                for level, part in reversed(b.stack):
                    a.add(part, level)
            return a

    return TotalsParam()
