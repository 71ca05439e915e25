"""The three stages of the spark-decode job, as functions the executors run.

1. ``read_task``: one byte range of one capture file (or a whole small / gzip file) -> ``Packet``s keyed
   by connection (``conn_key``), plus the file's damage, failure and counters as meta items.
2. ``assemble_partition``: the packets of some connections, sorted by (file order, packet number),
   each connection through its own ``StreamAssembler`` (a connection split across rotated files is
   reassembled as one). Frames that need per-connection context (non-Produce requests,
   Metadata-like answers, SASL and Envelope answers, unpaired responses) are turned into rows here
   by the connection's ``Conversation``; the others (Produce requests and the other responses: the
   bulk of the bytes) leave as frames with the context they need (the request's client id and
   protocol type) and are spread evenly over the decode partitions. Topic names learned from
   answers on every connection go to an accumulator.
3. ``decode_partition``: frames -> rows, their topic ids named from the names every connection
   learned before them; each row counted into the task's partial ``Summary``; damage, counters and
   failures added to the task's ``Totals`` (an accumulator of result tasks: each counted exactly once).

Every item carries a sort key whose first four parts order it as ``kwire pcap`` emits it: (file
rank, packet number, partition, sequence).
"""
from __future__ import annotations

import heapq
import zlib
from collections.abc import Iterator
from typing import Any, cast

from kwire_cli.capture import DEFAULT_MAX_FRAME, CaptureStats, Damage, KafkaFrame, Packet, StreamAssembler, conn_key
from kwire_cli.capture.check import CodecCheck
from kwire_cli.capture.events import Note
from kwire_cli.capture.session import Conversation
from kwire_cli.capture.summary import damage_entry
from kwire_cli.codec.secrets import CONTEXT_APIS
from kwire_cli.errors import KwireError
from kwire_cli.spark.reading import FilePlan, read_range
from kwire_cli.spark.rows import to_row
from kwire_cli.spark.shipping import code_location, executor_setup
from kwire_cli.spark.totals import Totals

PRODUCE = 0
TOPIC_MAP_APIS = frozenset({3, 19, 75})  # Metadata, CreateTopics, DescribeTopicPartitions (session.TOPIC_NAMING_APIS)
# answers decoded by their connection's Conversation: those that name topics, and those whose
# redaction needs the connection (SaslAuthenticate: the mechanism; Envelope: the forwarded request)
CONTEXT_RESPONSE_APIS = TOPIC_MAP_APIS | CONTEXT_APIS
END = 1 << 62  # position of events at the end of a file (after its last packet)
META = ("",)   # the connection of meta items (damage, failures, counters of a read task)
_FILE_AT = KafkaFrame._fields.index("file")


def _conn_hash(conn: tuple) -> int:
    return zlib.crc32(("%s|%d|%s|%d" % conn).encode())


def read_task(task: tuple, plans: list[FilePlan]) -> Iterator[tuple]:
    """Stage 1: one range of one file -> ((hash, conn, rank, packet number), packet fields) and meta items."""
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
                d = cast(Damage, item)
                seq += 1
                yield (h_meta, META, rank, seq), ("dmg", damage_item(d, rank, d.packet or 0))
    except KwireError as e:
        msg = str(e)
        seq += 1
        yield (h_meta, META, rank, seq), ("fail", msg if plan.label in msg else f"{plan.label}: {msg}")
    seq += 1
    yield (h_meta, META, rank, seq), ("stats", stats)


def damage_item(d: Damage, rank: int, pos) -> dict:
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
                       limits: tuple = (None, None, None), show_secrets: bool = False,
                       keylog: Any = None, strict: bool = False) -> Iterator[tuple]:
    """Stage 2: sorted packets of some connections -> frames (with context), rows, damage.

    Each item leaves keyed (file rank, packet, this partition, seq, decode partition): the first
    four order it as kwire pcap emits it; the last spreads the frames over the ``nout`` decode
    partitions by size (least loaded first), so that the decode stage is balanced whatever the
    connections: one busy connection does not pin one core.

    Topic ids learned from Metadata-like answers go to ``names_acc`` as ``{id: (position, name)}``
    (the earliest position wins, so a recomputed task adds nothing new): the decode stage names the
    ids of every frame from all connections' answers seen before it, as kwire pcap does."""
    executor_setup(specs_name, limits)
    check = CodecCheck()  # resynchronisation confirmed by the codec, as in kwire pcap
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

    def key(rank, packet, weight=64):
        nonlocal seq
        seq += 1
        load, tie, target = loads[0]
        heapq.heapreplace(loads, (load + weight, tie, target))
        return (rank, -1 if packet is None else packet, index, seq, target)

    def handle(events, pos):
        for ev in events:
            if ev.__class__ is Note:
                continue  # TLS handshakes: counted in the stats (the driver's summary has no per-connection list)
            if ev.__class__ is not KafkaFrame:
                d = damage_item(ev, ev.file, pos)
                yield key(ev.file, ev.packet), ("dmg", d)
                continue
            if ev.kind == "request":
                if ev.api_key == PRODUCE and ev.size >= 8:
                    ok, cid = _request_client_id(ev.data)
                    if ok and ev.acks != 0:
                        conv.remember_request(ev.conn, ev.correlation_id, cid, None)
                    yield key(ev.file, ev.packet, 64 + ev.size), ("frm", tuple(ev), None)
                else:
                    yield key(ev.file, ev.packet), ("row", conv.row(ev))
            elif ev.api_key is None or ev.api_key in CONTEXT_RESPONSE_APIS:
                rec = conv.row(ev)
                k = key(ev.file, ev.packet)
                for tid, name in fresh:
                    if tid not in learned:
                        learned[tid] = (k[:4], name)
                fresh.clear()
                yield k, ("row", rec)
            else:
                info = conv.take_request(ev.conn, ev.correlation_id)
                yield key(ev.file, ev.packet, 64 + ev.size), ("frm", tuple(ev), info)

    for k, v in items:
        conn = k[1]
        if conn is META or conn == META:
            yield key(k[2], None), v
            continue
        if conn != cur:
            if asm is not None:
                yield from handle(asm.finish(), END + first)
            cur = conn
            first = k[3]
            asm = StreamAssembler(broker_ports=ports or None, stats=stats,
                                  max_frame=limits[0] or DEFAULT_MAX_FRAME, check=check, keylog=keylog)
            conv = Conversation(records_mode, on_topic_name=lambda tid, name: fresh.append((tid, name)),
                                show_secrets=show_secrets, strict=strict)
            feed = asm.feed
        ev = feed(Packet(k[2], k[3], *v))
        if ev:
            yield from handle(ev, k[3])
    if asm is not None:
        yield from handle(asm.finish(), END + first)
    yield key(-1, None), ("stats", stats)
    if names_acc is not None and learned:
        names_acc.add(learned)


def decode_partition(items: Iterator[tuple], labels: list[str], fmt: str, records_mode: str | None,
                     specs_name: str | None, acc, names: dict | None = None,
                     limits: tuple = (None, None, None), show_secrets: bool = False,
                     strict: bool = False, filter_expr: str | None = None) -> Iterator[tuple]:
    """Stage 3: frames -> output rows (``spark.rows.to_row``); everything else -> the accumulator.

    ``names``: every topic id the job learned, ``{id: (position, name)}``; a row's ids are named
    from those learned before its position (kwire pcap's running map over all connections).
    Runs with kwire pcap's garbage-collector tuning (decoded trees are large and acyclic).
    ``filter_expr``: kwire pcap's --filter; rows it does not keep are counted in the summary, not written."""
    from kwire_cli.render.jsonlines import gc_tuned
    executor_setup(specs_name, limits)
    with gc_tuned():
        yield from _decode_partition(items, labels, fmt, records_mode, acc, names or {}, show_secrets, strict,
                                     filter_expr)


def _name_topics(rec: dict, pos: tuple, names: dict) -> None:
    """Name the row's still unnamed topic ids from ``names`` learned before ``pos``."""
    tn = rec.get("topic_names")
    if tn:
        for tid, name in tn.items():
            if name is None:
                known = names.get(tid)
                if known is not None and known[0] < pos:
                    tn[tid] = known[1]


def _decode_partition(items, labels, fmt, records_mode, acc, names, show_secrets=False, strict=False,
                      filter_expr=None):
    from kwire_cli.capture.filter import compile_filter
    keep = compile_filter(filter_expr) if filter_expr else None
    tot = Totals()
    tot.executor_code.add(code_location())
    summ = tot.summary  # positions: the sort key, kwire pcap's row order across all tasks
    for k, v in items:
        tag = v[0]
        if tag == "frm":
            t = list(v[1])
            t[_FILE_AT] = labels[t[_FILE_AT]]
            f = KafkaFrame(*t)
            # knows only this frame's request (client id, protocol type)
            conv = Conversation(records_mode, show_secrets=show_secrets, strict=strict)
            if names and records_mode is None:  # topic ids named before this frame (internal topics' records)
                pos = k[:4]
                conv.learn_topic_names((tid, nm) for tid, (p, nm) in names.items() if p < pos)
            if v[2] is not None:
                conv.remember_request(f.conn, f.correlation_id, *v[2])
            rec = conv.row(f)
        elif tag == "row":
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
        if keep is not None and not keep(rec):
            continue
        tot.rows += 1
        yield to_row(rec, fmt)
    acc.add(tot)
