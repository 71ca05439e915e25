"""The JSON writers' bytes gathered into large writes.

A row of JSON lines is a line and its newline, or a separator and a line: two writes, each a
system call where the stream does not buffer (``PYTHONUNBUFFERED=1``, common in containers,
leaves ``sys.stdout``'s binary side unbuffered) or where the row is longer than the stream's
buffer (8 KiB). ``Gathered`` holds what it is given up to ``SIZE`` bytes and writes that at once;
a piece of ``SIZE`` or more goes out as it is, after what was held. ``flush`` writes what is held
and flushes the stream: the writers call it after the last row, after each row of a live capture,
and ``print_rows`` when the rows stop on an error, so no row written is lost."""
from __future__ import annotations

from typing import IO

SIZE = 1 << 16


class Gathered:
    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.held = bytearray()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self.held
        if len(data) >= SIZE:
            if held:
                self._out(held)
                held.clear()
            self._out(data)
            return
        held += data
        if len(held) >= SIZE:
            self._out(held)
            held.clear()

    def flush(self) -> None:
        if self.held:
            self._out(self.held)
            self.held.clear()
        self.out.flush()

    def _out(self, data: bytes | bytearray | memoryview) -> None:
        """All of ``data`` written: an unbuffered (raw) stream may take part of it in one call."""
        view = memoryview(data)
        while view:
            n = self.out.write(view)
            if n is None or n >= len(view):  # (None: a non-blocking stream that took nothing: as before)
                return
            view = view[n:]
