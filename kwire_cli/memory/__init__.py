"""A process that builds and drops many objects keeps the memory it frees, for reuse
(``_arenas.c``): the proxy's decoding process (a frame's worth of objects at a time) and
spark-decode's Python workers (a capture's connections, a task at a time). The interpreter would
give each empty object arena back to the system and map a fresh one soon after, and glibc's
malloc would do the same with large blocks and the heap's top: a page fault per page of each
fresh mapping (costly on a VM). Kept, a process holds the memory it needed at its peak, no more.
Optional: not built, or KWIRE_NO_SPEEDUPS=1, and nothing changes."""
from __future__ import annotations

from types import ModuleType

from kwire_cli import speedups

KEEP = 128  # arenas (1 MiB each on CPython 3.10 and later): at most what the process held at its peak


def _native() -> ModuleType | None:
    return speedups.load("kwire_cli.memory._arenas")


def keep_arenas(n: int = KEEP) -> bool:
    """Freed object arenas (up to ``n``) kept for reuse in this process; whether they are."""
    arenas = _native()
    if arenas is None:
        return False
    arenas.keep(n)
    return True


def keep_malloc(mmap: int = 256 << 20, trim: int = 256 << 20, top_pad: int | None = 16 << 20) -> bool:
    """glibc's malloc keeps freed large blocks and the heap's top for reuse in this process (and the
    processes it forks): blocks under ``mmap`` bytes come from the heap, not a mapping of their own;
    the heap's top is given back only past ``trim`` bytes free; each growth takes ``top_pad`` more
    (None: glibc's own). Fixed, where glibc's thresholds would grow only after a large block was
    freed, one at a time. Whether it does (not with another C library)."""
    arenas = _native()
    try:
        return bool(arenas is not None and arenas.keep_malloc(mmap, trim, -1 if top_pad is None else top_pad))
    except TypeError:  # a build older than its sources (no thresholds): nothing changes
        return False
