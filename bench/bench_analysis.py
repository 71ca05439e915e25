"""The cost of the summary's answers: `kwire pcap --summary --format json` (every section: counts,
latency by broker and client, connections, who, groups, lag, commits, producers, expert) against
`kwire pcap --format jsonl` over the same capture, whole processes, CPU time (user + sys).

    python bench/make_spark_captures.py fixtures/captures/kafkajs-consume.pcap \\
        fixtures/captures/kafkajs-produce.pcap /tmp/an-bench --files 1 --times 1000   # 23 MB, 3,000 connections
    python bench/bench_analysis.py /tmp/an-bench/cap-00.pcap --repeat 5

Each repeat runs the two commands one after the other (paired, so background load hits both alike),
each a subprocess writing to /dev/null; CPU from os.wait4's rusage. Reported: the median CPU of
each, the median of the paired ratios summary / jsonl (the goal: at most 1.3), and in-process,
over rows decoded once and kept, the CPU of the analysis alone (``Analysis.add`` and ``sections``)
and of the summary's counting without it (``Summary.add``, ``to_dict``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_of(args: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "kwire_cli", *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    _pid, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"kwire {' '.join(args)} failed")
    return ru.ru_utime + ru.ru_stime


def in_process(path: str) -> dict[str, float]:
    sys.path.insert(0, str(REPO))
    from kwire_cli.analysis import Analysis
    from kwire_cli.capture import CaptureStats, iter_capture
    from kwire_cli.capture.session import Conversation
    from kwire_cli.capture.summary import Summary

    rows = list(Conversation().rows(iter_capture(path, stats=CaptureStats())))
    t = time.process_time()
    s = Summary()
    for r in rows:
        s.add(r)
    d = s.to_dict()
    summary = time.process_time() - t
    t = time.process_time()
    a = Analysis()
    for pos, r in enumerate(rows):
        a.add(r, pos)
    a.sections(d.get("auth"), d.get("negotiation_audit"))
    return {"rows": len(rows), "summary_counting_s": summary, "analysis_s": time.process_time() - t}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    jsonl, summ, ratios = [], [], []
    for _ in range(args.repeat):
        a = cpu_of(["pcap", args.capture, "--format", "jsonl"])
        b = cpu_of(["pcap", args.capture, "--summary", "--format", "json"])
        jsonl.append(a)
        summ.append(b)
        ratios.append(b / a)
    print(f"capture {args.capture}: {os.path.getsize(args.capture) / 1e6:.1f} MB")
    print(f"kwire pcap --format jsonl           CPU median {statistics.median(jsonl):.2f} s  {sorted(jsonl)}")
    print(f"kwire pcap --summary --format json  CPU median {statistics.median(summ):.2f} s  {sorted(summ)}")
    print(f"summary / jsonl, median of {args.repeat} paired ratios: {statistics.median(ratios):.2f}"
          " (goal <= 1.3)")
    ip = in_process(args.capture)
    print(f"in process over {ip['rows']} rows decoded once: summary counting {ip['summary_counting_s']:.2f} s, "
          f"analysis {ip['analysis_s']:.2f} s")


if __name__ == "__main__":
    main()
