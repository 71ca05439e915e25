"""The files a list of FILE, DIR and GLOB arguments stands for: one expander for every command.

* a **directory** stands for the regular files under it, recursively (hidden files and folders
  skipped), in rotation order (``cap2`` before ``cap10``: ``kwire_cli.capture.inputs``);
* a **glob** (``'traces/*.pcap*'``, ``**`` recursive), when no file has that name, for the regular
  files it matches, in rotation order;
* a **file** named on the command line, as given.

What a directory or a glob holds that the command does not read is skipped, never an error: a
FIFO, socket or device (``on_skip(path, what)`` is told about each) and, when ``accept`` is given,
a file it refuses (``accept(path)`` returns why: a ``manifest.json`` among captures); those are
listed together in ``Expansion.refused`` for one note. A file named on the command line is the
command's to read: its errors are the command's (``not a pcap or pcapng file``).

A name that is neither a file, a directory nor a glob that matches is a ``SourceError`` naming
it (an input that cannot be read: exit code 2 in every command).
"""
from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kwire_cli.capture.formats import SNIFF_BYTES, capture_kind, sniff
from kwire_cli.capture.inputs import file_kind, files_under, rotation_order
from kwire_cli.inputs.source import SourceError

_GLOB_CHARS = frozenset("*?[")


@dataclass
class Expansion:
    """The files to read, in order, and the files of directories and globs left out because
    ``accept`` refused them: (path, why)."""

    paths: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def is_glob(spec: str) -> bool:
    """True when ``spec`` holds a glob character (``*``, ``?``, ``[``)."""
    return not _GLOB_CHARS.isdisjoint(spec)


def expand_paths(specs: Iterable[str], *, what: str = "FILES",
                 on_skip: Callable[[str, str], object] | None = None,
                 accept: Callable[[str], str | None] | None = None,
                 special: bool = True, unique: bool = False) -> Expansion:
    """The files ``specs`` stand for (see the module's description).

    ``special``: a FIFO or device named on the command line is kept (read as a stream); with
    False it is a ``SourceError`` (a reader of byte ranges cannot read it). ``unique``: a file
    reached twice (named twice, or through two directories, links or globs) is read once.
    Names that do not exist are checked first, before any directory is walked: the error names
    the first and counts the rest."""
    specs = list(specs)
    missing = [s for s in specs if not os.path.lexists(s) and not (is_glob(s) and glob.glob(s, recursive=True))]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        first = missing[0]
        raise SourceError(f"{what}: no such file{' matches' if is_glob(first) else ':'} {first}{more}")
    out = Expansion()
    seen: set[str] = set()
    for spec in specs:
        if os.path.isdir(spec):
            found = _accepted(files_under(spec, on_skip), accept, out)
        elif os.path.lexists(spec):
            kind = file_kind(spec)
            if kind is not None and not special:
                raise SourceError(f"{what}: {spec} is a {kind}, not a regular file")
            found = [spec]
        else:
            found = []
            for p in glob.glob(spec, recursive=True):
                kind = file_kind(p)
                if kind is None and os.path.isfile(p):
                    found.append(p)
                elif kind not in (None, "directory") and on_skip is not None:
                    on_skip(p, kind)
            found = _accepted(rotation_order(found), accept, out)
        for p in found:
            key = os.path.realpath(p)
            if unique and key in seen:
                continue
            seen.add(key)
            out.paths.append(p)
    return out


def _accepted(paths: list[str], accept: Callable[[str], str | None] | None, out: Expansion) -> list[str]:
    if accept is None:
        return paths
    kept = []
    for p in paths:
        why = accept(p)
        if why is None:
            kept.append(p)
        else:
            out.refused.append((p, why))
    return kept


def not_a_capture(path: str) -> str | None:
    """None when ``path`` starts as a capture does (pcap, pcapng, either gzip-compressed); else
    why not (``accept`` for the capture commands). A file that cannot be read is accepted: reading
    it says why."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            if sniff(head) == "gzip":
                head += f.read(SNIFF_BYTES - 4)
    except OSError:
        return None
    if not head:
        return "empty"
    return None if capture_kind(head) is not None else "not a pcap or pcapng file"
