"""The stages of the spark-decode job, as functions the executors run (``mapInArrow``).

0. ``task_connections`` (the pre-pass, when there are several read tasks): the connections whose
   packets one read task holds, from the packet, IP and TCP headers only (``reading.range_connections``;
   the capture reader where that scan does not answer). The driver finds those in more than one
   task (a connection cut across rotated files or byte ranges: *shared*); all others are *local*
   to their task.
1. ``local_batches``: one read task's local connections, reassembled and decoded in the task itself,
   as ``kwire pcap`` does over those bytes: capture reader -> one ``StreamAssembler`` -> one
   ``Conversation`` -> output rows as Arrow batches (no Arrow packets, no shuffle). The task's
   damage, failure and counters are reported here.
2. ``read_batches``: the packets of the shared connections of one byte range of one capture file (or
   a whole small / gzip file) per task -> Arrow batches of ``Packet``s keyed by connection (``h``
   its hash, ``conn``), plus, for a task with no local connections, the file's damage, failure and
   counters as meta items (``conn`` empty, the item pickled in ``meta``). Spark shuffles them by
   ``h`` and sorts each partition by (h, conn, file rank, packet number): the payload bytes cross
   this one shuffle, in Spark's own row format.
3. ``decode_batches``: the packets of some shared connections, each connection through its own
   ``StreamAssembler`` (a connection split across rotated files is reassembled as one) and its own
   ``Conversation``, which turns every frame into its output row, as ``kwire pcap`` does; the rows
   leave as Arrow batches in the output schema (``spark.rows.RowBatcher``), built once.

In 1 and 3 each row is counted into the task's partial ``Summary``; damage, counters, failures and
the topic names learned go to the task's ``Totals`` (an accumulator).

Topic ids (Fetch v13+, ...) are named from Metadata-like answers on any connection before the frame.
A task knows the answers of its own connections: ``names=None`` names ids from those and records,
per id, the latest row that found no name (``Totals.topic_uses``); the driver then checks them
against every answer of the job (``topics_agree``) and, where a row found no name that an answer
on another task's connection gave earlier (or answers gave an id two names), runs the stage again
with all of them (``names``): the rows are those of the single pass kwire pcap makes.

Every item carries a sort key whose first four parts order it as ``kwire pcap`` emits it: (file
rank, packet number, partition, sequence).
"""
from __future__ import annotations

import hashlib
import pickle
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, cast

from kwire_cli.capture import DEFAULT_MAX_FRAME, CaptureStats, Damage, KafkaFrame, Packet
from kwire_cli.capture.events import Note
from kwire_cli.capture.pipeline import CODEC, build_assembler, frame_check
from kwire_cli.capture.session import Conversation
from kwire_cli.capture.summary import damage_entry
from kwire_cli.errors import KwireError
from kwire_cli.spark.direct import LineFiles, task_part
from kwire_cli.spark.reading import FilePlan, index_range, range_connections, read_range
from kwire_cli.spark.rows import RowBatcher
from kwire_cli.spark.shipping import code_location, executor_setup
from kwire_cli.spark.totals import Totals

END = 1 << 62  # position of events at the end of a file (after its last packet)
META = ""      # the connection of meta items (damage, failures, counters of a read task)
LOCAL = "-"    # the connection of packets decoded in their read task (one assembler for all of them)
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


def conn_id(conn: str) -> int:
    """A connection's id between the tasks and the driver (64 bits of its key's hash: the same in
    every process, unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(conn.encode(), digest_size=8).digest(), "big", signed=True)


def conn_name(four: tuple) -> str:
    """The direction-free connection of a packet's (src ip, src port, dst ip, dst port)."""
    a, b = four[:2], four[2:]
    return "%s|%d|%s|%d" % (a + b if a <= b else b + a)


def task_connections(task: tuple, plans: list[FilePlan]) -> list[tuple[int, int]]:
    """The pre-pass: the connections (``conn_id``) one read task's packets belong to, each with its
    packets' captured TCP bytes in the task (the payload bytes where the reader answers). The driver
    counts, per connection, the tasks that hold its packets: a connection of one task is reassembled
    and decoded in that task (``local_batches``), the others go through the shuffle; and it adds up
    their bytes: a heavy connection's frames are decoded on several cores (``heavy_batches``)."""
    rank, range_no, rng = task
    seen = range_connections(plans[rank], rng)  # from the packet, IP and TCP headers only
    if seen is None:  # what the header scan does not answer exactly (gzip, ...): the whole reader
        seen = {}
        try:
            for item in read_range(plans[rank], rank, rng, range_no, CaptureStats()):
                if item.__class__ is Packet:
                    k = item[3:7]
                    seen[k] = seen.get(k, 0) + len(item[10])
        except KwireError:
            pass  # reported by the read itself
    ids: dict[int, int] = {}
    for t, n in seen.items():
        c = conn_id(conn_name(t))
        ids[c] = ids.get(c, 0) + n
    return sorted(ids.items())


def connection_batches(batches, tasks: list, plans: list[FilePlan]) -> Iterator[Any]:
    """The pre-pass in ``mapInArrow`` (as the read and decode stages are, so that the Python workers
    it starts are the ones those stages reuse: an RDD job's workers come from another daemon, which
    imports pyspark, pyarrow and kwire all over again): batches of task numbers -> Arrow batches of
    (task, connection id, bytes), one row per connection of the task."""
    import pyarrow as pa
    for b in batches:
        for t in b.column(0).to_pylist():
            found = task_connections(tasks[t], plans)
            if found:
                yield pa.RecordBatch.from_arrays(
                    [int_array(pa, pa.int32(), "i", [t] * len(found)),
                     int_array(pa, pa.int64(), "q", [c for c, _ in found]),
                     int_array(pa, pa.int64(), "q", [n for _, n in found])],
                    names=["task", "conn", "bytes"])


def boundary_batches(batches, probes: list, plans: list[FilePlan], cuts: dict) -> Iterator[Any]:
    """The index job in ``mapInArrow`` (the same Python workers as the later stages, see
    ``connection_batches``): batches of probe numbers -> one row per probe: the file's rank and
    ``index_range``'s answer for its range (a boundary not found: -1; the flag as 0 or 1)."""
    import pyarrow as pa
    for b in batches:
        for n in b.column(0).to_pylist():
            rank, i = probes[n]
            r = index_range(plans[rank], i, cuts[rank])
            values = [rank, r[0], -1 if r[1] is None else r[1], r[2], r[3], int(r[4])]
            yield pa.RecordBatch.from_arrays([int_array(pa, pa.int64(), "q", [v]) for v in values],
                                             names=list(BOUNDARY_COLUMNS))


BOUNDARY_COLUMNS = ("rank", "range", "boundary", "chain_end", "packets", "headers_after")


def boundaries_of(rows: Iterable[tuple]) -> dict[int, list[tuple]]:
    """``boundary_batches``' rows -> per file rank, ``index_range``'s answers."""
    by_file: dict[int, list[tuple]] = {}
    for rank, i, boundary, end, packets, after in rows:
        by_file.setdefault(rank, []).append((i, None if boundary < 0 else boundary, end, packets, bool(after)))
    return by_file


def int_array(pa, typ, code: str, values: list[int]):
    """An Arrow integer array made from its buffer (``pa.array`` imports pandas, 0.7 s a worker)."""
    from array import array
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(array(code, values))])


def read_task(task: tuple, plans: list[FilePlan], shared: frozenset | None = None,
              with_meta: bool = True) -> Iterator[tuple]:
    """Stage 1: one range of one file -> packet rows (``PACKET_COLUMNS``) and meta rows.

    ``shared``: only the packets of these connections (``conn_id``; None: all of them);
    ``with_meta``: the task's damage, failure and counters too (False: the task's local decoding
    reports them)."""
    rank, range_no, rng = task
    plan = plans[rank]
    stats = CaptureStats()
    seq = 0
    h_meta = (rank * 131 + range_no) & 0x7FFFFFFF

    def meta(item) -> tuple:
        return (h_meta, META, rank, seq, None, None, None, None, None, None, None, None, None, None,
                pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
    conns: dict = {}  # (src ip, port, dst ip, port) -> (hash, connection), or () if not shuffled
    try:
        for item in read_range(plan, rank, rng, range_no, stats):
            if item.__class__ is Packet:
                hc = conns.get(item[3:7])
                if hc is None:
                    c = conn_name(item[3:7])
                    hc = conns[item[3:7]] = (_conn_hash(c), c, rank) \
                        if shared is None or conn_id(c) in shared else ()
                if hc:
                    yield hc + item[1:] + (None,)
            elif with_meta:
                d = cast(Damage, item)
                seq += 1
                yield meta(("dmg", damage_item(d, rank, d.packet or 0)))
    except KwireError as e:
        if with_meta:
            msg = str(e)
            seq += 1
            yield meta(("fail", msg if plan.label in msg else f"{plan.label}: {msg}"))
    if with_meta:
        seq += 1
        yield meta(("stats", stats))


def local_items(task: tuple, plans: list[FilePlan], shared: frozenset) -> Iterator[tuple]:
    """The items of ``_decode`` for one read task's own connections (those not in ``shared``), in
    the reader's order, without Arrow or pickling: (LOCAL, None, Packet) and the task's damage,
    failure and counters as (META, item, (rank,))."""
    rank, range_no, rng = task
    plan = plans[rank]
    stats = CaptureStats()
    where = (rank,)
    conns: dict = {}  # (src ip, port, dst ip, port) -> decoded here?
    try:
        for item in read_range(plan, rank, rng, range_no, stats):
            if item.__class__ is Packet:
                if not shared:  # every connection of the task is its own (a file of its own: the usual case)
                    yield LOCAL, None, item
                    continue
                mine = conns.get(item[3:7])
                if mine is None:
                    mine = conns[item[3:7]] = conn_id(conn_name(item[3:7])) not in shared
                if mine:
                    yield LOCAL, None, item
            else:
                d = cast(Damage, item)
                yield META, ("dmg", damage_item(d, rank, d.packet or 0)), where
    except KwireError as e:
        msg = str(e)
        yield META, ("fail", msg if plan.label in msg else f"{plan.label}: {msg}"), where
    yield META, ("stats", stats), where


def read_batches(batches, tasks: list, plans: list[FilePlan], shared: frozenset | None = None,
                 quiet: frozenset = frozenset(), which: list | None = None) -> Iterator[Any]:
    """Stage 1 in ``mapInArrow``: batches of numbers (``which[n]``: a task's number; None: n itself)
    -> Arrow batches of packets (of the ``shared`` connections; None: all; the tasks in ``quiet``
    without their meta items)."""
    import pyarrow as pa
    schema = _packet_arrow_schema()
    types = [f.type for f in schema]
    names = schema.names

    def batch(rows):
        cols = list(zip(*rows, strict=True))
        return pa.RecordBatch.from_arrays([pa.array(c, type=t) for c, t in zip(cols, types, strict=True)], names=names)
    for b in batches:
        for i in b.column(0).to_pylist():
            t = i if which is None else which[i]
            rows: list = []
            for r in read_task(tasks[t], plans, shared, t not in quiet):
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


def handshake(note: Note) -> tuple:
    """A TLS handshake's note as a meta item (``TaskRows.meta``)."""
    return ("tls", {"conn": note.conn, "detail": note.detail})


def _name_topics(rec: dict, pos: tuple, names: dict, uses: dict | None) -> None:
    """Name the row's still unnamed topic ids from ``names`` learned before ``pos``; ``uses``
    (the first pass, ``names`` this task's own): per id, the latest row that found no name
    (``topics_agree`` checks them against all answers). A name the conversation gave (its
    connection's own answers, or names given it before) is kept."""
    tn = rec.get("topic_names")
    if not tn:
        return
    for tid, name in tn.items():
        if name is not None:
            continue
        known = names.get(tid)
        if known is not None and known[0] < pos:
            tn[tid] = known[1]
        elif uses is not None:
            u = uses.get(tid)
            if u is None or pos > u:
                uses[tid] = pos


def topics_agree(learned: dict, uses: dict, renamed: frozenset | set = frozenset()) -> bool:
    """Did the first pass name every topic id as all the answers of the job name it? (``learned``:
    ``{id: (position, name)}``, the earliest answer of each id; ``uses``: ``Totals.topic_uses``, the
    latest row of each id that found no name; ``renamed``: ids that answers gave more than one
    name, ``Totals.renamed``.)

    While every id has one name, a row named from any answer before it (its conversation's own, or
    one its task learned) has the name kwire pcap gives it; only a row that found none, where an
    answer came earlier, differs. Answers that name an id twice differently: not asked (False)."""
    if renamed:
        return False
    for tid, missed in uses.items():
        first = learned.get(tid)
        if first is not None and missed > first[0]:
            return False
    return True


def decode_batches(batches, labels: list[str], fmt: str, records_mode: str | None, specs_name: str | None,
                   acc, ports: tuple = (), names: dict | None = None, limits: tuple = (None, None, None),
                   show_secrets: bool = False, keylog: Any = None, strict: bool = False,
                   filter_expr: str | None = None, write_to: str | None = None, summary: bool = True) -> Iterator[Any]:
    """Stage 2 in ``mapInArrow``: sorted packet batches -> Arrow batches of output rows (``write_to``:
    the lines written there, ``direct.LineFiles``, and the batch of their names; ``summary``
    False: only the run's counts, ``RunCounts``).

    ``names``: every topic id the job learned, ``{id: (position, name)}`` (the second pass), or
    None: this task's own answers, their uses recorded for ``topics_agree``.
    Runs with kwire pcap's garbage-collector tuning (decoded trees are large and acyclic)."""
    from kwire_cli.render.jsonlines import gc_tuned
    executor_setup(specs_name, limits)
    with gc_tuned():
        yield from _decode(_packets(batches), labels, fmt, records_mode, acc, ports, names, limits, show_secrets,
                           keylog, strict, filter_expr, write_to=write_to, summary=summary)


def local_batches(batches, which: list, tasks: list, plans: list[FilePlan], shared: frozenset, labels: list[str],
                  fmt: str,
                  records_mode: str | None, specs_name: str | None, acc, ports: tuple = (),
                  names: dict | None = None, limits: tuple = (None, None, None), show_secrets: bool = False,
                  keylog: Any = None, strict: bool = False, filter_expr: str | None = None,
                  write_to: str | None = None, summary: bool = True) -> Iterator[Any]:
    """Read and decode in one ``mapInArrow``, for the connections whose packets are all in one read
    task (not in ``shared``): batches of numbers (``which[n]``: a task's number) -> the tasks' own
    packets, straight from the capture reader into one ``StreamAssembler`` and one ``Conversation``
    per task (kwire pcap's path over the task's bytes) -> Arrow batches of output rows. The task's
    damage, failure and counters are reported here (its shared connections' packets go through the
    shuffle without them)."""
    from kwire_cli.render.jsonlines import gc_tuned
    executor_setup(specs_name, limits)
    with gc_tuned():
        for b in batches:
            for t in map(which.__getitem__, b.column(0).to_pylist()):
                yield from _decode(local_items(tasks[t], plans, shared), labels, fmt, records_mode, acc, ports, names,
                                   limits, show_secrets, keylog, strict, filter_expr, index=-1 - t, write_to=write_to,
                                   summary=summary)


_MAKE_PACKET = Packet._make


def _packets(batches) -> Iterator[tuple]:
    """(connection, meta, Packet) of each row of the sorted packet batches."""
    make = _MAKE_PACKET
    for b in batches:
        cols = [c.to_pylist() for c in b.columns]
        # the Packet's fields, in order: its file is the file's rank (labels[rank] names it)
        yield from zip(cols[1], cols[-1], map(make, zip(*cols[2:-1], strict=True)), strict=True)


class TaskRows:
    """What a decode task does with its frames and meta items, into its ``Totals``: each frame's row
    (``frame``: the topic names learned elsewhere given to the conversation by position, the
    codec's row, the names the conversation learns), each row named, counted into the partial
    summary, filtered and batched (``row``); damage, counters and failures (``meta``). One per
    task; ``start`` with each new conversation (``_decode``'s connections, ``split``'s chunks).

    ``names``: every topic id the job learned (the second pass), or None: this task's own answers,
    their uses recorded for ``topics_agree``."""

    def __init__(self, labels: list[str], fmt: str, records_mode: str | None, names: dict | None,
                 filter_expr: str | None, write_to: str | None = None, summary: bool = True) -> None:
        from kwire_cli.capture.filter import compile_filter
        self.keep = compile_filter(filter_expr) if filter_expr else None
        self.labels = labels
        self.tot = tot = Totals()
        if not summary:  # the run's counts only (frames, undecodable, record batches), as kwire pcap's JSON lines
            from kwire_cli.capture.summary import RunCounts
            tot.summary = RunCounts()
        tot.executor_code.add(code_location())
        self.summ = tot.summary  # positions: the sort key, kwire pcap's row order across all tasks
        self.uses = None if names is not None else tot.topic_uses
        self.known = names if names is not None else tot.learned  # the answers a row may be named from
        self.feed_names = records_mode is None  # internal topics' records are decoded with the names known
        self.out: Any = RowBatcher(fmt) if write_to is None else LineFiles(write_to, task_part())
        self.conv: Any = None
        self.given: set = set()  # topic ids this conversation knows a name for
        self.version = 0  # changes of the answers the task learned (``learn``)
        self.fed: list = [-1, []]  # ``version`` when ``waiting`` was made; (position, id, name) not given yet
        self.fresh: list = []  # (topic id, name) the conversation has just learned

    def on_topic_name(self, tid: str, name: str) -> None:
        """A conversation's ``on_topic_name``."""
        self.fresh.append((tid, name))

    def start(self, conv) -> None:
        """A new conversation (made with ``on_topic_name=self.on_topic_name``)."""
        self.conv = conv
        self.given = set()
        self.fed = [-1, []]

    def row(self, rec: dict, k: tuple):
        """A row at position ``k``: named, counted, filtered; an Arrow batch when one is full."""
        pos = k[:4]
        rec["file"] = self.labels[rec["file"]]
        _name_topics(rec, pos, self.known, self.uses)
        self.summ.add(rec, pos)
        if self.keep is not None and not self.keep(rec):
            return None
        self.tot.rows += 1
        return self.out.add(rec)

    def meta(self, v: tuple, k: tuple) -> None:
        tag = v[0]
        tot = self.tot
        if tag == "dmg":
            d = v[1]
            rank = d["file"]
            d["file"] = self.labels[rank]
            tot.add_damage((rank, d.pop("_pos"), k[3]), d)
        elif tag == "stats":
            tot.stats.merge(v[1])
        elif tag == "fail":
            tot.failures.append(v[1])
        elif tag == "tls":
            tot.add_handshake(k, v[1])

    def feed(self, k: tuple) -> None:
        """Give the conversation the answers learned before ``k`` that it lacks."""
        known = self.known
        if not (self.feed_names and known):
            return
        fed = self.fed
        given = self.given
        if self.version != fed[0]:  # answers learned since: what this conversation lacks, by position
            fed[0] = self.version
            fed[1] = sorted(((p, tid, nm) for tid, (p, nm) in known.items() if tid not in given), reverse=True)
        waiting = fed[1]
        if waiting and waiting[-1][0] < k:
            new = []
            while waiting and waiting[-1][0] < k:
                _, tid, nm = waiting.pop()
                if tid not in given:
                    given.add(tid)
                    new.append((tid, nm))
            self.conv.learn_topic_names(new)
            self.fresh.clear()  # learned elsewhere, not from this connection's answers

    def learn(self, tid: str, pn: tuple) -> None:
        """An answer's name (``Totals.learn``: the earliest of each id, whichever connection the task
        decoded first; ``split``'s chunks are told those before them)."""
        if self.tot.learn(tid, pn) and self.known is self.tot.learned:
            self.version += 1  # (the second pass names from the job's answers: nothing to feed again)

    def learned_now(self, k: tuple) -> None:
        """The names the conversation has just learned from an answer at ``k``."""
        for tid, name in self.fresh:
            self.given.add(tid)
            self.learn(tid, (k, name))
        self.fresh.clear()

    def frame(self, ev: KafkaFrame, k: tuple):
        """A Kafka frame at position ``k`` -> its row (``row``, in line: one call per frame less)."""
        if self.feed_names and self.known:
            self.feed(k)
        rec = self.conv.row(ev)
        if self.fresh:
            self.learned_now(k)
        pos = k[:4]
        rec["file"] = self.labels[rec["file"]]
        if rec.get("topic_names"):
            _name_topics(rec, pos, self.known, self.uses)
        self.summ.add(rec, pos)
        if self.keep is not None and not self.keep(rec):
            return None
        self.tot.rows += 1
        return self.out.add(rec)

    def finish(self, acc, stats: CaptureStats | None = None) -> Iterator[Any]:
        """The last batch (written directly: the batch of the files' names); the task's totals (and
        ``stats``) to the accumulator."""
        b = self.out.finish()
        if b is not None:
            yield b
        if stats is not None:
            self.tot.stats.merge(stats)
        acc.add(self.tot)


def _decode(items, labels, fmt, records_mode, acc, ports, names, limits, show_secrets, keylog, strict,
            filter_expr, index: int | None = None, write_to: str | None = None, summary: bool = True):
    """(connection, meta, packet) items -> Arrow batches of rows; ``index`` (default: the Spark
    partition's) orders the task's items after file and packet number (local tasks: negative)."""
    if index is None:
        index = task_part()
    out = TaskRows(labels, fmt, records_mode, names, filter_expr, write_to, summary)
    check = frame_check(CODEC)  # resynchronisation confirmed by the codec, as in kwire pcap (one for every connection)
    stats = CaptureStats()
    seq = 0
    cur = None
    first = 0
    asm: Any = None

    def handle(events, pos):
        nonlocal seq
        for ev in events:
            seq += 1
            k = (ev.file, -1 if ev.packet is None else ev.packet, index, seq)
            if ev.__class__ is Note:
                if ev.kind == "tls":  # a handshake: the summary's list, each connection's TLS version
                    out.meta(handshake(ev), k)
                continue
            if ev.__class__ is not KafkaFrame:
                out.meta(("dmg", damage_item(ev, ev.file, pos)), k)
                continue
            b = out.frame(ev, k)
            if b is not None:
                yield b

    for conn, m, pkt in items:
        if conn == META:
            seq += 1
            out.meta(pickle.loads(m) if m.__class__ is bytes else m, (pkt[0], -1, index, seq))
            continue
        if conn != cur:
            if asm is not None:
                yield from handle(asm.finish(), END + first)
            cur = conn
            first = pkt[1]
            asm = build_assembler(broker_ports=ports or None, stats=stats,
                                  max_frame=limits[0] or DEFAULT_MAX_FRAME, check=check, keylog=keylog)
            out.start(Conversation(records_mode, on_topic_name=out.on_topic_name, show_secrets=show_secrets,
                                   strict=strict))
            feed = asm.feed
        ev = feed(pkt)
        if ev:
            yield from handle(ev, pkt[1])
    if asm is not None:
        yield from handle(asm.finish(), END + first)
    yield from out.finish(acc, stats)
