"""Which files a capture command reads: a directory stands for the files under it."""
from __future__ import annotations

import os


def files_under(directory: str) -> list[str]:
    """Every file under ``directory``, recursively, hidden files and folders skipped, sorted by path
    (so that tcpdump's rotated files, -C/-G, come in their order)."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(root, f) for f in files if not f.startswith(".")]
    return sorted(found)
