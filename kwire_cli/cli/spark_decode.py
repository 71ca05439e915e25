"""`kwire spark-decode`: `kwire pcap` over many or large captures, as a PySpark job."""
from __future__ import annotations

import json
import os
import re
import sys

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic
from kwire_cli.cli.options import limit_options, read_keylogs, show_secrets_option, tls_keylog_option
from kwire_cli.cli.schemas import values_options
from kwire_cli.errors import KwireError
from kwire_cli.render.damage import damage_warning
from kwire_cli.render.safe import escape

EPILOG = """\b
Examples:
  kwire spark-decode fixtures/captures --out /tmp/kwire-out --overwrite
  kwire spark-decode 'traces/*.pcap*' --out /data/kafka-rows --format jsonl --port 19092
  kwire spark-decode /shared/captures --out /shared/rows --master spark://10.0.0.5:7077
  spark-submit --master yarn "$(python -m kwire_cli.cli.spark_submit --path)" /shared/captures --out /shared/rows

\b
Without --master (and outside spark-submit) kwire starts a local Spark session (local[*]):
Java 17 and kwire with its spark extra (pip install 'kwire[spark]') are all it needs.
On a cluster, every executor needs Python with kwire's dependencies (click, cramjam,
crc32c, pyyaml, rich); kwire itself and its message specs are shipped by the job. Input
paths must be readable from the executors.

\b
Output: one row per Kafka frame, partitioned by api_name (DIR/api_name=Produce/...). --format
jsonl: exactly the lines of `kwire pcap --format jsonl`. parquet: the same columns, header and
body as JSON strings, and every declared column in every row: topic_names, embedded,
violations, notes and captured, which a pcap JSON line carries only when it has them, are null
there, and extra (any other key, as JSON) is Parquet's own. Beside them:
_kwire_summary.json (the `kwire pcap --summary` JSON, its answers included: latency by
broker and client, connections, who, groups, lag, commits, producers, expert) and _kwire_result.json.

\b
Spark's progress bars go to stderr when it is a terminal (KWIRE_NO_PROGRESS=1 turns them off), then
one line:
files, packets, frames, decoded, undecodable, rows written, failed files, elapsed.

\b
Exit codes: 0 the job ran (files named on the command line that are not captures are reported
on stderr as failed files; with --strict they, undecodable frames and damage give 1), 1 the job
could not run, 2 usage (an input that does not exist is one). In a directory or glob, files that
are not captures (a manifest.json) are skipped with one note."""


def require_pyspark() -> None:
    """PySpark with its Arrow support (pyarrow, pandas: PySpark's `sql` extra) is kwire's `spark`
    extra: without it, one line saying how to add it (exit 1)."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ModuleNotFoundError as e:
        if (e.name or "").partition(".")[0] not in ("pyspark", "py4j", "pyarrow", "pandas"):
            raise
        raise KwireError(f"spark-decode needs PySpark with Arrow ({e.name} is missing): "
                         "pip install 'kwire[spark]'") from None


def _conf(_ctx, _param, values):
    out = []
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"{v!r} is not KEY=VALUE")
        k, _, val = v.partition("=")
        out.append((k.strip(), val.strip()))
    return out


# the master URLs Spark accepts (SparkContext's master parsing): checked before the JVM starts, so that a
# typo is one line, not the JVM's stack trace
MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]"
                    r"|spark://[^\s,/:]+:\d+(,[^\s,/:]+:\d+)*|yarn|k8s://\S+|mesos://\S+")


@click.command(epilog=EPILOG)
@click.argument("inputs", nargs=-1, required=True, metavar="DIR|FILE|GLOB...")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]), default="parquet", show_default=True,
              help="Parquet (typed columns, header/body as JSON strings) or JSON lines (kwire pcap's lines).")
@click.option("--master", metavar="URL", help="Spark master (spark://host:7077, local[4], yarn...). "
              "Default: the spark-submit configuration, else local[*].")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True, metavar="N",
              help="A broker port (repeatable). Default: 9092 and ports seen answering Kafka requests.")
@click.option("--partitions", type=click.IntRange(1, 100000), metavar="N",
              help="Shuffle partitions for the connections cut across read tasks (rotated files, ranges), "
              "where they are decoded; the others are decoded where they are read. Default: 2 x Spark's "
              "parallelism, at least one per 256 MiB of capture.")
@click.option("--split-size", type=click.IntRange(1, 1 << 20), default=64, show_default=True, metavar="MB",
              help="Files larger than this are read in ranges of this size, cut at record boundaries.")
@click.option("--raw-records", is_flag=True, help="Keep records fields as hex instead of decoding batches.")
@click.option("--overwrite", is_flag=True, help="Replace a previous spark-decode output in the directory "
              "(refused when it holds other files or an input).")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", callback=_conf,
              help="A Spark configuration setting (repeatable), e.g. spark.executor.memory=4g.")
@click.option("--ship-code", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Ship kwire's code to the executors as a zip (auto: unless the master is local). "
              "'never' when the executors have this kwire version installed: they keep its native decoder.")
@click.option("--summary-format", type=click.Choice(["table", "json", "none"]), default="table",
              show_default=True, help="How to print the summary on stdout.")
@click.option("--no-summary", is_flag=True,
              help="Count no summary (neither printed nor written to _kwire_summary.json): the tasks count only "
              "frames, undecodable frames and record batches, as kwire pcap does for JSON lines (less CPU).")
@click.option("--strict", is_flag=True, help="A frame that breaks a rule of the format is undecodable (not "
              "read leniently with its violations listed); exit 1 when a file failed, a frame did not decode "
              "or the capture is damaged.")
@click.option("--filter", "filter_expr", metavar="EXPR",
              help="Write only the rows this display filter keeps (kwire pcap's filter language: api, topic, "
                   "partition, group, key, header, error...); the summary counts every frame.")
@limit_options(capture=True)
@tls_keylog_option(dsb=False)
@show_secrets_option()
@values_options
def spark_decode(inputs, out, fmt, master, ports, partitions, split_size, raw_records, overwrite, conf,
                 ship_code, summary_format, no_summary, strict, filter_expr, tls_keylogs, limits, show_secrets):
    """Decode Kafka conversations from captures with Spark (same codec and capture code as
    `kwire pcap`).

    DIR (recursively), FILE or GLOB: pcap, pcapng, gzip-compressed pcap. Connections split
    across rotated files (tcpdump -C/-G) are reassembled as one; large files are read in
    parallel byte ranges cut at record boundaries.

    Secrets are redacted in the rows and the summary unless --show-secrets (as in kwire pcap).
    TLS is decrypted with the --tls-keylog files, broadcast to the executors (pcapng
    Decryption Secrets Blocks are not read here: give their key log with --tls-keylog).
    """
    if master is not None and not MASTER.fullmatch(master):
        raise KwireUsageError(f"--master: {master!r} is not a Spark master URL (local, local[N], local[*], "
                              "local[N,F], local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT], yarn, "
                              "k8s://https://HOST:PORT, mesos://HOST:PORT)")
    if filter_expr:
        from kwire_cli.capture.filter import compile_filter
        from kwire_cli.errors import FilterError
        try:
            compile_filter(filter_expr)
        except FilterError as e:  # before Spark starts: a usage error (exit 2)
            raise KwireUsageError(str(e)) from None
    require_pyspark()
    keylog = read_keylogs(tls_keylogs) if tls_keylogs else None
    from kwire_cli.cli.app import note_refused, note_skipped
    from kwire_cli.spark.job import run
    from kwire_cli.spark.outdir import UnsafeOutput
    try:
        res = run(inputs, out, fmt=fmt, master=master, ports=ports, partitions=partitions,
                  split_size=split_size << 20, raw_records=raw_records, overwrite=overwrite, conf=conf,
                  progress=not os.environ.get("KWIRE_NO_PROGRESS") and sys.stderr.isatty(),
                  ship={"auto": None, "always": True, "never": False}[ship_code], limits=tuple(limits),
                  show_secrets=show_secrets, on_skip=note_skipped, on_refused=note_refused, keylog=keylog,
                  strict=strict,
                  filter_expr=filter_expr, summary=not no_summary)
    except UnsafeOutput as e:  # nothing deleted, nothing started: a usage error
        raise KwireUsageError(str(e)) from None
    _print_summary(res.summary, "none" if no_summary else summary_format)
    for msg in res.failures:
        diagnostic("error", msg)
    dmg = sum(v["events"] for v in (res.summary.get("damage") or {}).values())
    warning = damage_warning(res.summary, see="the summary" if no_summary else f"{out}/_kwire_summary.json")
    if warning:
        diagnostic("warning", warning)
    click.echo(escape(res.line()), err=True)
    if strict and (res.failures or res.undecodable or dmg):
        sys.exit(1)


def _print_summary(summary: dict, how: str) -> None:
    """The summary on stdout, as a table or JSON (``how``: table, json, none)."""
    if how == "table":
        from kwire_cli.render.summary import print_summary
        print_summary(summary)
    elif how == "json":
        from kwire_cli.render.json import to_jsonable
        from kwire_cli.render.safe import json_text
        click.echo(json_text(json.dumps(to_jsonable(summary), ensure_ascii=False, allow_nan=False, indent=2)))
