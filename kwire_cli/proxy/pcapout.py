"""The proxied conversations written as a pcap file, as the client saw them (answers after the
proxy's changes): IPv4 or IPv6 in LINKTYPE_RAW records, a TCP handshake when a connection opens,
the payload in segments of at most 65,000 bytes with consistent sequence numbers, a FIN each way
when it closes. `kwire pcap` and tshark read it like a capture of the client's side."""
from __future__ import annotations

import contextlib
import errno
import functools
import ipaddress
import os
import stat
import struct
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from kwire_cli import speedups
from kwire_cli.proxy.directio import DirectAppender, open_direct

LINKTYPE_RAW = 101
SYN, FIN, PSH, ACK = 0x02, 0x01, 0x08, 0x10
MAX_SEG = 65000
IOV = 1024  # pieces per writev (IOV_MAX on Linux)
DROP_EVERY = 8 << 20  # bytes written between asking the kernel to write the file out and drop it from memory
GATHER = 1 << 20      # bytes waiting that wake the writing thread at once (with ``later``: less waits for it)
SYNC_AFTER = 0.02     # (O_DIRECT) seconds the writing thread waits for more before it writes the last partial block


def _csum(data: bytes | memoryview) -> int:
    """The Internet checksum (RFC 1071). The ones' complement sum of the 16-bit words is the bytes,
    read as one big-endian number, modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), 0 read as 0xFFFF
    unless every word is 0: one C-speed conversion instead of a Python loop over the words."""
    return ~_fold(*_sum(data)) & 0xFFFF


def _py_sum(data: bytes | memoryview) -> tuple[int, bool]:
    """The words' sum modulo 0xFFFF, and whether any word is not 0 (the bytes padded to even)."""
    n = int.from_bytes(data, "big")
    if len(data) % 2:
        n <<= 8
    return n % 0xFFFF, n != 0


_NATIVE_SUM = speedups.load("kwire_cli.proxy._pcapsum")
#: _pcapsum.c's ``word_sum`` (the same in C, a few times faster), unless not built or KWIRE_NO_SPEEDUPS=1
_sum: Callable[[bytes | memoryview], tuple[int, bool]] = _py_sum if _NATIVE_SUM is None else _NATIVE_SUM.word_sum


def _fold(s: int, nonzero: bool) -> int:
    return 0xFFFF if s == 0 and nonzero else s


def open_pcap(path: str) -> BinaryIO:
    """``--write-pcap``'s file, opened without waiting: a FIFO with no reader is an ``OSError`` now
    (opening it for writing would wait for a reader before the proxy even listens)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise OSError(e.errno, "a FIFO with no reader (start its reader first)") from None
        raise
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb")


class PcapOut:
    """Records are made on the proxy's event loop as the bytes are forwarded and written by a
    thread of their own, so that the disk (a write that waits for writeback) never holds up
    forwarding; the file is flushed whenever that thread has caught up (past the page cache:
    when it has had nothing more to write for ``SYNC_AFTER``). Past ``limit`` bytes waiting, the
    event loop waits for the disk: the capture stays whole. ``close()`` writes the rest (the file
    itself stays open). The thread writes a regular file past the page cache where it can
    (``directio``: the records copied into one buffer, written with ``O_DIRECT`` 4 MiB at a time,
    the last partial block the ordinary way once nothing more came for ``SYNC_AFTER``);
    otherwise what waits with ``os.writev``, up to ``IOV`` records' pieces per system call, when
    the file has a descriptor."""

    def __init__(self, f: BinaryIO, limit: int = 64 << 20,
                 later: Callable[[Callable[[], None]], object] | None = None) -> None:
        """``later(fn)``: calls ``fn`` soon on the caller's thread (the event loop's ``call_later``):
        then records are handed to the writing thread when ``GATHER`` bytes wait, or when ``fn``
        runs, not one wake-up per call (without it: at once)."""
        self.f = f
        self.limit = limit
        self._later = later
        self._kick_due = False              # a ``_kick`` is on its way (``later``)
        self._todo: list[bytes | memoryview] = []
        self._size = 0
        self._closed = False
        self._idle = False                  # the writing thread waits for records
        self.error: OSError | None = None
        self._cond = threading.Condition()
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINKTYPE_RAW))
        f.flush()
        try:
            self._fd: int | None = f.fileno() if hasattr(os, "writev") else None
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
            self._fd = None
        self._end = 0                       # the file's offset after what was written
        self._advised = (0, 0)              # up to these offsets the pages were let go of / are being written out
        self._drop = False                  # a regular file: its pages are let go of as they are written out
        self._direct: DirectAppender | None = open_direct(self._fd) if self._fd is not None else None
        if self._fd is not None and self._direct is None and hasattr(os, "posix_fadvise"):
            try:
                self._drop = stat.S_ISREG(os.fstat(self._fd).st_mode)
                self._end = os.lseek(self._fd, 0, os.SEEK_CUR)
            except OSError:
                self._drop = False
        self._thread = threading.Thread(target=self._write_loop, name="kwire-pcap", daemon=True)
        self._thread.start()

    def _write_loop(self) -> None:
        behind = False  # (O_DIRECT) records given to the appender and not all in the file yet
        while True:
            todo, closed = self._take(behind)
            if not todo:
                if behind:
                    self._sync()
                behind = False
                if closed:
                    return
                continue
            n = sum(len(piece) for piece in todo)
            try:
                if self.error is None:
                    self._write(todo)
                with self._cond:
                    more = bool(self._todo)
                if not more and self.error is None:
                    if self._direct is not None:
                        behind = True
                    elif self._fd is None:
                        self.f.flush()
            except OSError as e:  # a full disk: the proxy goes on, the capture stops here
                self.error = e
            with self._cond:
                self._size -= n
                self._cond.notify_all()

    def _take(self, behind: bool) -> tuple[list[bytes | memoryview], bool]:
        """What waits (when something does), and whether the capture is closing; ``behind``: none
        for SYNC_AFTER is an answer too (empty)."""
        cond = self._cond
        with cond:
            while not self._todo and not self._closed:
                self._idle = True
                if not behind:
                    cond.wait()
                elif not cond.wait(SYNC_AFTER) and not self._todo:
                    break
            self._idle = False
            todo, self._todo = self._todo, []
            return todo, self._closed

    def _sync(self) -> None:
        """(O_DIRECT) the file made whole: every record given is in it."""
        if self.error is None and self._direct is not None:
            try:
                self._direct.sync()
            except OSError as e:
                self.error = e

    def _write(self, todo: list[bytes | memoryview]) -> None:
        if self._direct is not None:
            self._direct.write(todo)
            return
        if self._fd is None:
            for piece in todo:
                self.f.write(piece)
            return
        i = 0  # the file object holds nothing unwritten (flushed in __init__, then only writev)
        while i < len(todo):
            batch = todo[i:i + IOV]
            sent = os.writev(self._fd, batch)
            self._end += sent
            for piece in batch:
                if sent < len(piece):  # a short write: the rest of this piece, then on
                    todo[i] = memoryview(piece)[sent:]
                    break
                sent -= len(piece)
                i += 1
        if self._drop and self._end - self._advised[1] >= DROP_EVERY:
            self._let_go()

    def _let_go(self) -> None:
        """The pages written since the last call are sent to the disk, and those of the call before
        (written out by now) dropped from memory: the capture streams through a few MiB of the page
        cache instead of filling it. (Fresh pages cost far more than the copy into them where the
        memory a machine let go of must come back from its host: 74% of the proxy's CPU time went
        to copying into new page-cache pages in a run of 200 MB.) Pages not yet written out stay."""
        done, started = self._advised
        with contextlib.suppress(OSError):
            os.posix_fadvise(self._fd, done, self._end - done, os.POSIX_FADV_DONTNEED)  # type: ignore[arg-type]
        self._advised = (started, self._end)

    def _put(self, pieces: list[bytes | memoryview], n: int) -> None:
        with self._cond:
            while self._size > self.limit and not self._closed:
                self._cond.wait()
            self._todo += pieces
            self._size += n
            if not self._idle:
                return
            if self._later is None or self._size >= GATHER:
                self._cond.notify_all()
                return
        if not self._kick_due:
            self._kick_due = True
            self._later(self._kick)

    def _kick(self) -> None:
        """The writing thread woken for what waits (``later``'s call)."""
        self._kick_due = False
        with self._cond:
            if self._idle and self._todo:
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        if self._direct is not None:
            self._direct.close()
        if self.error is None and self._fd is None:
            self.f.flush()

    def _packet(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
                payload: bytes | memoryview = b"") -> None:
        pieces: list[bytes | memoryview] = []
        self._put(pieces, self._record(pieces, src, dst, seq, ack, flags, payload))

    def _record(self, pieces: list[bytes | memoryview], src: tuple[str, int], dst: tuple[str, int], seq: int,
                ack: int, flags: int, payload: bytes | memoryview = b"") -> int:
        """One packet's record appended to ``pieces`` (its header, then the payload as it is); its size."""
        s, d = _ip(src[0]), _ip(dst[0])
        plen = len(payload)
        tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                          65535, 0, 0)
        # the payload's sum is added to the pseudo header's and the TCP header's (both even in length,
        # so the payload's words stay aligned): the payload is read once and never copied
        psum, pnz = _sum(payload) if plen else (0, False)
        if s.version == 4 and d.version == 4:
            pseudo = s.packed + d.packed + struct.pack("!BBH", 0, 6, len(tcp) + plen)
            hsum, hnz = _sum(pseudo + tcp)
            c = ~_fold((hsum + psum) % 0xFFFF, hnz or pnz) & 0xFFFF
            tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + plen, 0, 0x4000, 64, 6, 0,
                             s.packed, d.packed)
            ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
        else:
            s6 = s if s.version == 6 else ipaddress.IPv6Address(f"::ffff:{s}")
            d6 = d if d.version == 6 else ipaddress.IPv6Address(f"::ffff:{d}")
            pseudo = s6.packed + d6.packed + struct.pack("!I3xB", len(tcp) + plen, 6)
            hsum, hnz = _sum(pseudo + tcp)
            c = ~_fold((hsum + psum) % 0xFFFF, hnz or pnz) & 0xFFFF
            tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
            ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp) + plen, 6, 64, s6.packed, d6.packed)
        t = time.time()
        n = len(ip) + len(tcp) + plen
        pieces.append(struct.pack("<IIII", int(t), int((t % 1) * 1_000_000), n, n) + ip + tcp)
        if plen:
            pieces.append(payload)
        return 16 + n

    def connection(self, client: tuple[str, int], server: tuple[str, int]) -> PcapConnection:
        return PcapConnection(self, client, server)


@functools.lru_cache(maxsize=1024)
def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


class PcapConnection:
    def __init__(self, out: PcapOut, client: tuple[str, int], server: tuple[str, int]) -> None:
        self.out, self.ends = out, (client, server)
        self.seq = [1000, 5000]
        c, s = client, server
        out._packet(c, s, self.seq[0], 0, SYN)
        out._packet(s, c, self.seq[1], self.seq[0] + 1, SYN | ACK)
        self.seq = [self.seq[0] + 1, self.seq[1] + 1]
        out._packet(c, s, self.seq[0], self.seq[1], ACK)

    def data(self, side: int, payload: bytes | memoryview) -> None:
        """``side``: 0 client to server, 1 server to client."""
        a, b = self.ends[side], self.ends[1 - side]
        mv = memoryview(payload)
        pieces: list[bytes | memoryview] = []
        size = 0
        for i in range(0, len(payload), MAX_SEG):
            chunk = mv[i:i + MAX_SEG]
            size += self.out._record(pieces, a, b, self.seq[side], self.seq[1 - side], PSH | ACK, chunk)
            self.seq[side] += len(chunk)
        self.out._put(pieces, size)

    def close(self) -> None:
        c, s = self.ends
        self.out._packet(c, s, self.seq[0], self.seq[1], FIN | ACK)
        self.out._packet(s, c, self.seq[1], self.seq[0] + 1, FIN | ACK)
        self.out._packet(c, s, self.seq[0] + 1, self.seq[1] + 1, ACK)
