"""The two stages of the spark-decode job, as functions the executors run (``mapInArrow``).

1. ``read_batches``: one byte range of one capture file (or a whole small / gzip file) per task ->
   Arrow batches of ``Packet``s keyed by connection (``h`` its hash, ``conn``), plus the file's
   damage, failure and counters as meta items (``conn`` empty, the item pickled in ``meta``).
   Spark shuffles them by ``h`` and sorts each partition by (h, conn, file rank, packet number):
   the payload bytes cross this one shuffle, in Spark's own row format.
2. ``decode_batches``: the packets of some connections, each connection through its own
   ``StreamAssembler`` (a connection split across rotated files is reassembled as one) and its own
   ``Conversation``, which turns every frame into its output row, as ``kwire pcap`` does; the rows
   leave as Arrow batches in the output schema (``spark.rows.RowBatcher``), built once. Each row is
   counted into the task's partial ``Summary``; damage, counters, failures and the topic names
   learned go to the task's ``Totals`` (an accumulator).

Topic ids (Fetch v13+, ...) are named from Metadata-like answers on any connection before the frame.
A task knows the answers of its own connections: ``names=None`` names ids from those and records,
per id, which answer each row used or that it found none (``Totals.topic_uses``); the driver then
checks them against every answer of the job (``topics_agree``) and, in the rare capture where an
answer on another task's connection came earlier, runs the stage again with all of them
(``names``): the rows are those of the single pass kwire pcap makes.

Every item carries a sort key whose first four parts order it as ``kwire pcap`` emits it: (file
rank, packet number, partition, sequence).
"""
from __future__ import annotations

import pickle
import zlib
from collections.abc import Iterator
from typing import Any, cast

from kwire_cli.capture import DEFAULT_MAX_FRAME, CaptureStats, Damage, KafkaFrame, Packet, StreamAssembler, conn_key
from kwire_cli.capture.check import CodecCheck
from kwire_cli.capture.events import Note
from kwire_cli.capture.session import Conversation
from kwire_cli.capture.summary import damage_entry
from kwire_cli.errors import KwireError
from kwire_cli.spark.reading import FilePlan, read_range
from kwire_cli.spark.rows import RowBatcher
from kwire_cli.spark.shipping import code_location, executor_setup
from kwire_cli.spark.totals import Totals

END = 1 << 62  # position of events at the end of a file (after its last packet)
META = ""      # the connection of meta items (damage, failures, counters of a read task)
BATCH_ROWS = 4096  # packets per Arrow batch out of a read task

# the packets' columns between the two stages: (name, Spark type name, Arrow type name)
PACKET_COLUMNS = (("h", "int", "int32"), ("conn", "string", "string"), ("rank", "int", "int32"),
                  ("pos", "bigint", "int64"), ("ts", "double", "float64"), ("src_ip", "string", "string"),
                  ("src_port", "int", "int32"), ("dst_ip", "string", "string"), ("dst_port", "int", "int32"),
                  ("seq", "bigint", "int64"), ("ack", "bigint", "int64"), ("flags", "int", "int32"),
                  ("payload", "binary", "binary"), ("wire_len", "bigint", "int64"), ("meta", "binary", "binary"))
SORT_COLUMNS = ("h", "conn", "rank", "pos")


def packet_schema_ddl() -> str:
    """The Spark schema of the packets (DDL)."""
    return ", ".join(f"{n} {t}" for n, t, _ in PACKET_COLUMNS)


def _packet_arrow_schema():
    import pyarrow as pa
    return pa.schema([(n, getattr(pa, a)()) for n, _, a in PACKET_COLUMNS])


def _conn_hash(conn: str) -> int:
    return zlib.crc32(conn.encode()) & 0x7FFFFFFF


def read_task(task: tuple, plans: list[FilePlan]) -> Iterator[tuple]:
    """Stage 1: one range of one file -> packet rows (``PACKET_COLUMNS``) and meta rows."""
    rank, range_no, rng = task
    plan = plans[rank]
    stats = CaptureStats()
    seq = 0
    h_meta = (rank * 131 + range_no) & 0x7FFFFFFF

    def meta(item) -> tuple:
        return (h_meta, META, rank, seq, None, None, None, None, None, None, None, None, None, None,
                pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
    conns: dict = {}  # (src ip, port, dst ip, port) -> (hash, connection)
    try:
        for item in read_range(plan, rank, rng, range_no, stats):
            if item.__class__ is Packet:
                hc = conns.get(item[3:7])
                if hc is None:
                    c = "%s|%d|%s|%d" % conn_key(item)
                    hc = conns[item[3:7]] = (_conn_hash(c), c, rank)
                yield hc + item[1:] + (None,)
            else:
                d = cast(Damage, item)
                seq += 1
                yield meta(("dmg", damage_item(d, rank, d.packet or 0)))
    except KwireError as e:
        msg = str(e)
        seq += 1
        yield meta(("fail", msg if plan.label in msg else f"{plan.label}: {msg}"))
    seq += 1
    yield meta(("stats", stats))


def read_batches(batches, tasks: list, plans: list[FilePlan]) -> Iterator[Any]:
    """Stage 1 in ``mapInArrow``: batches of task numbers -> Arrow batches of packets."""
    import pyarrow as pa
    schema = _packet_arrow_schema()
    types = [f.type for f in schema]
    names = schema.names

    def batch(rows):
        cols = list(zip(*rows, strict=True))
        return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(cols, types, strict=True)], names=names)
    for b in batches:
        for t in b.column(0).to_pylist():
            rows: list = []
            for r in read_task(tasks[t], plans):
                rows.append(r)
                if len(rows) >= BATCH_ROWS:
                    yield batch(rows)
                    rows = []
            if rows:
                yield batch(rows)


def damage_item(d: Damage, rank: int, pos) -> dict:
    """A damage event as the summary lists it; ``_pos`` orders it as kwire pcap emits it (the
    packet being read when it was noticed; end-of-capture events after every packet)."""
    out = damage_entry(d, rank)
    out["_pos"] = pos
    return out


def _name_topics(rec: dict, pos: tuple, names: dict, uses: dict | None) -> None:
    """Name the row's still unnamed topic ids from ``names`` learned before ``pos``; ``uses``
    (the first pass, ``names`` this task's own): per id, the latest position of an answer a row
    used, and the latest row that found none (``topics_agree`` checks them against all answers)."""
    tn = rec.get("topic_names")
    if not tn:
        return
    for tid, name in tn.items():
        known = names.get(tid)
        if known is not None and known[0] < pos:
            if name is None:
                tn[tid] = known[1]
            if uses is not None:
                u = uses.setdefault(tid, [None, None])
                if u[0] is None or known[0] > u[0]:
                    u[0] = known[0]
        elif uses is not None:
            u = uses.setdefault(tid, [None, None])
            if u[1] is None or pos > u[1]:
                u[1] = pos


def topics_agree(learned: dict, uses: dict) -> bool:
    """Did the first pass name every topic id as all the answers of the job name it? (``learned``:
    ``{id: (position, name)}``, the earliest answer of each id; ``uses``: ``Totals.topic_uses``.)"""
    for tid, (used, unnamed) in uses.items():
        first = learned.get(tid)
        if first is None:
            continue
        if (used is not None and used > first[0]) or (unnamed is not None and unnamed > first[0]):
            return False
    return True


def decode_batches(batches, labels: list[str], fmt: str, records_mode: str | None, specs_name: str | None,
                   acc, ports: tuple = (), names: dict | None = None, limits: tuple = (None, None, None),
                   show_secrets: bool = False, keylog: Any = None, strict: bool = False,
                   filter_expr: str | None = None) -> Iterator[Any]:
    """Stage 2 in ``mapInArrow``: sorted packet batches -> Arrow batches of output rows.

    ``names``: every topic id the job learned, ``{id: (position, name)}`` (the second pass), or
    None: this task's own answers, their uses recorded for ``topics_agree``.
    Runs with kwire pcap's garbage-collector tuning (decoded trees are large and acyclic)."""
    from kwire_cli.render.jsonlines import gc_tuned
    executor_setup(specs_name, limits)
    with gc_tuned():
        yield from _decode(_packets(batches), labels, fmt, records_mode, acc, ports, names, limits, show_secrets,
                           keylog, strict, filter_expr)


_MAKE_PACKET = Packet._make


def _packets(batches) -> Iterator[tuple]:
    """(connection, meta, Packet) of each row of the sorted packet batches."""
    make = _MAKE_PACKET
    for b in batches:
        cols = [c.to_pylist() for c in b.columns]
        # the Packet's fields, in order: its file is the file's rank (labels[rank] names it)
        yield from zip(cols[1], cols[-1], map(make, zip(*cols[2:-1], strict=True)), strict=True)


def _decode(items, labels, fmt, records_mode, acc, ports, names, limits, show_secrets, keylog, strict,
            filter_expr):
    from pyspark import TaskContext

    from kwire_cli.capture.filter import compile_filter
    keep = compile_filter(filter_expr) if filter_expr else None
    ctx = TaskContext.get()
    index = ctx.partitionId() if ctx is not None else 0
    tot = Totals()
    tot.executor_code.add(code_location())
    summ = tot.summary  # positions: the sort key, kwire pcap's row order across all tasks
    uses = None if names is not None else tot.topic_uses
    learned = tot.learned if names is None else {}
    known = names if names is not None else learned  # the answers a row may be named from
    feed_names = records_mode is None  # internal topics' records are decoded with the names known
    out = RowBatcher(fmt)
    check = CodecCheck()  # resynchronisation confirmed by the codec, as in kwire pcap
    stats = CaptureStats()
    seq = 0
    cur = None
    first = 0
    asm: Any = None
    conv: Any = None
    given: set = set()  # topic ids this conversation knows a name for
    fed: list = [-1, []]  # len(known) when ``waiting`` was made; (position, id, name) not given yet, latest first
    fresh: list = []  # (topic id, name) the conversation has just learned

    def row(rec, k):
        pos = k[:4]
        rec["file"] = labels[rec["file"]]
        _name_topics(rec, pos, known, uses)
        summ.add(rec, pos)
        if keep is not None and not keep(rec):
            return None
        tot.rows += 1
        return out.add(rec)

    def meta(v, k):
        tag = v[0]
        if tag == "dmg":
            d = v[1]
            rank = d["file"]
            d["file"] = labels[rank]
            tot.add_damage((rank, d.pop("_pos"), k[3]), d)
        elif tag == "stats":
            tot.stats.merge(v[1])
        elif tag == "fail":
            tot.failures.append(v[1])

    def handle(events, pos):
        nonlocal seq
        for ev in events:
            if ev.__class__ is Note:
                continue  # TLS handshakes: counted in the stats (the driver's summary has no per-connection list)
            seq += 1
            k = (ev.file, -1 if ev.packet is None else ev.packet, index, seq)
            if ev.__class__ is not KafkaFrame:
                meta(("dmg", damage_item(ev, ev.file, pos)), k)
                continue
            if feed_names and known:
                if len(known) != fed[0]:  # answers learned since: what this conversation lacks, by position
                    fed[0] = len(known)
                    fed[1] = sorted(((p, tid, nm) for tid, (p, nm) in known.items() if tid not in given),
                                    reverse=True)
                waiting = fed[1]
                if waiting and waiting[-1][0] < k:
                    new = []
                    while waiting and waiting[-1][0] < k:
                        _, tid, nm = waiting.pop()
                        if tid not in given:
                            given.add(tid)
                            new.append((tid, nm))
                    conv.learn_topic_names(new)
                    fresh.clear()  # learned elsewhere, not from this connection's answers
            rec = conv.row(ev)
            for tid, name in fresh:
                given.add(tid)
                if tid not in learned:
                    learned[tid] = (k, name)
            fresh.clear()
            b = row(rec, k)
            if b is not None:
                yield b

    for conn, m, pkt in items:
        if conn == META:
            seq += 1
            meta(pickle.loads(m), (pkt[0], -1, index, seq))
            continue
        if conn != cur:
            if asm is not None:
                yield from handle(asm.finish(), END + first)
            cur = conn
            first = pkt[1]
            asm = StreamAssembler(broker_ports=ports or None, stats=stats,
                                  max_frame=limits[0] or DEFAULT_MAX_FRAME, check=check, keylog=keylog)
            conv = Conversation(records_mode, on_topic_name=lambda tid, name: fresh.append((tid, name)),
                                show_secrets=show_secrets, strict=strict)
            given = set()
            fed = [-1, []]
            feed = asm.feed
        ev = feed(pkt)
        if ev:
            yield from handle(ev, pkt[1])
    if asm is not None:
        yield from handle(asm.finish(), END + first)
    b = out.flush()
    if b is not None:
        yield b
    tot.stats.merge(stats)
    acc.add(tot)
