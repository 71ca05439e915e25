"""A heavy connection (one that carries much of a job's bytes) decoded on several cores.

A connection is otherwise reassembled and decoded in one task (``stages``), so one busy producer or
consumer would be decoded on one core whatever the cluster. For the connections the job judges
heavy (``job``: from the pre-pass's bytes per connection), the work is cut in two:

1. ``heavy_batches`` (one task per heavy connection): what must see the stream in order. The
   task reads that connection's packets from every read task that holds some (in file and packet
   order; the capture reader, as the read tasks do), reassembles them (TCP, TLS with the key log,
   framing, request/response pairing, KIP-43 SASL tokens: one ``StreamAssembler``) and runs a
   ``SequentialConversation`` over the frames: the frames later rows depend on (``state_frame``:
   SASL, Envelope, the topic-naming answers, JoinGroup/SyncGroup, unpaired answers) are decoded
   here, their rows complete; every other frame is passed on undecoded with what it needs to be
   decoded alone. The items go out in contiguous *chunks* of about ``chunk_bytes`` of frames,
   chunk ``c`` to partition ``c % n`` (``partition_keys``: Spark's hash of the key column lands
   each on its own partition).
2. ``chunk_batches`` (the n partitions, sorted by connection and item order): each chunk decoded
   with its own ``ChunkConversation``, its rows counted into the task's partial summary and
   written, as ``stages`` does with a connection's rows.

What a frame needs from the frames before it, and how it gets it:

* a response, its request's client id and group protocol type: the ``Conversation`` of kwire pcap
  remembers a request only once it has decoded (and not for acks=0), and a response takes the
  latest remembered request with its correlation id. Whether a request decodes is known only by
  decoding it, so the sequential task lists a response's *candidates* (the requests with its
  correlation id since the last answer or give-up, latest first, down to one already decoded
  there) and sends each candidate that lies in an earlier chunk along again as a *context* item in
  the response's chunk: the chunk decodes it (no row) and takes the latest that decoded. A frame
  the sequential task decodes itself takes its request the same way (decoding candidates there).
* topic names (topic ids in bodies, internal topics' records): each chunk starts with the names
  the connection's answers gave before it (``NAMES``), and takes those of the answers inside it
  from their rows; names from other connections come as in ``stages`` (the task's own, then the
  driver's check and, when needed, the second pass with all of them, which covers chunks as it
  covers tasks: each chunk task reports the names it used and lacked by position).
* SASL mechanisms, Envelope requests: only the frames decoded in the sequential task use them.

Not modelled: kwire pcap's limit of 10,000 remembered requests per connection (the assembler drops
requests past the same limit and reports them; a connection with that many open requests is
decoded as if the limit were not there).
"""
from __future__ import annotations

import pickle
from array import array
from collections.abc import Iterator
from itertools import accumulate
from typing import Any, cast

from kwire_cli.capture import DEFAULT_MAX_FRAME, CaptureStats, Damage, KafkaFrame, Packet
from kwire_cli.capture.events import Note
from kwire_cli.capture.pipeline import build_assembler
from kwire_cli.capture.session import ALWAYS_DECODED, Conversation
from kwire_cli.capture.stream import SASL_TOKEN
from kwire_cli.errors import KwireError
from kwire_cli.spark.reading import FilePlan, read_range
from kwire_cli.spark.shipping import executor_setup
from kwire_cli.spark.stages import END, TaskRows, conn_id, conn_name, damage_item, handshake, int_array

# the item kinds (the first element of an item's pickled tuple)
FRAME = 0  # a frame to decode: (FRAME, fields, position, number, candidates, fallback); data in ``data``
CONTEXT = 1  # a request of an earlier chunk a response here may take: (CONTEXT, fields, number)
ROW = 2  # a frame decoded in the sequential task: (ROW, row, position, names it learned)
META = 3  # damage, counters, a failure: (META, item, position)
NAMES = 4  # the names the connection's answers gave before the chunk: (NAMES, {id: (position, name)})

# the frames' columns between the two stages: (name, Spark type, Arrow type name)
FRAME_COLUMNS = (("p", "int", "int32"), ("conn", "bigint", "int64"), ("ord", "bigint", "int64"),
                 ("chunk", "int", "int32"), ("data", "binary", "binary"), ("meta", "binary", "binary"))
CHUNK_SORT_COLUMNS = ("conn", "ord")
BATCH_BYTES = 16 << 20  # frame bytes per Arrow batch out of the sequential task, about
BATCH_ITEMS = 4096
_NO_REQUEST: tuple[Any, Any] = (None, None)


def frame_schema_ddl() -> str:
    return ", ".join(f"{n} {t}" for n, t, _ in FRAME_COLUMNS)


def state_frame(f: KafkaFrame) -> bool:
    """Is ``f`` decoded in the sequential task: later frames depend on what it says (the frames
    kwire pcap decodes whatever a filter says, ``session.ALWAYS_DECODED``, and KIP-43 tokens), or
    it has no api key, version or correlation id to pair by."""
    return (f.api_key is None or f.api_key in ALWAYS_DECODED or f.kind == SASL_TOKEN or f.api_version is None
            or f.correlation_id is None)


def _fields(f: KafkaFrame) -> tuple:
    """A frame without its data (which travels in its own column)."""
    return f[:7] + f[8:]


def _frame(fields: tuple, data: bytes) -> KafkaFrame:
    return KafkaFrame._make(fields[:7] + (data,) + fields[7:])


# ----------------------------------------------------------------------------- the shuffle key
def spark_int_hash(v: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of an int column (Murmur3 x86 32-bit of the 4-byte value, seed 42): what
    its hash partitioning takes modulo the number of partitions."""
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m
    k1 = rotl((v & m) * 0xCC9E2D51 & m, 15) * 0x1B873593 & m
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & m
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & m
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & m
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(n: int) -> list[int]:
    """For each of ``n`` partitions, a key value Spark's ``repartition(n, key)`` sends to it."""
    keys: list[int | None] = [None] * n
    left = n
    v = 0
    while left:
        p = spark_int_hash(v) % n
        if keys[p] is None:
            keys[p] = v
            left -= 1
        v += 1
    return [k for k in keys if k is not None]


# ----------------------------------------------------------------------------- the sequential task
class SequentialConversation(Conversation):
    """The conversation of a heavy connection's sequential task: decodes the state frames, and
    knows, per correlation id, the requests a response may take (``candidates``): those it decoded
    itself with what they remembered, the others (decoded in a chunk) by number, undecided."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.requests: dict[tuple, list] = {}  # (connection, correlation id) -> [[number, info|None, chunk, frame]]
        self.remembered: tuple | None = None

    def remember_request(self, conn: str, corr: int, client_id: str | None,  # noqa: ARG002 - the base's signature
                         protocol_type: str | None) -> None:
        self.remembered = (client_id, protocol_type)

    def take_request(self, conn: str, corr: int | None) -> tuple[Any, Any]:
        """For a frame decoded here: the latest candidate that decodes (deciding them here)."""
        if corr is None:
            return _NO_REQUEST
        for entry in reversed(self.requests.pop((conn, corr), ())):
            if entry[1] is not None:
                return entry[1]
            saved, self.remembered = self.remembered, None
            self.row(entry[3])  # does it decode (and so is remembered)?
            got, self.remembered = self.remembered, saved
            if got is not None:
                return got
        return _NO_REQUEST

    def opened(self, f: KafkaFrame, number: int, info: tuple | None, chunk: int) -> None:
        """A request: decoded here (``info``: what it remembered; None: it did not decode, nothing to
        remember) or left to a chunk (``info`` None, ``chunk`` set)."""
        self.requests.setdefault((f.conn, f.correlation_id), []).append([number, info, chunk, f])

    def candidates(self, f: KafkaFrame) -> list:
        """A response left to a chunk: its candidates, latest first, down to the first decided one
        (the list's last item is then its info; else ``None``)."""
        out: list = []
        for entry in reversed(self.requests.pop((f.conn, f.correlation_id), ())):
            if entry[1] is not None:
                out.append(entry[1])
                return out
            out.append(entry)
        out.append(None)
        return out

    def give_up(self, conn: str, corrs) -> None:
        """Requests the assembler gave up (kwire pcap's conversation forgets them)."""
        for c in corrs:
            self.requests.pop((conn, c), None)


def heavy_items(conn: int, holders: list[int], reports: frozenset, tasks: list, plans: list[FilePlan],
                index: int, chunk_bytes: int, ports: tuple, limits: tuple, keylog: Any, records_mode: str | None,
                show_secrets: bool, strict: bool) -> Iterator[tuple]:
    """The sequential part of one heavy connection: (chunk, item, data) in order (items above)."""
    stats = CaptureStats()
    asm = build_assembler(broker_ports=ports or None, stats=stats, max_frame=limits[0] or DEFAULT_MAX_FRAME,
                          keylog=keylog)
    fresh: list = []
    conv = SequentialConversation(records_mode, on_topic_name=lambda tid, name: fresh.append((tid, name)),
                                  show_secrets=show_secrets, strict=strict)
    names: dict = {}  # topic id -> (position, name) of the connection's first answer naming it
    seq = 0
    number = 0  # frames so far
    done = 0    # frame bytes so far
    chunk = 0
    sent: set = set()  # context items already in this chunk
    first = None

    def handle(events, pos):
        nonlocal seq, number, done, chunk
        for ev in events:
            seq += 1
            k = (ev.file, -1 if ev.packet is None else ev.packet, index, seq)
            if ev.__class__ is Note:
                if ev.kind == "tls":
                    yield chunk, (META, handshake(ev), k), None
                continue
            if ev.__class__ is not KafkaFrame:
                if ev.corrs and ev.conn is not None:
                    conv.give_up(ev.conn, ev.corrs)
                yield chunk, (META, ("dmg", damage_item(ev, ev.file, pos)), k), None
                continue
            number += 1
            c = done // chunk_bytes
            done += ev.size
            if c != chunk:
                chunk = c
                sent.clear()
                yield chunk, (NAMES, dict(names)), None
            if state_frame(ev):
                conv.remembered = None
                rec = conv.row(ev)
                if ev.kind == "request" and conv.remembered is not None:
                    conv.opened(ev, number, conv.remembered, chunk)
                learned = list(fresh)
                fresh.clear()
                for tid, name in learned:
                    names.setdefault(tid, (k, name))
                yield chunk, (ROW, rec, k, learned), None
            elif ev.kind == "request":
                if ev.acks != 0:
                    conv.opened(ev, number, None, chunk)
                yield chunk, (FRAME, _fields(ev), k, number, None, None), ev.data
            else:
                cands = conv.candidates(ev)
                fallback = cands.pop()
                for entry in cands:
                    if entry[2] != chunk and entry[0] not in sent:
                        sent.add(entry[0])
                        yield chunk, (CONTEXT, _fields(entry[3]), entry[0]), entry[3].data
                yield chunk, (FRAME, _fields(ev), k, number, [e[0] for e in cands], fallback), ev.data

    for t in holders:
        rank, range_no, rng = tasks[t]
        report = t in reports
        rstats = CaptureStats()
        mine: dict = {}
        try:
            for item in read_range(plans[rank], rank, rng, range_no, rstats):
                if item.__class__ is Packet:
                    m = mine.get(item[3:7])
                    if m is None:
                        m = mine[item[3:7]] = conn_id(conn_name(item[3:7])) == conn
                    if m:
                        if first is None:
                            first = item[1]
                        ev = asm.feed(item)
                        if ev:
                            yield from handle(ev, item[1])
                elif report:
                    seq += 1
                    d = cast(Damage, item)
                    dmg = damage_item(d, rank, d.packet or 0)
                    yield chunk, (META, ("dmg", dmg), (rank, -1, index, seq)), None
        except KwireError as e:
            if report:
                msg = str(e)
                label = plans[rank].label
                seq += 1
                yield chunk, (META, ("fail", msg if label in msg else f"{label}: {msg}"), (rank, -1, index, seq)), None
        if report:
            seq += 1
            yield chunk, (META, ("stats", rstats), (rank, -1, index, seq)), None
    yield from handle(asm.finish(), END + (first or 0))
    yield chunk, (META, ("stats", stats), (0, -1, index, seq + 1)), None


def _binary_array(pa, values):
    """bytes-like values -> an Arrow binary array, its buffers made directly."""
    offsets = array("i", [0])
    offsets.extend(accumulate(map(len, values)))
    return pa.Array.from_buffers(pa.binary(), len(values),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


def _items_batch(pa, conn: int, start: int, rows: list):
    """Items ``start``.. of a heavy connection -> an Arrow batch (``FRAME_COLUMNS``)."""
    ps, chunks, datas, metas = zip(*rows, strict=True)
    n = len(rows)
    return pa.RecordBatch.from_arrays(
        [int_array(pa, pa.int32(), "i", list(ps)), int_array(pa, pa.int64(), "q", [conn] * n),
         int_array(pa, pa.int64(), "q", list(range(start, start + n))), int_array(pa, pa.int32(), "i", list(chunks)),
         _binary_array(pa, datas), _binary_array(pa, metas)],
        names=[c for c, _, _ in FRAME_COLUMNS])


def heavy_batches(batches, specs: list, tasks: list, plans: list[FilePlan], keys: list[int], index_base: int,
                  specs_name: str | None, ports: tuple, limits: tuple, keylog: Any, records_mode: str | None,
                  show_secrets: bool, strict: bool) -> Iterator[Any]:
    """The sequential tasks in ``mapInArrow``: batches of heavy connection numbers (``specs[n]``:
    its id, the read tasks holding it, those whose damage and counters it reports, its chunk
    size) -> Arrow batches of items (``FRAME_COLUMNS``), chunk ``c`` keyed for partition ``c % n``."""
    import pyarrow as pa

    from kwire_cli.render.jsonlines import gc_tuned
    executor_setup(specs_name, limits)
    n = len(keys)
    dumps = pickle.dumps
    with gc_tuned():
        for b in batches:
            for h in b.column(0).to_pylist():
                conn, holders, reports, chunk_bytes = specs[h]
                rows: list = []
                size = 0
                start = 0
                for chunk, item, data in heavy_items(conn, holders, frozenset(reports), tasks, plans, index_base + h,
                                                     chunk_bytes, ports, limits, keylog, records_mode, show_secrets,
                                                     strict):
                    rows.append((keys[chunk % n], chunk, b"" if data is None else data,
                                 dumps(item, protocol=pickle.HIGHEST_PROTOCOL)))
                    size += 0 if data is None else len(data)
                    if size >= BATCH_BYTES or len(rows) >= BATCH_ITEMS:
                        yield _items_batch(pa, conn, start, rows)
                        start += len(rows)
                        rows = []
                        size = 0
                if rows:
                    yield _items_batch(pa, conn, start, rows)


# ----------------------------------------------------------------------------- the chunk tasks
class ChunkConversation(Conversation):
    """A chunk's conversation: a request remembers by its number (``outcome``), a response takes
    the latest of its candidates that decoded (in this chunk, or as a context item), else what the
    sequential task decided (``fallback``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.outcome: dict[int, tuple | None] = {}
        self.number = 0
        self.cands: list = []
        self.fallback: tuple[Any, Any] = _NO_REQUEST

    def remember_request(self, conn: str, corr: int, client_id: str | None,  # noqa: ARG002 - the base's signature
                         protocol_type: str | None) -> None:
        self.outcome[self.number] = (client_id, protocol_type)

    def take_request(self, conn: str, corr: int | None) -> tuple[Any, Any]:  # noqa: ARG002 - the base's signature
        outcome = self.outcome
        for n in self.cands:
            if n not in outcome:
                raise RuntimeError(f"split decoding: request {n} of a response's candidates was not decoded")
            got = outcome[n]
            if got is not None:
                return got
        return self.fallback if self.fallback is not None else _NO_REQUEST


def chunk_batches(batches, labels: list[str], fmt: str, records_mode: str | None, specs_name: str | None, acc,
                  names: dict | None = None, limits: tuple = (None, None, None), show_secrets: bool = False,
                  strict: bool = False, filter_expr: str | None = None, write_to: str | None = None,
                  summary: bool = True) -> Iterator[Any]:
    """The chunk tasks in ``mapInArrow``: items sorted by (connection, order) -> Arrow batches of
    output rows (``names``, ``write_to``: as in ``stages.decode_batches``)."""
    from kwire_cli.render.jsonlines import gc_tuned
    executor_setup(specs_name, limits)
    loads = pickle.loads
    with gc_tuned():
        out = TaskRows(labels, fmt, records_mode, names, filter_expr, write_to, summary)
        cur = None
        conv: Any = None
        for b in batches:
            cols = b.columns
            for c, ch, data, m in zip(cols[1].to_pylist(), cols[3].to_pylist(), cols[4].to_pylist(),
                                      cols[5].to_pylist(), strict=True):
                if (c, ch) != cur:
                    cur = (c, ch)
                    conv = ChunkConversation(records_mode, on_topic_name=out.on_topic_name, show_secrets=show_secrets,
                                             strict=strict)
                    out.start(conv)
                item = loads(m)
                kind = item[0]
                if kind == FRAME:
                    _, fields, k, number, cands, fallback = item
                    f = _frame(fields, data)
                    if f.kind == "request":
                        conv.outcome[number] = None
                        conv.number = number
                    else:
                        conv.cands = cands
                        conv.fallback = fallback
                    got = out.frame(f, k)
                    if got is not None:
                        yield got
                elif kind == CONTEXT:
                    conv.outcome[item[2]] = None
                    conv.number = item[2]
                    conv.row(_frame(item[1], data))  # does it decode (is it remembered)? no row
                elif kind == ROW:
                    _, rec, k, learned = item
                    if learned:
                        conv.learn_topic_names(learned)
                        out.learned_now(k)
                    got = out.row(rec, k)
                    if got is not None:
                        yield got
                elif kind == META:
                    out.meta(item[1], item[2])
                else:  # NAMES
                    if names is None:
                        for tid, pn in item[1].items():
                            out.learn(tid, pn)
        yield from out.finish(acc)
