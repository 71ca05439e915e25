"""The packets of several files of one capture as one stream, in timestamp order.

Rotated files (tcpdump ``-C`` / ``-G``) are the parts of one capture: a connection that goes on in
the next file must be reassembled as one connection. ``merged_packets`` gives the packets of all
the files in timestamp order (ties: the order the files were given), each packet keeping its own
file label and packet number, so one ``StreamAssembler`` can take them all. Files captured at the
same time (two interfaces) interleave the same way; files of different times follow each other.

Files are opened lazily: each path is opened once to read its first packet's time and closed, and
again when the merge reaches that time, so a directory of thousands of rotated files has one or
two open at once (file objects given instead of paths cannot be reopened and stay open).
A file that is not a capture, or fails while being read, is reported through ``failures`` (one
line naming it) and the others go on.
"""
from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Generator, Iterator
from typing import Any

from kwire_cli.errors import CaptureError, KwireError

from .events import CaptureStats, Damage, Note, Packet
from .reader import iter_packets

_NEG = float("-inf")


def _label(src: Any) -> str:
    if isinstance(src, (str, bytes, os.PathLike)):
        return os.fsdecode(src)
    name = getattr(src, "name", None)
    return name if isinstance(name, str) else "<stream>"


class _Part:
    """One file of the capture: how to read it, and its first packet's time."""

    __slots__ = ("src", "label", "order", "first_ts", "head", "it", "reopen", "keylog")

    def __init__(self, src: Any, label: str, order: int) -> None:
        self.src = src
        self.label = label
        self.order = order
        self.first_ts: float | None = None
        self.head: list[Any] = []        # items already read (kept when the source cannot be reopened)
        self.it: Iterator[Any] | None = None
        self.reopen = False
        self.keylog: Any = None      # a kwire_cli.tls.KeyLog for the file's Decryption Secrets Blocks


def merged_packets(sources: list[Any], stats: CaptureStats, *, report_skipped: bool = False,
                   failures: list[str] | None = None,
                   wrap: Callable[[Any, str], Any] | None = None,
                   reopenable: Callable[[Any], bool] | None = None,
                   keylog: Any = None) -> Iterator[Packet | Damage | Note]:
    """``Packet``s and file ``Damage`` of ``sources`` (paths or binary file objects, or
    ``(source, label)`` pairs) merged by timestamp.

    ``failures``: where a file that cannot be read as a capture is reported (else ``CaptureError``
    is raised). ``wrap(fileobj, label)``: wraps each file opened from a path (e.g. progress).
    ``reopenable(path)``: False for a path that must be read only once (a FIFO); default: paths are.
    ``keylog``: a ``kwire_cli.tls.KeyLog`` that pcapng Decryption Secrets Blocks are added to.
    """
    parts = []
    for order, s in enumerate(sources):
        src, label = s if isinstance(s, tuple) else (s, _label(s))
        p = _Part(src, label, order)
        p.reopen = isinstance(src, (str, bytes, os.PathLike)) and (reopenable is None or reopenable(src))
        p.keylog = keylog
        if _peek(p, stats, report_skipped, failures):
            parts.append(p)
        elif p.head:
            parts.append(p)  # failed, but what it said about itself before failing is reported
    parts.sort(key=lambda p: (_NEG if p.first_ts is None else p.first_ts, p.order))
    return _merge(parts, stats, report_skipped, failures, wrap)


def _open(p: _Part, stats: CaptureStats, report_skipped: bool,
          wrap: Callable[[Any, str], Any] | None) -> tuple[Iterator[Any], Any]:
    f = None
    src = p.src
    if isinstance(src, (str, bytes, os.PathLike)):
        try:
            f = open(src, "rb")  # noqa: SIM115 - closed by _guarded
        except OSError as e:
            raise CaptureError(f"cannot open capture {p.label}: {e.strerror or e}") from None
        src = wrap(f, p.label) if wrap is not None else f
    return iter_packets(src, p.label, stats=stats, report_skipped=report_skipped, keylog=p.keylog), f


def _guarded(p: _Part, stats: CaptureStats, report_skipped: bool, failures: list[str] | None,
             wrap: Callable[[Any, str], Any] | None) -> Generator[Any, None, None]:
    """The file's items; a KwireError ends them (reported in ``failures``, or raised)."""
    f = None
    try:
        it, f = _open(p, stats, report_skipped, wrap)
        yield from it
    except KwireError as e:
        if failures is None:
            raise
        msg = str(e)
        failures.append(msg if p.label in msg else f"{p.label}: {msg}")
    finally:
        if f is not None:
            f.close()


def _peek(p: _Part, stats: CaptureStats, report_skipped: bool, failures: list[str] | None) -> bool:
    """Read up to the file's first packet for its time. False: the file failed and is left out
    (its counters go to ``stats`` and its damage events, if any, stay in ``p.head``: the file is
    not read again)."""
    if p.reopen:
        mine: list[str] = []
        seen = CaptureStats()
        it = _guarded(p, seen, report_skipped, mine, None)
        head = []
        for item in it:  # (a generator: closed below, which closes the file)
            if item.__class__ is Packet:
                p.first_ts = item.ts
                break
            head.append(item)
        it.close()
        if mine:
            if failures is None:
                raise CaptureError(mine[0])
            failures += mine
            stats.merge(seen)
            p.head = head
            return False
        return True
    return True  # read once: its first packet's time is learnt when the merge opens it


def _merge(parts: list[_Part], stats: CaptureStats, report_skipped: bool, failures: list[str] | None,
           wrap: Callable[[Any, str], Any] | None) -> Iterator[Any]:
    # streams that cannot be reopened are opened now (their first item tells their time)
    heap: list[Any] = []
    waiting: list[_Part] = []
    for p in parts:
        if p.head:  # a file that failed at its start: only the damage it reported
            yield from p.head
        elif p.reopen:
            waiting.append(p)
        else:
            it = _guarded(p, stats, report_skipped, failures, wrap)
            _push(heap, p, it, _NEG)
    waiting.sort(key=lambda p: (_NEG if p.first_ts is None else p.first_ts, p.order))
    w = 0
    nw = len(waiting)
    while heap or w < nw:
        # admit the files whose first packet is not after the next packet to go out
        while w < nw and (not heap or _first(waiting[w]) <= heap[0][0]):
            p = waiting[w]
            w += 1
            _push(heap, p, _guarded(p, stats, report_skipped, failures, wrap), _NEG)
        if not heap:
            continue
        key, _order, item, it, p = heap[0]
        limit = _first(waiting[w]) if w < nw else float("inf")
        if len(heap) == 1:
            # one file at a time (rotated parts): straight through until the next file begins
            heapq.heappop(heap)
            yield item
            last = key
            for item in it:
                ts = item.ts
                if ts is not None:
                    last = ts
                if last > limit:
                    _push_item(heap, p, it, item, last)
                    break
                yield item
            continue
        heapq.heappop(heap)
        yield item
        _push(heap, p, it, key)


def _first(p: _Part) -> float:
    return _NEG if p.first_ts is None else p.first_ts


def _push(heap: list[Any], p: _Part, it: Iterator[Any], last: float) -> None:
    for item in it:
        ts = item.ts
        _push_item(heap, p, it, item, ts if ts is not None else last)
        return


def _push_item(heap: list[Any], p: _Part, it: Iterator[Any], item: Any, key: float) -> None:
    heapq.heappush(heap, (key, p.order, item, it, p))
