"""spark-decode's connection pre-pass in one process, outside Spark: CPU seconds per walk.

    python bench/bench_prepass.py DIR_OR_FILE... [--split-size MB] [--repeat N]

Plans the inputs and cuts large files into ranges as ``kwire spark-decode`` does (``plan_file``,
``index_range``, ``stitch``: 64 MB ranges by default), then lists every read task's connections
(``stages.task_connections``' work) three ways, each ``--repeat`` times (best and median of
``time.process_time``):

    reader   the capture reader over every byte of the task (``read_range``: the pre-pass before
             the header scan, and still its fallback)
    python   ``capture.headerscan.py_tcp_connections`` (the Python walk of the headers)
    native   the C walk (``_headerscan.c``), when built

over an mmap of each file (a task the walk does not answer, e.g. gzip, is read by the reader, as
the pre-pass does), and checks that all three give the same connections for every task.
"""
from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kwire_cli.capture import CaptureStats, Packet, headerscan
from kwire_cli.capture.formats import HARD_RECORD_LIMIT
from kwire_cli.errors import KwireError
from kwire_cli.spark import reading
from kwire_cli.spark.job import expand_inputs


def plan_tasks(paths: list[str], split: int) -> tuple[list[reading.FilePlan], list[tuple]]:
    plans = [reading.plan_file(os.path.abspath(p), p, split) for p in paths]
    good = [p for p in plans if not p.failure]
    good.sort(key=lambda p: (p.first_ts is None, p.first_ts or 0.0, p.label))
    tasks = []
    for rank, p in enumerate(good):
        if p.kind in ("pcap", "pcapng"):
            cuts = reading.nominal_ranges(p, split)
            p.ranges = reading.stitch(p, cuts, [reading.index_range(p, i, cuts) for i in range(len(cuts) - 1)])
        if p.kind == "whole" or not p.ranges:
            tasks.append((rank, 0, None))
        else:
            tasks += [(rank, i, r) for i, r in enumerate(p.ranges)]
    return good, tasks


def by_reader(plan, rank, range_no, rng) -> set | None:
    seen = set()
    try:
        for item in reading.read_range(plan, rank, rng, range_no, CaptureStats()):
            if item.__class__ is Packet:
                seen.add(item[3:7])
    except KwireError:
        pass
    return seen


FALLBACKS: dict[str, int] = {}


def by_walk(name, walk):
    def run(plan, rank, range_no, rng) -> set | None:
        with open(plan.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if rng is None or plan.kind == "whole":
                keys = walk(mm, 0, len(mm), None)
            else:
                keys = walk(mm, rng[0], rng[1], plan.prefix)
        if keys is None:  # gzip, ...: the pre-pass reads the task in full
            FALLBACKS[name] = FALLBACKS.get(name, 0) + 1
            return by_reader(plan, rank, range_no, rng)
        return {headerscan.four_tuple(k) for k in keys}
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--split-size", type=int, default=reading.DEFAULT_SPLIT >> 20, help="MB (default 64)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    plans, tasks = plan_tasks(expand_inputs(a.inputs), a.split_size << 20)
    walks = {"reader": by_reader, "python": by_walk("python", headerscan.py_tcp_connections)}
    native = headerscan.native_tcp_connections
    if native is not None:
        walks["native"] = by_walk("native", lambda *x: native(*x, HARD_RECORD_LIMIT))
    size = sum(p.size for p in plans)
    print(f"{len(plans)} files, {size / 1e6:.0f} MB, {len(tasks)} read tasks; load {os.getloadavg()[0]:.2f}")
    answers: dict[str, list] = {}
    for _ in range(a.repeat):
        for name, walk in walks.items():
            t0 = time.process_time()
            got = [walk(plans[t[0]], t[0], t[1], t[2]) for t in tasks]
            answers.setdefault(name, []).append(time.process_time() - t0)
            if name == "reader":
                want = got
            elif got != want:
                print(f"{name}: connections differ from the reader's", file=sys.stderr)
                return 1
    nconn = len({min(c, c[2:] + c[:2]) for s in want for c in s})  # direction-free
    for name, times in answers.items():
        fb = FALLBACKS.get(name, 0) // a.repeat
        print(f"{name:7s} best {min(times):6.3f} s  median {statistics.median(times):6.3f} s  "
              f"(CPU; {nconn} connections, the reader's; {fb} tasks read in full)")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
