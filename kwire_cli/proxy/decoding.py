"""The decoding side of the proxy: frames go to another process (on Linux; a thread elsewhere), so
decoding never takes the forwarding process's time nor its interpreter lock.

The proxy hands each frame to ``DecodeChannel.put`` on its event loop. The frame goes into one end
of a socket pair at once when the socket takes it; what it does not take waits in a backlog of at
most ``backlog`` bytes, written as the socket drains. A frame that would take the backlog past
that is counted (``not_shown``), never waited for: a slow decoder never stalls a client. The
decoding process (niced, so that forwarding gets the CPU first) reads the frames, hands each to
the ``FrameSink`` (which makes and writes the output rows), and when the proxy stops, after the
last frame, sends back ``sink.result()`` (the summary) and the errors the sink raised.

On the socket a frame is ``>II`` (length of the pickled fields, length of the frame) then the
pickled ``(fields, notes)`` then the frame's bytes as they are (size prefix included): the bytes
are never pickled nor joined, ``sendmsg`` writes the three parts as one.
"""
from __future__ import annotations

import asyncio
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


class FrameSink(Protocol):
    """What the decoding side does with frames (runs in the decoding process)."""

    def frame(self, frame: KafkaFrame, notes: list[str]) -> None: ...

    def result(self) -> Any:
        """Picklable; handed back to the proxy when decoding ends."""


def frame_fields(frame: KafkaFrame) -> tuple:
    """A frame's fields but its bytes (``DecodeChannel.put`` sends those apart)."""
    return tuple(frame[:7]) + tuple(frame[9:])


def _send(sock: socket.socket, parts: list[bytes]) -> int:
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


def _child(sock: socket.socket, other: socket.socket, sink: FrameSink) -> None:
    # Ctrl-C reaches the whole process group: the proxy stops this process after the last frame
    # (a SIGTERM still ends it, e.g. multiprocessing's own at exit)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    other.close()
    with contextlib.suppress(OSError):
        os.nice(NICE)
    consume(sock, sink)


class DecodeChannel:
    def __init__(self, sink: FrameSink, backlog: int = 64 << 20, process: bool | None = None) -> None:
        self.sink = sink
        self.limit = backlog
        self.process = sys.platform.startswith("linux") if process is None else process
        self.sock: socket.socket | None = None
        self._worker: Any = None
        self._backlog: deque[bytes] = deque()
        self._pending = 0                    # bytes in _backlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False
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
        else:
            self._worker = threading.Thread(target=consume, args=(theirs, self.sink), name="kwire-decode",
                                            daemon=True)
            self._worker.start()
        mine.setblocking(False)
        self.sock = mine

    def put(self, fields: tuple, notes: list[str], frame: bytes | list, length: int | None = None) -> bool:
        """Hand a frame over (its ``frame_fields``): its bytes, or the list of its pieces (bytes-like,
        ``length`` bytes in all); False when it was dropped instead."""
        if self.broken is not None:
            self.not_shown += 1
            return False
        pieces = frame if isinstance(frame, list) else [frame]
        if len(pieces) > 256:  # within what one sendmsg takes
            pieces = [b"".join(pieces)]
        n = length if length is not None else sum(len(p) for p in pieces)
        meta = pickle.dumps((fields, notes), protocol=pickle.HIGHEST_PROTOCOL)
        size = _HEAD.size + len(meta) + n
        if self._backlog:
            if self._pending + size > self.limit:
                self.not_shown += 1
                return False
            self._backlog.append(_HEAD.pack(len(meta), n) + meta)
            self._backlog.append(b"".join(pieces))  # a copy: the chunks it came in are not kept
            self._pending += size
            return True
        parts = [_HEAD.pack(len(meta), n), meta, *pieces]
        assert self.sock is not None
        try:
            sent = _send(self.sock, parts)
        except BlockingIOError:
            sent = 0
        except OSError as e:
            self._break(e)
            self.not_shown += 1
            return False
        if sent < size:  # the rest waits (a message is never cut: the decoder reads them whole)
            for p in parts:
                if sent >= len(p):
                    sent -= len(p)
                    continue
                rest = p[sent:] if sent else p
                sent = 0
                self._backlog.append(bytes(rest))
                self._pending += len(rest)
            self._want_write()
        return True

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
        """Blocking (run it off the event loop): the rest of the backlog, the end mark, then wait for
        the decoding side's result."""
        sock = self.sock
        if sock is None:
            return
        self._stop_writing()
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
