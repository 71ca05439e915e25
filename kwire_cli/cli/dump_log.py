"""`kwire dump-log`: Kafka log segments, indexes and KRaft snapshots, with internal topics decoded."""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, std_binary
from kwire_cli.cli.options import parse_size, show_secrets_option
from kwire_cli.cli.schemas import values_options

if TYPE_CHECKING:
    from kwire_cli.logs.walk import DumpOptions

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
    from kwire_cli.logs.walk import DumpOptions
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
        opts = DumpOptions(fmt=fmt, verify=verify, offsets=offsets, record_type=record_type, show_secrets=show_secrets,
                           key=key, header=header, max_bytes=max_bytes)
        with gc_tuned():
            problems = _dump(targets, opts)
    finally:
        if record_specs_dir is not None:
            use_record_specs(None)
    if problems:
        sys.exit(1)


def _dump(targets: list[Any], opts: DumpOptions) -> int:
    """The files' entries written as ``opts`` says; returns how many problems --verify found."""
    from kwire_cli.logs.walk import LogWalk, open_plain
    from kwire_cli.output import progress as bar
    from kwire_cli.output.logtext import log_writer

    out = log_writer(opts.fmt, sys.stdout, lambda: std_binary("stdout"))
    walk = LogWalk(out, opts)
    with contextlib.ExitStack() as stack:
        opener = open_plain
        if bar.enabled():  # every format writes as the files are read: never on the rows' terminal
            progress = stack.enter_context(bar.FileProgress())

            def opener(path: str) -> BinaryIO:
                return progress.wrap(open_plain(path), path, os.path.getsize(path))
        for lf in targets:
            walk.file(lf, opener)
    out.close(walk.summary)
    for line in walk.damage_lines:
        diagnostic("warning", line)
    return walk.summary["index_problems"] + walk.summary["snapshot_problems"]
