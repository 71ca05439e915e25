"""Packet captures to Kafka frames, streaming, with every byte accounted for.

Two layers, composable separately (a Spark job groups packets by connection across rotated files
and runs the second layer per group on executors):

* ``iter_packets(fileobj, file_label)`` -> ``Packet`` tuples (and ``Damage`` for the file itself);
* ``StreamAssembler`` (alias ``ConnectionDecoder``): ``feed(packet)`` / ``finish()`` or
  ``process(packets)`` -> ``KafkaFrame`` and ``Damage`` events.

``iter_capture`` is the two chained for one file (or several, merged by timestamp).
"""
from __future__ import annotations

import heapq
from typing import Iterable, Iterator

from .errors import CaptureError
from .events import (CaptureStats, Damage, KafkaFrame, Packet, conn_key, endpoint)
from .kafka import (DEFAULT_MAX_FRAME, broker_side, looks_like_request, produce_acks,
                    request_prefix)
from .reader import iter_packets, iter_records
from .stream import ConnectionDecoder, Connection, StreamAssembler

__all__ = [
    "CaptureError", "CaptureStats", "Damage", "KafkaFrame", "Packet", "conn_key", "endpoint",
    "DEFAULT_MAX_FRAME", "broker_side", "looks_like_request", "produce_acks", "request_prefix",
    "iter_packets", "iter_records", "iter_capture", "ConnectionDecoder", "Connection",
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
            yield item
    yield from asm.finish()
