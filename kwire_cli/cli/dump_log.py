"""`kwire dump-log`: Kafka log segments, indexes and KRaft snapshots, with internal topics decoded."""
from __future__ import annotations

import functools
import io
import json
import json.encoder
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, std_binary
from kwire_cli.cli.options import parse_size, show_secrets_option
from kwire_cli.cli.schemas import values_options
from kwire_cli.errors import KwireError

EPILOG = """\b
Examples:
  kwire dump-log fixtures/logs/__consumer_offsets-12/00000000000000000000.log
  kwire dump-log fixtures/logs/kwire-produce-gzip-0 --verify --format jsonl
  kwire dump-log fixtures/logs/__cluster_metadata-0 --record-type TopicRecord
  kwire dump-log fixtures/logs/kwire-produce-none-0/00000000000000000000.log --offsets 2-3

\b
The topic of a file is the name of its partition directory (TOPIC-PARTITION), or --topic; records
of __consumer_offsets, __transaction_state, __share_group_state and __cluster_metadata (and
*.checkpoint snapshots) are decoded from kwire's record specs (Internal). Secrets of metadata
records (SCRAM salts and keys, sensitive config values) are redacted unless --show-secrets.

\b
kafka-dump-log's spellings are accepted too: --files F1,F2; --print-data-log and --deep-iteration
(kwire always decodes every record); --verify-index-only and --index-sanity-check (as --verify);
--offsets-decoder, --transaction-log-decoder, --cluster-metadata-decoder and
--share-group-state-decoder (as --topic with that internal topic).

\b
Exit codes: 0 every file read (damaged tails are reported on stderr and as damage entries),
1 a file could not be read, or --verify found an index entry or snapshot the files contradict,
2 usage error."""

# kafka-dump-log's decoder flags, and the internal topic each stands for
DECODER_TOPICS = {"offsets_decoder": "__consumer_offsets", "transaction_log_decoder": "__transaction_state",
                  "cluster_metadata_decoder": "__cluster_metadata",
                  "share_group_state_decoder": "__share_group_state"}


class _Counting(io.RawIOBase):
    """A read-only file wrapper that reports the bytes read to a callback (progress)."""

    def __init__(self, f: Any, advance: Callable[[int], object]) -> None:
        self.f = f
        self.advance = advance

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.f.readinto(b)
        if n:
            self.advance(n)
        return n or 0


def _parse_offsets(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    text = value.strip()
    try:
        if "-" in text[1:]:
            lo, hi = text.split("-", 1) if not text.startswith("-") else (text, "")
            return int(lo), int(hi)
        n = int(text)
        return n, n
    except ValueError:
        raise KwireUsageError(f"--offsets: expected N or A-B (record offsets), got {value!r}") from None


def _record_type_of(rec: dict[str, Any]) -> str | None:
    internal = rec.get("Internal")
    if not isinstance(internal, dict):
        return None
    key = internal.get("key")
    if isinstance(key, dict) and key.get("schema"):
        return str(key["schema"])
    return internal.get("schema")


def _type_matches(name: str | None, wanted: str) -> bool:
    if name is None:
        return False
    w = wanted.lower()
    n = name.lower()
    return n == w or n.removesuffix("key") == w or n.removesuffix("record") == w or n.removesuffix("message") == w


def _text(v: Any) -> str | None:
    """A record key, header key or value as text: its text, or its hex when it is not text."""
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        for k in ("text", "hex"):
            if isinstance(v.get(k), str):
                return str(v[k])
    return None


def _matches(pattern: str, value: str | None) -> bool:
    """``~PART``: the value holds PART; else the value is PATTERN."""
    if value is None:
        return False
    return pattern[1:] in value if pattern.startswith("~") else value == pattern


def _filter_batch(batch: dict[str, Any], offsets: tuple[int, int] | None, record_type: str | None,
                  key: str | None = None, header: str | None = None) -> bool:
    """Keep only the records the filters select (in place); False when none is left."""
    if offsets is None and record_type is None and key is None and header is None:
        return True
    lo, hi = offsets if offsets is not None else (None, None)

    def keep(rec: dict[str, Any]) -> bool:
        off = rec.get("Offset", rec.get("AbsoluteOffset"))
        if lo is not None and (not isinstance(off, int) or not lo <= off <= hi):  # type: ignore[operator]
            return False
        if key is not None and not _matches(key, _text(rec.get("Key"))):
            return False
        if header is not None and not any(_matches(header, _text(h.get(part)))
                                          for h in rec.get("Headers") or () if isinstance(h, dict)
                                          for part in ("Key", "Value")):
            return False
        return record_type is None or _type_matches(_record_type_of(rec), record_type)

    if "Records" in batch:
        batch["Records"] = [r for r in batch["Records"] or () if keep(r)]
        return bool(batch["Records"])
    if "Messages" in batch:
        batch["Messages"] = [m for m in batch["Messages"] or () if keep(m)]
        return bool(batch["Messages"])
    return keep(batch) if "error" not in batch else offsets is None and record_type is None and key is None \
        and header is None


# ------------------------------------------------------------------------------------------ output
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_quote: Callable[[str], str] = json.encoder.encode_basestring  # the C quoting of json.dumps


# a key or value longer than this (characters of text, digits of hex) is cut short in the table
# (a 256 MiB value would be a line of 512 MiB); --format jsonl shows it whole
_SHOWN = 4096


def _show_form(form: Any) -> str:
    if form is None:
        return "null"
    if isinstance(form, dict) and "text" in form:
        text = form["text"]
        if isinstance(text, str) and len(text) > _SHOWN:
            return f"{_quote(text[:_SHOWN])}… ({len(text)} characters; --format jsonl shows all)"
        return _quote(text) if isinstance(text, str) else _compact(text)
    if isinstance(form, dict) and "hex" in form:
        h = str(form["hex"])
        if len(h) > _SHOWN:
            return f"0x{h[:_SHOWN]}… ({len(h) // 2} bytes; --format jsonl shows all)"
        return "0x" + h
    return _compact(form)


def _internal_text(internal: dict[str, Any]) -> str:
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


def _record_line(rec: dict[str, Any]) -> str:
    off = rec.get("Offset", rec.get("AbsoluteOffset"))
    cells = [f"  offset {off}", f"ts {rec.get('Timestamp', '-')}"]
    if rec.get("Control"):
        ctl = rec["Control"]
        cells.append(f"control {ctl.get('Type', ctl.get('TypeId'))}")
    internal = rec.get("Internal")
    if internal is not None:
        cells.append(_internal_text(internal))
    else:
        cells.append(f"key {_show_form(rec.get('Key'))}")
        cells.append(f"value {_show_form(rec.get('Value'))}")
        if rec.get("Headers"):
            cells.append("headers " + ", ".join(f"{_show_form({'text': h.get('Key')})}={_show_form(h.get('Value'))}"
                                                for h in rec["Headers"]))
    return "  ".join(str(c) for c in cells)


def _batch_lines(batch: dict[str, Any], size: int) -> Iterator[str]:
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
            yield _record_line(rec)
        return
    crc = "crc ok" if batch.get("CrcValid") else "CRC MISMATCH"
    yield (f"position {batch['Position']}  offset {batch.get('Offset')}  magic {batch.get('Magic')}  size {size}  "
           f"{batch.get('Compression', 'none')}  {crc}")
    if "Messages" in batch:
        for m in batch["Messages"] or ():
            yield _record_line(m)
    else:
        yield _record_line(batch)


class _Out:
    """table lines, JSON lines, or one JSON document, written as they come (flat memory)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.first = True
        if fmt == "table":
            from kwire_cli.render.safe import escape
            self.escape = escape
            self.text = sys.stdout
        else:
            from kwire_cli.render.jsonlines import line_encoder, line_writer
            sys.stdout.flush()
            self.bout = std_binary("stdout")
            self.encode = line_encoder()
            self.write_line = line_writer()
            if fmt == "json":
                self.bout.write(b'{"entries": [\n')

    def line(self, text: str) -> None:
        self.text.write(self.escape(text) + "\n")

    def entry(self, obj: dict[str, Any]) -> None:
        if self.fmt == "jsonl":
            self.write_line(obj, self.bout.write)
            self.bout.write(b"\n")
        else:
            if not self.first:
                self.bout.write(b",\n")
            self.write_line(obj, self.bout.write)
            self.first = False

    def close(self, summary: dict[str, Any]) -> None:
        if self.fmt == "json":
            self.bout.write(b'\n], "summary": ' + self.encode(summary) + b"}\n")
        elif self.fmt == "jsonl":
            self.entry({"type": "summary", **summary})
        else:
            self.line("summary: " + "  ".join(f"{k} {v}" for k, v in summary.items()))
        if self.fmt != "table":
            self.bout.flush()
        sys.stdout.flush()


def _progress_enabled() -> bool:
    from kwire_cli.output import progress
    return progress.enabled()  # every format writes as the files are read: never on the rows' terminal


def _kafka_flag(name: str, help_text: str) -> Callable[[Any], Any]:
    return click.option(f"--{name}", name.replace("-", "_"), is_flag=True, hidden=True, help=help_text)


@click.command("dump-log", epilog=EPILOG)
@click.argument("files", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl", "json"]), default="table", show_default=True,
              help="Lines per batch and record (table), one JSON object per batch or index entry (jsonl), "
                   "or one JSON document.")
@click.option("--topic", metavar="NAME", help="The topic of the files (default: from the partition directory's "
              "name, TOPIC-PARTITION); it decides how internal topics' records are decoded.")
@click.option("--verify", is_flag=True, help="Check every *.index / *.timeindex entry against the segment beside "
              "it, and that snapshots start with a SnapshotHeader and end with a SnapshotFooter; exit 1 on any "
              "mismatch.")
@click.option("--offsets", "offsets_text", metavar="A-B", help="Only records with offsets A to B (or one offset N).")
@click.option("--record-type", metavar="NAME", help="Only records of an internal topic of this type (OffsetCommit, "
              "GroupMetadata, TransactionLog, TopicRecord, LeaderChangeMessage, ...).")
@click.option("--key", metavar="TEXT|~PART", help="Only records whose key is TEXT (or holds PART); a key that is "
              "not text is matched by its hex.")
@click.option("--header", metavar="TEXT|~PART", help="Only records with a header whose key or value is TEXT (or "
              "holds PART).")
@click.option("--record-specs", "record_specs_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Read the record specs from DIR (Kafka's record JSON files, or a Kafka checkout) instead of "
                   "the bundled ones.")
@click.option("--max-bytes", "max_bytes_text", metavar="SIZE",
              help="Read only the entries within each segment's first SIZE bytes (kafka-dump-log's --max-bytes): "
                   "the start of a large segment without reading it all. SIZE is bytes, or a number with K, M or G.")
@show_secrets_option()
@values_options
@click.option("--files", "kafka_files", metavar="F1,F2", multiple=True, hidden=True,
              help="kafka-dump-log's spelling of FILES: a comma-separated list.")
@_kafka_flag("print-data-log", "kafka-dump-log's flag: records are always printed.")
@_kafka_flag("deep-iteration", "kafka-dump-log's flag: batches are always iterated.")
@_kafka_flag("verify-index-only", "kafka-dump-log's spelling of --verify.")
@_kafka_flag("index-sanity-check", "kafka-dump-log's spelling of --verify.")
@_kafka_flag("offsets-decoder", "kafka-dump-log's spelling of --topic __consumer_offsets.")
@_kafka_flag("transaction-log-decoder", "kafka-dump-log's spelling of --topic __transaction_state.")
@_kafka_flag("cluster-metadata-decoder", "kafka-dump-log's spelling of --topic __cluster_metadata.")
@_kafka_flag("share-group-state-decoder", "kafka-dump-log's spelling of --topic __share_group_state.")
def dump_log(files: tuple[str, ...], fmt: str, topic: str | None, verify: bool, offsets_text: str | None,
             record_type: str | None, key: str | None, header: str | None, record_specs_dir: str | None,
             max_bytes_text: str | None, show_secrets: bool, kafka_files: tuple[str, ...],
             **kafka_flags: bool) -> None:
    """Dump Kafka log FILES: segments (*.log: every record batch and legacy message set from
    position 0, with file positions), offset and time indexes (*.index, *.timeindex), KRaft
    snapshots (*.checkpoint), producer state snapshots (*.snapshot, their CRC checked) and
    transaction indexes (*.txnindex: aborted transactions). A directory or a quoted glob stands
    for the log files in it, each partition's in base-offset order.

    Every record is decoded as `kwire decode` shows records; records of internal topics are decoded
    into their keys and values (Internal). Files are streamed: memory stays one batch whatever
    the segment's size. A segment cut short or damaged ends with one damage line.
    """
    from kwire_cli.logs import log_files
    from kwire_cli.render.jsonlines import gc_tuned
    from kwire_cli.spec.records import record_specs, use_record_specs

    files += tuple(p.strip() for spec in kafka_files for p in spec.split(",") if p.strip())
    if not files:
        raise KwireUsageError("give the log FILES (or DIRs) to dump")
    if kafka_flags["verify_index_only"] or kafka_flags["index_sanity_check"]:
        verify = True
    decoded = [t for flag, t in DECODER_TOPICS.items() if kafka_flags[flag]]
    if len(set(decoded + ([topic] if topic else []))) > 1:
        raise KwireUsageError(f"the files are of one topic, not {' and '.join(sorted(set(decoded + [topic or ''])))}")
    topic = topic or (decoded[0] if decoded else None)
    offsets = _parse_offsets(offsets_text)
    max_bytes = None if max_bytes_text is None else parse_size(max_bytes_text, "--max-bytes")
    if record_specs_dir is not None:
        use_record_specs(record_specs_dir)
    try:
        record_specs()  # loaded up front: a folder that holds none is one error, not damage per batch
        from kwire_cli.cli.app import note_skipped
        targets = log_files(list(files), topic, note_skipped)
        with gc_tuned():
            problems = _dump(targets, fmt, verify, offsets, record_type, show_secrets, key, header, max_bytes)
    finally:
        if record_specs_dir is not None:
            use_record_specs(None)
    if problems:
        sys.exit(1)


def _open(path: str, progress: Any) -> Any:
    f = open(path, "rb")  # noqa: SIM115 (closed by the caller)
    if progress is None:
        return f
    task = progress.add_task(os.path.basename(path), total=os.path.getsize(path))
    return io.BufferedReader(_Counting(f, functools.partial(progress.advance, task)))


def _dump(targets: list[Any], fmt: str, verify: bool, offsets: tuple[int, int] | None, record_type: str | None,
          show_secrets: bool, key: str | None = None, header: str | None = None, max_bytes: int | None = None) -> int:
    from kwire_cli.logs import IndexCheck, iter_segment, read_index, segment_map

    out = _Out(fmt)
    summary = {"files": 0, "batches": 0, "records": 0, "damage": 0, "index_entries": 0, "index_problems": 0,
               "producers": 0, "aborted_txns": 0,
               "snapshot_problems": 0}
    damage_lines: list[str] = []
    progress = None
    if _progress_enabled():
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        from kwire_cli.render.console import make_console
        progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                            TransferSpeedColumn(), console=make_console(stderr=True), transient=True)
        progress.start()
    try:
        for lf in targets:
            summary["files"] += 1
            head = {"file": lf.path, "kind": lf.kind, "topic": lf.topic, "partition": lf.partition,
                    "base_offset": lf.base_offset}
            if fmt == "table":
                where = f"  topic {lf.topic}" + (f" partition {lf.partition}" if lf.partition is not None else "")
                out.line(f"== {lf.path}  {lf.kind}{where if lf.topic else ''}")
            if lf.kind in ("producer-snapshot", "txn-index"):
                problems = _state_file(lf, head, out, fmt, summary, damage_lines)
                if verify:
                    summary["snapshot_problems"] += problems
                continue
            if lf.kind in ("segment", "snapshot"):
                seen_types: list[str | None] = []
                try:
                    f = _open(lf.path, progress)
                except OSError as e:
                    raise KwireError(f"{lf.path}: {e.strerror or e}") from None
                with f:
                    size = os.path.getsize(lf.path)
                    for ent in iter_segment(f, topic=lf.topic, show_secrets=show_secrets, size=size,
                                            offsets=None if verify and lf.kind == "snapshot" else offsets,
                                            limit=max_bytes if lf.kind == "segment" else None):
                        if ent.kind == "stopped":
                            if fmt == "table":
                                out.line(ent.reason or "")
                            else:
                                out.entry({**head, "type": "stopped", "position": ent.position,
                                           "reason": ent.reason})
                            continue
                        if ent.kind == "damage":
                            summary["damage"] += 1
                            damage_lines.append(f"{lf.path}: {ent.reason}")
                            if fmt == "table":
                                out.line(f"damage: {ent.reason}")
                            else:
                                out.entry({**head, **ent.to_json()})
                            continue
                        batch = ent.batch or {}
                        if lf.kind == "snapshot" and verify and batch.get("IsControlBatch"):
                            seen_types.extend(_record_type_of(r) for r in batch.get("Records") or ())
                        elif lf.kind == "snapshot" and verify:
                            seen_types.append(None)
                        summary["batches"] += 1
                        if not _filter_batch(batch, offsets, record_type, key, header):
                            continue
                        summary["records"] += len(batch.get("Records") or batch.get("Messages") or [batch])
                        if fmt == "table":
                            for text in _batch_lines(batch, ent.size):
                                out.line(text)
                        else:
                            out.entry({**head, **ent.to_json()})
                if lf.kind == "snapshot" and verify:
                    problem = _snapshot_problem(seen_types)
                    if problem is not None:
                        summary["snapshot_problems"] += 1
                        if fmt == "table":
                            out.line(f"verify: {problem}")
                        else:
                            out.entry({**head, "type": "verify", "problem": problem})
                continue
            # an index, streamed entry by entry (checked against the segment's map with --verify)
            base = lf.base_offset if lf.base_offset is not None else 0
            check = None
            try:
                if verify:
                    log = lf.sibling_log
                    if not os.path.isfile(log):
                        raise KwireError(f"{lf.path}: --verify needs the segment beside it, {log}, "
                                         "which does not exist")
                    with open(log, "rb") as f:
                        check = IndexCheck(lf.kind, segment_map(f, os.fstat(f.fileno()).st_size))
                with open(lf.path, "rb") as f:
                    for ie in read_index(f, lf.kind, base):
                        if isinstance(ie, str):
                            damage_lines.append(f"{lf.path}: {ie}")
                            summary["damage"] += 1
                            if fmt == "table":
                                out.line(f"damage: {ie}")
                            else:
                                out.entry({**head, "type": "damage", "reason": ie})
                            continue
                        summary["index_entries"] += 1
                        if check is not None:
                            check.check(ie)
                        if offsets is not None and not offsets[0] <= ie.offset <= offsets[1]:
                            continue
                        if fmt == "table":
                            text = f"  entry {ie.number}  offset {ie.offset}  " + (
                                f"position {ie.position}" if ie.position is not None else f"timestamp {ie.timestamp}")
                            if ie.problem:
                                text += f"  MISMATCH {ie.problem}"
                            elif verify:
                                text += "  ok"
                            out.line(text)
                        else:
                            out.entry({**head, **ie.to_json()})
            except OSError as e:
                raise KwireError(f"{lf.path}: {e.strerror or e}") from None
            if check is not None:
                summary["index_problems"] += check.bad
    finally:
        if progress is not None:
            progress.stop()
    out.close(summary)
    for line in damage_lines:
        diagnostic("warning", line)
    return summary["index_problems"] + summary["snapshot_problems"]


def _state_file(lf: Any, head: dict[str, Any], out: _Out, fmt: str, summary: dict[str, int],
                damage_lines: list[str]) -> int:
    """A producer state snapshot's entries or a transaction index's aborted transactions; returns
    how many problems the broker would refuse the file for (each also a damage line)."""
    from kwire_cli.logs.state import MAX_SNAPSHOT_BYTES, iter_producers, read_txn_index, scan_producer_snapshot

    def damage(reason: str) -> None:
        summary["damage"] += 1
        damage_lines.append(f"{lf.path}: {reason}")
        if fmt == "table":
            out.line(f"damage: {reason}")
        else:
            out.entry({**head, "type": "damage", "reason": reason})

    try:
        with open(lf.path, "rb") as f:
            if lf.kind == "txn-index":
                n = 0
                for item in read_txn_index(f):
                    if isinstance(item, str):
                        damage(item)
                        return 1
                    n += 1
                    if fmt == "table":
                        out.line(f"  aborted transaction  producer {item['producer_id']}  offsets "
                                 f"{item['first_offset']}-{item['last_offset']}  last stable offset "
                                 f"{item['last_stable_offset']}")
                    else:
                        out.entry({**head, "type": "aborted-txn", **item})
                summary["aborted_txns"] += n
                return 0
            size = os.fstat(f.fileno()).st_size
            if size > MAX_SNAPSHOT_BYTES:
                damage(f"{size} bytes: larger than any producer state snapshot ({MAX_SNAPSHOT_BYTES} at most "
                       "read), not read")
                return 1
            snap = scan_producer_snapshot(f)  # streamed: the CRC a megabyte at a time, then the entries
            if fmt == "table":
                if snap.version is not None:
                    out.line(f"  producer state snapshot  version {snap.version}  crc 0x{snap.crc:08x}  "
                             f"{snap.producers} producer{'' if snap.producers == 1 else 's'}")
            else:
                out.entry({**head, **snap.to_json()})
            for p in iter_producers(f, snap):
                if fmt == "table":
                    txn = p["current_txn_first_offset"]
                    out.line(f"  producer {p['producer_id']}  epoch {p['producer_epoch']}  last sequence "
                             f"{p['last_sequence']}  last offset {p['last_offset']}  offset delta "
                             f"{p['offset_delta']}  timestamp {p['timestamp']}  coordinator epoch "
                             f"{p['coordinator_epoch']}  open transaction " + (f"from {txn}" if txn >= 0 else "none"))
                else:
                    out.entry({**head, "type": "producer", **p})
    except OSError as e:
        raise KwireError(f"{lf.path}: {e.strerror or e}") from None
    summary["producers"] += snap.producers
    for problem in snap.problems:
        damage(problem)
    return len(snap.problems)


def _snapshot_problem(types: list[str | None]) -> str | None:
    """A KRaft snapshot is a SnapshotHeader control batch, the records, a SnapshotFooter control batch."""
    if not types:
        return "the snapshot holds no batch (expected SnapshotHeaderRecord first)"
    if types[0] != "SnapshotHeaderRecord":
        return f"the snapshot starts with {types[0] or 'a data batch'}, not a SnapshotHeaderRecord"
    if types[-1] != "SnapshotFooterRecord":
        return f"the snapshot ends with {types[-1] or 'a data batch'}, not a SnapshotFooterRecord"
    return None
