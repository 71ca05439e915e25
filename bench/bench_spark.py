"""Spark benchmark: `kwire spark-decode` against the plain processes it replaces, in one run.

    python bench/bench_spark.py DIR [--single FILE]          # local[2]: jsonl and parquet
    python bench/bench_spark.py DIR --cluster                # standalone cluster: 1 vs 2 executor cores
    python bench/bench_spark.py DIR --cluster --pin          # the same, executors confined to their cores
    python bench/bench_spark.py DIR --json spark.json        # also write the figures as JSON
    python bench/bench_spark.py DIR --formats jsonl --repeat 5 --no-x1   # paired rounds, medians
    python bench/bench_spark.py DIR --formats jsonl --no-summary         # spark-decode --no-summary
    python bench/bench_spark.py DIR --formats jsonl --peers json         # the default against pcap --format json

The input is real client traffic (not committed; bench/data/ is ignored), >= 500 MB, e.g. a bulk
kafkajs recording and the kafkajs fixtures replayed as 20 files (bench/make_spark_captures.py says
how), and the same traffic as one large file (``--merge 20``), which spark-decode cuts at record
boundaries (``--split-size``, 64 MB). A rotated capture of a client that fetches by topic id
(librdkafka's fixtures replayed, ``--rotate``: bench/make_spark_captures.py) has topic ids answered
in one file and used in the next (``decode_passes`` in the figures; docs/spark.md, Topic names).

Each command is a subprocess writing its rows to files on the same disk; for each: wall seconds,
and the CPU seconds of all its processes (the JVM, the Python driver and workers: user + system
time of every process of its tree, read from /proc every 0.1 s while it runs; processes that start
and end between two samples, such as the chmod processes of Hadoop's local file system, are counted
from the CPU their parents reaped: ``unseen`` in ``cpu_by_process``; ``system_cpu_s``: the
kernel's part of the processes seen, most of it writing the rows' files into the page cache):

    pcap x1        taskset -c 0 python -m kwire_cli pcap FILES --format jsonl > OUT
                   (one process on one core: the single-process baseline)
    pcap x2        two such processes side by side, each on its own core, each over half the bytes
                   (the peer of a 2-core Spark job: what a user would do with plain processes)
    pcap x2 json   the same two processes with --format json: the same rows (the same line for
                   each), then the summary of --summary, counted in the same pass: the like-for-
                   like peer of spark-decode's default, which counts that summary too (kwire pcap
                   --format jsonl counts only frames, undecodable frames and record batches, as
                   spark-decode --no-summary does); ``--peers`` chooses (default: both, jsonl
                   alone with --no-summary)
    spark jsonl    python -m kwire_cli spark-decode DIR --out OUT --master local[2] --format jsonl
    spark parquet  the same, --format parquet
                   (Spark's session start is reported apart from the job: _kwire_result.json's
                   startup_s and job_s)

Reported, as the goals: the job's throughput over pcap x2's (>= 0.9) and over pcap x1's
(>= 1.8); the whole command's CPU over pcap x1's (<= 1.2; its inverse, per-core efficiency, >=
0.8) and over pcap x2's two processes together (``cpu_over_pcap_x2_cpu``: the same work on a
shared machine, measured in the same round); the same two against pcap x2 json
(``job_speed_over_pcap_x2_summary``, ``cpu_over_pcap_x2_summary_cpu``); parquet's job time over
jsonl's (<= 1.1).
``--repeat N``: N rounds of pcap x2 and spark-decode in turn (pcap x1 once, or not at all with
``--no-x1``), the ratios of each round and their medians: on a machine shared with other work,
prefer the CPU ratios, which a busy moment changes less than the wall-clock ones.
``--cluster`` starts a standalone master and worker from the pyspark wheel on 127.0.0.1 (as
tests/test_spark_cluster.py does) and runs the jsonl job
with 1 and then 2 executor cores (``spark.cores.max``): the job-only speed-up (goal >= 1.8).
A small run first (not measured) writes the driver JVM's class data archive, as a user's first run does;
the measured runs map it (`jvm_class_data` in each run's figures).
The load average before and after each command is printed: the machine may be shared, and a busy
machine slows a 2-core run more than a 1-core one; prefer the ratios, and repeat (``--repeat``).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu(root: int, seen: dict[int, list], names: dict[int, str], sample: int) -> None:
    """Record, for ``root`` and its descendants: [own CPU seconds (user + system), CPU seconds of
    their children they waited for (reaped), parent pid, number of the last sample they were seen
    in, own system CPU seconds] in ``seen``, their command names in ``names``."""
    children: dict[int, list[int]] = {}
    stat: dict[int, tuple[float, float, int]] = {}
    comm: dict[int, str] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                s = f.read()
        except OSError:
            continue
        fields = s[s.rindex(b")") + 2:].split()
        pid = int(d)
        children.setdefault(int(fields[1]), []).append(pid)
        stat[pid] = ((int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK,
                     int(fields[1]), int(fields[12]) / TICK)
        comm[pid] = s[s.index(b"(") + 1:s.rindex(b")")].decode(errors="replace")
    todo = [root]
    while todo:
        p = todo.pop()
        if p in stat:
            own, reaped, parent, system = stat[p]
            old = seen.get(p)
            seen[p] = [max(old[0], own) if old else own, max(old[1], reaped) if old else reaped, parent, sample,
                       max(old[4], system) if old else system]
            names[p] = "command" if p == root else ("java" if comm[p] == "java" else
                                                    "python" if comm[p].startswith("python") else "other")
        todo += children.get(p, [])


def unseen_cpu(seen: dict[int, list]) -> float:
    """CPU seconds of descendants that came and went between two samples (a JVM's chmod
    processes, ...): what each process's reaped children used beyond the children seen to end
    before its last sample."""
    ended: dict[int, float] = {}
    for own, reaped, parent, last, _ in seen.values():
        if parent in seen and last < seen[parent][3]:
            ended[parent] = ended.get(parent, 0.0) + own + reaped
    return sum(max(0.0, reaped - ended.get(p, 0.0)) for p, (_, reaped, _, _, _) in seen.items())


def run(cmds: list[list[str]], outs: list[str | None], env=None, executors_of: int | None = None) -> dict:
    """Run commands side by side: wall seconds of the slowest, CPU seconds of all their processes
    (and, with ``executors_of``, a standalone worker's pid, of the executors it starts meanwhile:
    their JVM and Python workers, as ``executor java`` and ``executor python``)."""
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    procs = []
    for cmd, out in zip(cmds, outs, strict=True):
        stdout = open(out, "wb") if out else subprocess.DEVNULL  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, env=env), stdout))
    seen: dict[int, list] = {}
    names: dict[int, str] = {}
    sample = 0
    errs = {}
    import threading

    def drain(p):
        errs[p.pid] = p.stderr.read()
    threads = [threading.Thread(target=drain, args=(p,)) for p, _ in procs]
    for t in threads:
        t.start()
    while any(p.poll() is None for p, _ in procs):
        sample += 1
        for p, _ in procs:
            _tree_cpu(p.pid, seen, names, sample)
        if executors_of is not None:
            _tree_cpu(executors_of, seen, names, sample)
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    for t in threads:
        t.join()
    for (p, stdout), cmd in zip(procs, cmds, strict=True):
        if stdout is not subprocess.DEVNULL:
            stdout.close()
        if p.returncode != 0:
            sys.stderr.write(errs[p.pid].decode(errors="replace")[-3000:])
            raise SystemExit(f"failed: {' '.join(cmd)}")
    if executors_of is not None:  # the worker's own CPU is the cluster's, not the job's
        seen.pop(executors_of, None)
        for pid in list(seen):
            if names[pid] != "command" and _descends(pid, executors_of, seen):
                names[pid] = f"executor {names[pid]}"
    by: dict[str, float] = {"unseen": unseen_cpu(seen)}
    for p, v in seen.items():
        by[names[p]] = by.get(names[p], 0.0) + v[0]
    return {"wall_s": round(wall, 2), "cpu_s": round(sum(by.values()), 2),
            "cpu_by_process": {k: round(v, 2) for k, v in sorted(by.items())},
            "system_cpu_s": round(sum(v[4] for v in seen.values()), 2),
            "load_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def _descends(pid: int, root: int, seen: dict[int, list]) -> bool:
    while pid in seen:
        pid = seen[pid][2]
        if pid == root:
            return True
    return pid == root


def halves(files: list[str]) -> tuple[list[str], list[str]]:
    """Two lists of files with about the same number of bytes each."""
    a: list[str] = []
    b: list[str] = []
    sa = sb = 0
    for f in sorted(files, key=os.path.getsize, reverse=True):
        if sa <= sb:
            a.append(f)
            sa += os.path.getsize(f)
        else:
            b.append(f)
            sb += os.path.getsize(f)
    return a, b


def spark(inputs: list[str], out: Path, fmt: str, master: str, conf: list[str] = (), env=None,
          extra: list[str] = (), executors_of: int | None = None) -> dict:
    cmd = [sys.executable, "-m", "kwire_cli", "spark-decode", *inputs, "--out", str(out), "--overwrite",
           "--master", master, "--format", fmt, "--summary-format", "none",
           "--conf", "spark.ui.showConsoleProgress=false", *extra]
    for c in conf:
        cmd += ["--conf", c]
    fig = run([cmd], [None], env=env, executors_of=executors_of)
    res = json.loads((out / "_kwire_result.json").read_text())
    fig.update(startup_s=res["startup_s"], job_s=res["job_s"], summary_s=res["summary_s"], frames=res["frames"],
               rows=res["rows"])
    fig.update({k: res[k] for k in ("decode_passes", "tasks_local", "tasks_shuffled", "connections_local",
                                    "connections_shuffled", "connections_split", "split_bytes", "jvm_class_data")
                if k in res})
    shutil.rmtree(out, ignore_errors=True)
    return fig


def pcap(files: list[str], scratch: Path, procs: int, fmt: str = "jsonl") -> dict:
    """``kwire pcap --format FMT`` over the files, in one process or two side by side (each over
    half the bytes, each on its own core). ``jsonl``: the rows, and the run's counts only; ``json``:
    the same rows (the same line for each) and the summary of ``--summary`` after them, counted in
    the same pass, as spark-decode counts it unless ``--no-summary``."""
    taskset = shutil.which("taskset")
    parts = [files] if procs == 1 else list(halves(files))
    cmds, outs = [], []
    for i, part in enumerate(parts):
        pin = [taskset, "-c", str(i % (os.cpu_count() or 1))] if taskset else []
        cmds.append(pin + [sys.executable, "-m", "kwire_cli", "pcap", *part, "--format", fmt])
        outs.append(str(scratch / f"pcap{i}.{fmt}"))
    fig = run(cmds, outs)
    fig["frames"] = 0
    for o in outs:
        fig["frames"] += _rows_in(o, fmt)
        os.unlink(o)
    return fig


def _rows_in(path: str, fmt: str) -> int:
    """The rows of a ``kwire pcap`` output: a line each (``json``: between the document's first
    line and its last, the summary's, whose frame count must agree)."""
    lines = 0
    last = b""
    with open(path, "rb") as f:
        for line in f:
            lines += 1
            last = line
    if fmt != "json":
        return lines
    rows = max(0, lines - 2)
    head = b'], "summary": '
    if not last.startswith(head):
        raise SystemExit(f"{path}: not a kwire pcap --format json document")
    counted = json.loads(last[len(head):].rstrip()[:-1])["frames"]
    assert counted == rows, (path, counted, rows)
    return rows


def _head(p: Path) -> bytes:
    with open(p, "rb") as f:
        return f.read(4)


def warm_up(scratch: Path) -> dict:
    """One small spark-decode run, not measured: a user's first run writes the driver JVM's class
    data archive as its JVM exits (kwire_cli/spark/session.py); the measured runs then map it, as
    every later run of a user does. Waits (up to 2 min) until the archive is complete."""
    sys.path.insert(0, str(ROOT))
    from kwire_cli.spark.session import DYNAMIC_ARCHIVE_MAGIC
    from kwire_cli.spec.cache import cache_dir
    small = str(ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap")
    first = spark([small], scratch / "warm-up", "jsonl", "local[2]")
    d = cache_dir()
    for _ in range(240):
        writing = [p for p in (d.glob("spark-*.jsa.*.tmp") if d else ()) if _head(p) != DYNAMIC_ARCHIVE_MAGIC]
        if first["jvm_class_data"] != "writing" or not writing:
            break
        time.sleep(0.5)
    then = spark([small], scratch / "warm-up", "jsonl", "local[2]")
    return {"first_run": first.get("jvm_class_data"), "then": then.get("jvm_class_data")}


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


PEERS = {"jsonl": "pcap_x2", "json": "pcap_x2_summary"}  # kwire pcap's format -> its pcap x2 figures


def local_suite(name: str, inputs: list[str], files: list[str], scratch: Path, formats: list[str],  # noqa: PLR0913
                conf: list[str] = (), repeat: int = 1, x1: bool = True, extra: list[str] = (),
                peers: tuple[str, ...] = ("jsonl",)) -> dict:
    """pcap x1 (once, unless not ``x1``), then ``repeat`` rounds of pcap x2 (once per format of
    ``peers``: ``jsonl``, the rows; ``json``, the rows and the summary) and each spark-decode
    format in turn (paired runs: a busy moment of a shared machine hits both); the ratios of each
    round and their medians."""
    size = sum(os.path.getsize(f) for f in files)
    print(f"== {name}: {len(files)} files, {size / 1e6:.0f} MB", file=sys.stderr)
    fig: dict = {"files": len(files), "bytes": size}
    if x1:
        fig["pcap_x1"] = pcap(files, scratch, 1)
        print(f"   pcap x1 {fig['pcap_x1']}", file=sys.stderr)
    rounds: list[dict] = []
    for _ in range(repeat):
        r: dict = {}
        if len(files) > 1:
            for peer in peers:
                r[PEERS[peer]] = pcap(files, scratch, 2, peer)
                print(f"   pcap x2 --format {peer} {r[PEERS[peer]]}", file=sys.stderr)
        for fmt in formats:
            r[f"spark_{fmt}"] = spark(inputs, scratch / "spark", fmt, "local[2]", conf, extra=extra)
            print(f"   spark {fmt} {r[f'spark_{fmt}']}", file=sys.stderr)
        rounds.append(r)
    fig.update(rounds[0])
    if repeat > 1:
        fig["rounds"] = rounds
    ratios: dict = {}
    for fmt in formats:
        per: list[dict] = []
        for r in rounds:
            s = r[f"spark_{fmt}"]
            q: dict = {}
            if x1:
                one = fig["pcap_x1"]
                q.update(job_speed_over_pcap_x1=round(one["wall_s"] / s["job_s"], 2),
                         whole_speed_over_pcap_x1=round(one["wall_s"] / s["wall_s"], 2),
                         cpu_over_pcap_x1=round(s["cpu_s"] / one["cpu_s"], 2),
                         per_core_efficiency=round(one["cpu_s"] / s["cpu_s"], 2))
                assert s["frames"] == one["frames"], (fmt, s["frames"], one["frames"])
            for peer in PEERS.values():
                if peer in r:
                    two = r[peer]
                    q.update({f"job_speed_over_{peer}": round(two["wall_s"] / s["job_s"], 2),
                              f"cpu_over_{peer}_cpu": round(s["cpu_s"] / two["cpu_s"], 2)})
                    assert s["frames"] == two["frames"], (fmt, peer, s["frames"], two["frames"])
            per.append(q)
        ratios[fmt] = {k: round(_median([q[k] for q in per]), 2) for k in per[0]}
        if repeat > 1:
            ratios[fmt]["rounds"] = per
            ratios[fmt]["median_job_s"] = round(_median([r[f"spark_{fmt}"]["job_s"] for r in rounds]), 2)
            ratios[fmt]["median_startup_s"] = round(_median([r[f"spark_{fmt}"]["startup_s"] for r in rounds]), 2)
            ratios[fmt]["median_cpu_s"] = round(_median([r[f"spark_{fmt}"]["cpu_s"] for r in rounds]), 2)
            for peer in PEERS.values():
                if peer in rounds[0]:
                    ratios[fmt][f"median_{peer}_wall_s"] = round(_median([r[peer]["wall_s"] for r in rounds]), 2)
                    ratios[fmt][f"median_{peer}_cpu_s"] = round(_median([r[peer]["cpu_s"] for r in rounds]), 2)
    if "jsonl" in formats and "parquet" in formats:
        ratios["parquet_job_over_jsonl_job"] = round(_median(
            [r["spark_parquet"]["job_s"] / r["spark_jsonl"]["job_s"] for r in rounds]), 2)
    fig["ratios"] = ratios
    return fig


# ------------------------------------------------------------------------ standalone cluster
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except OSError:
        return 0


def cluster_suite(inputs: list[str], scratch: Path, repeat: int, conf: list[str] = (), pin: bool = False) -> dict:
    """A master and a 2-core worker from the pyspark wheel on 127.0.0.1; the jsonl job on 1 and on
    2 executor cores (spark.cores.max), ``repeat`` times each, alternating. The executors import
    kwire from this checkout (``--ship-code never``, their PYTHONPATH: the native decoders, as the
    local runs). Each run's CPU includes its executors' (their JVM and Python workers).

    ``pin``: the worker (and so the executors it starts, JVM and Python workers) is started for
    each run confined to as many CPUs as the executor has cores (``taskset``: the last ones; the
    driver and the master are not confined), as a cluster manager that enforces an executor's cores
    does (YARN's CPU cgroups, Kubernetes' CPU limits). Without it, a 1-core executor's JVM threads
    run on the other core of this machine beside its one Python worker."""
    from pyspark.find_spark_home import _find_spark_home
    cls = os.path.join(_find_spark_home(), "bin", "spark-class")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_MASTER_HOST": "127.0.0.1"}
    port, ui, wui = _free_port(), _free_port(), _free_port()
    logs = scratch / "cluster"
    logs.mkdir(exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0))
    taskset = shutil.which("taskset")
    if pin and (taskset is None or len(cpus) < 2):
        raise SystemExit("--pin needs taskset and at least 2 CPUs")

    def start_worker(cores: int | None) -> subprocess.Popen:
        confine = [str(taskset), "-c", ",".join(map(str, cpus[-cores:]))] if cores else []
        w = subprocess.Popen(
            [*confine, cls, "org.apache.spark.deploy.worker.Worker", "--cores", "2", "--memory", "4g", "--host",
             "127.0.0.1", "--webui-port", str(wui), "--work-dir", str(logs / "work"), f"spark://127.0.0.1:{port}"],
            stdout=open(logs / "worker.log", "ab"), stderr=subprocess.STDOUT, env=env,  # noqa: SIM115 - the process keeps it
            start_new_session=True)
        end = time.monotonic() + 90
        while _alive_workers(ui) == 0 and time.monotonic() < end:
            time.sleep(0.5)
        if _alive_workers(ui) == 0:
            raise SystemExit(f"the standalone worker did not start (logs in {logs})")
        return w

    def stop(p: subprocess.Popen) -> None:
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    master_proc = subprocess.Popen(
        [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)], stdout=open(logs / "master.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
        env=env, start_new_session=True)
    worker = None
    try:
        end = time.monotonic() + 90
        while not urllib_ok(ui) and time.monotonic() < end:
            time.sleep(0.5)
        master = f"spark://127.0.0.1:{port}"
        fig: dict = {"pinned": pin, "cores_1": [], "cores_2": []}
        for _ in range(repeat):
            for cores in (1, 2):
                if worker is None or pin:
                    if worker is not None:
                        stop(worker)
                        while _alive_workers(ui):  # the master forgets it before the next one registers
                            time.sleep(0.5)
                    worker = start_worker(cores if pin else None)
                f = spark(inputs, scratch / "spark", "jsonl", master,
                          [f"spark.cores.max={cores}", f"spark.executor.cores={cores}", "spark.executor.memory=2g",
                           "spark.driver.host=127.0.0.1", f"spark.executorEnv.PYTHONPATH={ROOT}", *conf],
                          env=env, extra=["--ship-code", "never"], executors_of=worker.pid)
                print(f"   cluster, {cores} executor core(s){' pinned' if pin else ''}: {f}", file=sys.stderr)
                fig[f"cores_{cores}"].append(f)
        best = {c: min(r["job_s"] for r in fig[f"cores_{c}"]) for c in (1, 2)}
        fig["job_speedup_2_over_1"] = round(best[1] / best[2], 2)
        return fig
    finally:
        for p in (worker, master_proc):
            if p is not None:
                stop(p)


def urllib_ok(ui: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2):
            return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", default=str(ROOT / "bench" / "data" / "spark"))
    ap.add_argument("--single", help="also: the same traffic as one large capture file")
    ap.add_argument("--formats", default="jsonl,parquet", help="spark-decode's output formats (default: both)")
    ap.add_argument("--cluster", action="store_true", help="the standalone-cluster scaling run instead")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds: pcap x2 and spark-decode in turn (medians of the ratios); --cluster: runs of each")
    ap.add_argument("--no-x1", action="store_true", help="leave out the single-process run (pcap x1)")
    ap.add_argument("--no-summary", action="store_true",
                    help="spark-decode --no-summary (the run's counts only, as kwire pcap's JSON lines)")
    ap.add_argument("--peers", help="pcap x2's formats, in each round: jsonl (the rows only) and/or json (the "
                                    "rows and the summary, as spark-decode counts it); default: jsonl,json, "
                                    "jsonl with --no-summary")
    ap.add_argument("--pin", action="store_true",
                    help="--cluster: confine the executors to as many CPUs as they have cores (taskset)")
    ap.add_argument("--out", help="scratch directory for the outputs (default: a temporary one)")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the spark-decode runs (e.g. spark.eventLog.enabled=true)")
    args = ap.parse_args(argv)
    files = sorted(p for p in glob.glob(os.path.join(args.dir, "**", "*"), recursive=True) if os.path.isfile(p))
    if not files:
        raise SystemExit(f"{args.dir}: no captures (see the docstring for how to make them)")
    scratch = Path(args.out or tempfile.mkdtemp(prefix="kwire-bench-spark-"))
    scratch.mkdir(parents=True, exist_ok=True)
    fig: dict = {"cpus": os.cpu_count()}
    try:
        fig["warm_up"] = warm_up(scratch)
        if args.cluster:
            fig["cluster"] = cluster_suite([args.dir], scratch, args.repeat, args.conf, args.pin)
        else:
            formats = args.formats.split(",")
            extra = ["--no-summary"] if args.no_summary else []
            peers = tuple((args.peers or ("jsonl" if args.no_summary else "jsonl,json")).split(","))
            if not set(peers) <= set(PEERS):
                raise SystemExit(f"--peers: {args.peers!r}: jsonl, json or both")
            fig["directory"] = local_suite(args.dir, [args.dir], files, scratch, formats, args.conf,
                                           args.repeat, not args.no_x1, extra, peers)
            if args.single:
                fig["single_file"] = local_suite(args.single, [args.single], [args.single], scratch, formats,
                                                 args.conf, args.repeat, extra=extra, peers=peers)
    finally:
        if not args.out:
            shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(fig, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
