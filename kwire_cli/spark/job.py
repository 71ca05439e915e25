"""The PySpark job behind ``kwire spark-decode``: the capture and codec code of ``kwire pcap``, on executors.

``run`` plans and runs it (the other modules of this package hold the parts):

0. driver: start or join the Spark session (``session``), ship kwire's code and specs to the
   executors (``shipping``), expand the inputs and read each file's header (``reading.plan_file``);
   an *index* job finds packet boundaries and counts in the byte ranges of large files.
1. a pre-pass job (one small task per read task, when there are several) lists the connections
   of each read task; a connection whose packets are in one task only is *local* to it, the others
   (cut across rotated files or byte ranges) are *shared*.
2. one Spark job that writes the rows (``rows``: their Spark schema comes from the output-row
   declaration) partitioned by ``api_name``, the union of two branches (``stages``): the read tasks
   that have local connections reassemble and decode them themselves (kwire pcap's path, no
   shuffle); the packets of the shared connections are read, shuffled by connection and decoded
   per connection. Topic ids are named from the answers each task saw; if an answer in another
   task came earlier than a row that lacked it, the job runs again with every answer (broadcast).
   JSON lines to a local ``--out`` are written by the tasks themselves and committed here
   (``direct``); Parquet rows go to Spark's writer.

The tasks' damage, capture counters, failures and partial summaries travel in an accumulator
(``totals``); the driver merges them into the summary of ``kwire pcap --summary`` (``summary``:
exact, with no pass over the rows written) and writes it beside the rows.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Iterable

from kwire_cli.capture.inputs import file_kind
from kwire_cli.errors import SparkJobError
from kwire_cli.inputs.paths import expand_paths, not_a_capture
from kwire_cli.spark.direct import RESULT_SCHEMA, clear, commit, discard, pass_dir, workers_write
from kwire_cli.spark.localfs import local_fs_conf, local_fs_status
from kwire_cli.spark.outdir import UnsafeOutput, check_out, create_nofollow, local_path, name_jsonl
from kwire_cli.spark.reading import DEFAULT_SPLIT, FilePlan, nominal_ranges, plan_file, stitch
from kwire_cli.spark.session import (
    class_data_status,
    executor_conf,
    get_session,
    java,
    jvm_started,
    session_master,
)
from kwire_cli.spark.shipping import ship_code
from kwire_cli.spark.totals import Totals, TotalsParts, totals_param

__all__ = ["JobResult", "SparkJobError", "UnsafeOutput", "check_out", "create_nofollow",
           "default_partitions", "expand_inputs", "get_session", "run"]

# the partitioned writer keeps one open file per api_name (up to N per task) instead of sorting
# every row by api_name first: the sort held each task's rows until its input ended, so the Python
# workers' decoding and the JVM's writing did not overlap (Parquet's job 55 s -> 33 s on 577 MB)
WRITE_CONF = {"jsonl": {"spark.sql.optimizer.plannedWrite.enabled": "false",
                        "spark.sql.maxConcurrentOutputFileWriters": "64"},
              "parquet": {"spark.sql.optimizer.plannedWrite.enabled": "false",
                          "spark.sql.maxConcurrentOutputFileWriters": "16"}}
# the Arrow batches the JVM hands to a chunk task: Spark's 10,000 rows a batch would be gigabytes of
# frames of a megabyte
FRAMES_CONF = {"spark.sql.execution.arrow.maxBytesPerBatch": str(64 << 20)}
# a Parquet writer buffers a row group: 16 open writers of 32 MiB row groups hold at most 512 MiB a
# task (Parquet's own memory manager shrinks row groups past 95% of the heap); past 16 APIs in a
# task Spark sorts the task's remaining rows instead
PARQUET_ROW_GROUP = 32 << 20
# Parquet's compression unless spark.sql.parquet.compression.codec is given: zstd, not Spark's
# snappy: the rows' JSON bodies compress 6x smaller (577 MB of captures: 29 MB of Parquet against
# 169 MB) for the same CPU (3 paired runs: the whole command 1.12x, 0.98x, 0.99x); read by Spark,
# pyarrow, DuckDB, Trino
PARQUET_CODEC = "zstd"
PARQUET_CODEC_CONF = "spark.sql.parquet.compression.codec"
# no dictionary for the body column unless the user's Hadoop settings say: Parquet's writer hashes
# every body (7.5 KB on average) into a dictionary until the dictionary passes 1 MB, which bodies
# that repeat (the benchmark's replayed conversations, Heartbeats, Metadata) never make it do: 3
# paired runs on 577 MB: the JVM's CPU 17.82 -> 16.79, 16.87 -> 13.91, 16.10 -> 14.53 s; the same
# 29 MB of Parquet (zstd finds the repeats within a page)
PARQUET_NO_DICTIONARY = ("body",)
PARQUET_DICTIONARY = "parquet.enable.dictionary"


# ------------------------------------------------------------------------------------ inputs
def expand_inputs(inputs: Iterable[str], on_skip=None, on_refused=None) -> list[str]:
    """Files named by DIR (recursively; hidden files skipped), FILE or GLOB, each once, in a stable
    order (rotation order: ``cap2`` before ``cap10``): ``kwire_cli.inputs.paths.expand_paths``. In a
    directory or a glob, what is not a regular file (a FIFO, socket or device: a range reader would
    block on it) is skipped and reported to ``on_skip(path, what)``, and files that are not captures
    (a manifest.json) are skipped and listed to ``on_refused([(path, why), ...])``; named
    explicitly, a FIFO is an error (Spark reads files by byte range), a file that is not a capture
    a failed file. A name that does not exist is a ``SourceError``."""
    inputs = list(inputs)
    for spec in inputs:
        what = file_kind(spec) if os.path.lexists(spec) else None
        if what not in (None, "directory"):
            raise SparkJobError(f"{spec}: a {what}, not a regular file: spark-decode reads files by "
                                "byte range (kwire pcap reads a FIFO as a stream)")
    found = expand_paths(inputs, what="INPUTS", on_skip=on_skip, accept=not_a_capture, unique=True)
    if found.refused and on_refused is not None:
        on_refused(found.refused)
    out = [p for p in found.paths if os.path.isfile(p)]
    if not out:
        raise SparkJobError("no input files" + (" (no captures among them)" if found.refused else ""))
    return out


PARTITION_BYTES = 256 << 20  # capture bytes per shuffle partition, at most, by default
GZIP_GROWTH = 5              # a gzip capture counts as this many times its size


def default_partitions(parallelism: int, plans: list[FilePlan]) -> int:
    """Twice Spark's parallelism, and at least one partition per 256 MiB of capture (gzip files
    counted five-fold): a partition's packets and frames pass through one Python worker, whose
    sort spills to disk past spark.python.worker.memory, so big inputs get more, smaller ones."""
    size = sum(p.size * (GZIP_GROWTH if p.kind == "whole" and not p.prefix else 1) for p in plans)  # gzip
    return max(2, parallelism * 2, -(-size // PARTITION_BYTES))


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
    decode_passes: int = 0   # 2: topic ids answered on another task's connection, decoded again with all answers
    tasks_local: int = 0     # read tasks that decoded connections of their own (no shuffle)
    tasks_shuffled: int = 0  # read tasks that sent packets of connections shared with other tasks to the shuffle
    connections_local: int | None = None  # connections decoded in their read task (None: one task, not counted)
    connections_shuffled: int = 0         # connections whose packets were in several read tasks
    connections_split: int = 0            # heavy connections: framed in one task, decoded in chunks on several
    split_bytes: int = 0                  # their captured TCP bytes (the pre-pass's)
    jvm_class_data: str = "not started here"  # the driver JVM's class data archive: used, writing, refused, off
    local_file_system: str = "not started here"  # local files written through: kwire (no chmod processes), hadoop
    master: str = ""         # the session's master (local[N], spark://..., yarn, ...)

    def line(self) -> str:
        return (f"kwire spark-decode: files {self.files}, packets {self.packets}, frames {self.frames}, "
                f"decoded {self.decoded}, undecodable {self.undecodable}, rows written {self.rows}, "
                f"failed files {len(self.failures)}, elapsed {self.elapsed:.1f} s -> {self.out}")


def run(inputs: Iterable[str], out: str, *, fmt: str = "parquet", master: str | None = None,
        ports: Iterable[int] = (), partitions: int | None = None, split_size: int = DEFAULT_SPLIT,
        raw_records: bool = False, overwrite: bool = False, conf: Iterable[tuple[str, str]] = (),
        spark=None, progress: bool = True, ship: bool | None = None,
        limits: tuple = (None, None, None), show_secrets: bool = False, on_skip=None, on_refused=None,
        keylog=None, strict: bool = False, filter_expr: str | None = None, summary: bool = True) -> JobResult:
    """Decode captures with Spark; write rows to ``out`` (partitioned by api_name) and the summary.

    ``on_skip(path, what)``: told about each FIFO, socket or device found in a directory or glob
    (skipped); ``on_refused([(path, why), ...])``: the files there that are not captures (skipped).

    ``limits``: the largest frame reassembled, and per frame the decompressed bytes and the records
    and headers decoded (kwire pcap's --max-frame-size, --max-decompressed, --max-records; None:
    the default). Secrets are redacted in the rows and the summary unless ``show_secrets``
    (``kwire_cli.codec.secrets``). ``keylog``: a ``kwire_cli.tls.KeyLog`` that TLS connections are
    decrypted with (a broadcast: sent once per executor, not with every task). ``strict``: a frame
    that breaks a rule of the format is undecodable (kwire pcap --strict), not read leniently with
    its violations listed.
    ``filter_expr``: kwire pcap's --filter (checked here, before Spark starts): only the rows it keeps
    are written; the summary counts every frame. ``summary`` False: the tasks count only the run's
    counts (frames, undecodable frames, record batches: ``RunCounts``, as kwire pcap does for JSON
    lines), not the summary's sections and the analysis; no ``_kwire_summary.json`` is written."""
    t0 = time.monotonic()
    if filter_expr:
        from kwire_cli.capture.filter import compile_filter
        compile_filter(filter_expr)  # a FilterError now, not in every task
    if fmt not in ("parquet", "jsonl"):
        raise SparkJobError(f"unknown output format {fmt!r} (parquet or jsonl)")
    conf = tuple(conf)
    for k, v in conf:
        if k in SIZE_WORDS:
            conf_size(k, v)  # a bad value now, before Spark starts
    inputs = tuple(inputs)
    refused: list[tuple[str, str]] = []
    paths = expand_inputs(inputs, on_skip, refused.extend)
    check_out(out, inputs, paths, overwrite)
    if refused and on_refused is not None:  # after --out is known to be safe: a refusal is the one line
        on_refused(refused)
    if os.path.exists(out) and os.listdir(out) and not overwrite:
        raise SparkJobError(f"output directory {out} exists and is not empty (use --overwrite)")
    created = False
    class_data = JobResult.jvm_class_data
    local_fs = JobResult.local_file_system
    if spark is None:
        where = session_master(master)
        files = local_fs_conf(where, conf, java(), jvm_started())
        spark, created = get_session(master, conf + daemon_conf(where, conf, ship) + files + executor_conf(where, conf),
                                     progress)
        if created:
            class_data = class_data_status(spark)
            local_fs = local_fs_status(spark)
    from kwire_cli.render.jsonlines import gc_tuned
    try:
        # the collector tuned: the accumulator's thread unpickles and merges a partial summary per
        # task (a large tree, frozen out of the collections' sight), then the summary is made of the
        # merged total: at the default thresholds, full collections scanned it all again
        with gc_tuned():
            return _run(spark, paths, out, fmt, tuple(ports), partitions, split_size,
                        "hex" if raw_records else None, t0, time.monotonic() - t0, ship, tuple(limits),
                        show_secrets, keylog, strict, filter_expr, class_data, local_fs, summary)
    finally:
        if created:
            spark.stop()


DAEMON_MODULE = "kwire_cli.spark.daemon"


def daemon_conf(master: str, conf: tuple = (), ship: bool | None = None) -> tuple:
    """The Python workers' daemon of a local session (``kwire_cli.spark.daemon``: kwire imported
    once, before the workers are forked, not in each: 0.34 s of CPU less for two), unless kwire's code is shipped
    (its workers must import the shipped zip) or the setting is given. Not for a cluster: the
    executors' Python may not have kwire installed."""
    if ship or any(k == "spark.python.daemon.module" for k, _ in conf):
        return ()
    return (("spark.python.daemon.module", DAEMON_MODULE),) if master.startswith("local") else ()


def _run(spark, paths, out, fmt, ports, partitions, split_size, records_mode, t0, startup,
         ship=None, limits=(None, None, None), show_secrets=False, keylog=None, strict=False,
         filter_expr=None, class_data=JobResult.jvm_class_data, local_fs=JobResult.local_file_system,
         counted=True) -> JobResult:
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

    # index job: packet boundaries and packet counts of the ranges of large files
    probes = []
    cuts = {}
    for rank, p in enumerate(good):
        if p.kind in ("pcap", "pcapng"):
            cuts[rank] = nominal_ranges(p, split_size)
            probes += [(rank, i) for i in range(len(cuts[rank]) - 1)]
    if probes:
        from kwire_cli.spark.stages import BOUNDARY_COLUMNS, boundaries_of, boundary_batches
        sc.setJobDescription("kwire: find packet boundaries")
        bidx = sc.broadcast((good, cuts, probes))
        width = prepass_partitions(len(probes), sc.defaultParallelism)
        found = spark.range(len(probes), numPartitions=width).mapInArrow(
            lambda it, b=bidx: boundary_batches(it, b.value[2], b.value[0], b.value[1]),
            ", ".join(f"{c} bigint" for c in BOUNDARY_COLUMNS))
        by_file = boundaries_of(collect_rows(found))
        bidx.unpersist()
        for rank, rs in by_file.items():
            good[rank].ranges = stitch(good[rank], cuts[rank], rs)
    tasks = []
    for rank, p in enumerate(good):
        if p.kind == "whole" or not p.ranges:
            tasks.append((rank, 0, None))
        else:
            tasks += [(rank, i, r) for i, r in enumerate(p.ranges)]

    totals = driver
    rows_written = 0
    passes = 0
    paths_used: dict = {}
    if tasks:
        tot, passes = _decode_and_write(paths_used, spark, good, tasks, labels, out, fmt, ports, nparts,
                                        records_mode, specs_name, limits, show_secrets, keylog, strict, filter_expr,
                                        counted)
        totals.merge(tot)
        rows_written = totals.rows
    else:
        os.makedirs(out, exist_ok=True)

    t_job = time.monotonic()
    sc.setJobDescription(None)
    damage = [e[3] for e in sorted(totals.damage_events, key=lambda e: e[:3])]
    summary = final_summary(totals, damage)
    if filter_expr:
        summary["shown"] = rows_written  # as kwire pcap --filter says how many rows it showed
    elapsed = time.monotonic() - t0
    t_sum = elapsed - (t_job - t0)
    result = JobResult(files=totals.stats.files, packets=totals.stats.packets, frames=summary["frames"],
                       decoded=summary["decoded"], undecodable=summary["undecodable"], rows=rows_written,
                       elapsed=elapsed, failures=list(totals.failures), summary=summary, out=out, fmt=fmt,
                       executor_code=sorted(totals.executor_code), startup_s=round(startup, 2),
                       job_s=round(t_job - t0 - startup, 2), summary_s=round(t_sum, 2), decode_passes=passes,
                       jvm_class_data=class_data, local_file_system=local_fs, master=sc.master, **paths_used)
    from kwire_cli.render.json import to_jsonable
    if counted:
        with create_nofollow(os.path.join(out, "_kwire_summary.json")) as f:
            json.dump(to_jsonable(summary), f, ensure_ascii=False, allow_nan=False, indent=2)
            f.write("\n")
    with create_nofollow(os.path.join(out, "_kwire_result.json")) as f:
        d = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "summary"}
        json.dump(d, f, indent=2)
        f.write("\n")
    return result


def _decode_and_write(paths_used: dict, spark, plans, tasks, labels, out, fmt, ports, nparts, records_mode,
                      specs_name, limits, show_secrets, keylog, strict, filter_expr,
                      summary=True) -> tuple[Totals, int]:
    """The job: the connections local to one read task reassembled and decoded in it; the packets of
    the shared ones read (one task per range) -> one shuffle by connection, sorted -> reassembled and
    decoded per connection; both branches' rows (Arrow batches) -> written, partitioned by api_name.

    Topic ids are first named from the answers each task saw itself; if an answer on a connection
    of another task named an id earlier than a row that used (or lacked) it (``topics_agree``), the
    stage runs again with every answer the job learned, and its rows replace the first ones.

    Keys and values framed by a Schema Registry (--schema-registry, --schemas): every schema is
    read here, once, on the driver, and shipped to the tasks with their closures."""
    from kwire_cli.spark.rows import row_schema
    from kwire_cli.spark.stages import (
        SORT_COLUMNS,
        decode_batches,
        local_batches,
        packet_schema_ddl,
        read_batches,
        topics_agree,
    )
    from kwire_cli.values.records import current as values_decoder
    from kwire_cli.values.shipping import ship, within
    sc = spark.sparkContext
    bplans = sc.broadcast((plans, tasks))
    bkeys = sc.broadcast(keylog) if keylog is not None else None  # once per executor, not in every task
    heavy_min, chunk_bytes = heavy_conf(spark)
    cs = _connections(spark, bplans, len(tasks), heavy_min, sc.defaultParallelism)
    shared, local, shuffled = cs.to_shuffle, cs.local, cs.shuffled
    paths_used.update(tasks_local=len(local), tasks_shuffled=len(shuffled), connections_local=cs.nlocal,
                      connections_shuffled=len(shared), connections_split=len(cs.heavy),
                      split_bytes=sum(h[1] for h in cs.heavy))
    sc.setJobDescription("kwire: read, reassemble, decode, write")
    by_conn = None
    if shuffled:
        quiet = frozenset(local)  # their damage, failures and counters are reported by their local part
        packets = spark.range(len(shuffled), numPartitions=len(shuffled)).mapInArrow(
            lambda it, b=bplans, sh=shared, q=quiet, w=shuffled: read_batches(it, b.value[1], b.value[0], sh, q, w),
            packet_schema_ddl())
        by_conn = packets.repartition(nparts, "h").sortWithinPartitions(*SORT_COLUMNS)
    by_chunk = None
    if cs.heavy:
        from kwire_cli.spark.split import CHUNK_SORT_COLUMNS, frame_schema_ddl, heavy_batches, partition_keys
        keys = partition_keys(nparts)
        specs = [(c, holders, reports, max(1, chunk_bytes or -(-n // (CHUNKS_PER_PARTITION * nparts))))
                 for c, n, holders, reports in cs.heavy]
        frames = spark.range(len(specs), numPartitions=len(specs)).mapInArrow(
            lambda it, b=bplans, sp=specs, keys=keys, base=nparts, sn=specs_name, ports=ports, kl=bkeys,
            rm=records_mode, ss=show_secrets, st=strict:
            heavy_batches(it, sp, b.value[1], b.value[0], keys, base, sn, ports, limits, kl and kl.value, rm, ss, st),
            frame_schema_ddl())
        by_chunk = frames.repartition(nparts, "p").sortWithinPartitions(*CHUNK_SORT_COLUMNS)
    direct = workers_write(spark, fmt, out)  # the workers write the lines themselves (``direct``)
    schema = RESULT_SCHEMA if direct else row_schema(fmt)
    root = os.path.abspath(local_path(out) or ".")
    if direct:
        clear(root)  # what Spark's overwrite mode does first (check_out: only a previous run's output)
        os.makedirs(root, exist_ok=True)
    job_id = uuid.uuid4().hex
    shipped = ship(values_decoder())
    names = None
    passes = 0
    try:
        while True:
            passes += 1
            acc = sc.accumulator(TotalsParts(), totals_param())
            bnames = sc.broadcast(names)
            wt = pass_dir(root, job_id, passes) if direct else None
            rows = None
            if local:
                not_local = cs.not_local  # their packets are decoded elsewhere: shared or heavy
                rows = spark.range(len(local), numPartitions=len(local)).mapInArrow(
                    lambda it, b=bplans, w=local, sh=not_local, labels=labels, fmt=fmt, rm=records_mode, sn=specs_name,
                    acc=acc, ports=ports, bn=bnames, ss=show_secrets, kl=bkeys, st=strict, fe=filter_expr, vs=shipped,
                    wt=wt, sm=summary:
                    within(vs, local_batches(it, w, b.value[1], b.value[0], sh, labels, fmt, rm, sn, acc, ports,
                                             bn.value, limits, ss, kl and kl.value, st, fe, wt, sm)), schema)
            if by_conn is not None:
                decoded = by_conn.mapInArrow(
                    lambda it, labels=labels, fmt=fmt, rm=records_mode, sn=specs_name, acc=acc, ports=ports,
                    bn=bnames, ss=show_secrets, kl=bkeys, st=strict, fe=filter_expr, vs=shipped, wt=wt, sm=summary:
                    within(vs, decode_batches(it, labels, fmt, rm, sn, acc, ports, bn.value, limits, ss,
                                              kl and kl.value, st, fe, wt, sm)),
                    schema)
                rows = decoded if rows is None else rows.union(decoded)
            if by_chunk is not None:
                from kwire_cli.spark.split import chunk_batches
                decoded = by_chunk.mapInArrow(
                    lambda it, labels=labels, fmt=fmt, rm=records_mode, sn=specs_name, acc=acc, bn=bnames,
                    ss=show_secrets, st=strict, fe=filter_expr, vs=shipped, wt=wt, sm=summary:
                    within(vs, chunk_batches(it, labels, fmt, rm, sn, acc, bn.value, limits, ss, st, fe, wt, sm)),
                    schema)
                rows = decoded if rows is None else rows.union(decoded)
            files = None
            if direct:
                files = [r[0] for r in collect_rows(rows)]
            else:
                _write(spark, rows, out, fmt, bool(cs.heavy))
            bnames.unpersist()
            tot = acc.value.total()
            if names is not None or topics_agree(tot.learned, tot.topic_uses, tot.renamed):
                if files is not None:
                    commit(root, job_id, passes, files)
                return tot, passes
            if direct:
                discard(root, job_id, passes)
            names = tot.learned  # a row missed an earlier answer (or an id has two names): once more, with all of them
            sc.setJobDescription("kwire: decode again, topic ids named from every connection")
    finally:
        bplans.unpersist()
        if bkeys is not None:
            bkeys.unpersist()


@dataclasses.dataclass
class Connections:
    """What the pre-pass decided (``_connections``)."""

    shared: frozenset = frozenset()   # connections with packets in several read tasks, shuffled
    local: list = dataclasses.field(default_factory=lambda: [0])  # read tasks that decode connections of their own
    shuffled: list = dataclasses.field(default_factory=list)      # read tasks that send packets to the shuffle
    nlocal: int | None = None         # connections decoded in their read task (None: one task, not counted)
    heavy: list = dataclasses.field(default_factory=list)  # heavy connections: (id, bytes, holders, reported tasks)

    @property
    def not_local(self) -> frozenset:
        return self.shared | {h[0] for h in self.heavy}

    @property
    def to_shuffle(self) -> frozenset:
        return self.shared - {h[0] for h in self.heavy}


PREPASS_TASKS_PER_SLOT = 2  # Spark tasks of the pre-pass per task slot, each over a run of read tasks


def prepass_partitions(ntasks: int, parallelism: int) -> int:
    """Spark tasks of the pre-pass (and of the index job): two per task slot, each scanning the
    headers of a run of read tasks (or probing a run of ranges: a few milliseconds each), not one
    Spark task each: every Spark task is a round trip between the JVM and a Python worker, which on
    a busy machine waits its turn for a core (72 files, local[2], load 5-6: the pre-pass stage
    5.2 s -> 4.0 s of wall time, most of what is left the Python workers' start)."""
    return max(1, min(ntasks, PREPASS_TASKS_PER_SLOT * max(1, parallelism)))


def _connections(spark, bplans, ntasks: int, heavy_min: int | None = None, parallelism: int = 2) -> Connections:
    """The pre-pass (a job over every read task, ``prepass_partitions`` Spark tasks, when there are
    several read tasks or every connection is heavy): which connections have packets in more than
    one read task (``shared``: their ids); the read tasks that decode connections of their own
    (and report the task's damage and counters: every task with a connection that is neither
    shared nor heavy, or with none), and those that send packets to the shuffle; how many
    connections are decoded in their read task.

    ``heavy_min`` (``heavy_conf``): a connection whose captured TCP bytes are at least
    max(``heavy_min``, all connections' bytes / (2 x ``parallelism``)) is *heavy* (0: every
    connection; None: none): read, reassembled and framed in one task of its own, its frames decoded
    in chunks on several (``split``); its read tasks are read by that task, which reports the
    damage and counters of those that have no other part."""
    if ntasks == 1 and heavy_min != 0:
        return Connections()
    from kwire_cli.spark.stages import connection_batches
    spark.sparkContext.setJobDescription("kwire: find each read task's connections")
    found = spark.range(ntasks, numPartitions=prepass_partitions(ntasks, parallelism)).mapInArrow(
        lambda it, b=bplans: connection_batches(it, b.value[1], b.value[0]), "task int, conn bigint, bytes bigint")
    held: list[list[int]] = [[] for _ in range(ntasks)]
    weight: dict[int, int] = {}
    for t, c, n in collect_rows(found):
        held[t].append(c)
        weight[c] = weight.get(c, 0) + n
    tasks_of: dict[int, int] = {}
    for ids in held:
        for c in ids:
            tasks_of[c] = tasks_of.get(c, 0) + 1
    heavy_ids: set = set()
    if heavy_min is not None:
        bar = max(heavy_min, sum(weight.values()) // (2 * max(1, parallelism))) if heavy_min else 0
        heavy_ids = {c for c, n in weight.items() if n >= bar}
    shared = frozenset(c for c, n in tasks_of.items() if n > 1)
    local = [t for t, ids in enumerate(held)
             if not ids or any(c not in shared and c not in heavy_ids for c in ids)]
    shuffled = [t for t, ids in enumerate(held) if any(c in shared and c not in heavy_ids for c in ids)]
    heavy = []
    if heavy_ids:
        order = sorted(heavy_ids, key=lambda c: (-weight[c], c))  # the heaviest first
        rank = {c: i for i, c in enumerate(order)}
        holders: dict[int, list[int]] = {c: [] for c in order}
        reports: dict[int, list[int]] = {c: [] for c in order}
        others = set(local) | set(shuffled)
        for t, ids in enumerate(held):
            mine = [c for c in ids if c in heavy_ids]
            for c in mine:
                holders[c].append(t)
            if t not in others:  # only heavy connections: the first of them reports the task
                reports[min(mine, key=rank.__getitem__)].append(t)
        heavy = [(c, weight[c], holders[c], reports[c]) for c in order]
    nlocal = sum(1 for c in tasks_of if c not in shared and c not in heavy_ids)
    return Connections(shared, local, shuffled, nlocal, heavy)


HEAVY_CONF = "spark.kwire.heavyConnectionBytes"
HEAVY_DEFAULT = 32 << 20
CHUNK_CONF = "spark.kwire.heavyChunkBytes"
CHUNKS_PER_PARTITION = 4  # a heavy connection's chunks per partition (round robin: an even share)


SIZE_WORDS: dict[str, dict] = {HEAVY_CONF: {"off": None}, CHUNK_CONF: {}}


def _conf_size(spark, key: str, default: int | None) -> int | None:
    """A byte count from Spark conf ``key`` (``conf_size``), or ``default`` when it is not set."""
    text = spark.conf.get(key, None)
    return default if text is None else conf_size(key, text)


def conf_size(key: str, text) -> int | None:
    """The value of kwire's size setting ``key``: bytes, or a number with k, m, g or t (1024-based),
    or one of the setting's words; else a one-line ``SparkJobError``."""
    words = SIZE_WORDS[key]
    t = str(text).strip().lower()
    if t in words:
        return words[t]
    num = t.rstrip("b").rstrip("i")
    shift = {"k": 10, "m": 20, "g": 30, "t": 40}.get(num[-1:], 0)
    if shift:
        num = num[:-1]
    if not num.isdigit() or len(num) > 20:
        raise SparkJobError(f"{key}: {str(text)!r} is not a size (bytes, or a number with k, m or g, as in 32m"
                            + "".join(f"; {w}" for w in words) + ")")
    return int(num) << shift


def heavy_conf(spark) -> tuple[int | None, int | None]:
    """``spark.kwire.heavyConnectionBytes`` (default 32m; 0: every connection is heavy; off: none)
    and ``spark.kwire.heavyChunkBytes`` (frame bytes per chunk; default: a heavy connection's
    bytes / (4 x partitions)), as (heavy_min, chunk_bytes)."""
    return _conf_size(spark, HEAVY_CONF, HEAVY_DEFAULT), _conf_size(spark, CHUNK_CONF, None)


def collect_rows(df) -> Iterable[tuple]:
    """A small result's rows as tuples, through Arrow (no Row objects)."""
    table = df.toArrow() if hasattr(df, "toArrow") else df._collect_as_arrow()  # PySpark 4 / 3.5
    for batch in table if isinstance(table, list) else table.to_batches():
        yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)


def _write(spark, df, out: str, fmt: str, frames: bool = False) -> None:
    """Rows to ``out``, partitioned by api_name (jsonl: text files renamed .jsonl; parquet).
    ``frames``: the job hands heavy connections' frames to the Python workers (``FRAMES_CONF``)."""
    wconf = dict(WRITE_CONF[fmt], **(FRAMES_CONF if frames else {}))  # one open file per api_name, no sort first
    saved = {k: spark.conf.get(k, None) for k in wconf}
    for k, v in wconf.items():
        spark.conf.set(k, v)
    try:
        w = df.write.mode("overwrite").partitionBy("api_name")
        if fmt == "parquet":
            if not spark.sparkContext.getConf().contains(PARQUET_CODEC_CONF) \
                    and spark.conf.get(PARQUET_CODEC_CONF, "snappy") == "snappy":  # not the user's choice
                w = w.option("compression", PARQUET_CODEC)
            hadoop = spark.sparkContext._jsc.hadoopConfiguration()
            if hadoop.get(PARQUET_DICTIONARY) is None:  # (a user's setting of it is kept, and so is theirs per column)
                for c in PARQUET_NO_DICTIONARY:
                    if hadoop.get(f"{PARQUET_DICTIONARY}#{c}") is None:
                        w = w.option(f"{PARQUET_DICTIONARY}#{c}", "false")
            # bodies can be megabytes: check the page size after every row, not every 100
            w.option("parquet.page.size.row.check.min", "1") \
             .option("parquet.page.size.row.check.max", "100") \
             .option("parquet.block.size", str(PARQUET_ROW_GROUP)).parquet(out)
        else:
            w.text(out)
            name_jsonl(out)
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
