"""The proxy's decoding process keeps the object arenas it frees, for reuse (``_arenas.c``): it
builds and drops a frame's worth of objects at a time, and the interpreter would give each empty
arena back to the system and map a fresh one soon after, a page fault per page (costly on a VM).
(The forwarding process, whose objects are few and small, keeps the interpreter's own way: its
peak memory stays what it was.) Optional: not built, or KWIRE_NO_SPEEDUPS=1, and nothing
changes."""
from __future__ import annotations

import importlib
import os

KEEP = 128  # arenas (1 MiB each on CPython 3.10 and later): at most what the process held at its peak


def keep_arenas(n: int = KEEP) -> bool:
    """Freed arenas kept for reuse in this process; whether they are."""
    if os.environ.get("KWIRE_NO_SPEEDUPS", "") not in ("", "0"):
        return False
    try:
        arenas = importlib.import_module("kwire_cli.proxy._arenas")
    except ImportError:
        return False
    arenas.keep(n)
    return True
