"""The progress bar of files being read (``kwire pcap``, ``kwire dump-log``): on stderr, on a terminal only.

A bar and the lines of output must not share a terminal: Rich redraws its bar in place with cursor
moves on stderr, and a line written to stdout meanwhile lands in the middle of it (a garbled row
on the screen). So the bar is drawn only when stderr is a terminal and stdout is not the same
terminal while rows are written (``enabled``): output to a file or a pipe, or a run that prints
nothing to stdout until it ends (``--summary``), shows the bar; rows streaming to the terminal are
their own progress. ``KWIRE_NO_PROGRESS=1`` turns it off.
"""
from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Callable
from typing import IO, Any, BinaryIO

from kwire_cli.render.safe import escape


class Counting(io.RawIOBase):
    """A read-only file wrapper that reports the bytes read to a callback (progress)."""

    def __init__(self, f: IO[bytes], advance: Callable[[int], object]) -> None:
        self.f = f
        self.advance = advance

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.f.readinto(b)  # type: ignore[attr-defined]
        if n:
            self.advance(n)
        return n or 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        if data:
            self.advance(len(data))
        return data


def _same_terminal(a: IO[Any], b: IO[Any]) -> bool:
    """Whether two streams are one terminal (a tty each, the same device): a bar on one and lines
    on the other would mix."""
    try:
        if not b.isatty():
            return False
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
        return (sa.st_dev, sa.st_ino, sa.st_rdev) == (sb.st_dev, sb.st_ino, sb.st_rdev)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return bool(getattr(b, "isatty", lambda: False)())  # not a real file (a test's stream): its word


def enabled(rows_to_stdout: bool = True) -> bool:
    """Whether to draw the bar: stderr is a terminal, ``KWIRE_NO_PROGRESS`` is unset, and, when
    ``rows_to_stdout`` (lines are written while files are read), stdout is not that terminal."""
    if os.environ.get("KWIRE_NO_PROGRESS") or not sys.stderr.isatty():
        return False
    return not (rows_to_stdout and _same_terminal(sys.stderr, sys.stdout))


class FileProgress:
    """A bar per file being read, on stderr; ``wrap(f, path)`` counts the bytes read from ``f``.
    A context manager: the bars go away when it ends."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        from kwire_cli.render.console import make_console
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), console=make_console(stderr=True), transient=True)

    def __enter__(self) -> FileProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def wrap(self, f: IO[bytes], label: str, total: int | None) -> BinaryIO:
        """``f`` read through a counter that advances a new bar named after ``label`` (its base
        name, escaped; ``total``: its size, None for a stream)."""
        task = self.progress.add_task(escape(os.path.basename(label)), total=total)
        return io.BufferedReader(Counting(f, functools.partial(self.progress.advance, task)))
