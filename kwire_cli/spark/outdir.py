"""What spark-decode may replace: ``--out`` is checked before Spark starts, because Spark's
overwrite mode deletes the whole output directory before a task reads an input.

An output directory that is, or holds, one of the inputs is refused; so is a symbolic link (also
written with a trailing slash); with ``--overwrite`` a directory that is not empty is replaced only
when everything in it is what a spark-decode run writes there (``api_name=*`` partitions of
``part-*`` files, ``_SUCCESS``, ``_kwire_*.json``, Hadoop's ``.crc`` files and ``_temporary``)."""
from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable

from kwire_cli.errors import SparkJobError

__all__ = ["UnsafeOutput", "check_out", "create_nofollow", "local_path", "name_jsonl"]

# the names a spark-decode run writes at the top of --out, and inside each api_name=* directory
TOP_NAMES = ("api_name=*", "_SUCCESS", "._SUCCESS.crc", "_kwire_*.json", "._kwire_*.json.crc", "_temporary")
PARTITION_NAMES = ("part-*", ".part-*.crc")


class UnsafeOutput(SparkJobError):
    """An ``--out`` that replacing would delete what kwire did not write (a usage error: exit 2)."""


def local_path(out: str) -> str | None:
    """``out`` as a local path (``file://`` stripped), or None for another file system's URI."""
    if out.startswith("file://"):
        return out[len("file://"):]
    return None if "://" in out else out


def _within(inner: str, outer: str) -> bool:
    try:
        return os.path.commonpath([inner, outer]) == outer
    except ValueError:  # one absolute, one not; different drives
        return False


def _foreign(root: str) -> str | None:
    """The first entry under ``root`` a spark-decode run does not write, or None."""
    with os.scandir(root) as top:
        for e in top:
            if not any(fnmatch.fnmatchcase(e.name, p) for p in TOP_NAMES):
                return e.name
            if e.name.startswith("api_name="):
                if e.is_symlink() or not e.is_dir():
                    return e.name
                with os.scandir(e.path) as part:
                    for f in part:
                        if f.is_symlink() or not f.is_file() \
                                or not any(fnmatch.fnmatchcase(f.name, p) for p in PARTITION_NAMES):
                            return os.path.join(e.name, f.name)
    return None


def check_out(out: str, inputs: Iterable[str], paths: Iterable[str], overwrite: bool) -> None:
    """Raise ``UnsafeOutput`` unless writing the rows to ``out`` (replacing it with ``overwrite``)
    deletes nothing but a previous run's output. ``inputs``: the arguments as given (directories
    too); ``paths``: the files they expand to. A non-empty ``out`` without ``overwrite`` is the
    caller's ``SparkJobError`` (exit 1, as before)."""
    root = local_path(out)
    if root is None:
        return  # HDFS, S3...: Spark's own file system; nothing local to compare
    plain = os.path.normpath(root)  # "link/" names the link itself, not its target
    if os.path.islink(plain):
        raise UnsafeOutput(f"--out {out} is a symbolic link: give the directory itself (--overwrite would "
                           "empty what it points to)")
    real = os.path.realpath(plain)
    for given in (*inputs, *paths):
        if os.path.exists(given) and _within(os.path.realpath(given), real):
            raise UnsafeOutput(f"--out {out} holds the input {given}: give another output directory "
                               "(writing there deletes the inputs)")
    if overwrite and os.path.isdir(real):
        try:
            other = _foreign(real)
        except OSError as e:
            raise UnsafeOutput(f"--out {out}: cannot list it ({e.strerror or e}): not replaced") from None
        if other is not None:
            raise UnsafeOutput(f"--out {out} holds {other}, which spark-decode did not write: --overwrite "
                               "replaces only a previous spark-decode output (give an empty or new directory)")


def name_jsonl(out: str) -> None:
    """Spark's text writer names its files ``part-...txt``: on a local file system they are renamed
    ``.jsonl``, which is what they hold, and so are Hadoop's ``.crc`` files of them where there are
    any (after the commit; on HDFS, S3 and the like the names stay)."""
    if "://" in out and not out.startswith("file://"):
        return
    root = out[len("file://"):] if out.startswith("file://") else out
    for p in glob.glob(os.path.join(glob.escape(root), "api_name=*", "part-*.txt")):
        os.rename(p, p[:-len(".txt")] + ".jsonl")
        d, name = os.path.split(p)
        crc = os.path.join(d, f".{name}.crc")  # Hadoop's checksum file beside it (its own file system)
        if os.path.exists(crc):
            os.rename(crc, os.path.join(d, f".{name[:-len('.txt')]}.jsonl.crc"))


def create_nofollow(path: str):
    """A text file written in --out without following a symbolic link planted there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise SparkJobError(f"cannot write {path}: {e.strerror or e} (a symbolic link is not followed)") from None
    return os.fdopen(fd, "w", encoding="utf-8")
