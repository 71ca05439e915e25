"""`kwire pcap`: capture files to decoded, paired Kafka conversations."""
from __future__ import annotations

import io
import json
import os
import sys
from typing import Any, BinaryIO, Iterator

import click

from kwire_cli.cli.app import KwireUsageError, std_binary
from kwire_cli.cli.options import DecodeLimits, limit_options
from kwire_cli.errors import KwireError
from kwire_cli.render.jsonlines import gc_tuned, line_encoder

EPILOG = """\b
Examples:
  kwire pcap fixtures/captures/kafka-python-produce.pcap
  kwire pcap fixtures/captures/*.pcap --format jsonl --filter 'api=Produce and version>=9'
  kwire pcap fixtures/captures/confluent-kafka-consume.pcap --summary
  kwire pcap capture.pcapng --port 19092 --filter 'error or undecodable'

\b
Filter fields: api (name or key; api~part), version (=, !=, <, >, a-b), kind,
client (client~part), error (any non-zero code, or error=NAME|CODE), undecodable,
conn / src / dst (ip:port, ip or port), corr, frame, size, latency (ms), file;
joined with and / or / not and parentheses.

\b
Exit codes: 0 every file read (damage and undecodable frames are reported on
stderr and in --summary; with --strict they give 1), 1 a file could not be read
as a capture, 2 usage error."""


class _Counting(io.RawIOBase):
    """A read-only file wrapper that reports progress (bytes read) to a callback."""

    def __init__(self, f: BinaryIO, advance):
        self.f = f
        self.advance = advance

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.f.readinto(b)
        if n:
            self.advance(n)
        return n or 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        if data:
            self.advance(len(data))
        return data


def _progress_enabled() -> bool:
    return sys.stderr.isatty() and not os.environ.get("KWIRE_NO_PROGRESS")


def iter_records(paths: list[str], ports: tuple[int, ...], records_mode: str | None, stats, conv,
                 failures: list[str], max_frame: int | None = None) -> Iterator[dict]:
    """Records of every file in order; a file that is not a capture is reported and skipped."""
    from kwire_cli.capture import DEFAULT_MAX_FRAME, iter_capture
    if max_frame is None:
        max_frame = DEFAULT_MAX_FRAME
    progress = None
    if _progress_enabled():
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
        from kwire_cli.render.console import make_console
        progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                            TransferSpeedColumn(), console=make_console(stderr=True), transient=True)
        progress.start()
    try:
        for path in paths:
            try:
                f = open(path, "rb")
            except OSError as e:
                failures.append(f"{path}: {e.strerror or e}")
                continue
            with f:
                src: Any = f
                if progress is not None:
                    task = progress.add_task(os.path.basename(path), total=os.path.getsize(path))
                    src = io.BufferedReader(_Counting(f, lambda n, t=task: progress.advance(t, n)))
                try:
                    events = iter_capture(src, file_label=path, broker_ports=ports or None, stats=stats,
                                          max_frame=max_frame)
                    yield from conv.records(events)
                except KwireError as e:
                    msg = str(e)
                    failures.append(msg if path in msg else f"{path}: {msg}")
    finally:
        if progress is not None:
            progress.stop()


def _table_row(r: dict, t0: float | None) -> list[str]:
    api = f"{r['api_name'] or '?'} v{r['api_version']}" if r.get("api_version") is not None else (r.get("api_name") or "?")
    note = r["error"] or ", ".join(r.get("error_codes") or [])
    if r.get("body") is not None:
        from kwire_cli.capture.session import batch_stats, new_batch_stats
        b = batch_stats(r["body"], new_batch_stats())
        bad = [f"{n} {what}" for n, what in ((b["batch_errors"], "batch(es) not decoded (see --format jsonl)"),
                                            (b["crc_invalid"], "batch(es) with a bad CRC")) if n]
        if bad:
            note = (note + "; " if note else "") + ", ".join(bad)
    names = r.get("topic_names")
    if names and not r["error"]:
        shown = ", ".join(f"{k}={v or '?'}" for k, v in names.items())
        note = (note + "; " if note else "") + "topics " + shown
    lat = "" if r.get("latency_ms") is None else f"{r['latency_ms']:.3f}"
    ts = "" if r.get("ts") is None or t0 is None else f"{r['ts'] - t0:.6f}"
    return [str(r["frame"]), ts, f"{r['src']} -> {r['dst']}", r["kind"], api,
            str(r.get("correlation_id") if r.get("correlation_id") is not None else ""),
            str(r.get("client_id") or ""), str(r["size"]), lat, note]


def _print_summary_tables(s: dict) -> None:
    from rich.table import Table
    from kwire_cli.render.console import make_console
    con = make_console()
    cap = s.get("capture") or {}
    con.print(f"files {cap.get('files', '?')}  packets {cap.get('packets', '?')}  frames {s['frames']}  "
              f"decoded {s['decoded']}  undecodable {s['undecodable']}  "
              f"reconciled {'yes' if s['reconciled'] else 'NO'}")
    if s["undecodable_by_reason"]:
        con.print("undecodable by reason: " + ", ".join(f"{k} {v}" for k, v in s["undecodable_by_reason"].items()))
    t = Table(title="APIs", title_justify="left")
    for c in ("API", "version", "kind", "count", "bytes", "undecodable", "p50 ms", "p99 ms"):
        t.add_column(c, justify="right" if c not in ("API", "kind") else "left")
    for a in s["apis"]:
        f = lambda x: "" if x is None else f"{x:.3f}"  # noqa: E731
        t.add_row(str(a["api_name"]), str(a["api_version"]), a["kind"], str(a["count"]), str(a["bytes"]),
                  str(a["undecodable"]), f(a["latency_p50_ms"]), f(a["latency_p99_ms"]))
    con.print(t)
    if s["error_codes"]:
        t = Table(title="Error codes", title_justify="left")
        t.add_column("error")
        t.add_column("frames", justify="right")
        for k, v in s["error_codes"].items():
            t.add_row(k, str(v))
        con.print(t)
    t = Table(title="Clients", title_justify="left")
    t.add_column("client id")
    t.add_column("requests", justify="right")
    t.add_column("API versions used")
    for cid, c in s["clients"].items():
        t.add_row(cid, str(c["requests"]), ", ".join(f"{k} {'/'.join(map(str, v))}" for k, v in c["versions"].items()))
    con.print(t)
    audit = s["negotiation_audit"]
    if s["advertised_by"]:
        if audit:
            t = Table(title="Negotiation audit: versions outside what the broker advertised", title_justify="left")
            for c in ("broker", "client id", "API", "version", "advertised", "requests"):
                t.add_column(c)
            for a in audit:
                adv = "missing" if a["advertised"] is None else f"{a['advertised'][0]}-{a['advertised'][1]}"
                t.add_row(a["broker"], str(a["client_id"]), a["api_name"], str(a["api_version"]), adv, str(a["requests"]))
            con.print(t)
        else:
            con.print("negotiation audit: every request is within what its broker advertised "
                      f"({', '.join(s['advertised_by'])})")
    else:
        con.print("negotiation audit: no ApiVersions answer in the capture")
    w = s["what_if_tagged_error_fields"]
    con.print(f"what-if ErrorCode/ErrorMessage tagged: {w['applicable']} of {w['responses']} responses apply; "
              f"{w['bytes_now']} bytes now, {w['bytes_tagged']} tagged, saving {w['saving']} bytes")
    rb = s.get("record_batches") or {}
    if rb.get("batches"):
        codecs = ", ".join(f"{c} {n}" for c, n in rb["compression"].items())
        con.print(f"record batches: {rb['batches']} ({codecs}) holding {rb['records']} records; "
                  f"bad CRC {rb['crc_invalid']}, not decoded {rb['batch_errors']}, "
                  f"fields ending in a partial batch {rb['partial_trailing_batches']}")
    dmg = s.get("damage") or {}
    if dmg:
        con.print("damage: " + ", ".join(f"{k} {v['events']} ({v['bytes']} bytes)" for k, v in dmg.items()))
        for d in s.get("damage_events", [])[:20]:
            where = f" packet {d['frame']}" if d["frame"] is not None else ""  # None: no one packet
            con.print(f"  {d['file']}{where} {d['conn'] or ''}: {d['kind']}: {d['detail']}")


@click.command(epilog=EPILOG)
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl", "json"]), default="table", show_default=True,
              help="One line per frame (table), one JSON object per line (jsonl), or one JSON document.")
@click.option("--summary", is_flag=True, help="Print the summary (counts, latency, errors, clients, "
              "negotiation audit, what-if, record batches, damage) instead of the frames.")
@click.option("--filter", "filter_expr", metavar="EXPR", help="Show only frames matching EXPR (see below).")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True, metavar="N",
              help="A broker port (repeatable). Default: 9092 and any port seen answering Kafka requests.")
@click.option("--raw-records", is_flag=True, help="Keep records fields as hex instead of decoding batches.")
@click.option("--strict", is_flag=True, help="Exit 1 when any frame did not decode or the capture is damaged.")
@limit_options(capture=True)
def pcap(files: tuple[str, ...], fmt: str, summary: bool, filter_expr: str | None, ports: tuple[int, ...],
         raw_records: bool, strict: bool, limits: DecodeLimits) -> None:
    """Decode Kafka conversations from pcap/pcapng FILES (a directory: every file under it, in
    path order, so tcpdump's rotated files come in sequence).

    Every Kafka frame becomes one record: requests decode from their header, responses by pairing
    with their request through the correlation id on the same connection. Damaged captures still
    give every intact frame, and the summary accounts for the rest.
    """
    from kwire_cli.capture.inputs import files_under
    files = tuple(f for spec in files for f in (files_under(spec) if os.path.isdir(spec) else [spec]))
    if not files:
        raise KwireUsageError("FILES: the directories given hold no files")
    with gc_tuned(), limits.apply():
        _pcap(files, fmt, summary, filter_expr, ports, raw_records, strict, limits.frame_size())


def _pcap(files: tuple[str, ...], fmt: str, summary: bool, filter_expr: str | None, ports: tuple[int, ...],
          raw_records: bool, strict: bool, max_frame: int) -> None:
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.filter import compile_filter
    from kwire_cli.capture.session import RECORD_KEYS, Conversation, Summary

    def to_jsonable(value):
        from kwire_cli.render.json import to_jsonable as conv  # imports yaml: only when needed
        return conv(value)

    keep = compile_filter(filter_expr)
    stats = CaptureStats()
    conv = Conversation(records_mode="hex" if raw_records else None)
    summ = Summary()
    failures: list[str] = []
    out = sys.stdout
    bout = None  # frames as JSON go out as bytes (orjson's output), straight to the binary stdout
    t0 = None
    first_json = True
    if fmt in ("json", "jsonl") and not summary:
        out.flush()
        bout = std_binary("stdout")
        encode = line_encoder()
        sep = b"\n" if fmt == "jsonl" else b",\n"
    if fmt == "json" and not summary:
        bout.write(b'{"frames": [\n')
    if fmt == "table" and not summary:
        from kwire_cli.render.console import make_console
        con = make_console()
        con.print("frame  time  src -> dst  kind  api  corr  client  size  latency_ms  note")
    shown = 0
    for r in iter_records(list(files), ports, conv.records_mode, stats, conv, failures, max_frame):
        summ.add(r)
        if not keep(r):
            continue
        shown += 1
        if summary:
            continue
        if t0 is None:
            t0 = r.get("ts")
        if fmt == "table":
            con.print("  ".join(_table_row(r, t0)))
        else:
            ordered = {k: r.get(k) for k in RECORD_KEYS}
            for k in r:
                if k not in ordered:
                    ordered[k] = r[k]
            line = encode(ordered)
            if fmt == "jsonl":
                bout.write(line)
                bout.write(sep)
            else:
                if not first_json:
                    bout.write(sep)
                bout.write(line)
                first_json = False
    result = summ.to_dict(stats.to_dict(), conv.damage)
    if filter_expr:
        result["shown"] = shown
    if summary:
        if fmt == "table":
            _print_summary_tables(result)
        else:
            out.write(json.dumps(to_jsonable(result), ensure_ascii=False, allow_nan=False,
                                 indent=2 if fmt == "json" else None) + "\n")
    elif fmt == "json":
        bout.write(("\n], \"summary\": " + json.dumps(to_jsonable(result), ensure_ascii=False, allow_nan=False)
                    + "}\n").encode())
    if bout is not None:
        bout.flush()
    out.flush()  # text output (tables, --summary) before any diagnostics
    for msg in failures:
        click.echo(f"kwire: error: {msg}", err=True)
    bad = result["undecodable"]
    dmg = sum(v["events"] for v in (result.get("damage") or {}).values())
    if bad or dmg:
        click.echo(f"kwire: warning: {bad} of {result['frames']} frames did not decode; "
                   f"{dmg} damage events (see --summary)", err=True)
    if failures or (strict and (bad or dmg)):
        sys.exit(1)
