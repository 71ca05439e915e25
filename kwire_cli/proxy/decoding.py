"""The decoding side of the proxy: frames go to another process (on Linux; a thread elsewhere), so
decoding never takes the forwarding process's time nor its interpreter lock.

The proxy hands each frame to ``DecodeChannel.put`` on its event loop. Frames are gathered for the
rest of that turn of the loop and written into one end of a socket pair together (``flush``, called
soon by the loop: after the bytes of that turn were forwarded, one ``sendmsg`` and one wake-up of
the decoding side for them all). What the socket does not take waits in a backlog of at most
``backlog`` bytes, written as the socket drains. A frame that would take the backlog past that is
counted (``not_shown``), never waited for: a slow decoder never stalls a client. The decoding
process runs at the idle scheduling class (nice 19 where that is not allowed), so that it only
gets a CPU nothing else wants: the clients, the brokers and forwarding come first, and under load
it falls behind and counts frames as not shown rather than competing (when the proxy stops, it
goes to nice 19 for the frames it has left). It reads the frames, hands
each to the ``FrameSink`` (which makes and writes the output rows), and when the proxy stops,
after the last frame, sends back ``sink.result()`` (the summary) and the errors the sink raised.

On the socket a frame is ``>II`` (length of the pickled fields, length of the frame) then the
pickled ``(fields, notes)`` then the frame's bytes as they are (size prefix included): the bytes
are never pickled nor joined, ``sendmsg`` writes the parts of many frames as one.
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import sys
import threading
from collections import deque
from typing import Any, Protocol

from kwire_cli.capture.events import KafkaFrame

_HEAD = struct.Struct(">II")
_LEN = struct.Struct(">I")
_END = _HEAD.pack(0, 0)
MAX_ERRORS = 100
NICE = 19  # the decoding process yields the CPU to everything else (forwarding, the clients, the brokers)
IOV = 512  # parts per sendmsg (within IOV_MAX, 1024 on Linux)


class FrameSink(Protocol):
    """What the decoding side does with frames (runs in the decoding process)."""

    def frame(self, frame: KafkaFrame, notes: list[str]) -> None: ...

    def result(self) -> Any:
        """Picklable; handed back to the proxy when decoding ends."""


def frame_fields(frame: KafkaFrame) -> tuple:
    """A frame's fields but its bytes (``DecodeChannel.put`` sends those apart)."""
    return tuple(frame[:7]) + tuple(frame[9:])


def _send(sock: socket.socket, parts: list[bytes | memoryview]) -> int:
    if hasattr(sock, "sendmsg"):
        return sock.sendmsg(parts)
    return sock.send(b"".join(parts))  # no sendmsg (Windows)


def _read_exact(f: Any, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise EOFError
    return bytes(data)


def consume(sock: socket.socket, sink: FrameSink) -> None:
    """The decoding side's loop: frames until the end mark, then the result back."""
    f = sock.makefile("rb", buffering=1 << 20)
    errors: list[str] = []
    n_errors = 0
    try:
        while True:
            lm, ld = _HEAD.unpack(_read_exact(f, _HEAD.size))
            if not lm:
                break
            fields, notes = pickle.loads(_read_exact(f, lm))
            data = _read_exact(f, ld)
            frame = KafkaFrame._make((*fields[:7], data[4:], ld - 4, *fields[7:]))
            try:
                sink.frame(frame, notes)
            except Exception as e:  # the proxy goes on whatever one frame's output does
                n_errors += 1
                if len(errors) < MAX_ERRORS:
                    errors.append(f"{type(e).__name__}: {e}")
    except (EOFError, OSError):
        return  # the proxy went away: nobody to answer
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    try:
        result = pickle.dumps((sink.result(), errors, n_errors))
    except Exception as e:
        result = pickle.dumps((None, [f"the decoding side's result: {type(e).__name__}: {e}"], n_errors + 1))
    with contextlib.suppress(OSError):
        sock.sendall(_LEN.pack(len(result)) + result)
    f.close()
    sock.close()


def idle_priority() -> str:
    """This process to the idle scheduling class (it runs only on a CPU nothing else wants), or to
    nice 19 where that is not available; which one it got."""
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]
        return "idle"
    with contextlib.suppress(OSError):
        os.nice(NICE)
        return "nice"
    return "normal"


def _normal_class(pid: int) -> None:
    """The decoding process back from the idle class to nice 19 when the proxy stops: the rest of
    its frames then get a share of a busy machine (at the idle class, next to nothing), so the
    summary comes within ``close``'s timeout. Where that is not allowed it stays as it is."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, pid, NICE)  # type: ignore[attr-defined,unused-ignore]
        if os.sched_getscheduler(pid) == os.SCHED_IDLE:  # type: ignore[attr-defined,unused-ignore]
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))  # type: ignore[attr-defined,unused-ignore]


def _child(sock: socket.socket, other: socket.socket, sink: FrameSink) -> None:
    # Ctrl-C, and a SIGTERM to the process group (timeout, systemd, docker stop), reach this process
    # too: the proxy stops it after the last frame, with the summary (it ends without the proxy
    # when its socket closes; at exit the proxy kills it if it is still there)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    other.close()
    idle_priority()
    consume(sock, sink)


class DecodeChannel:
    def __init__(self, sink: FrameSink, backlog: int = 64 << 20, process: bool | None = None) -> None:
        self.sink = sink
        self.limit = backlog
        self.process = sys.platform.startswith("linux") if process is None else process
        self.sock: socket.socket | None = None
        self._worker: Any = None
        self._backlog: deque[bytes | memoryview] = deque()  # (memoryviews: only at close)
        self._pending = 0                    # bytes in _batch and _backlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False
        self._batch: list[bytes | memoryview] = []  # parts of the frames put since the last flush
        self._batch_frames = 0
        self._flushing: asyncio.Handle | None = None
        self.broken: str | None = None      # why frames cannot be sent any more
        self.not_shown = 0                  # frames dropped: the backlog was full (or decoding died)
        self.result: Any = None
        self.errors: list[str] = []
        self.n_errors = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Before the proxy opens any socket (the decoding process inherits none of them)."""
        self._loop = loop
        mine, theirs = socket.socketpair()
        for s in (mine, theirs):
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        if self.process:
            ctx = multiprocessing.get_context("fork")
            self._worker = ctx.Process(target=_child, args=(theirs, mine, self.sink), name="kwire-decode",
                                       daemon=True)
            self._worker.start()
            theirs.close()
            atexit.register(self._abandon)  # before multiprocessing's own: its SIGTERM is ignored
        else:
            self._worker = threading.Thread(target=consume, args=(theirs, self.sink), name="kwire-decode",
                                            daemon=True)
            self._worker.start()
        mine.setblocking(False)
        self.sock = mine

    def _abandon(self) -> None:
        """At exit: a decoding process still there (the proxy did not close) is killed."""
        if self._worker is not None and self._worker.is_alive():
            self._worker.kill()
            self._worker.join(5)

    def put(self, fields: tuple, notes: list[str], frame: bytes | list, length: int | None = None) -> bool:
        """Hand a frame over (its ``frame_fields``): its bytes, or the list of its pieces (bytes-like,
        ``length`` bytes in all); False when it was dropped instead. It is written with the others
        of this turn of the event loop (``flush``)."""
        if self.broken is not None:
            self.not_shown += 1
            return False
        pieces = frame if isinstance(frame, list) else [frame]
        if len(pieces) > 256:  # within what one sendmsg takes
            pieces = [b"".join(pieces)]
        n = length if length is not None else sum(len(p) for p in pieces)
        meta = pickle.dumps((fields, notes), protocol=pickle.HIGHEST_PROTOCOL)
        size = _HEAD.size + len(meta) + n
        if self._pending and self._pending + size > self.limit:
            self.not_shown += 1
            return False
        self._pending += size
        if self._writing:  # the socket is full: a copy waits (the chunks it came in are not kept)
            self._backlog.append(_HEAD.pack(len(meta), n) + meta)
            self._backlog.append(b"".join(pieces))
            return True
        self._batch += [_HEAD.pack(len(meta), n), meta, *pieces]
        self._batch_frames += 1
        if self._flushing is None and self._loop is not None:
            self._flushing = self._loop.call_soon(self.flush)
        return True

    def flush(self) -> None:
        """On the event loop: the frames put since the last flush, written in as few ``sendmsg`` as
        the socket takes; what it does not take waits in the backlog (a message is never cut: the
        decoder reads them whole)."""
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        batch, frames = self._batch, self._batch_frames
        self._batch, self._batch_frames = [], 0
        if not batch or self.sock is None:
            return
        if self.broken is not None:
            self.not_shown += frames
            return
        i = 0
        while i < len(batch):
            part = batch[i:i + IOV]
            try:
                sent = _send(self.sock, part)
            except BlockingIOError:
                sent = 0
            except OSError as e:
                self._break(e)
                self.not_shown += frames
                return
            self._pending -= sent
            for p in part:
                if sent >= len(p):
                    sent -= len(p)
                    i += 1
                    continue
                # the socket is full: the rest waits, copied (the chunks it came in are not kept)
                self._backlog.append(bytes(p[sent:]))
                self._backlog.extend(q if isinstance(q, bytes) else bytes(q) for q in batch[i + 1:])
                self._want_write()
                return

    def _want_write(self) -> None:
        if not self._writing and self._loop is not None and self.sock is not None:
            self._loop.add_writer(self.sock, self._drain)
            self._writing = True

    def _drain(self) -> None:
        assert self.sock is not None
        while self._backlog:
            batch = list(itertools.islice(self._backlog, 64))
            try:
                sent = _send(self.sock, batch)
            except BlockingIOError:
                return
            except OSError as e:
                self._break(e)
                return
            self._pending -= sent
            while sent:
                head = self._backlog[0]
                if sent >= len(head):
                    self._backlog.popleft()
                    sent -= len(head)
                else:
                    self._backlog[0] = head[sent:]
                    sent = 0
        self._stop_writing()

    def _stop_writing(self) -> None:
        if self._writing and self._loop is not None and self.sock is not None:
            self._loop.remove_writer(self.sock)
        self._writing = False

    def _break(self, e: BaseException) -> None:
        self.broken = f"the decoding side is gone ({e}); frames are forwarded but no longer shown"
        self.not_shown += len(self._backlog) // 2
        self._backlog.clear()
        self._pending = 0
        self._stop_writing()

    def close(self, timeout: float = 120) -> None:
        """Blocking (run it off the event loop, after a last ``flush`` on it): the rest of the
        backlog, the end mark, then wait for the decoding side's result."""
        sock = self.sock
        if sock is None:
            return
        self._stop_writing()
        if self._flushing is not None:  # not flushed on the loop: the frames go with the backlog
            self._flushing.cancel()
            self._flushing = None
        self._backlog.extend(self._batch)
        self._batch = []
        if self.process:
            _normal_class(self._worker.pid)
        sock.setblocking(True)
        sock.settimeout(timeout)
        try:
            if self.broken is None:
                for part in self._backlog:
                    sock.sendall(part)
                self._backlog.clear()
                sock.sendall(_END)
                f = sock.makefile("rb")
                (n,) = _LEN.unpack(_read_exact(f, _LEN.size))
                self.result, self.errors, self.n_errors = pickle.loads(_read_exact(f, n))
                f.close()
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            self.broken = self.broken or f"the decoding side did not finish: {e}"
        finally:
            sock.close()
            self.sock = None
            if self.process:
                self._worker.join(10)
                if self._worker.is_alive():
                    self._worker.kill()
                    self._worker.join(5)
            else:
                self._worker.join(timeout)
