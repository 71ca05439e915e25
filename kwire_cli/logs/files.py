"""Which files a ``kwire dump-log`` argument stands for, and the topic each belongs to.

A partition directory is named ``TOPIC-PARTITION`` (``__consumer_offsets-12``); a KRaft metadata
log is ``__cluster_metadata-0``. Segment files are named by their base offset (20 digits).
"""
from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from kwire_cli.capture.inputs import file_kind
from kwire_cli.errors import KwireError
from kwire_cli.inputs.paths import expand_paths, is_glob
from kwire_cli.inputs.source import SourceError

KINDS = {".log": "segment", ".index": "offset-index", ".timeindex": "time-index", ".checkpoint": "snapshot",
         ".snapshot": "producer-snapshot", ".txnindex": "txn-index"}
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


@dataclass(frozen=True)
class LogFile:
    path: str
    kind: str          # segment, offset-index, time-index, snapshot, producer-snapshot, txn-index
    topic: str | None  # from --topic, else the partition directory's name
    partition: int | None
    base_offset: int | None  # from the file name, when it is a number

    @property
    def sibling_log(self) -> str:
        """The segment an index belongs to (same base name, ``.log``)."""
        return os.path.splitext(self.path)[0] + ".log"


def topic_of(path: str) -> tuple[str | None, int | None]:
    """(topic, partition) from the name of the directory holding ``path``."""
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    m = _PARTITION_DIR.match(parent)
    if m is None:
        return None, None
    return m.group(1), int(m.group(2))


def _order(name: str) -> tuple[str, int]:
    stem, ext = os.path.splitext(name)
    return stem, list(KINDS).index(ext)


def _base_offset(path: str) -> int | None:
    stem = os.path.basename(path).split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def _log_file(path: str, topic: str | None) -> LogFile:
    ext = os.path.splitext(path)[1]
    kind = KINDS.get(ext)
    if kind is None:
        raise KwireError(f"{path}: not a log file (expected {', '.join('*' + e for e in KINDS)})")
    t, part = topic_of(path)
    if kind == "snapshot":
        t = "__cluster_metadata"  # KRaft snapshots (and bootstrap.checkpoint) hold metadata records
    return LogFile(path, kind, topic or t, part, _base_offset(path))


def _what(path: str) -> str | None:
    """None for a regular file (through a symbolic link too), else what it is."""
    if not os.path.exists(path):
        return "dangling symbolic link" if os.path.islink(path) else "file that is gone"
    return file_kind(path)


def log_files(args: list[str], topic: str | None = None,
              on_skip: Callable[[str, str], None] | None = None) -> list[LogFile]:
    """The files FILE|DIR arguments stand for: a file as given (its kind from its extension); a
    directory, the log files under it (recursively, sorted: each partition's files in base-offset
    order), other files there skipped; a quoted glob, the log files it matches, in the same order.
    Only regular files are read: under a directory or a glob, a FIFO, a socket, a device or a
    dangling symbolic link named like a log file is told to ``on_skip(path, what)`` and skipped (a
    FIFO would block the reading for ever, a device never end); named itself, it is an error."""
    out: list[LogFile] = []
    for arg in args:
        if os.path.isdir(arg):
            found = []
            for root, dirs, files in os.walk(arg):
                dirs.sort()
                # each segment's files together: the log, then its indexes
                for name in sorted((n for n in files if os.path.splitext(n)[1] in KINDS), key=_order):
                    path = os.path.join(root, name)
                    what = _what(path)
                    if what is None:
                        found.append(path)
                    elif on_skip is not None:
                        on_skip(path, what)
            if not found:
                raise KwireError(f"{arg}: no log files ({', '.join('*' + e for e in KINDS)}) under it")
            out.extend(_log_file(p, topic) for p in found)
        elif os.path.exists(arg):
            what = file_kind(arg)
            if what is not None:
                raise KwireError(f"{arg}: a {what}, not a regular file: dump-log reads log files")
            out.append(_log_file(arg, topic))
        elif is_glob(arg) and glob.glob(arg, recursive=True):
            # a quoted glob, through the one expander of every command: its log files, each
            # directory's in base-offset order (a segment, then its indexes)
            found = expand_paths([arg], accept=_not_a_log_file, on_skip=on_skip).paths
            if not found:
                raise KwireError(f"{arg}: no log files ({', '.join('*' + e for e in KINDS)}) match")
            found.sort(key=lambda p: (os.path.dirname(p), _order(os.path.basename(p))))
            out.extend(_log_file(p, topic) for p in found)
        else:
            raise SourceError(f"{arg}: no such file or directory")  # an input that cannot be read: exit 2
    return out


def _not_a_log_file(path: str) -> str | None:
    return None if os.path.splitext(path)[1] in KINDS else "not a log file"
