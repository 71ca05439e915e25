"""``kwire dump-log``'s walk over log files: each file's entries read (``kwire_cli.logs``), selected
by the options (``DumpOptions``: --offsets, --record-type, --key, --header, --max-bytes), checked
(--verify), counted, and told as they come to a writer (``kwire_cli.output.logtext.LogWriter``:
table lines, JSON lines or one JSON document)."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from kwire_cli.errors import KwireError
from kwire_cli.output.logtext import LogWriter


def record_type_of(rec: dict[str, Any]) -> str | None:
    internal = rec.get("Internal")
    if not isinstance(internal, dict):
        return None
    key = internal.get("key")
    if isinstance(key, dict) and key.get("schema"):
        return str(key["schema"])
    return internal.get("schema")


def type_matches(name: str | None, wanted: str) -> bool:
    if name is None:
        return False
    w = wanted.lower()
    n = name.lower()
    return n == w or n.removesuffix("key") == w or n.removesuffix("record") == w or n.removesuffix("message") == w


def match_text(v: Any) -> str | None:
    """A record key, header key or value as text: its text, or its hex when it is not text."""
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        for k in ("text", "hex"):
            if isinstance(v.get(k), str):
                return str(v[k])
    return None


def matches(pattern: str, value: str | None) -> bool:
    """``~PART``: the value holds PART; else the value is PATTERN."""
    if value is None:
        return False
    return pattern[1:] in value if pattern.startswith("~") else value == pattern


def filter_batch(batch: dict[str, Any], offsets: tuple[int, int] | None, record_type: str | None,
                  key: str | None = None, header: str | None = None) -> bool:
    """Keep only the records the filters select (in place); False when none is left."""
    if offsets is None and record_type is None and key is None and header is None:
        return True
    lo, hi = offsets if offsets is not None else (None, None)

    def keep(rec: dict[str, Any]) -> bool:
        off = rec.get("Offset", rec.get("AbsoluteOffset"))
        if lo is not None and (not isinstance(off, int) or not lo <= off <= hi):  # type: ignore[operator]
            return False
        if key is not None and not matches(key, match_text(rec.get("Key"))):
            return False
        if header is not None and not any(matches(header, match_text(h.get(part)))
                                          for h in rec.get("Headers") or () if isinstance(h, dict)
                                          for part in ("Key", "Value")):
            return False
        return record_type is None or type_matches(record_type_of(rec), record_type)

    if "Records" in batch:
        batch["Records"] = [r for r in batch["Records"] or () if keep(r)]
        return bool(batch["Records"])
    if "Messages" in batch:
        batch["Messages"] = [m for m in batch["Messages"] or () if keep(m)]
        return bool(batch["Messages"])
    return keep(batch) if "error" not in batch else offsets is None and record_type is None and key is None \
        and header is None


def snapshot_problem(types: list[str | None]) -> str | None:
    """A KRaft snapshot is a SnapshotHeader control batch, the records, a SnapshotFooter control batch."""
    if not types:
        return "the snapshot holds no batch (expected SnapshotHeaderRecord first)"
    if types[0] != "SnapshotHeaderRecord":
        return f"the snapshot starts with {types[0] or 'a data batch'}, not a SnapshotHeaderRecord"
    if types[-1] != "SnapshotFooterRecord":
        return f"the snapshot ends with {types[-1] or 'a data batch'}, not a SnapshotFooterRecord"
    return None


@dataclass(frozen=True)
class DumpOptions:
    """What ``kwire dump-log`` reads and shows."""

    fmt: str = "table"
    verify: bool = False
    offsets: tuple[int, int] | None = None
    record_type: str | None = None
    show_secrets: bool = False
    key: str | None = None
    header: str | None = None
    max_bytes: int | None = None


def open_plain(path: str) -> BinaryIO:
    return open(path, "rb")


class LogWalk:
    """The files' entries, told to the writer (``kwire_cli.output.logtext``) as they are read, and
    counted (``summary``; ``damage_lines`` for stderr)."""

    def __init__(self, out: LogWriter, opts: DumpOptions) -> None:
        self.out = out
        self.opts = opts
        self.summary = {"files": 0, "batches": 0, "records": 0, "damage": 0, "index_entries": 0,
                        "index_problems": 0, "producers": 0, "aborted_txns": 0, "snapshot_problems": 0}
        self.damage_lines: list[str] = []

    def damage(self, lf: Any, reason: str, entry: dict[str, Any] | None = None) -> None:
        self.summary["damage"] += 1
        self.damage_lines.append(f"{lf.path}: {reason}")
        self.out.damage(reason, entry)

    def file(self, lf: Any, open_counted: Callable[[str], BinaryIO] = open_plain) -> None:
        self.summary["files"] += 1
        self.out.file(lf)
        if lf.kind in ("producer-snapshot", "txn-index"):
            problems = self.state_file(lf)
            if self.opts.verify:
                self.summary["snapshot_problems"] += problems
        elif lf.kind in ("segment", "snapshot"):
            self.segment(lf, open_counted)
        else:
            self.index(lf)

    def segment(self, lf: Any, open_counted: Callable[[str], BinaryIO]) -> None:
        from kwire_cli.logs import iter_segment
        opts = self.opts
        verify = opts.verify and lf.kind == "snapshot"
        seen_types: list[str | None] = []
        try:
            f = open_counted(lf.path)
        except OSError as e:
            raise KwireError(f"{lf.path}: {e.strerror or e}") from None
        with f:
            size = os.path.getsize(lf.path)
            for ent in iter_segment(f, topic=lf.topic, show_secrets=opts.show_secrets, size=size,
                                    offsets=None if verify else opts.offsets,
                                    limit=opts.max_bytes if lf.kind == "segment" else None):
                if ent.kind == "stopped":
                    self.out.stopped(ent.to_json())
                    continue
                if ent.kind == "damage":
                    self.damage(lf, ent.reason or "", ent.to_json())
                    continue
                batch = ent.batch or {}
                if verify and batch.get("IsControlBatch"):
                    seen_types.extend(record_type_of(r) for r in batch.get("Records") or ())
                elif verify:
                    seen_types.append(None)
                self.summary["batches"] += 1
                if not filter_batch(batch, opts.offsets, opts.record_type, opts.key, opts.header):
                    continue
                self.summary["records"] += len(batch.get("Records") or batch.get("Messages") or [batch])
                self.out.batch(ent.to_json(), batch, ent.size)
        if verify:
            problem = snapshot_problem(seen_types)
            if problem is not None:
                self.summary["snapshot_problems"] += 1
                self.out.verify(problem)

    def index(self, lf: Any) -> None:
        """An index, streamed entry by entry (checked against the segment's map with --verify)."""
        from kwire_cli.logs import IndexCheck, read_index, segment_map
        opts = self.opts
        base = lf.base_offset if lf.base_offset is not None else 0
        check = None
        try:
            if opts.verify:
                log = lf.sibling_log
                if not os.path.isfile(log):
                    raise KwireError(f"{lf.path}: --verify needs the segment beside it, {log}, which does not exist")
                with open(log, "rb") as f:
                    check = IndexCheck(lf.kind, segment_map(f, os.fstat(f.fileno()).st_size))
            with open(lf.path, "rb") as f:
                for ie in read_index(f, lf.kind, base):
                    if isinstance(ie, str):
                        self.damage(lf, ie)
                        continue
                    self.summary["index_entries"] += 1
                    if check is not None:
                        check.check(ie)
                    if opts.offsets is not None and not opts.offsets[0] <= ie.offset <= opts.offsets[1]:
                        continue
                    self.out.index_entry(ie.to_json(), opts.verify)
        except OSError as e:
            raise KwireError(f"{lf.path}: {e.strerror or e}") from None
        if check is not None:
            self.summary["index_problems"] += check.bad

    def state_file(self, lf: Any) -> int:
        """A producer state snapshot's entries or a transaction index's aborted transactions; returns
        how many problems the broker would refuse the file for (each also a damage line)."""
        from kwire_cli.logs.state import MAX_SNAPSHOT_BYTES, iter_producers, read_txn_index, scan_producer_snapshot
        try:
            with open(lf.path, "rb") as f:
                if lf.kind == "txn-index":
                    n = 0
                    for item in read_txn_index(f):
                        if isinstance(item, str):
                            self.damage(lf, item)
                            return 1
                        n += 1
                        self.out.aborted_txn(item)
                    self.summary["aborted_txns"] += n
                    return 0
                size = os.fstat(f.fileno()).st_size
                if size > MAX_SNAPSHOT_BYTES:
                    self.damage(lf, f"{size} bytes: larger than any producer state snapshot ({MAX_SNAPSHOT_BYTES} "
                                    "at most read), not read")
                    return 1
                snap = scan_producer_snapshot(f)  # streamed: the CRC a megabyte at a time, then the entries
                self.out.producer_snapshot(snap.to_json(), iter_producers(f, snap))
        except OSError as e:
            raise KwireError(f"{lf.path}: {e.strerror or e}") from None
        self.summary["producers"] += snap.producers
        for problem in snap.problems:
            self.damage(lf, problem)
        return len(snap.problems)
