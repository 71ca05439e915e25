"""A cache of loaded spec folders, so that a command does not parse ~200 JSON spec files each time.

A folder's ``Registry`` is pickled into the user's cache directory (``$XDG_CACHE_HOME/kwire`` or
``~/.cache/kwire``, created private, 0700) under a name made from what it depends on: kwire's
version, Python's, the folder's real path, every ``*.json`` file's name, size and modification
time, and those of the model module the pickles are of. A spec file that changes, a file added or
removed, another kwire or Python: another name, so a stale cache is never read. Unpickling runs
code named in the file, so a cache is read only from a directory the user owns that nobody else
can write, from a file the user owns; anything unexpected (a bad file, no home, a read-only
disk) falls back to parsing the specs, silently.
``KWIRE_NO_SPEC_CACHE=1`` turns the cache off.
"""
from __future__ import annotations

import os
import pickle
import stat
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

MAX_KEEP = 16  # cached folders kept; older ones are removed when a new one is written


def cache_dir() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    return Path(base) / "kwire"


def _key(folder: str) -> str | None:
    """What the cached value depends on, as one string (kept in the file, compared on reading)."""
    from kwire_cli import __version__
    try:
        entries = sorted((e.name, e.stat()) for e in os.scandir(folder) if e.name.endswith(".json"))
    except OSError:
        return None
    parts = [__version__, sys.version, os.path.realpath(folder)]
    try:  # the model the pickles are of (a checkout's model changes without a new version)
        model = os.stat(os.path.join(os.path.dirname(__file__), "model.py"))
        parts.append(f"model.py:{model.st_size}:{model.st_mtime_ns}")
    except OSError:
        pass
    parts += [f"{name}:{st.st_size}:{st.st_mtime_ns}" for name, st in entries]
    return "\0".join(parts)


def key_digest(key: str | bytes) -> str:
    """A cached file's name part for a key: two checksums, 16 hex digits (no hashlib: its import
    costs more than the cache saves)."""
    b = key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(b):08x}{zlib.adler32(b):08x}"


def _name(key: str) -> str:
    """The file name of a key (a collision is harmless: the file's own key is compared)."""
    return f"specs-{key_digest(key)}.pickle"


def private_dir(d: Path) -> bool:
    """The directory is ours and nobody else can write it (or rename files in it)."""
    try:
        st = os.lstat(d)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def cached(folder: str, build: Callable[[], T], kind: type[T]) -> T:
    """``build()`` (the folder's parsed specs), or the pickled result of an earlier build of the
    same files. ``kind``: the type the cached value must have."""
    if os.environ.get("KWIRE_NO_SPEC_CACHE", "") not in ("", "0"):
        return build()
    d = cache_dir()
    key = _key(folder)
    if d is None or key is None:
        return build()
    path = d / _name(key)
    if private_dir(d):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                if os.fstat(fd).st_uid == os.getuid():
                    with os.fdopen(fd, "rb") as f:
                        fd = -1
                        stored_key, value = pickle.load(f)
                    if stored_key == key and isinstance(value, kind):
                        return value
            except Exception:  # a damaged or foreign cache file: parse the specs instead
                pass
            finally:
                if fd >= 0:
                    os.close(fd)
    value = build()
    _store(d, path, (key, value))
    return value


def _store(d: Path, path: Path, value: object) -> None:
    import tempfile
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not private_dir(d):
            return
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".specs-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        old = sorted(d.glob("specs-*.pickle"), key=lambda p: p.stat().st_mtime)
        for p in old[:-MAX_KEEP]:
            p.unlink()
    except Exception:  # no cache is no error: the next run parses the specs again
        return
