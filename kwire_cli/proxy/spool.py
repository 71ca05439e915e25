"""Frames the decoding side cannot keep up with, kept on disk until it can (``DecodeChannel``'s
spool): shown late instead of never.

When the channel's in-memory backlog is full, frames go to the spool instead, and every later
frame too until it is empty again, so the decoding side reads them in the order they came. The
event loop only appends a frame's pieces to a list, not copied (``add``, bounded: past ``MEMORY`` bytes not yet
on disk, or past ``cap`` bytes spooled in all, the frame is refused and counted as not shown by the
channel). A thread of its own writes them to an unlinked temporary file, and, once the channel
says the socket is its (``go``: what the channel had in memory was written), reads them back and
writes them to the decoding side's socket, whole messages at a time. When it has written all of
them it gives the socket back (``active`` false) and the file is emptied. At the end the channel
waits for it to write the rest (``finish``), or, told to give up (``give_up``), it stops after
the message it is writing and the rest is counted as not shown.

The thread is the only one to touch the file and, while it has the socket, the only one to write
to the socket; the event loop does no disk work for it.

The file is written past the page cache where the file system allows it (``O_DIRECT``, through
``directio.DirectAppender``: 4 MiB at a time from one reused buffer) and read back the same way,
the bytes not written yet read from that buffer: a buffered write would take fresh page-cache
pages for every byte spooled (costly on a VM whose freed memory goes back to the host), on the
CPUs the clients and brokers need while the traffic flows.

``hold``: while on, the thread writes to the file but not to the socket (the proxy's traffic is
busy and the decoding waits for a pause; ``DecodeChannel``); ``finish`` ends it.
"""
from __future__ import annotations

import contextlib
import errno
import mmap
import os
import select
import socket
import struct
import tempfile
import threading
from collections.abc import Callable

from kwire_cli.proxy.directio import BLOCK, DirectAppender, open_direct

_HEAD = struct.Struct(">II")  # decoding.py's message head: the lengths of the pickled fields and of the frame
CHUNK = 1 << 20               # bytes read back from the file at once
MEMORY = 64 << 20             # bytes added and not on disk yet: past it, frames are refused (a slow disk)
SPOOL = 1 << 30               # the default cap on bytes spooled
WAKE = 4 << 20                # (held) bytes added that wake the thread to write them to disk
WAIT = 0.02                   # seconds between writing to disk what was added while the socket is full


class Spool:
    def __init__(self, cap: int, sock: socket.socket, on_error: Callable[[BaseException], None]) -> None:
        self.cap = cap
        self.sock = sock
        self.on_error = on_error            # called on the spool's thread when writing the socket fails
        self._cond = threading.Condition()
        self._todo: list[bytes | memoryview] = []  # added, not on disk yet
        self._queued = 0                    # their bytes
        self.active = False                 # frames go to the spool (from the first one the backlog refused)
        self._go = False                    # the socket is the spool's (the channel's backlog is written)
        self._closing = False               # write the rest, then end
        self._give_up = False               # end after the message being written
        self._hold = False                  # nothing written to the socket (the traffic is busy)
        self.frames_in = self.frames_out = 0
        self.bytes_in = self.bytes_out = 0  # (bytes_in - bytes_out: in the spool now)
        self.most = 0                       # the most bytes in the spool at once
        self.error: BaseException | None = None
        self._fd: int | None = None
        self._app: DirectAppender | None = None  # the file's writer past the page cache (None: buffered)
        self._rfd: int | None = None        # the file opened O_DIRECT to read back
        self._rbuf: mmap.mmap | None = None  # (aligned) what is read back through it
        self._end = self._read = 0          # the file's offsets: written up to, read back up to
        self._thread = threading.Thread(target=self._run, name="kwire-spool", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the event loop's side
    def add(self, parts: list[bytes | memoryview], size: int) -> bool:
        """A message (its parts, ``size`` bytes) to the spool; False: refused (over the cap, or too
        much not on disk yet, or the spool failed)."""
        with self._cond:
            if self.error is not None or self._closing:
                return False
            spooled = self.bytes_in - self.bytes_out
            if spooled + size > self.cap or self._queued + size > MEMORY:
                return False
            self.active = True
            self._todo += parts
            self._queued += size
            self.frames_in += 1
            self.bytes_in += size
            self.most = max(self.most, spooled + size)
            if not self._hold or self._queued >= WAKE:  # (held: the thread only writes to disk, WAKE at a time)
                self._cond.notify()
        return True

    def go(self) -> None:
        """The socket is the spool's now (the channel has nothing of its own left to write)."""
        with self._cond:
            if self.active and not self._go:
                self._go = True
                self._cond.notify()

    def hold(self, on: bool) -> None:
        """``on``: the socket is not written to (the spool only fills); off: it is again."""
        with self._cond:
            on = on and not self._closing  # (after ``finish``: never held again)
            if self._hold != on:
                self._hold = on
                self._cond.notify()

    def waiting(self) -> tuple[int, int]:
        """Frames and bytes in the spool, not written to the socket yet."""
        with self._cond:
            return self.frames_in - self.frames_out, self.bytes_in - self.bytes_out

    # ------------------------------------------------------------------ the end (off the event loop)
    def finish(self) -> None:
        """Blocking: the rest written to the socket (or, after ``give_up``, up to a message's end),
        then the thread ends and the file is closed."""
        with self._cond:
            self._closing = True
            self._hold = False
            self._go = self._go or self.active
            self._cond.notify()
        self._thread.join()

    def give_up(self) -> None:
        """What is left in the spool is not written (``finish`` returns after the current message)."""
        with self._cond:
            self._give_up = self._closing = True
            self._cond.notify()

    # ------------------------------------------------------------------ the spool's thread
    def _run(self) -> None:
        try:
            self._loop()
        except OSError as e:  # the disk (full, gone) or the socket (the decoding side gone)
            with self._cond:
                self.error = e
                self._todo, self._queued = [], 0
            self.on_error(e)
        finally:
            if self._app is not None:
                self._app.close()
            if self._rbuf is not None:
                self._rbuf.close()
            for fd in (self._fd, self._rfd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fd = self._rfd = None

    def _loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not (self._todo or (self._go and not self._hold and self._end > self._read)
                           or self._closing or self._give_up):
                    cond.wait()
                go, give_up = self._go and not self._hold, self._give_up
            self._to_disk()
            if give_up:
                return
            if go and self._end > self._read:
                self._send_some()
            if self._done():
                return

    def _done(self) -> bool:
        """After a step: the socket given back when all was written to it; whether to end."""
        with self._cond:
            if self._todo:
                return False
            if self._end == self._read and self._go:  # all written to the socket: it goes back
                self.active = self._go = False
                if self._fd is not None and self._end:
                    os.ftruncate(self._fd, 0)
                    if self._app is not None:
                        self._app.base = self._app.pos = 0
                self._end = self._read = 0
                return self._closing
            return self._closing and not self._go  # (closing and not go: nothing is spooled)

    def _to_disk(self) -> None:
        """What was added and is not on disk yet, written to the file."""
        with self._cond:
            todo, self._todo = self._todo, []
            n, self._queued = self._queued, 0
        if todo:
            self._write(todo, n)

    def _write(self, todo: list[bytes | memoryview], n: int) -> None:
        if self._fd is None:
            self._fd = self._open()
        if self._app is not None:
            self._app.write(todo)
            self._end += n
            return
        view: list[bytes | memoryview] = list(todo)
        left = n
        while left:
            sent = os.pwritev(self._fd, view[:512], self._end) if hasattr(os, "pwritev") else \
                os.pwrite(self._fd, view[0], self._end)
            self._end += sent
            left -= sent
            while sent:
                if sent >= len(view[0]):
                    sent -= len(view.pop(0))
                else:
                    view[0] = memoryview(view[0])[sent:]
                    sent = 0

    def _send_some(self) -> None:
        """Whole messages from the file, up to CHUNK bytes (or one bigger message), to the socket."""
        assert self._fd is not None
        data = self._pread(min(CHUNK, self._end - self._read), self._read)
        cut, frames = _whole(data)
        if not frames:  # one message longer than CHUNK
            lm, ld = _HEAD.unpack_from(data)
            data = self._pread(_HEAD.size + lm + ld, self._read)
            cut, frames = len(data), 1
        view = memoryview(data)[:cut]
        while view:
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError, TimeoutError):
                # the decoding side is busy: what was added meanwhile goes to disk while it is
                self._to_disk()
                select.select([], [self.sock], [], WAIT)
                continue
            view = view[sent:]
        self._read += cut
        with self._cond:
            self.frames_out += frames
            self.bytes_out += cut

    def _open(self) -> int:
        """The file, and its writer and reader past the page cache where the file system has them."""
        fd = _temp_file()
        self._app = open_direct(fd)
        if self._app is not None:
            try:
                self._rfd = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECT)
            except OSError:
                self._rfd = None
            self._rbuf = mmap.mmap(-1, CHUNK + 2 * BLOCK)
        return fd

    def _pread(self, n: int, at: int) -> bytes:
        """``n`` bytes of the spool from offset ``at`` (all of them written: ``at + n <= _end``)."""
        assert self._fd is not None
        app = self._app
        if app is None:
            return os.pread(self._fd, n, at)
        parts = []
        if at < app.base:  # in the file (whole buffers were written: block-aligned up to base)
            take = min(n, app.base - at)
            parts.append(self._read_file(take, at))
            at, n = at + take, n - take
        if n > 0:
            i = at - app.base
            parts.append(app.buf[i:i + n])
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _read_file(self, n: int, at: int) -> bytes:
        """``n`` bytes at ``at`` from the part of the file written whole (aligned up to ``_app.base``)."""
        assert self._fd is not None and self._rbuf is not None
        out = []
        while n > 0 and self._rfd is not None:
            start = at - at % BLOCK
            span = min(len(self._rbuf), -(-(at + n - start) // BLOCK) * BLOCK)
            try:
                got = os.preadv(self._rfd, [memoryview(self._rbuf)[:span]], start)
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                os.close(self._rfd)  # the flag taken but the read refused: the ordinary way from now on
                self._rfd = None
                break
            take = min(n, got - (at - start))
            if take <= 0:
                raise OSError(errno.EIO, "the spool file is shorter than what was written to it")
            out.append(self._rbuf[at - start:at - start + take])
            at, n = at + take, n - take
        if n > 0:
            out.append(os.pread(self._fd, n, at))
        return out[0] if len(out) == 1 else b"".join(out)


def _whole(data: bytes) -> tuple[int, int]:
    """How many bytes of ``data`` are whole messages from its start, and how many messages."""
    pos = frames = 0
    size = len(data)
    unpack = _HEAD.unpack_from
    while pos + _HEAD.size <= size:
        lm, ld = unpack(data, pos)
        end = pos + _HEAD.size + lm + ld
        if end > size:
            break
        pos, frames = end, frames + 1
    return pos, frames


def _temp_file() -> int:
    """An unlinked file in the temporary directory (TMPDIR): nothing to clean up, whatever happens."""
    fd, path = tempfile.mkstemp(prefix="kwire-spool-")
    os.unlink(path)
    return fd
