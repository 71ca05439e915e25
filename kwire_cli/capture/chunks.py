"""Reading a capture file in chunks: ``Chunks`` (a record reader's buffer over a file object, read
a megabyte at a time, skipping what it need not hold), ``Gunzip`` (a gzip-compressed capture,
streamed), ``Prefixed`` (the bytes a format sniff read, then the rest of the file)."""
from __future__ import annotations

import zlib
from typing import BinaryIO

from kwire_cli.errors import CaptureError

CHUNK = 1 << 20


def _read_once(f: BinaryIO | Gunzip | Prefixed, n: int) -> bytes:
    """One read of up to ``n`` bytes: b"" at end of file, and for a compressed stream cut short."""
    try:
        data = f.read(n)
    except EOFError:
        return b""
    return b"" if data is None else data


def read_fully(f: BinaryIO | Gunzip | Prefixed, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads; fewer only at end of file.

    A compressed stream cut short (gzip's EOFError) reads as the end of the file, so the record
    layer reports the truncated record like any other cut capture.
    """
    data = _read_once(f, n)
    if len(data) >= n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        try:
            more = f.read(n - got)
        except EOFError:
            break
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_some(f: BinaryIO | Gunzip | Prefixed, least: int, most: int) -> bytes:
    """Read at least ``least`` bytes (fewer only at end of file) and at most ``most``: one read
    asks for ``most``, further reads only for what ``least`` still lacks. A regular file fills
    the whole chunk at once; a stream (a pipe, a followed file: ``kwire_cli.capture.live``) gives
    what has arrived, so a packet is read as soon as its bytes are there and never waits for a
    chunk's worth of later packets."""
    data = _read_once(f, most)
    if len(data) >= least or not data:
        return data
    more = read_fully(f, least - len(data))
    return data + more if more else data


class Chunks:
    """A sliding window over a binary stream: ``ensure(pos, n)`` makes buf[pos:pos+n] present.

    Kept as attributes (buf, base) that the record loops copy into locals; ``base`` is the file
    offset of ``buf[0]`` (for error messages).
    """

    __slots__ = ("f", "buf", "base", "eof")

    def __init__(self, f: BinaryIO | Gunzip | Prefixed, initial: bytes = b""):
        self.f = f
        self.buf = initial
        self.base = 0
        self.eof = False

    def refill(self, pos: int, need: int) -> int:
        """Drop buf[:pos], read so that at least ``need`` bytes follow; return the new pos (0)."""
        rest = self.buf[pos:]
        self.base += pos
        if self.eof:
            self.buf = rest
            return 0
        want = need - len(rest)
        data = read_some(self.f, want, want if want > CHUNK else CHUNK)
        if len(data) < want or not data:
            self.eof = True
        self.buf = rest + data if rest else data
        return 0

    def discard(self, pos: int, n: int) -> tuple[int, int]:
        """Skip ``n`` bytes from ``pos`` without buffering them: (bytes skipped, new pos)."""
        avail = len(self.buf) - pos
        if n <= avail:
            return n, pos + n
        skipped = avail
        self.base += len(self.buf)
        self.buf = b""
        left = n - avail
        while left > 0:
            d = read_fully(self.f, min(left, CHUNK))
            if not d:
                self.eof = True
                break
            skipped += len(d)
            left -= len(d)
            self.base += len(d)
        return skipped, 0


class Gunzip:
    """Streaming gzip decompression (several members allowed). A stream cut short just ends: the
    bytes decompressed so far are all returned, and the record layer reports the cut."""

    def __init__(self, f: BinaryIO | Prefixed, label: str):
        self.f = f
        self.label = label
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.out = bytearray()
        self.done = False

    def read(self, n: int = -1) -> bytes:
        # (one read of what has arrived at a time: a stream's reader asks again for what it lacks)
        while not self.done and (n < 0 or not self.out):
            raw = self.f.read(1 << 16)
            if not raw:
                self.done = True
                break
            while raw:
                try:
                    self.out += self.z.decompress(raw)
                except zlib.error as e:
                    raise CaptureError(f"{self.label}: gzip data corrupt: {e}") from None
                if self.z.eof:
                    raw = self.z.unused_data
                    self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    raw = b""
        if n < 0 or n >= len(self.out):
            data = bytes(self.out)
            self.out.clear()
        else:
            data = bytes(self.out[:n])
            del self.out[:n]
        return data


class Prefixed:
    """A read-only file object that first returns ``head`` then the rest of ``f``."""

    def __init__(self, head: bytes, f: BinaryIO | Prefixed):
        self.head = head
        self.f = f

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n is None or n < 0:
                d = self.head + self.f.read()
                self.head = b""
                return d
            d = self.head[:n]
            self.head = self.head[n:]
            if len(d) < n:
                d += self.f.read(n - len(d)) or b""
            return d
        return self.f.read(n)
