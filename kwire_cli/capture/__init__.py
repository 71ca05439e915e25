"""Packet captures to Kafka frames, streaming, with every byte accounted for.

Two layers, composable separately (a Spark job groups packets by connection across rotated files
and runs the second layer per group on executors):

* ``iter_packets(path_or_fileobj, file_label=None, *, stats=None, report_skipped=False)``
  -> ``Packet`` tuples ``(file, packet, ts, src_ip, src_port, dst_ip, dst_port, seq, ack, flags,
  payload, wire_len)`` in file order, mixed with ``Damage`` events about the file itself
  (filter with ``type(x) is Packet``). Non-TCP packets are only counted (``stats.skipped``).
* ``StreamAssembler(broker_ports=None, max_frame=100 MiB, max_buffered=4 MiB, max_open=10000,
  idle_timeout=1800, stats=None, api_check=None, strict=False)``:
  ``feed(packet) -> events`` then ``finish() -> events``, or ``process(packets)`` -> iterator of
  ``KafkaFrame`` and ``Damage``. Group packets with ``conn_key(packet)``; keep each group in capture order.

``iter_capture(source, *, file_label=None, broker_ports=None, max_frame=..., stats=None,
report_skipped=False, **assembler_options)`` chains the two for one file or a list of rotated
files (merged by timestamp). Pass a ``CaptureStats`` to read the counters; after the iterator is
exhausted ``stats.reconcile()["ok"]`` is True when every payload byte is accounted for.

Whole-file failures (not a capture, unreadable) raise ``CaptureError`` (a ``KwireError``).

Above them: ``session.Conversation`` decodes each frame into an output row (the columns declared in
``rows``), ``summary.Summary`` counts rows into `kwire pcap --summary`, ``filter.compile_filter``
selects rows.
"""
from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import cast

from kwire_cli.errors import CaptureError

from .events import CaptureStats, Damage, KafkaFrame, Packet, conn_key, endpoint
from .kafka import DEFAULT_MAX_FRAME, broker_side, looks_like_request, produce_acks, request_prefix
from .reader import iter_packets, iter_records
from .stream import Connection, StreamAssembler

__all__ = [
    "CaptureError", "CaptureStats", "Damage", "KafkaFrame", "Packet", "conn_key", "endpoint",
    "DEFAULT_MAX_FRAME", "broker_side", "looks_like_request", "produce_acks", "request_prefix",
    "iter_packets", "iter_records", "iter_capture", "Connection",
    "StreamAssembler",
]


def _ts_key(item):
    ts = item.ts
    return ts if ts is not None else float("-inf")


def iter_capture(source, *, file_label: str | None = None, broker_ports: Iterable[int] | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME, stats: CaptureStats | None = None,
                 report_skipped: bool = False, **assembler_options) -> Iterator[KafkaFrame | Damage]:
    """Kafka frames and damage from a capture, in capture order.

    ``source``: a path, a binary file object, or a list/tuple of those (rotated files; merged by
    timestamp, each keeps its own packet numbering and label). ``stats``: pass a ``CaptureStats``
    to get the counters filled in (reconciled once the iterator is exhausted). Other keyword
    options go to ``StreamAssembler`` (``max_buffered``, ``max_open``, ``idle_timeout``,
    ``api_check``, ``strict``).
    """
    if stats is None:
        stats = CaptureStats()
    asm = StreamAssembler(broker_ports=broker_ports, max_frame=max_frame, stats=stats,
                          **assembler_options)
    if isinstance(source, (list, tuple)):
        streams = [iter_packets(s, file_label if len(source) == 1 else None, stats=stats,
                                report_skipped=report_skipped) for s in source]
        items = heapq.merge(*streams, key=_ts_key) if len(streams) > 1 else streams[0]
    else:
        items = iter_packets(source, file_label, stats=stats, report_skipped=report_skipped)
    feed = asm.feed
    for item in items:
        if item.__class__ is Packet:
            ev = feed(item)
            if ev:
                yield from ev
        else:
            yield cast(Damage, item)
    yield from asm.finish()
