"""Live captures: pcap / pcapng read as it is written, frames out as soon as they are complete.

``kwire pcap -`` (standard input, e.g. ``tcpdump -U -w - | kwire pcap -``; a FIFO named alone
alike) and ``kwire pcap --follow FILE|DIR`` (a file tcpdump is still writing; a directory: its files in rotation order,
and the rotated files as they appear) read here. Nothing waits for the end of the input:

* ``LiveInput``: what is read. ``stdin()``, ``follow_file(path)``, ``follow_dir(path)``.
  Its streams' ``read(n)`` give what has arrived (at least one byte; fewer than ``n``), so the
  capture reader (``reader.iter_records``, which asks for at least what a record lacks and at most
  a chunk) yields each packet as soon as its bytes are there. Before waiting for more bytes a
  stream says so (``on_wait``): the packets read so far go to the assembler then, not when a
  batch is full. A followed file polls for growth (``poll`` seconds) at its end; in a directory,
  a file is complete once a later file (rotation order, ``inputs.rotation_key``) exists and the
  first file's end has been read again, and reading goes on with the next one.
* ``iter_live(input, ...)``: the reader runs in a thread (it blocks in reads) that hands packets
  over in batches through a bounded queue (a fast writer is slowed down by the pipe, memory does
  not grow); the assembler, framing and pairing run in the caller's thread, where
  ``StreamAssembler.tick`` is called whenever no packet came for ``tick`` seconds, with the
  capture time that has passed since the last packet (its timestamp plus the wall-clock time
  since it was read): a hole held open for a late segment is declared a gap at most ``hold_time``
  (0.2 s) after it opened, and requests unanswered for ``request_timeout`` expire, with no packet
  to trigger it. ``stop`` (a ``threading.Event``: the command sets it on SIGINT/SIGTERM) ends
  reading; what is pending is flushed as at end of input (``StreamAssembler.finish``).

The reader thread counts into its own ``CaptureStats`` (packets, files, reader damage), added to
the caller's when the iterator ends, so that no counter is written by two threads.
"""
from __future__ import annotations

import os
import queue
import select
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kwire_cli.errors import CaptureError, KwireError
from kwire_cli.tls import KeyLog

from .events import CaptureStats, Damage, KafkaFrame, Note, Packet
from .inputs import files_under, rotation_key
from .kafka import DEFAULT_MAX_FRAME, FrameCheck
from .pipeline import CODEC, build_assembler
from .reader import iter_packets

#: how long a followed file's end is waited at before it is read again (seconds)
POLL = 0.05
#: how long the assembler waits for packets before time is let pass (``StreamAssembler.tick``)
TICK = 0.05
#: packets handed over at once at most (fewer when the input has nothing more for now)
BATCH = 256
#: default for unanswered requests (capture seconds) in live captures
DEFAULT_REQUEST_TIMEOUT = 60.0
STDIN_LABEL = "-"
#: the kind of the Note that says a followed file is read again from its start
FOLLOW_NOTE = "follow"


class _Stream:
    """A read-only file object over a descriptor (or a file object without one) whose ``read(n)``
    gives what has arrived: at least one byte, b"" only at the end."""

    def __init__(self, fd: int | None, name: str, on_wait: Callable[[], object], stop: threading.Event,
                 follow: bool = False, done: Callable[[], bool] | None = None, fobj: Any = None,
                 changed: Callable[[], str | None] | None = None) -> None:
        self.fd = fd
        self.name = name
        self.on_wait = on_wait
        self.stop = stop
        self.follow = follow
        self.done = done          # follow: True once the file is complete (a later rotated file exists)
        self.fobj = fobj
        self.changed = changed    # follow: why the file at this path is no longer the one being read
        self.ended: str | None = None  # that reason, once reading stopped for it
        self._pollable = True

    def readable(self) -> bool:
        return True

    def _ready(self, timeout: float = 0.0) -> bool:
        if not self._pollable or self.fd is None:
            return True
        try:
            return bool(select.select([self.fd], [], [], timeout)[0])
        except (OSError, ValueError):
            self._pollable = False
            return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = 1 << 20
        if n == 0:
            return b""
        if self.fd is None:  # a file object (e.g. a test's BytesIO): whatever it gives
            if self.stop.is_set():
                return b""
            read1 = getattr(self.fobj, "read1", None)
            return (read1(n) if read1 is not None else self.fobj.read(n)) or b""
        waited = False
        while True:
            if self.stop.is_set():
                return b""
            if not self._ready():
                if not waited:
                    self.on_wait()
                    waited = True
                self._ready(POLL * 2)  # (waits in steps, so that ``stop`` is seen)
                continue
            data = os.read(self.fd, n)
            if data or not self.follow:
                return data
            # a followed file's end: more may come, unless the file was truncated or replaced
            if self.changed is not None:
                why = self.changed()
                if why is not None:
                    self.ended = why
                    return b""
            if self.done is not None and self.done():
                data = os.read(self.fd, n)  # written before the next file began
                return data
            if not waited:
                self.on_wait()
                waited = True
            time.sleep(POLL)


class LiveInput:
    """What a live capture reads: standard input, a followed file or a followed directory.
    ``sources(on_wait, stop)`` yields ``(stream, label)`` for the reader, one capture file after
    the other."""

    def __init__(self, kind: str, path: str | None = None, fobj: Any = None) -> None:
        self.kind = kind          # "stdin" | "file" | "dir"
        self.path = path
        self.fobj = fobj

    @classmethod
    def stdin(cls, fobj: Any) -> LiveInput:
        """Standard input (``fobj``: its binary stream)."""
        return cls("stdin", None, fobj)

    @classmethod
    def fifo(cls, path: str) -> LiveInput:
        """A FIFO (or a device such as /dev/stdin): read as it comes, to its end."""
        return cls("fifo", path)

    @classmethod
    def follow_file(cls, path: str) -> LiveInput:
        return cls("file", path)

    @classmethod
    def follow_dir(cls, path: str) -> LiveInput:
        return cls("dir", path)

    def sources(self, on_wait: Callable[[], object], stop: threading.Event,
                on_skip: Callable[[str, str], object] | None = None) -> Iterator[tuple[_Stream, str]]:
        if self.kind == "stdin":
            fd = None
            try:
                fd = self.fobj.fileno()
            except (AttributeError, OSError, ValueError):
                fd = None
            yield _Stream(fd, STDIN_LABEL, on_wait, stop, fobj=self.fobj), STDIN_LABEL
            return
        if self.kind == "fifo":
            assert self.path is not None
            yield from self._followed(self.path, on_wait, stop, None, follow=False)
            return
        if self.kind == "file":
            # as `tail -F`: a file truncated, rewritten from its start or replaced (tcpdump started
            # again with the same -w file, logrotate) is read again from its start
            assert self.path is not None
            while not stop.is_set():
                for stream, label in self._followed(self.path, on_wait, stop, None, watch=True):
                    yield stream, label
                if stream.ended is None:
                    return
            return
        assert self.path is not None
        done_files: set[str] = set()
        warned: set[str] = set()
        while not stop.is_set():
            pending = [p for p in self._listing(on_skip, warned) if p not in done_files]
            if not pending:
                on_wait()
                time.sleep(POLL * 4)
                continue
            cur = pending[0]
            done_files.add(cur)

            def later(cur: str = cur) -> bool:
                key = rotation_key(cur)
                return any(rotation_key(p) > key for p in self._listing(None, warned) if p not in done_files)

            yield from self._followed(cur, on_wait, stop, _every(0.25, later))

    def _listing(self, on_skip: Callable[[str, str], object] | None, warned: set[str]) -> list[str]:
        def skip(p: str, what: str) -> None:
            if on_skip is not None and p not in warned:
                warned.add(p)
                on_skip(p, what)
        assert self.path is not None
        return files_under(self.path, skip)

    @staticmethod
    def _followed(path: str, on_wait: Callable[[], object], stop: threading.Event, done: Callable[[], bool] | None,
                  follow: bool = True,
                  watch: bool = False) -> Iterator[tuple[_Stream, str]]:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise CaptureError(f"cannot open capture {path}: {e.strerror or e}") from None
        try:
            yield _Stream(fd, path, on_wait, stop, follow=follow, done=done,
                          changed=_changed(path, fd) if watch else None), path
        finally:
            os.close(fd)


#: bytes of a followed file's start remembered to notice it being written again from its start
#: (a capture's file header, a pcapng's interface blocks, and the first packet's time stamp)
HEAD = 256


def _changed(path: str, fd: int) -> Callable[[], str | None]:
    """A check, asked at the end of a followed file, of whether the file is still the one being
    read: None, or why not (truncated, written again from its start, or another file at the path).
    A file removed and not yet created again is waited for."""
    head = [b""]  # the file's first bytes as seen so far

    def check() -> str | None:
        try:
            st = os.fstat(fd)
            pos = os.lseek(fd, 0, os.SEEK_CUR)
        except OSError:
            return None
        try:
            now = os.stat(path)
        except OSError:
            now = None
        if now is not None and (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            return "replaced by another file: read from its start"
        if st.st_size < pos:
            return f"truncated ({pos} bytes read, {st.st_size} left): read again from its start"
        try:
            start = os.pread(fd, HEAD, 0)
        except OSError:
            return None
        seen = head[0]
        if start[:len(seen)] != seen[:len(start)]:
            return "written again from its start: read again from its start"
        if len(start) > len(seen):
            head[0] = start
        return None
    return check


def _every(seconds: float, check: Callable[[], bool]) -> Callable[[], bool]:
    """``check`` asked at most once per ``seconds`` (it lists a directory); True stays True."""
    at = [0.0]
    yes = [False]

    def cached() -> bool:
        now = time.monotonic()
        if not yes[0] and now - at[0] >= seconds:
            at[0] = now
            yes[0] = check()
        return yes[0]
    return cached


class _End:
    """The reader thread is done (``error``: why it stopped early, or None at end of input)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _produce(live: LiveInput, q: queue.Queue[Any], stats: CaptureStats, stop: threading.Event, keylog: KeyLog,
             failures: list[str], report_skipped: bool, on_skip: Callable[[str, str], object] | None) -> None:
    batch: list[Any] = []

    def flush() -> None:
        if batch:
            q.put(batch.copy())
            batch.clear()

    err: BaseException | None = None
    try:
        for stream, label in live.sources(flush, stop, on_skip):
            try:
                for item in iter_packets(stream, label, stats=stats, report_skipped=report_skipped, keylog=keylog):
                    batch.append(item)
                    if len(batch) >= BATCH:
                        flush()
            except KwireError as e:
                if live.kind == "stdin":
                    raise
                msg = str(e)
                failures.append(msg if label in msg else f"{label}: {msg}")  # the directory goes on
            if stream.ended is not None:  # the followed file is read again from its start
                batch.append(Note(label, None, None, FOLLOW_NOTE, stream.ended))
            if stop.is_set():
                break
    except BaseException as e:  # handed to the caller's thread
        err = e
    flush()
    q.put(_End(err))


def iter_live(live: LiveInput, *, broker_ports: Iterable[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
              stats: CaptureStats | None = None, check: FrameCheck | str | None = CODEC, keylog: KeyLog | None = None,
              request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT, stop: threading.Event | None = None,
              failures: list[str] | None = None, report_skipped: bool = False,
              on_skip: Callable[[str, str], object] | None = None, tick: float = TICK,
              **assembler_options: Any) -> Iterator[KafkaFrame | Damage | Note]:
    """Kafka frames, damage and notes of a live capture as soon as they are complete (see the
    module docstring). ``failures``: where a file of a followed directory that is not a capture is
    reported (the others go on); standard input that is not a capture raises ``CaptureError``.
    Other keyword options go to ``StreamAssembler``."""
    if stats is None:
        stats = CaptureStats()
    if stop is None:
        stop = threading.Event()
    if failures is None:
        failures = []
    asm = build_assembler(broker_ports=broker_ports, max_frame=max_frame, stats=stats, check=check,
                          keylog=keylog, request_timeout=request_timeout, **assembler_options)
    keylog = asm.keylog
    rstats = CaptureStats()
    q: queue.Queue[Any] = queue.Queue(maxsize=8)
    worker = threading.Thread(target=_produce, name="kwire-live-reader", daemon=True,
                              args=(live, q, rstats, stop, keylog, failures, report_skipped, on_skip))
    worker.start()
    feed = asm.feed
    last_ts: float | None = None
    last_wall = 0.0
    error: BaseException | None = None
    deadline = None
    try:
        while True:
            if stop.is_set():
                # stopped (Ctrl-C): what the reader has read still goes through, until it ends
                if deadline is None:
                    deadline = time.monotonic() + 2.0
                elif time.monotonic() > deadline:
                    break
            try:
                batch = q.get(timeout=tick)
            except queue.Empty:
                if last_ts is not None and deadline is None:
                    late = asm.tick(last_ts + (time.monotonic() - last_wall))
                    if late:
                        yield from late
                continue
            if batch.__class__ is _End:
                error = batch.error
                break
            for item in batch:
                if item.__class__ is Packet:
                    last_ts = item.ts
                    ev = feed(item)
                    if ev:
                        yield from ev
                else:
                    yield item
            last_wall = time.monotonic()
        stop.set()  # (the reader thread stops at its next read)
        if error is not None:
            raise error
        yield from asm.finish()
    finally:
        stop.set()
        stats.merge(rstats)
