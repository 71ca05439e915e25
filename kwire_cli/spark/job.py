"""The PySpark job behind ``kwire spark-decode``: the capture and codec code of ``kwire pcap``, on executors.

Stages (one Spark job for the data, plus two tiny ones):

0. driver: expand the inputs, read each file's header (``reading.plan_file``); an *index* job
   finds record boundaries and packet counts of the byte ranges of large files.
1. read: one task per byte range (or per small / gzip file) streams ``Packet``s with the capture
   reader and keys them by connection (``conn_key``).
2. assemble: the packets are repartitioned by connection and sorted within it by (file order,
   packet number); each connection runs through its own ``StreamAssembler`` (so a connection
   split across rotated files is reassembled as one). Frames that carry per-connection context
   (non-Produce requests, Metadata-like responses) are decoded here with a ``Conversation``;
   the rest (Produce requests, other responses: the bulk of the bytes) leave with the context
   they need (the request's client id and protocol type). The topic ids learned from answers on
   every connection are gathered first (a job on an empty extra partition runs this stage alone)
   and broadcast, so each frame's ids are named from all answers seen before it.
3. decode: frames are spread evenly over the decode partitions (so one busy connection does not
   pin one core), decoded with ``Conversation.record`` and turned into rows, written partitioned
   by ``api_name``. Damage, capture counters and failures travel with the data to this stage and
   are added to an accumulator there (result tasks: each counted exactly once).

The summary is then computed with Spark aggregations over the rows written (``summary.py``).
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import heapq
import json
import os
import sys
import tempfile
import time
import zipfile
import zlib
from typing import Any, Iterable, Iterator

from kwire_cli.capture import DEFAULT_MAX_FRAME, CaptureStats, Damage, KafkaFrame, Packet, StreamAssembler, \
    conn_key
from kwire_cli.capture.inputs import files_under
from kwire_cli.capture.summary import Summary, damage_entry
from kwire_cli.errors import KwireError, SparkJobError
from kwire_cli.spark.rows import rows_dataframe, to_row
from kwire_cli.spark.reading import DEFAULT_SPLIT, FilePlan, index_range, nominal_ranges, plan_file, \
    read_range, stitch

PRODUCE = 0
TOPIC_MAP_APIS = frozenset({3, 19, 75})  # Metadata, CreateTopics, DescribeTopicPartitions responses
MAX_DAMAGE_EVENTS = 200
END = 1 << 62  # position of events at the end of a file (after its last packet)
_FILE_AT = KafkaFrame._fields.index("file")
_META = ("",)
WRITE_CONF = {"spark.sql.optimizer.plannedWrite.enabled": "false",
              "spark.sql.maxConcurrentOutputFileWriters": "64"}


# ------------------------------------------------------------------------------------ inputs
def expand_inputs(inputs: Iterable[str]) -> list[str]:
    """Files named by DIR (recursively; hidden files skipped), FILE or GLOB, in a stable order."""
    out: list[str] = []
    seen = set()
    for spec in inputs:
        if os.path.isdir(spec):
            paths = files_under(spec)
        elif os.path.exists(spec):
            paths = [spec]
        else:
            paths = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
            if not paths:
                raise SparkJobError(f"{spec}: no such file, directory or matching files")
        for p in paths:
            if os.path.isfile(p) and os.path.realpath(p) not in seen:
                seen.add(os.path.realpath(p))
                out.append(p)
    if not out:
        raise SparkJobError("no input files")
    return out


PARTITION_BYTES = 256 << 20  # capture bytes per shuffle partition, at most, by default
GZIP_GROWTH = 5              # a gzip capture counts as this many times its size


def default_partitions(parallelism: int, plans: list[FilePlan]) -> int:
    """Twice Spark's parallelism, and at least one partition per 256 MiB of capture (gzip files
    counted five-fold): a partition's packets and frames pass through one Python worker, whose
    sort spills to disk past spark.python.worker.memory, so big inputs get more, smaller ones."""
    size = sum(p.size * (GZIP_GROWTH if p.kind == "whole" and not p.prefix else 1) for p in plans)  # gzip
    return max(2, parallelism * 2, -(-size // PARTITION_BYTES))


# ------------------------------------------------------------------------------------ totals
class Totals:
    """What the tasks report besides rows; merged by an accumulator (see ``TotalsParam``)."""

    def __init__(self) -> None:
        self.stats = CaptureStats()
        self.damage_kinds: dict[str, list[int]] = {}
        self.damage_events: list[tuple] = []   # (rank, frame, seq, dict), the first MAX by position
        self.failures: list[str] = []
        self.summary = Summary()  # the part of kwire pcap's summary this task's records make
        self.rows = 0
        self.executor_code: set[str] = set()

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

    def merge(self, o: "Totals") -> "Totals":
        self.stats.merge(o.stats)
        for k, (n, b) in o.damage_kinds.items():
            m = self.damage_kinds.setdefault(k, [0, 0])
            m[0] += n
            m[1] += b
        self.damage_events += o.damage_events
        self._trim()
        self.failures += o.failures
        self.summary.merge(o.summary)
        self.rows += o.rows
        self.executor_code |= o.executor_code
        return self


def _totals_param():
    from pyspark.accumulators import AccumulatorParam

    class TotalsParam(AccumulatorParam):
        def zero(self, value):
            return Totals()

        def addInPlace(self, a, b):
            return a.merge(b)

    return TotalsParam()


def _names_param():
    """Topic ids learned: ``{id: (position, name)}``, the earliest position of each id kept."""
    from pyspark.accumulators import AccumulatorParam

    class NamesParam(AccumulatorParam):
        def zero(self, value):
            return {}

        def addInPlace(self, a, b):
            for tid, pn in b.items():
                mine = a.get(tid)
                if mine is None or pn[0] < mine[0]:
                    a[tid] = pn
            return a

    return NamesParam()


# ------------------------------------------------------------------------------------ executors
_specs_in_use: list = [None]


def _executor_setup(specs_name: str | None, limits: tuple = (None, None, None)) -> None:
    """Make the codec read the specs the driver uses: a folder on this machine (``path:DIR``, local
    mode) or the archive the driver shipped (an executor may not have kwire installed); and use
    the job's per-frame limits (``limits``: max frame, decompressed bytes, records and headers;
    None: the default; set at every task, as Python workers are reused across jobs)."""
    from kwire_cli.records.compression import (DEFAULT_MAX_FRAME_DECOMPRESSED, DEFAULT_MAX_FRAME_ITEMS,
                                               set_frame_limits)
    set_frame_limits(limits[1] or DEFAULT_MAX_FRAME_DECOMPRESSED, limits[2] or DEFAULT_MAX_FRAME_ITEMS)
    if not specs_name or _specs_in_use[0] == specs_name:
        return
    from kwire_cli.spec.registry import use_specs
    if specs_name.startswith("path:"):
        use_specs(specs_name[5:])
        _specs_in_use[0] = specs_name
        return
    from pyspark import SparkFiles
    path = SparkFiles.get(specs_name)
    if os.path.isfile(path):  # not unpacked: do it here, once per worker process
        dest = os.path.join(tempfile.gettempdir(), f"{specs_name}-{os.getpid()}")
        if not os.path.isdir(dest):
            with zipfile.ZipFile(path) as z:
                z.extractall(dest + ".tmp")
            os.replace(dest + ".tmp", dest)
        path = dest
    if os.path.isdir(path):
        use_specs(path)
    _specs_in_use[0] = specs_name


def _conn_hash(conn: tuple) -> int:
    return zlib.crc32(("%s|%d|%s|%d" % conn).encode())


def read_task(task: tuple, plans: list[FilePlan]) -> Iterator[tuple]:
    """Stage 1: one range of one file -> ((hash, conn, rank, frame), packet fields) and meta items."""
    rank, range_no, rng = task
    plan = plans[rank]
    stats = CaptureStats()
    seq = 0
    h_meta = (rank * 131 + range_no) & 0x7FFFFFFF
    try:
        for item in read_range(plan, rank, rng, range_no, stats):
            if item.__class__ is Packet:
                c = conn_key(item)
                yield (_conn_hash(c), c, rank, item.packet), item[2:]
            else:
                seq += 1
                yield (h_meta, _META, rank, seq), ("dmg", _damage_dict(item, rank, item.packet or 0))
    except KwireError as e:
        msg = str(e)
        seq += 1
        yield (h_meta, _META, rank, seq), ("fail", msg if plan.label in msg else f"{plan.label}: {msg}")
    seq += 1
    yield (h_meta, _META, rank, seq), ("stats", stats)


def _damage_dict(d: Damage, rank: int, pos) -> dict:
    """A damage event as the summary lists it; ``_pos`` orders it as kwire pcap emits it (the
    packet being read when it was noticed; end-of-capture events after every packet)."""
    out = damage_entry(d, rank)
    out["_pos"] = pos
    return out


def _request_client_id(data: bytes) -> tuple[bool, Any]:
    """Does this request's header decode (API known, version valid)? And its client id."""
    from kwire_cli.codec.headers import request_header_version
    from kwire_cli.codec.message import header_plan
    from kwire_cli.spec.registry import registry
    try:
        key, ver = int.from_bytes(data[0:2], "big", signed=True), int.from_bytes(data[2:4], "big", signed=True)
        api = registry().api(key)
        if ver not in api.request.valid_versions:
            return False, None
        header, _ = header_plan("request", request_header_version(api, ver)).decode(data, 0, len(data))
        return True, header.get("ClientId")
    except (KwireError, IndexError, ValueError):
        return False, None


def assemble_partition(index: int, items: Iterator[tuple], ports: tuple, records_mode: str | None,
                       specs_name: str | None, nout: int = 1, names_acc=None,
                       limits: tuple = (None, None, None)) -> Iterator[tuple]:
    """Stage 2: sorted packets of some connections -> frames (with context), records, damage.

    Each item leaves keyed (file rank, packet, this partition, seq, decode partition): the first
    four order it as kwire pcap emits it; the last spreads the frames over the ``nout`` decode
    partitions by size (least loaded first), so that the decode stage is balanced whatever the
    connections: one busy connection does not pin one core.

    Topic ids learned from Metadata-like answers go to ``names_acc`` as ``{id: (position, name)}``
    (the earliest position wins, so a recomputed task adds nothing new): the decode stage names the
    ids of every frame from all connections' answers seen before it, as kwire pcap does."""
    from kwire_cli.capture.session import Conversation
    _executor_setup(specs_name, limits)
    stats = CaptureStats()
    seq = 0
    cur = None
    first = 0
    asm = conv = None
    learned: dict = {}
    fresh: list = []  # (topic id, name) a conversation has just learned
    # (load so far, tie rank, partition): the least loaded first, ties in an order rotated by this
    # partition's index (each starts elsewhere); a heap, as the width grows with the input
    loads = [(0, i, (index + i) % nout) for i in range(nout)]

    def key(rank, frame, weight=64):
        nonlocal seq
        seq += 1
        load, tie, target = loads[0]
        heapq.heapreplace(loads, (load + weight, tie, target))
        return (rank, -1 if frame is None else frame, index, seq, target)

    def handle(events, pos):
        for ev in events:
            if ev.__class__ is not KafkaFrame:
                d = _damage_dict(ev, ev.file, pos)
                yield key(ev.file, ev.packet), ("dmg", d)
                continue
            if ev.kind == "request":
                if ev.api_key == PRODUCE and ev.size >= 8:
                    ok, cid = _request_client_id(ev.data)
                    if ok and ev.acks != 0:
                        conv.remember_request(ev.conn, ev.correlation_id, cid, None)
                    yield key(ev.file, ev.packet, 64 + ev.size), ("frm", tuple(ev), None)
                else:
                    yield key(ev.file, ev.packet), ("rec", conv.row(ev))
            elif ev.api_key is None or ev.api_key in TOPIC_MAP_APIS:
                rec = conv.row(ev)
                k = key(ev.file, ev.packet)
                for tid, name in fresh:
                    if tid not in learned:
                        learned[tid] = (k[:4], name)
                fresh.clear()
                yield k, ("rec", rec)
            else:
                info = conv.take_request(ev.conn, ev.correlation_id)
                yield key(ev.file, ev.packet, 64 + ev.size), ("frm", tuple(ev), info)

    for k, v in items:
        conn = k[1]
        if conn is _META or conn == _META:
            yield key(k[2], None), v
            continue
        if conn != cur:
            if asm is not None:
                yield from handle(asm.finish(), END + first)
            cur = conn
            first = k[3]
            asm = StreamAssembler(broker_ports=ports or None, stats=stats,
                                  max_frame=limits[0] or DEFAULT_MAX_FRAME)
            conv = Conversation(records_mode, on_topic_name=lambda tid, name: fresh.append((tid, name)))
        ev = asm.feed(Packet(k[2], k[3], *v))
        if ev:
            yield from handle(ev, k[3])
    if asm is not None:
        yield from handle(asm.finish(), END + first)
    yield key(-1, None), ("stats", stats)
    if names_acc is not None and learned:
        names_acc.add(learned)


def _exec_code() -> str:
    import kwire_cli
    return os.path.dirname(os.path.dirname(os.path.abspath(kwire_cli.__file__)))


def decode_partition(items: Iterator[tuple], labels: list[str], fmt: str, records_mode: str | None,
                     specs_name: str | None, acc, names: dict | None = None,
                     limits: tuple = (None, None, None)) -> Iterator[tuple]:
    """Stage 3: frames -> records -> output rows; everything else -> the accumulator.

    ``names``: every topic id the job learned, ``{id: (position, name)}``; a row's ids are named
    from those learned before its position (kwire pcap's running map over all connections).
    Runs with kwire pcap's garbage-collector tuning (decoded record trees are large and acyclic)."""
    from kwire_cli.render.jsonlines import gc_tuned
    _executor_setup(specs_name, limits)
    with gc_tuned():
        yield from _decode_partition(items, labels, fmt, records_mode, acc, names or {})


def _name_topics(rec: dict, pos: tuple, names: dict) -> None:
    tn = rec.get("topic_names")
    if tn:
        for tid, name in tn.items():
            if name is None:
                known = names.get(tid)
                if known is not None and known[0] < pos:
                    tn[tid] = known[1]


def _decode_partition(items, labels, fmt, records_mode, acc, names):
    from kwire_cli.capture.session import Conversation
    tot = Totals()
    tot.executor_code.add(_exec_code())
    summ = tot.summary  # positions: the sort key, kwire pcap's row order across all tasks
    for k, v in items:
        tag = v[0]
        if tag == "frm":
            t = list(v[1])
            t[_FILE_AT] = labels[t[_FILE_AT]]
            f = KafkaFrame(*t)
            conv = Conversation(records_mode)  # knows only this frame's request (client id, protocol type)
            if v[2] is not None:
                conv.remember_request(f.conn, f.correlation_id, *v[2])
            rec = conv.row(f)
        elif tag == "rec":
            rec = v[1]
            rec["file"] = labels[rec["file"]]
        elif tag == "dmg":
            d = v[1]
            rank = d["file"]
            d["file"] = labels[rank]
            tot.add_damage((rank, d.pop("_pos"), k[3]), d)
            continue
        elif tag == "stats":
            tot.stats.merge(v[1])
            continue
        elif tag == "fail":
            tot.failures.append(v[1])
            continue
        else:  # pragma: no cover
            continue
        if names:
            _name_topics(rec, k[:4], names)
        summ.add(rec, k[:4])
        tot.rows += 1
        yield to_row(rec, fmt)
    acc.add(tot)


# ------------------------------------------------------------------------------------ session
def get_session(master: str | None = None, conf: Iterable[tuple[str, str]] = (), progress: bool = True):
    """The active SparkSession (spark-submit, tests), or a new one: ``master`` or ``local[*]``.

    Returns (session, created).
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.appName("kwire spark-decode")
    if master:
        b = b.master(master)
    elif not SparkConf().contains("spark.master"):
        b = b.master("local[*]")
    given = {k for k, _ in conf}
    if "spark.driver.memory" not in given and not os.environ.get("SPARK_DRIVER_MEMORY"):
        b = b.config("spark.driver.memory", "2g")  # local mode runs the executors in the driver JVM
    b = b.config("spark.ui.showConsoleProgress", "true" if progress else "false") \
         .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false") \
         .config("spark.python.worker.reuse", "true") \
         .config("spark.python.worker.memory", "1g")
    for k, v in conf:
        b = b.config(k, v)
    try:
        spark = b.getOrCreate()
    except Exception as e:  # Java missing, master unreachable...: one line
        raise SparkJobError(f"cannot start Spark ({master or 'local[*]'}): {_first_line(e)}") from None
    spark.sparkContext.setLogLevel("WARN")
    return spark, True


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


_shipped: dict = {}


def ship_code(sc, ship: bool | None = None) -> str | None:
    """Zip kwire_cli for the executors (addPyFile) and the specs folder the driver uses (addArchive);
    returns how executors find the specs (a SparkFiles name, or ``path:DIR``).

    ``ship=None``: ship unless the master is local (local executors run this very installation,
    native decoder included: a zip cannot carry compiled extensions, so code imported from it
    decodes in pure Python). ``ship=False`` on a cluster whose executors have kwire installed
    (the same version) keeps their native decoder.
    """
    import kwire_cli
    from kwire_cli.spec.registry import registry
    if ship is None:
        ship = not sc.master.startswith("local")
    if not ship:
        return "path:" + os.path.abspath(registry().folder)
    key = sc.applicationId
    if key in _shipped:
        return _shipped[key]
    pkg = os.path.dirname(os.path.abspath(kwire_cli.__file__))
    h = hashlib.sha1()
    files = []
    for root, dirs, names in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("_bundled"))
        for n in sorted(names):
            if n.endswith(".py"):
                p = os.path.join(root, n)
                files.append(p)
                with open(p, "rb") as f:
                    h.update(p.encode() + f.read())
    tmp = os.path.join(tempfile.gettempdir(), f"kwire-spark-{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    zpath = os.path.join(tmp, f"kwire_cli-{h.hexdigest()[:12]}.zip")
    if not os.path.exists(zpath):
        with zipfile.ZipFile(zpath + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, os.path.join("kwire_cli", os.path.relpath(p, pkg)))
        os.replace(zpath + ".tmp", zpath)
    sc.addPyFile(zpath)
    specs = os.path.abspath(registry().folder)
    sh = hashlib.sha1()
    names = sorted(n for n in os.listdir(specs) if n.endswith(".json"))
    for n in names:
        with open(os.path.join(specs, n), "rb") as f:
            sh.update(n.encode() + f.read())
    name = f"kwire-specs-{sh.hexdigest()[:12]}.zip"
    spath = os.path.join(tmp, name)
    if not os.path.exists(spath):
        with zipfile.ZipFile(spath + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
            for n in names:
                z.write(os.path.join(specs, n), n)
        os.replace(spath + ".tmp", spath)
    sc.addArchive(spath)  # unpacked on every executor (SparkFiles.get(name) is the folder)
    _shipped[key] = name
    return name


# ------------------------------------------------------------------------------------ the job
@dataclasses.dataclass
class JobResult:
    files: int
    packets: int
    frames: int
    decoded: int
    undecodable: int
    rows: int
    elapsed: float
    failures: list
    summary: dict
    out: str
    fmt: str
    executor_code: list
    startup_s: float = 0.0   # starting the Spark session (0 when one was given)
    job_s: float = 0.0       # planning, reading, reassembling, decoding, writing
    summary_s: float = 0.0   # merging the tasks' summaries, writing the summary files

    def line(self) -> str:
        return (f"kwire spark-decode: files {self.files}, packets {self.packets}, frames {self.frames}, "
                f"decoded {self.decoded}, undecodable {self.undecodable}, rows written {self.rows}, "
                f"failed files {len(self.failures)}, elapsed {self.elapsed:.1f} s -> {self.out}")


def run(inputs: Iterable[str], out: str, *, fmt: str = "parquet", master: str | None = None,
        ports: Iterable[int] = (), partitions: int | None = None, split_size: int = DEFAULT_SPLIT,
        raw_records: bool = False, overwrite: bool = False, conf: Iterable[tuple[str, str]] = (),
        spark=None, progress: bool = True, ship: bool | None = None,
        limits: tuple = (None, None, None)) -> JobResult:
    """Decode captures with Spark; write rows to ``out`` (partitioned by api_name) and the summary.

    ``limits``: the largest frame reassembled, and per frame the decompressed bytes and the records
    and headers decoded (kwire pcap's --max-frame-size, --max-decompressed, --max-records; None:
    the default)."""
    t0 = time.monotonic()
    if fmt not in ("parquet", "jsonl"):
        raise SparkJobError(f"unknown output format {fmt!r} (parquet or jsonl)")
    paths = expand_inputs(inputs)
    if os.path.exists(out) and os.listdir(out) and not overwrite:
        raise SparkJobError(f"output directory {out} exists and is not empty (use --overwrite)")
    created = False
    if spark is None:
        spark, created = get_session(master, conf, progress)
    try:
        return _run(spark, paths, out, fmt, tuple(ports), partitions, split_size,
                    "hex" if raw_records else None, t0, time.monotonic() - t0, ship, tuple(limits))
    finally:
        if created:
            spark.stop()


def _run(spark, paths, out, fmt, ports, partitions, split_size, records_mode, t0, startup,
         ship=None, limits=(None, None, None)) -> JobResult:
    from kwire_cli.spark.summary import final_summary
    sc = spark.sparkContext
    specs_name = ship_code(sc, ship)
    nparts = partitions  # set below from the input size when not given

    driver = Totals()
    # executors open the files themselves (their working directory is not ours): absolute paths,
    # while rows keep the paths as given (as kwire pcap labels them)
    plans = [plan_file(os.path.abspath(p), p, split_size) for p in paths]
    for p in plans:
        if p.failure:
            if p.counted:  # kwire pcap counts a file it could open, capture or not
                driver.stats.files += 1
            driver.failures.append(p.failure)
    good = [p for p in plans if not p.failure]
    good.sort(key=lambda p: (p.first_ts is None, p.first_ts or 0.0, p.label))
    labels = [p.label for p in good]
    if not nparts:
        nparts = default_partitions(sc.defaultParallelism, good)

    # index job: record boundaries and packet counts of the ranges of large files
    probes = []
    cuts = {}
    for rank, p in enumerate(good):
        if p.kind in ("pcap", "pcapng"):
            cuts[rank] = nominal_ranges(p, split_size)
            probes += [(rank, i) for i in range(len(cuts[rank]) - 1)]
    if probes:
        sc.setJobDescription("kwire: find record boundaries")
        bidx = sc.broadcast((good, cuts))
        res = sc.parallelize(probes, len(probes)).map(
            lambda t, b=bidx: (t[0], index_range(b.value[0][t[0]], t[1], b.value[1][t[0]]))).collect()
        bidx.unpersist()
        by_file: dict = {}
        for rank, r in res:
            by_file.setdefault(rank, []).append(r)
        for rank, rs in by_file.items():
            good[rank].ranges = stitch(good[rank], cuts[rank], rs)
    tasks = []
    for rank, p in enumerate(good):
        if p.kind == "whole" or not p.ranges:
            tasks.append((rank, 0, None))
        else:
            tasks += [(rank, i, r) for i, r in enumerate(p.ranges)]

    acc = sc.accumulator(Totals(), _totals_param())
    totals = driver
    rows_written = 0
    if tasks:
        sc.setJobDescription("kwire: read, reassemble, decode, write")
        bplans = sc.broadcast(good)
        pk = sc.parallelize(tasks, len(tasks)).flatMap(lambda t, b=bplans: read_task(t, b.value))
        by_conn = pk.repartitionAndSortWithinPartitions(nparts, partitionFunc=lambda k: k[0])
        names_acc = sc.accumulator({}, _names_param())
        frames = by_conn.mapPartitionsWithIndex(
            lambda i, it, ports=ports, rm=records_mode, sn=specs_name, n=nparts, na=names_acc:
            assemble_partition(i, it, ports, rm, sn, n, na, limits))
        # one more partition than the frames go to: running a job on that empty one makes Spark
        # reassemble every connection (and write the shuffle) without decoding anything, so that the
        # topic ids learned on all connections are known before the decode stage, which then reuses
        # that shuffle output (its stage is skipped, not run again)
        spread = frames.repartitionAndSortWithinPartitions(nparts + 1, partitionFunc=lambda k: k[4])
        sc.runJob(spread, lambda it: [], [nparts])
        bnames = sc.broadcast(dict(names_acc.value))
        rows = spread.mapPartitions(
            lambda it, labels=labels, fmt=fmt, rm=records_mode, sn=specs_name, acc=acc, bn=bnames:
            decode_partition(it, labels, fmt, rm, sn, acc, bn.value, limits))
        df = rows_dataframe(spark, rows, fmt)
        # rows go to one open file per api_name instead of being sorted by it first
        # (jsonl only: a parquet writer buffers a row group, so parquet rows are sorted instead)
        wconf = WRITE_CONF if fmt == "jsonl" else {}
        saved = {k: spark.conf.get(k, None) for k in wconf}
        for k, v in wconf.items():
            spark.conf.set(k, v)
        try:
            w = df.write.mode("overwrite").partitionBy("api_name")
            if fmt == "parquet":
                # bodies can be megabytes: check the page size after every row, not every 100
                w.option("parquet.page.size.row.check.min", "1") \
                 .option("parquet.page.size.row.check.max", "100").parquet(out)
            else:
                w.text(out)
        finally:
            for k, v in saved.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)
        bplans.unpersist()
        bnames.unpersist()
        totals.merge(acc.value)
        rows_written = totals.rows
    else:
        os.makedirs(out, exist_ok=True)

    t_job = time.monotonic()
    sc.setJobDescription(None)
    damage = [e[3] for e in sorted(totals.damage_events, key=lambda e: e[:3])]
    summary = final_summary(totals, damage)
    elapsed = time.monotonic() - t0
    t_sum = elapsed - (t_job - t0)
    result = JobResult(files=totals.stats.files, packets=totals.stats.packets, frames=summary["frames"],
                       decoded=summary["decoded"], undecodable=summary["undecodable"], rows=rows_written,
                       elapsed=elapsed, failures=list(totals.failures), summary=summary, out=out, fmt=fmt,
                       executor_code=sorted(totals.executor_code), startup_s=round(startup, 2),
                       job_s=round(t_job - t0 - startup, 2), summary_s=round(t_sum, 2))
    from kwire_cli.render.json import to_jsonable
    with open(os.path.join(out, "_kwire_summary.json"), "w", encoding="utf-8") as f:
        json.dump(to_jsonable(summary), f, ensure_ascii=False, allow_nan=False, indent=2)
        f.write("\n")
    with open(os.path.join(out, "_kwire_result.json"), "w", encoding="utf-8") as f:
        d = dataclasses.asdict(result)
        d.pop("summary")
        json.dump(d, f, indent=2)
        f.write("\n")
    return result
