"""Capture benchmark: `kwire pcap --format jsonl` vs `tshark -T json -O kafka`, same file, one run.

    python bench/bench_pcap.py                                # the kafkajs bulk captures in bench/data/
    python bench/bench_pcap.py bench/data/bulk-kafkajs.pcap --repeat 5
    python bench/bench_pcap.py --json out.json                # also write the figures as JSON
    python bench/bench_pcap.py --phases                       # also kwire's CPU time by phase

The captures come from the fixture recorder (not committed; bench/data/ is gitignored):

    python scripts/record_fixtures.py --bulk 100000 --bulk-client kafkajs
    python scripts/record_fixtures.py --bulk 100000 --bulk-client kafkajs --bulk-compression gzip

kafkajs speaks Produce v7 / Fetch v11, which tshark 4.0's Kafka dissector decodes down to each
record (key, value, headers), gzip batches included; kafka-python's flexible Produce v9 / Fetch v12
are not decoded that deep by tshark 4.0, so the default bulk.pcap is not a fair comparison.

The two commands, each a subprocess writing to /dev/null:

    kwire   python -m kwire_cli pcap FILE --format jsonl [--port P]
            (records fields decoded into batches, records, keys, values, headers: the default)
    tshark  tshark -r FILE -o gui.max_tree_items:100000000 -d tcp.port==P,kafka -T json -O kafka
            (the Kafka tree of every packet, record batches and records included; the tree limit
            is raised because a 100k-record Fetch response passes tshark's default 1,000,000 items,
            and tshark would stop decoding that packet there)

Same depth: before timing, each command runs once more into a pipe and the records it decoded
are counted (kwire: the Records lists of every decoded batch; tshark: its kafka.message_value
fields); the benchmark says so when the counts differ (--no-verify skips this).

Timing: wall time (time.perf_counter around spawn and os.wait4), CPU time (user + sys) and peak
RSS (ru_maxrss) of that one child from os.wait4's rusage; best (lowest wall) of --repeat runs,
kwire and tshark alternating so that background load hits both alike. Reported: wall s, CPU s,
peak RSS MiB, packets/s (capture packets), Kafka frames/s (frames kwire decoded), records/s,
MB/s (capture file size), and the speed ratio tshark wall / kwire wall (> 1: kwire is faster;
the goal is >= 4).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
DEFAULT_CAPTURES = [DATA / "bulk-kafkajs.pcap", DATA / "bulk-kafkajs-gzip.pcap"]
GOAL = 4.0


class BenchError(Exception):
    """The benchmark cannot run (tool missing, capture missing, a command failed)."""


def kwire_cmd(path: Path, port: int) -> list[str]:
    cmd = [sys.executable, "-m", "kwire_cli", "pcap", str(path), "--format", "jsonl"]
    if port != 9092:
        cmd += ["--port", str(port)]
    return cmd


def tshark_cmd(tshark: str, path: Path, port: int) -> list[str]:
    # gui.max_tree_items: by default tshark stops a packet's tree at 1,000,000 items ("Dissector bug
    # ... possible infinite loop"), which a Fetch response of ~100k records (~10 items each) passes:
    # raised so that tshark decodes every record, as kwire does.
    return [tshark, "-r", str(path), "-o", "gui.max_tree_items:100000000", "-d", f"tcp.port=={port},kafka",
            "-T", "json", "-O", "kafka"]


def child_env() -> dict:
    """kwire's environment: as a user's, with bytecode caching on (PYTHONDONTWRITEBYTECODE, set in
    some sandboxes, would make every run compile kwire's ~40 modules again: ~0.08 s, a tenth of a
    run on these captures); ``main`` byte-compiles the package once before timing."""
    env = dict(os.environ, KWIRE_NO_PROGRESS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def byte_compile() -> None:
    """Write kwire_cli's .pyc files (what pip does on install), so no timed run compiles them."""
    import compileall
    compileall.compile_dir(str(ROOT / "kwire_cli"), quiet=1)


def run_once(cmd: list[str]) -> dict:
    """One run to /dev/null: wall s, cpu s, peak RSS (KiB) of that child alone (os.wait4)."""
    with open(os.devnull, "wb") as null:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=null, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=child_env(), cwd=str(ROOT))
        # stderr is small (tshark's root warning, kwire's damage notes); read it after wait4 would
        # risk a full pipe, so drain it first: both tools write it before or while they exit.
        err = proc.stderr.read()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode(errors='replace').strip()[-400:]}")
    return {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
            "peak_rss_kib": ru.ru_maxrss}


def count_kwire(path: Path, port: int) -> dict:
    """Kafka frames, batches and records kwire decodes (one untimed run into a pipe)."""
    proc = subprocess.Popen(kwire_cmd(path, port), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=child_env(), cwd=str(ROOT))
    frames = batches = records = undecoded = 0

    def walk(v):
        nonlocal batches, records
        if isinstance(v, dict):
            bl = v.get("batches")
            if isinstance(bl, list):
                for b in bl:
                    batches += 1
                    records += len(b.get("Records") or ())
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for line in proc.stdout:
        frames += 1
        obj = json.loads(line)
        if obj.get("error"):
            undecoded += 1
        walk(obj.get("body"))
    proc.wait()
    return {"kafka_frames": frames, "batches": batches, "records": records, "frames_with_error": undecoded}


def count_tshark(tshark: str, path: Path, port: int) -> dict:
    """Packets, Kafka PDUs, batches and records tshark decodes (one untimed run into a pipe)."""
    keys = {b'"kafka.message_value"': "records", b'"kafka.batch_codec"': "batches",
            b'"kafka.len"': "kafka_frames", b'"_index"': "packets"}
    counts = dict.fromkeys(keys.values(), 0)
    pat = re.compile(b"|".join(re.escape(k) for k in keys))
    proc = subprocess.Popen(tshark_cmd(tshark, path, port), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    tail = b""
    while True:
        chunk = proc.stdout.read(1 << 20)
        if not chunk:
            break
        buf = tail + chunk
        cut = buf.rfind(b"\n")  # each field is on one line: matches never straddle the cut
        if cut < 0:
            tail = buf
            continue
        for m in pat.finditer(buf, 0, cut):
            counts[keys[m.group()]] += 1
        tail = buf[cut:]
    for m in pat.finditer(tail):
        counts[keys[m.group()]] += 1
    proc.wait()
    return counts


def packet_count(path: Path) -> int | None:
    capinfos = shutil.which("capinfos")
    if not capinfos:
        return None
    out = subprocess.run([capinfos, "-M", "-c", "-T", "-r", str(path)], capture_output=True, text=True).stdout
    try:
        return int(out.strip().split("\t")[-1])
    except ValueError:
        return None


def bench_file(path: Path, tshark: str, port: int, repeat: int, verify: bool) -> dict:
    size = path.stat().st_size
    packets = packet_count(path)
    res: dict = {"file": str(path.relative_to(ROOT) if ROOT in path.resolve().parents else path),
                 "bytes": size, "packets": packets}
    cmds = {"kwire": kwire_cmd(path, port), "tshark": tshark_cmd(tshark, path, port)}
    res["commands"] = {k: " ".join(v) for k, v in cmds.items()}
    if verify:
        res["depth"] = {"kwire": count_kwire(path, port), "tshark": count_tshark(tshark, path, port)}
    res["load_before"] = round(os.getloadavg()[0], 2)
    runs: dict[str, list[dict]] = {"kwire": [], "tshark": []}
    for i in range(repeat):
        for tool in ("kwire", "tshark"):
            r = run_once(cmds[tool])
            runs[tool].append(r)
            print(f"  {path.name} run {i + 1}/{repeat} {tool:6s} {r['wall_s']:7.2f} s wall "
                  f"{r['cpu_s']:7.2f} s cpu {r['peak_rss_kib'] / 1024:7.1f} MiB", file=sys.stderr, flush=True)
    frames = res.get("depth", {}).get("kwire", {}).get("kafka_frames")
    records = res.get("depth", {}).get("kwire", {}).get("records")
    for tool, rs in runs.items():
        best = min(rs, key=lambda r: r["wall_s"])
        res[tool] = dict(
            best,
            runs_wall_s=[round(r["wall_s"], 3) for r in rs],
            peak_rss_mib=round(max(r["peak_rss_kib"] for r in rs) / 1024, 1),
            mb_per_s=round(size / 1e6 / best["wall_s"], 2),
            packets_per_s=round(packets / best["wall_s"]) if packets else None,
            kafka_frames_per_s=round(frames / best["wall_s"]) if frames else None,
            records_per_s=round(records / best["wall_s"]) if records else None,
        )
    res["load_after"] = round(os.getloadavg()[0], 2)
    res["speed_ratio"] = round(res["tshark"]["wall_s"] / res["kwire"]["wall_s"], 2)
    res["cpu_ratio"] = round(res["tshark"]["cpu_s"] / res["kwire"]["cpu_s"], 2)
    res["rss_ratio"] = round(res["kwire"]["peak_rss_mib"] / res["tshark"]["peak_rss_mib"], 2)
    return res


def phases_child(path: str) -> None:
    """Run in a fresh interpreter: CPU seconds of each phase of `kwire pcap --format jsonl`,
    frame by frame as the CLI streams them, printed as one JSON object."""
    t_start = time.process_time()
    import gc

    sys.path.insert(0, str(ROOT))
    from kwire_cli.capture import CaptureStats, KafkaFrame, iter_capture
    from kwire_cli.capture.rows import json_ordered
    from kwire_cli.capture.session import Conversation
    from kwire_cli.capture.summary import Summary
    from kwire_cli.render.jsonlines import line_encoder
    from kwire_cli.spec.registry import registry

    registry()
    encode = line_encoder()
    out = {"imports_and_specs": time.process_time() - t_start}
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)  # as kwire pcap does
    pt = time.process_time
    t0 = pt()
    events = list(iter_capture(path, file_label=path, stats=CaptureStats()))
    out["read_reassemble_frame"] = pt() - t0
    frames = [e for e in events if e.__class__ is KafkaFrame]
    as_hex, full, summ = Conversation(records_mode="hex"), Conversation(), Summary()
    t_hex = t_full = t_sum = t_json = t_free = 0.0
    size = 0
    for f in frames:
        t0 = pt()
        as_hex.row(f)  # the message codec with records fields left as hex
        t1 = pt()
        r = full.row(f)
        t2 = pt()
        summ.add(r)
        t3 = pt()
        o = json_ordered(r)
        size += len(encode(o)) + 1
        t4 = pt()
        del r, o  # the decoded tree is freed here, as the CLI frees it before the next frame
        t5 = pt()
        t_hex += t1 - t0
        t_full += t2 - t1
        t_sum += t3 - t2
        t_json += t4 - t3
        t_free += t5 - t4
    out.update(codec_records_as_hex=t_hex, records_decode=t_full - t_hex, summary=t_sum, json_lines=t_json,
               free_trees=t_free, json_bytes=size, kafka_frames=len(frames))
    print(json.dumps(out))


def phases(path: Path) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--phases-child", str(path)], capture_output=True,
                          text=True, env=child_env(), cwd=str(ROOT))
    if proc.returncode != 0:
        raise BenchError(f"phase breakdown of {path} failed: {proc.stderr.strip()[-400:]}")
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in json.loads(proc.stdout).items()}


def tool_versions(tshark: str) -> dict:
    tv = subprocess.run([tshark, "--version"], capture_output=True, text=True).stdout.splitlines()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    try:
        import orjson
        oj = orjson.__version__
    except ImportError:
        oj = None
    return {"python": platform.python_version(), "tshark": tv[0].rstrip(".") if tv else "?",
            "kwire_commit": commit or None, "orjson": oj, "machine": platform.machine(),
            "cpus": os.cpu_count(), "kernel": platform.release()}


def print_table(results: list[dict], versions: dict) -> None:
    print(f"kwire pcap --format jsonl vs tshark -T json -O kafka  ({versions['tshark']}; kwire "
          f"{versions['kwire_commit']}, Python {versions['python']}, orjson {versions['orjson'] or 'absent'}; "
          f"{versions['cpus']} CPUs)")
    for r in results:
        print()
        d = r.get("depth")
        print(f"{r['file']}: {r['bytes'] / 1e6:.1f} MB, {r['packets']} packets (1-min load average "
              f"{r['load_before']} -> {r['load_after']} on {versions['cpus']} CPUs)")
        if d:
            print(f"  {d['kwire']['kafka_frames']} Kafka frames; records decoded: {d['kwire']['records']} by kwire, "
                  f"{d['tshark']['records']} by tshark")
            if d["kwire"]["records"] != d["tshark"]["records"]:
                print("  WARNING: the two tools did not decode the same number of records")
        hdr = f"  {'tool':7s} {'wall s':>8s} {'cpu s':>8s} {'peak RSS MiB':>13s} {'packets/s':>10s} " \
              f"{'frames/s':>9s} {'records/s':>10s} {'MB/s':>7s}"
        print(hdr)
        for tool in ("kwire", "tshark"):
            t = r[tool]
            print(f"  {tool:7s} {t['wall_s']:8.2f} {t['cpu_s']:8.2f} {t['peak_rss_mib']:13.1f} "
                  f"{t['packets_per_s'] or '-':>10} {t['kafka_frames_per_s'] or '-':>9} "
                  f"{t['records_per_s'] or '-':>10} {t['mb_per_s']:7.2f}")
        ph = r.get("kwire_phases_cpu_s")
        if ph:
            print("  kwire CPU s by phase (in-process, one run): " + ", ".join(
                f"{k.replace('_', ' ')} {ph[k]:.2f}" for k in ("imports_and_specs", "read_reassemble_frame",
                                                              "codec_records_as_hex", "records_decode",
                                                              "summary", "json_lines", "free_trees")))
        verdict = "meets" if r["speed_ratio"] >= GOAL else "below"
        print(f"  speed kwire/tshark: {r['speed_ratio']:.2f}x (wall; CPU time {r['cpu_ratio']:.2f}x), "
              f"{verdict} the {GOAL:g}x goal; peak RSS kwire/tshark: {r['rss_ratio']:.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("captures", nargs="*", type=Path,
                    help="capture files (default: bench/data/bulk-kafkajs.pcap and bulk-kafkajs-gzip.pcap)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool; best wall time kept (default %(default)s)")
    ap.add_argument("--port", type=int, default=9092, help="broker port in the captures (default %(default)s)")
    ap.add_argument("--tshark", default=shutil.which("tshark"), help="tshark binary (default: from PATH)")
    ap.add_argument("--no-verify", action="store_true", help="skip the untimed depth (records decoded) check")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE as JSON")
    ap.add_argument("--phases", action="store_true",
                    help="also break kwire's CPU time down by phase (reading, codec, records, JSON)")
    ap.add_argument("--phases-child", metavar="FILE", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phases_child:
        phases_child(args.phases_child)
        return 0
    try:
        if not args.tshark:
            raise BenchError("tshark not found on PATH (apt-get install tshark) and --tshark not given")
        captures = args.captures or [p for p in DEFAULT_CAPTURES if p.exists()]
        if not captures:
            raise BenchError("no capture: record one with  python scripts/record_fixtures.py --bulk 100000 "
                             "--bulk-client kafkajs")
        for p in captures:
            if not p.is_file():
                raise BenchError(f"{p}: no such capture file")
        byte_compile()
        if args.repeat < 1:
            raise BenchError("--repeat must be >= 1")
        versions = tool_versions(args.tshark)
        results = [bench_file(p.resolve(), args.tshark, args.port, args.repeat, not args.no_verify)
                   for p in captures]
        if args.phases:
            for p, r in zip(captures, results, strict=True):
                r["kwire_phases_cpu_s"] = phases(p.resolve())
    except BenchError as e:
        print(f"bench_pcap: {e}", file=sys.stderr)
        return 1
    print_table(results, versions)
    if args.json:
        figures = {"versions": versions, "goal": GOAL, "results": results}
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
