"""``kwire dump-log``'s output: one writer per format (table lines, JSON lines, one JSON document).

The command walks the files (``kwire_cli.cli.dump_log``) and tells a ``LogWriter`` what it finds: a
file (``file``), a batch or legacy message (``batch``), damage, a stop at ``--max-bytes``, an index
entry, an aborted transaction, a producer state snapshot, a snapshot's verdict, and the summary at
the end (``close``). The JSON writers write each as an object (the file's ``head`` first); the
table writes lines (``batch_lines``), record keys, values and headers through
``kwire_cli.output.forms.RecordForms`` in its LOG style (JSON-quoted, cut at ``SHOWN``), every
line escaped for a terminal once.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Protocol

from kwire_cli.render.safe import escape

from .forms import LOG, RecordForms

_compact: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_FORMS = RecordForms(LOG)


class LogFile(Protocol):
    """A file the walk reads (``kwire_cli.logs.files.LogFile``)."""

    path: str
    kind: str
    topic: str | None
    partition: int | None
    base_offset: int | None


def internal_text(internal: dict[str, Any]) -> str:
    """A record of an internal topic decoded (its ``Internal``), on one line."""
    if "key" in internal or "value" in internal:
        parts = []
        key = internal.get("key")
        if isinstance(key, dict):
            parts.append(f"{key.get('schema', 'type ' + str(key.get('type')))} {_compact(key.get('data'))}")
        if "value" in internal:
            value = internal["value"]
            if value is None:
                parts.append("tombstone")
            else:
                parts.append(f"{value.get('schema')} v{value.get('version')} {_compact(value.get('data'))}")
        text = " -> ".join(parts)
    else:
        text = f"{internal.get('schema', 'apiKey ' + str(internal.get('api_key')))}"
        if "version" in internal:
            text += f" v{internal['version']}"
        if "data" in internal:
            text += " " + _compact(internal["data"])
    if internal.get("embedded"):
        text += " embedded " + _compact([{k: v for k, v in e.items() if k != "schema"} for e in internal["embedded"]])
    if internal.get("error"):
        text += f"  ERROR {internal['error']}"
    return text


def record_line(rec: dict[str, Any]) -> str:
    """A record (or legacy message) on one line: offset, timestamp, control type, then its internal
    decoding or its key, value and headers."""
    off = rec.get("Offset", rec.get("AbsoluteOffset"))
    cells = [f"  offset {off}", f"ts {rec.get('Timestamp', '-')}"]
    if rec.get("Control"):
        ctl = rec["Control"]
        cells.append(f"control {ctl.get('Type', ctl.get('TypeId'))}")
    internal = rec.get("Internal")
    if internal is not None:
        cells.append(internal_text(internal))
    else:
        cells.append(f"key {_FORMS.text(rec.get('Key'))}")
        cells.append(f"value {_FORMS.text(rec.get('Value'))}")
        if rec.get("Headers"):
            cells.append("headers " + _FORMS.headers(rec["Headers"], sep=", "))
    return "  ".join(str(c) for c in cells)


def batch_lines(batch: dict[str, Any], size: int) -> Iterator[str]:
    """A batch's line, then a line per record."""
    if "error" in batch:
        yield f"position {batch['Position']}  size {size}  ERROR {batch['error']}"
        return
    if batch.get("Magic") == 2:
        base = batch["BaseOffset"]
        last = base + batch.get("LastOffsetDelta", 0)
        flags = [batch.get("Compression", "none"), batch.get("TimestampType", "")]
        if batch.get("IsTransactional"):
            flags.append("transactional")
        if batch.get("IsControlBatch"):
            flags.append("control")
        if batch.get("ProducerId", -1) != -1:
            flags.append(f"producer {batch['ProducerId']}/{batch.get('ProducerEpoch')} seq {batch.get('BaseSequence')}")
        crc = "crc ok" if batch.get("CrcValid") else \
            f"CRC MISMATCH (stored {batch.get('Crc')}, computed {batch.get('CrcComputed')})"
        yield (f"position {batch['Position']}  offsets {base}-{last}  magic 2  count {batch.get('RecordCount')}  "
               f"size {size}  epoch {batch.get('PartitionLeaderEpoch')}  max ts {batch.get('MaxTimestamp')}  "
               + "  ".join(str(f) for f in flags if f) + f"  {crc}")
        for rec in batch.get("Records") or ():
            yield record_line(rec)
        return
    crc = "crc ok" if batch.get("CrcValid") else "CRC MISMATCH"
    yield (f"position {batch['Position']}  offset {batch.get('Offset')}  magic {batch.get('Magic')}  size {size}  "
           f"{batch.get('Compression', 'none')}  {crc}")
    if "Messages" in batch:
        for m in batch["Messages"] or ():
            yield record_line(m)
    else:
        yield record_line(batch)


class LogWriter:
    """What the walk found, written as the format writes it (this base: the JSON formats; ``emit``
    writes one object)."""

    def __init__(self) -> None:
        self.head: dict[str, Any] = {}

    def emit(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def file(self, lf: LogFile) -> None:
        self.head = {"file": lf.path, "kind": lf.kind, "topic": lf.topic, "partition": lf.partition,
                     "base_offset": lf.base_offset}

    def stopped(self, entry: dict[str, Any]) -> None:
        """Reading stopped at --max-bytes (a segment entry's JSON: position, reason)."""
        self.emit({**self.head, "type": "stopped", "position": entry.get("position"), "reason": entry.get("reason")})

    def damage(self, reason: str, entry: dict[str, Any] | None = None) -> None:
        self.emit({**self.head, **(entry or {"type": "damage", "reason": reason})})

    def batch(self, entry: dict[str, Any], _batch: dict[str, Any], _size: int) -> None:
        self.emit({**self.head, **entry})

    def verify(self, problem: str) -> None:
        self.emit({**self.head, "type": "verify", "problem": problem})

    def index_entry(self, entry: dict[str, Any], _verified: bool) -> None:
        self.emit({**self.head, **entry})

    def aborted_txn(self, item: dict[str, Any]) -> None:
        self.emit({**self.head, "type": "aborted-txn", **item})

    def producer_snapshot(self, snapshot: dict[str, Any], producers: Iterable[dict[str, Any]]) -> None:
        self.emit({**self.head, **snapshot})
        for p in producers:
            self.emit({**self.head, "type": "producer", **p})

    def close(self, summary: dict[str, Any]) -> None:
        raise NotImplementedError


class JsonLinesLogWriter(LogWriter):
    """One JSON object per line; the summary is the last (``"type": "summary"``)."""

    def __init__(self, out: IO[bytes]) -> None:
        from kwire_cli.render.jsonlines import line_writer
        super().__init__()
        self.out = out
        self.write_line = line_writer()

    def emit(self, obj: dict[str, Any]) -> None:
        self.write_line(obj, self.out.write)
        self.out.write(b"\n")

    def close(self, summary: dict[str, Any]) -> None:
        self.emit({"type": "summary", **summary})
        self.out.flush()


class JsonLogWriter(JsonLinesLogWriter):
    """One JSON document: ``{"entries": [...], "summary": {...}}``."""

    def __init__(self, out: IO[bytes]) -> None:
        super().__init__(out)
        self.first = True
        out.write(b'{"entries": [\n')

    def emit(self, obj: dict[str, Any]) -> None:
        if not self.first:
            self.out.write(b",\n")
        self.write_line(obj, self.out.write)
        self.first = False

    def close(self, summary: dict[str, Any]) -> None:
        from kwire_cli.render.jsonlines import line_encoder
        encode: Callable[[dict[str, Any]], bytes] = line_encoder()  # type: ignore[no-untyped-call]
        self.out.write(b'\n], "summary": ' + encode(summary) + b"}\n")
        self.out.flush()


class TableLogWriter(LogWriter):
    """Lines: a file's header, a batch's line and one per record, an index entry per line..."""

    def __init__(self, out: IO[str]) -> None:
        super().__init__()
        self.out = out

    def line(self, text: str) -> None:
        self.out.write(escape(text) + "\n")

    def emit(self, obj: dict[str, Any]) -> None:  # every kind of entry has its own lines
        raise TypeError(f"the table has no line for {obj.get('type')}")

    def file(self, lf: LogFile) -> None:
        where = f"  topic {lf.topic}" + (f" partition {lf.partition}" if lf.partition is not None else "")
        self.line(f"== {lf.path}  {lf.kind}{where if lf.topic else ''}")

    def stopped(self, entry: dict[str, Any]) -> None:
        self.line(entry.get("reason") or "")

    def damage(self, reason: str, _entry: dict[str, Any] | None = None) -> None:
        self.line(f"damage: {reason}")

    def batch(self, _entry: dict[str, Any], batch: dict[str, Any], size: int) -> None:
        for text in batch_lines(batch, size):
            self.line(text)

    def verify(self, problem: str) -> None:
        self.line(f"verify: {problem}")

    def index_entry(self, entry: dict[str, Any], verified: bool) -> None:
        text = f"  entry {entry['entry']}  offset {entry['offset']}  " + (
            f"position {entry['position']}" if "position" in entry else f"timestamp {entry.get('timestamp')}")
        if entry.get("problem"):
            text += f"  MISMATCH {entry['problem']}"
        elif verified:
            text += "  ok"
        self.line(text)

    def aborted_txn(self, item: dict[str, Any]) -> None:
        self.line(f"  aborted transaction  producer {item['producer_id']}  offsets "
                  f"{item['first_offset']}-{item['last_offset']}  last stable offset {item['last_stable_offset']}")

    def producer_snapshot(self, snapshot: dict[str, Any], producers: Iterable[dict[str, Any]]) -> None:
        if snapshot.get("version") is not None:
            n = snapshot["producers"]
            self.line(f"  producer state snapshot  version {snapshot['version']}  crc 0x{snapshot['crc']:08x}  "
                      f"{n} producer{'' if n == 1 else 's'}")
        for p in producers:
            txn = p["current_txn_first_offset"]
            self.line(f"  producer {p['producer_id']}  epoch {p['producer_epoch']}  last sequence "
                      f"{p['last_sequence']}  last offset {p['last_offset']}  offset delta {p['offset_delta']}  "
                      f"timestamp {p['timestamp']}  coordinator epoch {p['coordinator_epoch']}  open transaction "
                      + (f"from {txn}" if txn >= 0 else "none"))

    def close(self, summary: dict[str, Any]) -> None:
        self.line("summary: " + "  ".join(f"{k} {v}" for k, v in summary.items()))
        self.out.flush()


def log_writer(fmt: str, text: IO[str], binary: Callable[[], IO[bytes]]) -> LogWriter:
    """The writer of ``fmt`` (table, jsonl, json) on stdout (``text``; ``binary()`` its binary side,
    taken after ``text`` is flushed)."""
    if fmt == "table":
        return TableLogWriter(text)
    text.flush()
    return JsonLinesLogWriter(binary()) if fmt == "jsonl" else JsonLogWriter(binary())
