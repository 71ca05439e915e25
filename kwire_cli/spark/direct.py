"""JSON lines written by the Python workers themselves, not handed to the JVM's writer.

With ``--format jsonl`` and a local ``--out`` (a path every executor and the driver see), each
decode task writes its rows' lines to files of its own (``LineFiles``: one per ``api_name``, named
as Spark's writer names them) under a pass directory in ``OUT/_temporary``, and hands Spark only
their names. The driver then moves the files of the tasks whose results it received into place
(``commit``): a task attempt that failed or was retried leaves files nobody names, deleted with the
pass directory; a decode pass that runs again (topic names) writes a directory of its own.

What it saves: the lines crossed the pipe to the JVM as Arrow batches, became Spark rows and went
through Spark's partitioned text writer: the JVM's per-byte work, about 0.1-0.2x one ``kwire pcap``
process's CPU per byte (docs/spark.md, Speed).
"""
from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable
from typing import Any

from kwire_cli.capture.rows import json_ordered

WRITER_CONF = "spark.kwire.jsonlWriter"  # "workers" (default: this module) or "spark" (Spark's text writer)
WRITERS = ("workers", "spark")
PARTITION_COLUMN = "api_name"
RESULT_SCHEMA = "file string"        # a task's result: the files it wrote, relative to the pass directory
TEMPORARY = "_temporary"             # under --out, where the tasks write before the commit
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
BUFFER = 1 << 20                     # bytes buffered per open file

# the characters Spark escapes (%XX) in a partition directory's value (ExternalCatalogUtils)
_ESCAPED = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


def workers_write(spark, fmt: str, out: str) -> bool:
    """Do the workers write the rows themselves? ``--format jsonl``, a local ``--out``, and
    ``spark.kwire.jsonlWriter`` not ``spark``."""
    from kwire_cli.errors import SparkJobError
    from kwire_cli.spark.outdir import local_path
    how = str(spark.conf.get(WRITER_CONF, WRITERS[0])).strip().lower()
    if how not in WRITERS:
        raise SparkJobError(f"{WRITER_CONF}: {how!r} is not one of {', '.join(WRITERS)}")
    return fmt == "jsonl" and how == "workers" and local_path(out) is not None


def partition_dir(value: str | None) -> str:
    """The directory Spark's writer puts a partition value's rows in (``api_name=Produce``)."""
    if value is None or value == "":
        return f"{PARTITION_COLUMN}={DEFAULT_PARTITION}"
    return f"{PARTITION_COLUMN}=" + "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def pass_dir(out: str, job: str, number: int) -> str:
    """The directory one decode pass's tasks write in."""
    return os.path.join(out, TEMPORARY, f"kwire-{job}", f"pass-{number}")


class LineFiles:
    """A task's rows as JSON lines, one file per ``api_name``, under ``root`` (``pass_dir``); the
    sink of ``stages.TaskRows`` in place of ``rows.RowBatcher``. ``finish`` closes them and returns
    the Arrow batch of their names (``RESULT_SCHEMA``)."""

    def __init__(self, root: str, part: int) -> None:
        from kwire_cli.spark.rows import encoders
        self.root = root
        self.name = f"part-{part:05d}-{uuid.uuid4()}.c000.jsonl"
        self.line = encoders()[0]
        self.files: dict[str | None, Any] = {}
        self.written: list[str] = []

    def _open(self, api: str | None):
        rel = os.path.join(partition_dir(api), self.name)
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        f = self.files[api] = open(path, "wb", buffering=BUFFER)  # noqa: SIM115 - closed in finish
        self.written.append(rel)
        return f

    def add(self, rec: dict) -> None:
        api = rec.get(PARTITION_COLUMN)
        f = self.files.get(api)
        if f is None:
            f = self._open(api)
        f.write(self.line(json_ordered(rec)))
        f.write(b"\n")

    def finish(self):
        import pyarrow as pa

        from kwire_cli.spark.rows import utf8_array
        for f in self.files.values():
            f.close()
        self.files = {}
        names = tuple(n.encode() for n in self.written)
        return pa.RecordBatch.from_arrays([utf8_array(pa, names)], names=["file"])


def task_part() -> int:
    """The Spark partition of the running task (0 outside one): its files' number."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def clear(out: str) -> None:
    """Empty ``out`` before a job writes there (``--overwrite``; ``outdir.check_out`` has made sure
    it holds only what spark-decode writes)."""
    if not os.path.isdir(out):
        return
    for e in os.scandir(out):
        if e.is_dir(follow_symlinks=False):
            shutil.rmtree(e.path)
        else:
            os.unlink(e.path)


def discard(out: str, job: str, number: int) -> None:
    """A pass's files, not committed (the pass runs again)."""
    shutil.rmtree(pass_dir(out, job, number), ignore_errors=True)


def commit(out: str, job: str, number: int, files: Iterable[str]) -> None:
    """Move the files the tasks' results name from the pass directory into ``out``; remove the
    job's temporary directory; write ``_SUCCESS`` (as Spark's writer does)."""
    src = pass_dir(out, job, number)
    made: set[str] = set()
    for rel in files:
        d = os.path.dirname(rel)
        if d not in made:
            os.makedirs(os.path.join(out, d), exist_ok=True)
            made.add(d)
        os.replace(os.path.join(src, rel), os.path.join(out, rel))
    shutil.rmtree(os.path.join(out, TEMPORARY, f"kwire-{job}"), ignore_errors=True)
    try:
        os.rmdir(os.path.join(out, TEMPORARY))
    except OSError:
        pass  # another job's, or not empty
    open(os.path.join(out, "_SUCCESS"), "wb").close()
