"""The decoding side of the proxy: frames go to another process (on Linux; a thread elsewhere), so
decoding never takes the forwarding process's time nor its interpreter lock.

The proxy hands each frame to ``DecodeChannel.put`` on its event loop. Frames are gathered for the
rest of that turn of the loop and written into one end of a socket pair together (``flush``, called
soon by the loop: after the bytes of that turn were forwarded, one ``sendmsg`` and one wake-up of
the decoding side for them all). What the socket does not take waits in a backlog of at most
``backlog`` bytes, written as the socket drains. A frame that would take the backlog past that is
spooled to disk instead, with every later frame until the spool is empty (``spool.Spool``, up to
``spool`` bytes; 0: none), and written to the socket from there as the decoding side catches up:
shown late rather than never. A frame the spool does not take either is counted (``not_shown``),
never waited for: a slow decoder never stalls a client. The decoding
process runs at the idle scheduling class (nice 19 where that is not allowed), so that it only
gets a CPU nothing else wants: the clients, the brokers and forwarding come first, and under load
it falls behind and counts frames as not shown rather than competing (when the proxy stops, it
goes to nice 19 for the frames it has left). With ``priority`` "yield" it is, besides, not fed at
all while the traffic is busy (past ``BUSY`` bytes within ``QUIET`` seconds): the frames go to the
spool, which writes them to it once the traffic has stayed under that for ``QUIET_TICKS`` such
stretches in a row (or the spool is half full). It reads the frames, hands
each to the ``FrameSink`` (which makes and writes the output rows), and when the proxy stops,
after the last frame, sends back ``sink.result()`` (the summary) and the errors the sink raised.

On the socket a frame is ``>II`` (length of the pickled fields, length of the frame) then the
pickled ``(fields, notes)`` then the frame's bytes as they are (size prefix included): the bytes
are never pickled nor joined, ``sendmsg`` writes the parts of many frames as one. The other way,
the decoding side says how far it got, at most every ``PROGRESS_EVERY`` seconds while it works
(``>I`` 0xFFFFFFFF, then ``>qqd``: the frames and the bytes it has read, the time of its last
frame), so that the proxy knows how far behind it is (``DecodeChannel.lag``); at the end its
result (``>I`` length, then the pickled result).
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import itertools
import multiprocessing
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections import deque
from typing import Any, Protocol

from kwire_cli.capture.events import KafkaFrame
from kwire_cli.capture.summary import Summary
from kwire_cli.memory import keep_arenas
from kwire_cli.proxy.spool import Spool

_HEAD = struct.Struct(">II")
_LEN = struct.Struct(">I")
_END = _HEAD.pack(0, 0)
_PROGRESS = 0xFFFFFFFF
_DONE = struct.Struct(">qqd")  # frames and bytes read, the time of the last frame
PROGRESS_EVERY = 0.25  # seconds between the decoding side's word of how far it got
MAX_ERRORS = 100
NICE = 19  # the decoding process yields the CPU to everything else (forwarding, the clients, the brokers)
IOV = 512  # parts per sendmsg (within IOV_MAX, 1024 on Linux)
# the decoding process's cyclic garbage collector: a collection of the youngest objects every
# 100,000 allocations instead of 700 (a Produce request of 7,000 records is some 20,000 of them,
# none of them cyclic: at 700 the collector ran some 30 times a frame, about a sixth of the
# decoding's CPU), the older generations in proportion
GC_THRESHOLDS = (100_000, 20, 100)
# --decode-priority yield: the traffic is busy while BUSY bytes or more are handed over within
# QUIET seconds; the decoding is fed again after QUIET_TICKS stretches of QUIET seconds in a row
# with less (or with the spool past half its cap). One quiet stretch was not enough: librdkafka's
# traffic at full speed has gaps of 20 ms, and each fed the decoding some 5 MB (what its socket
# and its read hold) to decode beside the traffic, 0.2-0.45 CPU s a run of 200 MB.
BUSY = 256 << 10
QUIET = 0.02
QUIET_TICKS = 5
HELD_MOST = 16 << 20  # (yield) a frame bigger goes the ordinary way when the spool is empty (the spool
                      # takes at most spool.MEMORY bytes not on disk yet)


class FrameSink(Protocol):
    """What the decoding side does with frames (runs in the decoding process)."""

    def frame(self, frame: KafkaFrame, notes: list[str]) -> None: ...

    def result(self) -> Any:
        """Picklable; handed back to the proxy when decoding ends."""


class RowsOnly(Summary):
    """The summary when the proxy prints none (no --summary): the rows are counted, nothing else is
    read from them (counting the rest is a pass over every record of every Produce request)."""

    def add(self, r: dict[str, Any], pos: Any = None) -> None:  # noqa: ARG002 (the rows are not read)
        self.frames += 1


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


READ = 1 << 20  # bytes the decoding side asks its socket for at once


class _Incoming:
    """The decoding side's reading: the socket read in big pieces (``READ``), messages cut out of
    them; and its word back of how far it got, at most every ``PROGRESS_EVERY`` seconds while
    frames keep coming, and once more when it has read everything there is (before it waits)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""
        self.pos = 0
        self.frames = self.done = 0      # read so far: frames, and bytes of them on the socket
        self.ts = 0.0                    # the time of the last one
        self.told = (0, time.monotonic())  # frames read at the last word, and when

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes (EOFError: the socket ended first)."""
        pos, buf = self.pos, self.buf
        if len(buf) - pos >= n:
            self.pos = pos + n
            return buf[pos:pos + n]
        parts, have = [buf[pos:]], len(buf) - pos
        self.buf, self.pos = b"", 0
        while True:
            self._idle()
            chunk = self.sock.recv(max(READ, n - have))
            if not chunk:
                raise EOFError
            if have + len(chunk) >= n:
                parts.append(chunk[:n - have])
                self.buf, self.pos = chunk, n - have
                return b"".join(parts)
            parts.append(chunk)
            have += len(chunk)

    def read(self, frames: int, done: int, ts: float) -> None:
        """So far ``frames`` frames of ``done`` bytes, the last one of time ``ts``: said if it is time."""
        self.frames, self.done, self.ts = frames, done, ts
        if time.monotonic() - self.told[1] >= PROGRESS_EVERY:
            self._tell()

    def _tell(self) -> None:
        self.sock.sendall(_LEN.pack(_PROGRESS) + _DONE.pack(self.frames, self.done, self.ts))
        self.told = (self.frames, time.monotonic())

    def _idle(self) -> None:
        """Before waiting for more: what was read since the last word is said, unless more comes
        within PROGRESS_EVERY of that word."""
        if self.frames == self.told[0]:
            return
        wait = max(0.0, self.told[1] + PROGRESS_EVERY - time.monotonic())
        if not select.select([self.sock], [], [], wait)[0]:
            self._tell()


def consume(sock: socket.socket, sink: FrameSink) -> None:
    """The decoding side's loop: frames until the end mark, then the result back."""
    f = _Incoming(sock)
    errors: list[str] = []
    n_errors = 0
    frames = done = 0
    try:
        while True:
            lm, ld = _HEAD.unpack(f.take(_HEAD.size))
            if not lm:
                break
            fields, notes = pickle.loads(f.take(lm))
            f.take(4)  # the frame's size prefix (ld - 4 is the size)
            frame = KafkaFrame._make((*fields[:7], f.take(ld - 4), ld - 4, *fields[7:]))
            try:
                sink.frame(frame, notes)
            except Exception as e:  # the proxy goes on whatever one frame's output does
                n_errors += 1
                if len(errors) < MAX_ERRORS:
                    errors.append(f"{type(e).__name__}: {e}")
            frames += 1
            done += _HEAD.size + lm + ld
            f.read(frames, done, fields[2])
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


def _child(sock: socket.socket, other: socket.socket, sink: FrameSink, low: bool = True) -> None:
    # Ctrl-C, and a SIGTERM to the process group (timeout, systemd, docker stop), reach this process
    # too: the proxy stops it after the last frame, with the summary (it ends without the proxy
    # when its socket closes; at exit the proxy kills it if it is still there)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    other.close()
    if low:
        idle_priority()
    gc.freeze()  # what the proxy made before the fork: never collected, never looked at again
    gc.set_threshold(*GC_THRESHOLDS)
    keep_arenas()
    consume(sock, sink)


class DecodeChannel:
    def __init__(self, sink: FrameSink, backlog: int = 64 << 20, process: bool | None = None,
                 spool: int = 0, priority: str = "low") -> None:
        """``priority``: "low", the decoding process at the idle scheduling class (nice 19 where
        that is not allowed) while the proxy forwards; "normal", as the forwarding process;
        "yield", at the idle class and, while the traffic is busy, not fed at all: the frames go to
        the spool and are decoded when the traffic pauses (without a spool, as "low")."""
        self.sink = sink
        self.low = priority in ("low", "yield")
        self.yielding = priority == "yield" and spool > 0
        self._held = False                   # (yield) the traffic is busy: frames go to the spool
        self._recent = 0                     # bytes handed over since _since
        self._since = 0.0
        self._at_tick = 0                    # taken_bytes at the last _tick
        self._quiet = 0                      # _ticks in a row with less than BUSY handed over
        self._tick_handle: asyncio.TimerHandle | None = None
        self.limit = backlog
        self.spool_cap = spool              # bytes the spool may hold (0: no spool)
        self.spool: Spool | None = None
        self.process = sys.platform.startswith("linux") if process is None else process
        self.sock: socket.socket | None = None
        self._worker: Any = None
        self._backlog: deque[bytes | memoryview] = deque()  # (memoryviews: only at close)
        self._pending = 0                    # bytes in _batch and _backlog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False
        self._batch: list[bytes | memoryview] = []  # parts of the frames put since the last flush
        self._flushing: asyncio.Handle | None = None
        self.broken: str | None = None      # why frames cannot be sent any more
        self.not_shown = 0                  # frames dropped: the backlog was full (or decoding died)
        self.taken = 0                      # frames handed over (not dropped), and their bytes on the socket
        self.taken_bytes = 0
        self.done = (0, 0, 0.0)             # the decoding side's last word: frames and bytes read, last frame's time
        self._back = b""                    # what the decoding side sent, not read as a whole message yet
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
            self._worker = ctx.Process(target=_child, args=(theirs, mine, self.sink, self.low),
                                       name="kwire-decode",
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
        loop.add_reader(mine, self._read_back)
        if self.spool_cap > 0:
            self.spool = Spool(self.spool_cap, mine, self._spool_failed)

    def _spool_failed(self, e: BaseException) -> None:
        """On the spool's thread: it could not write the file or the socket. The channel breaks (on
        the loop): the spool's frames are lost, and a message may have been cut on the socket."""
        def broke() -> None:
            if self.broken is None:
                self._break(e)
        with contextlib.suppress(RuntimeError):  # (the loop is closed: close() finds out)
            if self._loop is not None:
                self._loop.call_soon_threadsafe(broke)

    def _abandon(self) -> None:
        """At exit: a decoding process still there (the proxy did not close) is killed."""
        if self._worker is not None and self._worker.is_alive():
            self._worker.kill()
            self._worker.join(5)

    def _read_back(self) -> None:
        """On the event loop: the decoding side's words of how far it got (the last one kept)."""
        assert self.sock is not None
        try:
            data = self.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the decoding side is gone: sending finds out and says so
            self._loop.remove_reader(self.sock)  # type: ignore[union-attr]
            return
        self._back += data
        self._progress()

    def _progress(self) -> None:
        """The whole progress messages at the start of ``_back`` read (a result stays for ``close``)."""
        back, i, step = self._back, 0, _LEN.size + _DONE.size
        while len(back) - i >= step and _LEN.unpack_from(back, i)[0] == _PROGRESS:
            self.done = _DONE.unpack_from(back, i + _LEN.size)
            i += step
        self._back = back[i:]

    def lag(self) -> tuple[int, int, float | None]:
        """How far behind the decoding side is: frames and bytes handed over and not decoded yet,
        and the time of the last frame it decoded (None: none yet)."""
        frames, done, ts = self.done
        return self.taken - frames, self.taken_bytes - done, (ts if frames else None)

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
        spool = self.spool
        if self.yielding:
            self._traffic(size)
        if spool is not None and (spool.active or (self._held and size <= HELD_MOST)
                                  or (self._pending and self._pending + size > self.limit)):
            # (its pieces as they are: views of the chunks it came in, kept until the spool's thread
            # has written them, within the spool's MEMORY)
            if not spool.add([_HEAD.pack(len(meta), n) + meta, *pieces], size):
                self.not_shown += 1
                return False
            self.taken += 1
            self.taken_bytes += size
            self._handoff()
            return True
        if self._pending and self._pending + size > self.limit:
            self.not_shown += 1
            return False
        self._pending += size
        self.taken += 1
        self.taken_bytes += size
        if self._writing:  # the socket is full: a copy waits (the chunks it came in are not kept)
            self._backlog.append(_HEAD.pack(len(meta), n) + meta)
            self._backlog.append(b"".join(pieces))
            return True
        self._batch += [_HEAD.pack(len(meta), n), meta, *pieces]
        if self._flushing is None and self._loop is not None:
            self._flushing = self._loop.call_soon(self.flush)
        return True

    def _traffic(self, size: int) -> None:
        """(yield) ``size`` bytes handed over now: past BUSY within QUIET seconds the decoding is
        held (the spool fills, its socket not written) until QUIET_TICKS QUIET stretches in a row
        with less."""
        now = time.monotonic()
        if now - self._since > QUIET:
            self._since, self._recent = now, 0
        self._recent += size
        if not self._held and self._recent >= BUSY and self._loop is not None and self.spool is not None \
                and self._spool_room():
            self._held = True
            self.spool.hold(True)
            self._at_tick = self.taken_bytes
            self._quiet = 0
            self._tick_handle = self._loop.call_later(QUIET, self._tick)

    def _spool_room(self) -> bool:
        """The spool is under half its cap (past it, the decoding is fed whatever the traffic)."""
        return self.spool is not None and self.spool.waiting()[1] < self.spool_cap // 2

    def _tick(self) -> None:
        """(yield, on the loop, every QUIET seconds while held) still busy, or fed again after
        QUIET_TICKS quiet ones in a row."""
        self._tick_handle = None
        if self.spool is None or self.sock is None:
            return
        busy = self.taken_bytes - self._at_tick >= BUSY
        self._at_tick = self.taken_bytes
        self._quiet = 0 if busy else self._quiet + 1
        if self._quiet < QUIET_TICKS and self._spool_room() and self._loop is not None:
            self._tick_handle = self._loop.call_later(QUIET, self._tick)
            return
        self._held = False
        self.spool.hold(False)

    def flush(self) -> None:
        """On the event loop: the frames put since the last flush, written in as few ``sendmsg`` as
        the socket takes; what it does not take waits in the backlog (a message is never cut: the
        decoder reads them whole)."""
        if self._flushing is not None:
            self._flushing.cancel()
            self._flushing = None
        batch, self._batch = self._batch, []
        if not batch or self.sock is None:
            return
        if self.broken is not None:  # (its frames were counted as not shown when it broke)
            return
        i = 0
        while i < len(batch):
            part = batch[i:i + IOV]
            try:
                sent = _send(self.sock, part)
            except BlockingIOError:
                sent = 0
            except OSError as e:
                self._break(e)  # (this turn's frames counted with the rest handed over)
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
        self._handoff()

    def _handoff(self) -> None:
        """The socket to the spool when it has frames and the channel has none of its own left."""
        if self.spool is not None and self.spool.active and not self._batch and not self._backlog \
                and not self._writing:
            self.spool.go()

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
        self._handoff()

    def _stop_writing(self) -> None:
        if self._writing and self._loop is not None and self.sock is not None:
            self._loop.remove_writer(self.sock)
        self._writing = False

    def _break(self, e: BaseException) -> None:
        self.broken = f"the decoding side is gone ({e}); frames are forwarded but no longer shown"
        if self.spool is not None:
            self.spool.give_up()
        self.not_shown += self.taken - self.done[0]  # handed over, never said to be read: lost with it
        self.taken = self.done[0]
        self._backlog.clear()
        self._pending = 0
        self._stop_writing()

    def _result(self, f: Any) -> bytes:
        """The decoding side's result (pickled), read after the progress messages before it."""
        back = self._back
        while True:
            if len(back) < _LEN.size:
                back += _read_exact(f, _LEN.size - len(back))
            (n,) = _LEN.unpack_from(back)
            size = _DONE.size if n == _PROGRESS else n
            if len(back) < _LEN.size + size:
                back += _read_exact(f, _LEN.size + size - len(back))
            if n != _PROGRESS:
                return back[_LEN.size:_LEN.size + n]
            self.done = _DONE.unpack_from(back, _LEN.size)
            back = back[_LEN.size + size:]

    def _send_rest(self, sock: socket.socket) -> None:
        """Blocking: the backlog, the spool, the end mark; then the decoding side's result."""
        for part in self._backlog:
            sock.sendall(part)
        self._backlog.clear()
        self._end_spool()
        if self.broken is not None:  # (the spool failed)
            return
        sock.sendall(_END)
        f = sock.makefile("rb")
        self.result, self.errors, self.n_errors = pickle.loads(self._result(f))
        f.close()

    def _end_spool(self) -> None:
        """The spool's frames written to the decoding side (all of them unless ``give_up``); those
        left are counted as not shown."""
        spool = self.spool
        if spool is None:
            return
        spool.finish()
        if self.broken is not None:  # (its frames were counted as not shown when it broke)
            return
        frames, size = spool.waiting()
        self.not_shown += frames
        self.taken -= frames
        self.taken_bytes -= size
        spool.frames_in -= frames  # (counted once)
        spool.bytes_in -= size
        if spool.error is not None and self.broken is None:
            self._break(spool.error)

    def detach(self) -> None:
        """On the event loop, before ``close`` runs on another thread: the loop stops watching the
        socket (``close`` writes the rest and reads the result itself)."""
        self._stop_writing()
        if self._loop is not None and self.sock is not None:
            self._loop.remove_reader(self.sock)

    def spooled(self) -> tuple[int, int]:
        """Frames and bytes in the spool now (not written to the decoding side yet)."""
        return self.spool.waiting() if self.spool is not None else (0, 0)

    def give_up(self) -> None:
        """Any thread: ``close`` does not wait for the spool to be decoded; its frames left are counted
        as not shown."""
        if self.spool is not None:
            self.spool.give_up()

    def close(self, timeout: float = 120) -> None:
        """Blocking (run it off the event loop, after a last ``flush`` on it): the rest of the
        backlog, then the spool's frames (unless ``give_up``), the end mark, then wait for the
        decoding side's result."""
        sock = self.sock
        if sock is None:
            return
        self._stop_writing()
        with contextlib.suppress(Exception):
            if self._loop is not None:
                self._loop.remove_reader(sock)
        if self._flushing is not None:  # not flushed on the loop: the frames go with the backlog
            self._flushing.cancel()
            self._flushing = None
        self._backlog.extend(self._batch)
        self._batch = []
        self._held = False  # (the spool's hold ends with its finish)
        if self.process and self.low:
            _normal_class(self._worker.pid)
        sock.setblocking(True)
        sock.settimeout(timeout)
        try:
            if self.broken is None:
                self._send_rest(sock)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            self.broken = self.broken or f"the decoding side did not finish: {e}"
        finally:
            if self.spool is not None:
                self.spool.give_up()
                self._end_spool()
            sock.close()
            self.sock = None
            if self.process:
                self._worker.join(10)
                if self._worker.is_alive():
                    self._worker.kill()
                    self._worker.join(5)
            else:
                self._worker.join(timeout)
