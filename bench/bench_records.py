"""Records benchmark: kwire_cli.records vs kafka-python's record reader, same bytes, one run.

    python bench/bench_records.py             # full run (~20 s on 2 cores)
    python bench/bench_records.py --quick     # short timing loops, for a smoke test
    python bench/bench_records.py --json out.json

The data: ~1 MB of records (keys ~16 B, JSON values ~120 B, one header each) written by
kafka-python's own DefaultRecordBatchBuilder into 16 KiB batches (a producer's default batch.size),
once uncompressed and once lz4; each set is also wrapped in a FetchResponse v11 frame (one topic, one
partition, the records field holding all batches), the way a broker answers a consumer.

Two levels, each timed for both libraries on the same bytes:

* records: the records field alone.
    kwire        decode_records(data): every batch and record decoded into the value tree
                 (keys/values shown as text or hex, headers, CRC checked).
    kafka-python MemoryRecords(data); for each batch validate_crc() and for each record read
                 offset, timestamp, key, value and headers.
* fetch: the whole FetchResponse frame.
    kwire        kwire_cli.codec.decode_response(frame, api_key=1, api_version=11) with the records
                 field decoded by kwire_cli.records (the codec's default).
    kafka-python FetchResponse.decode(frame, version=11, header=True, framed=True), then the records
                 level above on each partition's records.

With kwire's optional native decoders built (kwire_cli/codec/_speedups.c, kwire_cli/records/_native.c), kwire is
also timed with it switched off (compiler.use_speedups(False)), as the row "kwire (py)": the pure-Python decoders on
the same bytes. KWIRE_NO_SPEEDUPS=1 times the pure-Python decoders only.

Both sides are checked to read the same records first. Timing: a clock around a loop of calls
calibrated to --run-time seconds, best of --repeat runs; the value each call returns is dropped
inside the loop (its deallocation is timed too); the garbage collector stays enabled (kwire pauses
it itself while it builds a value tree; any collection that puts off lands in the timed loop) and
is collected before each run. --clock wall (default) is time.perf_counter; --clock cpu is
time.process_time, this process's CPU time, steadier on a shared, loaded machine. Reported:
records/s, MB/s (of the records field, compressed size for lz4) and the kwire / kafka-python
ratio (>1 means kwire is faster).
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from importlib import metadata as importlib_metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

from kwire_cli.records import decode_records, to_bytes  # noqa: E402

try:
    from kwire_cli.codec import compiler as kwire_compiler
except ImportError:
    kwire_compiler = None
try:
    from kafka.protocol.consumer import FetchResponse as KpFetchResponse

    from kwire_cli.codec import decode_response, encode_response
except ImportError:  # the message codec is optional here: the records level runs without it
    decode_response = encode_response = KpFetchResponse = None

TARGET_BYTES = 1 << 20
BATCH_SIZE = 16 * 1024
FETCH_VERSION = 11


def build_records(codec: int) -> tuple[bytes, int]:
    """~1 MB (uncompressed size) of records in 16 KiB batches; returns (bytes, record count)."""
    parts = []
    total_raw = 0
    offset = 0
    n = 0
    while total_raw < TARGET_BYTES:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=BATCH_SIZE)
        count = 0
        while True:
            i = offset + count
            value = json.dumps({"order": i, "customer": f"customer-{i % 997}", "items": i % 7,
                                "price": round(19.99 + i % 100, 2), "currency": "EUR",
                                "note": "x" * (i % 40)}).encode()
            meta = b.append(count, timestamp=1_700_000_000_000 + i, key=f"customer-{i:07d}".encode(),
                            value=value, headers=[("trace-id", f"{i:016x}".encode())])
            if meta is None:
                break
            count += 1
            total_raw += meta.size
        data = bytearray(b.build())
        data[0:8] = offset.to_bytes(8, "big")  # the broker's base offset (outside the CRC)
        parts.append(bytes(data))
        offset += count
        n += count
    return b"".join(parts), n


def kafka_python_read(data: bytes) -> int:
    n = 0
    for batch in MemoryRecords(data):
        batch.validate_crc()
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers  # noqa: B018 - read every field
            n += 1
    return n


def kwire_read(data: bytes) -> int:
    return sum(len(b["Records"]) for b in decode_records(data)["batches"])


def fetch_frame(records: bytes) -> bytes:
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0, "Responses": [{
        "Topic": "bench", "Partitions": [{
            "PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 1 << 20, "LastStableOffset": 1 << 20,
            "LogStartOffset": 0, "AbortedTransactions": [], "PreferredReadReplica": -1,
            "Records": records.hex()}]}]}
    return encode_response(1, FETCH_VERSION, {"CorrelationId": 7}, body, size_prefix=True)


def kwire_fetch(frame: bytes) -> int:
    msg = decode_response(frame, api_key=1, api_version=FETCH_VERSION)
    return sum(len(b["Records"]) for t in msg.body["Responses"] for p in t["Partitions"]
               for b in p["Records"]["batches"])


def kafka_python_fetch(frame: bytes) -> int:
    resp = KpFetchResponse.decode(frame, version=FETCH_VERSION, header=True, framed=True)
    return sum(kafka_python_read(p.records) for t in resp.responses for p in t.partitions)


def same_records(data: bytes) -> None:
    ours = [(r["Offset"], r["Timestamp"], to_bytes(r["Key"], "k"), to_bytes(r["Value"], "v"),
             [(h["Key"], to_bytes(h["Value"], "h")) for h in r["Headers"]])
            for b in decode_records(data)["batches"] for r in b["Records"]]
    theirs = [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
              for b in MemoryRecords(data) for r in b]
    if ours != theirs:
        raise SystemExit("kwire and kafka-python read different records: benchmark aborted")


def best_time(fn, arg, run_time: float, repeat: int, clock=time.perf_counter) -> float:
    """Seconds per call: best of ``repeat`` runs of a loop calibrated to ``run_time``."""
    loops = 1
    while True:
        t = clock()
        for _ in range(loops):
            fn(arg)
        dt = clock() - t
        if dt >= run_time / 4 or loops >= 1 << 16:
            break
        loops *= 2
    loops = max(1, int(loops * run_time / max(dt, 1e-9)))
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = clock()
        for _ in range(loops):
            fn(arg)
        best = min(best, (clock() - t) / loops)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short timing loops (smoke test)")
    ap.add_argument("--run-time", type=float, default=None, help="seconds per timed run (default 1.0)")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per figure, best kept (default 3)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: time.perf_counter (default); cpu: time.process_time (steadier on a busy machine)")
    args = ap.parse_args(argv)
    run_time = args.run_time or (0.15 if args.quick else 1.0)
    repeat = args.repeat or (1 if args.quick else 3)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    versions = {}
    for dist in ("kafka-python", "cramjam", "crc32c", "lz4"):
        try:
            versions[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            versions[dist] = None
    print(f"python {platform.python_version()} on {platform.machine()}; "
          + ", ".join(f"{k} {v}" for k, v in versions.items() if v) + f"; clock: {args.clock}")
    native = kwire_compiler is not None and kwire_compiler.speedups_available()
    print(f"kwire's native decoder: {'on (the kwire (py) rows: switched off)' if native else 'off'}")
    results = []
    print(f"{'data':<14}{'level':<9}{'library':<14}{'ms/call':>9}{'records/s':>13}{'MB/s':>9}{'ratio':>8}")
    for codec, label in ((0, "uncompressed"), (3, "lz4")):
        data, n = build_records(codec)
        same_records(data)
        assert kwire_read(data) == n == kafka_python_read(data)
        levels = [("records", data, kwire_read, kafka_python_read)]
        if decode_response is not None:
            frame = fetch_frame(data)
            if kwire_fetch(frame) == n == kafka_python_fetch(frame):
                levels.append(("fetch", frame, kwire_fetch, kafka_python_fetch))
            else:  # pragma: no cover
                print("  (fetch level skipped: the two libraries disagree on the frame)")
        for level, arg, ours, theirs in levels:
            t_kw = best_time(ours, arg, run_time, repeat, clock)
            rows = [("kwire", t_kw)]
            if native:
                prev = kwire_compiler.use_speedups(False)
                try:
                    rows.append(("kwire (py)", best_time(ours, arg, run_time, repeat, clock)))
                finally:
                    kwire_compiler.use_speedups(prev)
            t_kp = best_time(theirs, arg, run_time, repeat, clock)
            for lib, t in rows + [("kafka-python", t_kp)]:
                row = {"data": label, "level": level, "library": lib, "records": n, "bytes": len(data),
                       "seconds_per_call": t, "records_per_s": n / t, "mb_per_s": len(data) / t / 1e6,
                       "ratio_vs_kafka_python": t_kp / t}
                results.append(row)
                print(f"{label:<14}{level:<9}{lib:<14}{t * 1e3:>9.2f}{n / t:>13,.0f}"
                      f"{len(data) / t / 1e6:>9.1f}{t_kp / t:>8.2f}")
        print(f"  {label}: {n} records, {len(data):,} bytes of records in "
              f"{len(decode_records(data)['batches'])} batches")
    if args.json:
        Path(args.json).write_text(json.dumps({"versions": versions, "clock": args.clock, "native": native,
                                                  "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
