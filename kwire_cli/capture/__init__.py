"""Packet captures to Kafka frames, streaming, with every byte accounted for.

Two layers, composable separately (a Spark job groups packets by connection across rotated files
and runs the second layer per group on executors):

* ``iter_packets(path_or_fileobj, file_label=None, *, stats=None, report_skipped=False)``
  -> ``Packet`` tuples ``(file, packet, ts, src_ip, src_port, dst_ip, dst_port, seq, ack, flags,
  payload, wire_len)`` in file order, mixed with ``Damage`` events about the file itself
  (filter with ``type(x) is Packet``). Non-TCP packets are only counted (``stats.skipped``).
* ``StreamAssembler(broker_ports=None, max_frame=100 MiB, max_buffered=4 MiB, max_open=10000,
  idle_timeout=1800, stats=None, api_check=None, strict=False, check=None, resync_window=1 MiB)``:
  ``feed(packet) -> events`` then ``finish() -> events``, or ``process(packets)`` -> iterator of
  ``KafkaFrame`` and ``Damage``. Group packets with ``conn_key(packet)``; keep each group in capture order.
  ``build_assembler(...)`` (``pipeline``) makes the one every reader of captures uses: the codec's
  check, the key log.

``iter_capture(source, *, file_label=None, broker_ports=None, max_frame=..., stats=None,
report_skipped=False, check=CODEC, failures=None, **assembler_options)`` chains the two for one
file or for the files of one capture (rotated parts: ``merge.merged_packets`` merges them by
timestamp into one reassembly), resynchronisation confirmed by the codec (``check.CodecCheck``).
Pass a ``CaptureStats`` to read the counters; after the iterator is exhausted
``stats.reconcile()["ok"]`` is True when every payload byte is accounted for.

Whole-file failures (not a capture, unreadable) raise ``CaptureError`` (a ``KwireError``).

Above them: ``session.Conversation`` decodes each frame into an output row (the columns declared in
``rows``), ``summary.Summary`` counts rows into `kwire pcap --summary`, ``filter.compile_filter``
selects rows.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

from kwire_cli.errors import CaptureError
from kwire_cli.tls import KeyLog

from .events import CaptureStats, Damage, KafkaFrame, Packet, conn_key, endpoint
from .kafka import DEFAULT_MAX_FRAME, FrameCheck, broker_side, looks_like_request, produce_acks, request_prefix
from .merge import merged_packets
from .pipeline import CODEC, build_assembler
from .reader import iter_packets, iter_records
from .stream import Connection, StreamAssembler

__all__ = [
    "CaptureError", "CaptureStats", "Damage", "KafkaFrame", "Packet", "conn_key", "endpoint",
    "DEFAULT_MAX_FRAME", "broker_side", "looks_like_request", "produce_acks", "request_prefix",
    "iter_packets", "iter_records", "iter_capture", "merged_packets", "Connection",
    "StreamAssembler", "FrameCheck", "CODEC", "build_assembler",
]


def iter_capture(source: Any, *, file_label: str | None = None, broker_ports: Iterable[int] | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME, stats: CaptureStats | None = None,
                 report_skipped: bool = False, check: FrameCheck | str | None = CODEC,
                 failures: list[str] | None = None,
                 wrap: Callable[[Any, str], Any] | None = None, reopenable: Callable[[Any], bool] | None = None,
                 keylog: KeyLog | None = None, **assembler_options: Any) -> Iterator[KafkaFrame | Damage]:
    """Kafka frames and damage from a capture, in capture order.

    ``source``: a path, a binary file object, or a list/tuple of those (or of ``(source, label)``
    pairs): the files of one capture (rotated parts, or files captured side by side), merged by
    timestamp into one reassembly (``merge.merged_packets``: each packet keeps its file and packet
    number; a connection that goes on in the next file is one connection). ``failures``: a list
    where a file of the list that is not a capture is reported (else ``CaptureError``); ``wrap``
    and ``reopenable``: see ``merged_packets``. ``stats``: pass a ``CaptureStats`` to get the
    counters filled in (reconciled once the iterator is exhausted). ``check``: what confirms
    resynchronisation (default: the codec, ``check.CodecCheck``; None: a plausible header is
    enough). Other keyword options go to ``StreamAssembler`` (``max_buffered``, ``max_open``,
    ``idle_timeout``, ``api_check``, ``strict``, ``resync_window``).

    ``keylog``: a ``kwire_cli.tls.KeyLog`` (key log files read into it by the caller); pcapng
    Decryption Secrets Blocks are added to it as the files are read. TLS connections are recognised
    by their ClientHello whatever it is, and decrypted where the key log has their secrets.
    """
    if stats is None:
        stats = CaptureStats()
    asm = build_assembler(broker_ports=broker_ports, max_frame=max_frame, stats=stats, check=check,
                          keylog=keylog, **assembler_options)
    keylog = asm.keylog
    if isinstance(source, (list, tuple)):
        if len(source) == 1 and file_label is not None and not isinstance(source[0], tuple):
            source = [(source[0], file_label)]
        items = merged_packets(list(source), stats, report_skipped=report_skipped, failures=failures,
                               wrap=wrap, reopenable=reopenable, keylog=keylog)
    else:
        items = iter_packets(source, file_label, stats=stats, report_skipped=report_skipped, keylog=keylog)
    feed = asm.feed
    for item in items:
        if item.__class__ is Packet:
            ev = feed(item)
            if ev:
                yield from ev
        else:
            yield cast(Damage, item)
    yield from asm.finish()
