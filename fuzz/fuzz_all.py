#!/usr/bin/env python3
"""Long mutation-fuzzing run over every kwire decoder (pure Python, no instrumentation).

    python fuzz/fuzz_all.py --seconds 120                 # every target, 120 s each
    python fuzz/fuzz_all.py --target records --seconds 600 --seed 7

Each input is a real fixture mutated 1-5 times (bit flips, truncation, inflated lengths, huge
varints, bogus tag counts, inserted / deleted / duplicated runs) or, one time in eight, random
bytes. Every decode runs under an address-space limit (--mem-mb, default 2048) so a decoder
that allocates from a lying length fails loudly as MemoryError instead of taking the machine.
Findings are deduplicated by exception type + innermost kwire frame and the first reproducer of
each is written to fuzz/findings/<target>-<n>.bin. Exit status 1 when anything was found.
"""
from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fuzzlib


def run_target(name: str, seconds: float, seed: int, out_dir: Path, verbose: bool) -> tuple[int, dict]:
    rng = random.Random(seed)
    target = fuzzlib.TARGETS[name]
    seeds = fuzzlib.seeds_for(name)
    found: dict[str, bytes] = {}
    n = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(50):
            seed, kw = rng.choice(seeds)
            if rng.random() < 0.125:
                data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
                if rng.random() < 0.5:
                    kw = {}
            else:
                data = fuzzlib.mutate(rng, seed)
            r_seed = rng.randrange(1 << 30)
            bug = fuzzlib.run_one(target, data, random.Random(r_seed), **kw)
            n += 1
            key = None if bug is None else bug.split(":", 1)[0] + " @ " + bug.rsplit(" @ ", 1)[-1]
            if bug is not None and key not in found:
                found[key] = data
                out_dir.mkdir(parents=True, exist_ok=True)
                p = out_dir / f"{name}-{len(found)}.bin"
                p.write_bytes(data)
                (out_dir / f"{name}-{len(found)}.txt").write_text(f"{bug}\nrng seed {r_seed}\nkwargs {kw}\n")
                if verbose:
                    print(f"  [{name}] {bug[:200]}  ({p.name}, {len(data)} bytes)", flush=True)
    return n, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", action="append", choices=sorted(fuzzlib.TARGETS),
                    help="target(s) to run (default: all)")
    ap.add_argument("--seconds", type=float, default=60.0, help="time per target")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mem-mb", type=int, default=2048, help="address-space limit for the run")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "findings"))
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args()
    if a.mem_mb:
        lim = a.mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    total = 0
    bugs = 0
    for name in a.target or sorted(fuzzlib.TARGETS):
        t0 = time.monotonic()
        n, found = run_target(name, a.seconds, a.seed, Path(a.out), not a.quiet)
        total += n
        bugs += len(found)
        print(f"{name:11s} {n:9d} inputs in {time.monotonic() - t0:6.1f} s, {len(found)} distinct findings",
              flush=True)
    print(f"total       {total:9d} inputs, {bugs} distinct findings")
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
