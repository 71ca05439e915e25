"""Which files a capture command reads: a directory stands for the files under it, in rotation order.

* ``rotation_key`` orders file names as tcpdump writes rotated files: ``-C`` appends a number to the
  name (``cap``, ``cap1``, ``cap2`` ... ``cap10``), ``-W`` pads it (``cap00``), ``-G`` names files
  by a strftime pattern (``cap-2024-05-01_10:00:00``). Runs of digits compare as numbers, so
  ``cap2`` comes before ``cap10`` (string order put ``cap10`` first); with zero-padded or
  date-first names this is the same as string order.
* ``files_under`` walks a directory: regular files only. A FIFO, socket or device would block a
  reader or read forever: it is skipped with a note (``on_skip``). Named explicitly, a FIFO is read
  as a stream (``is_stream``).
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from typing import Any

_DIGITS = re.compile(r"(\d+)")


def rotation_key(path: str) -> tuple[Any, ...]:
    """Sort key: the path's parts with runs of digits compared as numbers (``cap2`` < ``cap10``)."""
    parts = _DIGITS.split(path)
    return tuple((0, int(p), len(p)) if i % 2 else (1, p, 0) for i, p in enumerate(parts))


def rotation_order(paths: list[str]) -> list[str]:
    """``paths`` sorted in rotation order (see ``rotation_key``)."""
    return sorted(paths, key=rotation_key)


def file_kind(path: str) -> str | None:
    """None for a regular file (or one that cannot be examined: opening it reports why), else what
    it is: "fifo", "socket", "character device", "block device", "directory"."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISDIR(mode):
        return "directory"
    return "special file"


def is_stream(path: str) -> bool:
    """A FIFO (or a character device such as /dev/stdin): read once, front to back, never reopened."""
    return file_kind(path) in ("fifo", "character device")


def files_under(directory: str, on_skip: Callable[[str, str], object] | None = None) -> list[str]:
    """Every regular file under ``directory``, recursively, hidden files and folders skipped, in
    rotation order (``rotation_key``). Anything else (FIFOs, sockets, devices, dangling links) is
    skipped: ``on_skip(path, what)`` is told about each."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted((d for d in dirs if not d.startswith(".")), key=rotation_key)
        for f in files:
            if f.startswith("."):
                continue
            p = os.path.join(root, f)
            try:
                mode = os.stat(p).st_mode
            except OSError:
                if on_skip is not None:
                    on_skip(p, "unreadable or a dangling link")
                continue
            if stat.S_ISREG(mode):
                found.append(p)
            elif on_skip is not None:
                on_skip(p, file_kind(p) or "special file")
    return rotation_order(found)
