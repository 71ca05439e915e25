#!/usr/bin/env python3
"""Exhaustive allocation check of the message codec against lying lengths and counts.

    python fuzz/fuzz_claims.py [--width 40]

For every (api, version, kind) the bundled specs define, and at every offset of its default body,
write a claim (int32 2^31-1, int32 -2, uvarint 2^32-1, uvarint 2^31-2, an over-long uvarint) and
cut the input to --width bytes; decode it as a bare body (records decoded) and measure the peak
traced allocation (tracemalloc; the smaller of two runs, so a one-off growth of a global cache is
not counted). Prints the number of decodes and the worst peak with its input; exit status 1 when
any decode raised something other than a KwireError or allocated more than --limit bytes.
"""
from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kwire_cli.codec import decode_body, encode_body
from kwire_cli.errors import KwireError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzzlib

CLAIMS = (b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x07",
          b"\xff\xff\xff\xff\xff\x01")


def quiet(data, key, v, kind):
    try:
        decode_body(data, key, v, kind)
    except KwireError:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=40, help="bytes per input (default 40)")
    ap.add_argument("--limit", type=int, default=64 * 1024, help="allowed peak bytes (default 64 KiB)")
    a = ap.parse_args()
    t0 = time.monotonic()
    n = 0
    worst = (0, None)
    bugs = []
    plans = fuzzlib.api_versions()
    tracemalloc.start()
    for key, v, kind in plans:
        base = encode_body(key, v, kind, {})
        quiet(base, key, v, kind)
        quiet(b"\xff" * 8, key, v, kind)
        for i in range(min(len(base), a.width) + 1):
            for claim in CLAIMS:
                data = (base[:i] + claim + base[i + len(claim):] + b"\x00" * a.width)[:a.width]
                peaks = []
                for _ in range(2):
                    tracemalloc.reset_peak()
                    before = tracemalloc.get_traced_memory()[0]
                    try:
                        quiet(data, key, v, kind)
                    except Exception as e:
                        bugs.append(f"{type(e).__name__}: {e} on {key} v{v} {kind} {data.hex()}")
                        break
                    peaks.append(tracemalloc.get_traced_memory()[1] - before)
                    if peaks[0] < a.limit:
                        break
                n += 1
                if peaks and min(peaks) > worst[0]:
                    worst = (min(peaks), f"{key} v{v} {kind} {data.hex()}")
    tracemalloc.stop()
    print(f"{len(plans)} (api, version, kind) plans, {n} decodes in {time.monotonic() - t0:.1f} s")
    print(f"worst peak allocation: {worst[0]} bytes ({worst[1]})")
    for b in bugs[:20]:
        print("BUG", b)
    return 1 if bugs or worst[0] > a.limit else 0


if __name__ == "__main__":
    sys.exit(main())
