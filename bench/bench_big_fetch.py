"""A legitimate big Fetch answer in a capture: `kwire pcap --format jsonl` against
`tshark -T json -O kafka`, paired runs, CPU time and peak memory of each process, as ratios.

The capture: one connection carrying the fixture's Fetch request (made v11, the newest Fetch
version tshark 4.0 dissects) and an answer of N partitions (default 100,000: 4.2 MB), each the
fixture's partition without records, made by kwire's encoder. tshark runs with its tree-item cap
raised (`-o gui.max_tree_items:100000000`; at its default of a million items it stops two thirds
of the way through the partitions). Both outputs are checked to hold every partition.

    python bench/bench_big_fetch.py                       # 5 pairs, 100,000 partitions
    python bench/bench_big_fetch.py --partitions 399990 --pairs 3
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MAKE = r"""
import sys
sys.path.insert(0, sys.argv[3] + "/tests")
from memory_bombs import answer_pcap
from kwire_cli.codec import decode_request, decode_response, encode_request, encode_response
from kwire_cli.inputs.dump import parse_hex
root, n = sys.argv[3], int(sys.argv[1])
q = decode_request(parse_hex(open(root + "/fixtures/hex/fetch-request-v13.hex").read()))
header = {**q.header, "RequestApiVersion": 11}
body = {k: v for k, v in q.body.items() if k != "ClusterId"}
body["Topics"] = [{"Topic": "orders", "Partitions": [{k: v for k, v in p.items() if k != "LastFetchedEpoch"}
                                                     for p in t["Partitions"]]} for t in q.body["Topics"]]
request = encode_request("Fetch", 11, header, body)
m = decode_response(parse_hex(open(root + "/fixtures/hex/fetch-response-v13.hex").read()), "Fetch", 13)
part = m.body["Responses"][0]["Partitions"][0]
keep = ("ErrorCode", "HighWatermark", "LastStableOffset", "LogStartOffset", "AbortedTransactions",
        "PreferredReadReplica")
parts = [{"PartitionIndex": i, **{k: part[k] for k in keep}, "Records": None} for i in range(n)]
answer = encode_response("Fetch", 11, m.header, {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0,
                                                 "Responses": [{"Topic": "orders", "Partitions": parts}]})
open(sys.argv[2], "wb").write(answer_pcap(request, answer))
print(len(answer))
"""


def measured(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    """(CPU seconds, peak RSS in MiB) of one run of ``cmd``, its output to ``out``."""
    with open(out, "wb") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.DEVNULL, env=env)
        _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: exit {os.waitstatus_to_exitcode(status)}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss // 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        cap = Path(tmp) / "fetch.pcap"
        size = subprocess.run([sys.executable, "-c", MAKE, str(args.partitions), str(cap), str(ROOT)], env=env,
                              check=True, capture_output=True, text=True).stdout.strip()
        kwire = [sys.executable, "-m", "kwire_cli", "pcap", str(cap), "--format", "jsonl"]
        tshark = ["tshark", "-o", "gui.max_tree_items:100000000", "-r", str(cap), "-T", "json", "-O", "kafka"]
        runs: dict[str, list[tuple[float, int]]] = {"kwire": [], "tshark": []}
        for _ in range(args.pairs):
            runs["tshark"].append(measured(tshark, Path(tmp) / "tshark.json"))
            runs["kwire"].append(measured(kwire, Path(tmp) / "kwire.jsonl", env))
        rows = [json.loads(line) for line in (Path(tmp) / "kwire.jsonl").read_text().splitlines()]
        shown = len(rows[-1]["body"]["Responses"][0]["Partitions"])
        ids = 0
        needle = b'"kafka.partition_id"'
        with open(Path(tmp) / "tshark.json", "rb") as f:
            tail = b""
            while chunk := f.read(1 << 20):
                text = tail + chunk
                ids += text.count(needle)
                tail = text[-(len(needle) - 1):]   # too short to hold a whole match: none counted twice
    assert shown == args.partitions, f"kwire shows {shown} partitions"
    assert ids == args.partitions + 1, f"tshark shows {ids - 1} partitions"  # and the request's one
    print(f"Fetch v11 answer of {args.partitions:,} partitions ({int(size):,} bytes) in a capture; "
          f"medians of {args.pairs} pairs (load {os.getloadavg()[0]:.1f})")
    print("| | CPU s | peak MiB |\n|---|---:|---:|")
    med = {}
    for name in ("tshark", "kwire"):
        cpu = statistics.median(r[0] for r in runs[name])
        mib = statistics.median(r[1] for r in runs[name])
        med[name] = (cpu, mib)
        print(f"| {name} | {cpu:.2f} | {mib:.0f} |")
    print(f"kwire / tshark: {med['tshark'][0] / med['kwire'][0]:.2f}x faster (CPU), "
          f"{med['tshark'][1] / med['kwire'][1]:.2f}x less memory")


if __name__ == "__main__":
    main()
