"""`kwire pcap`: capture files to decoded, paired Kafka conversations."""
from __future__ import annotations

import functools
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, expand_captures, note_skipped, std_binary
from kwire_cli.cli.options import DecodeLimits, limit_options, read_keylogs, show_secrets_option, tls_keylog_option
from kwire_cli.cli.schemas import values_options
from kwire_cli.errors import FilterError, KwireError
from kwire_cli.render.damage import damage_warning
from kwire_cli.render.jsonlines import gc_tuned, line_writer
from kwire_cli.render.safe import escape, json_text

if TYPE_CHECKING:
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.session import Conversation

EPILOG = """\b
Examples:
  kwire pcap fixtures/captures/kafka-python-produce.pcap
  kwire pcap fixtures/captures/*.pcap --format jsonl --filter 'api=Produce and version>=9'
  kwire pcap fixtures/captures/confluent-kafka-consume.pcap --summary
  kwire pcap capture.pcapng --port 19092 --filter 'error or undecodable'
  kwire pcap fixtures/captures/kafkajs-consume.pcap --filter 'topic~gzip and partition=1'
  kwire pcap fixtures/captures/kafkajs-produce.pcap --filter 'key=k-1 or header~dup'
  kwire pcap - --format jsonl < fixtures/captures/kafkajs-consume.pcap
  tcpdump -U --immediate-mode -w - -i any port 9092 | kwire pcap -
  kwire pcap --follow /var/captures/kafka/   # tcpdump -C/-G rotating into it

\b
Filter fields: api (name or key; api~part), version (=, !=, <, >, a-b), kind,
client (client~part), error (any non-zero code anywhere in the body, or
error=NAME|CODE), undecodable, conn / src / dst (ip:port, ip or port), corr,
frame, size, latency (ms), file; and values inside the body: topic, group,
member, transactional_id (=, !=, ~part), partition, producer_id (numbers, a-b),
key (a record key), header (a record header's key or value); fields of keys
and values read with --schema-registry or --schemas: value.PATH, key.PATH
(value.customer.name=c1, key.id~A-, value.lines.qty>1); joined with
and / or / not and parentheses. An unknown field or API name is a usage error.

\b
Answers (--summary): a classic group's generation starts at the first JoinGroup
request after the previous generation formed and its rebalance lasts until the
generation's last SyncGroup answer; lag = the Fetch answer's high watermark -
the request's fetch offset, per client id, topic and partition; committed lag =
the newest high watermark - the last committed offset; percentiles are
nearest-rank (the smallest value with at least that fraction at or below it).

\b
Live captures: - (standard input) and --follow print each frame as soon as it
is complete (a request when it arrives, its response when it arrives), flushed
line by line in every format, and the summary at end of input or on Ctrl-C
(SIGINT, or SIGTERM: the frames so far, then the summary; exit status as at end
of input, 0, as tcpdump and tshark do). Requests unanswered for
--request-timeout seconds of capture time (default 60) expire and are counted
(unanswered-request damage, capture.expired_requests); closed connections are
dropped, so memory stays flat over hours.

\b
Exit codes: 0 every file read (damage and undecodable frames are reported on
stderr and in --summary; with --strict they give 1), 1 a file could not be read
as a capture (the others are still read), 2 usage error: an option or filter
that does not parse, a FILE that does not exist (nothing is read then)."""


class _Counting(io.RawIOBase):
    """A read-only file wrapper that reports progress (bytes read) to a callback."""

    def __init__(self, f: io.BufferedReader, advance: Callable[[int], object]) -> None:
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


def captures(paths: list[str]) -> list[list[str]]:
    """The captures the files make: every file named once is a part of the first one (rotated
    parts, or unrelated files: they are merged by timestamp); a file named again (the same file,
    by its real path) is read again, as a part of the next capture."""
    groups: list[list[str]] = []
    seen: dict[str, int] = {}
    for p in paths:
        real = os.path.realpath(p)
        k = seen.get(real, 0)
        seen[real] = k + 1
        while len(groups) <= k:
            groups.append([])
        groups[k].append(p)
    return groups


def iter_rows(paths: list[str], ports: tuple[int, ...], stats: CaptureStats, conv: Conversation,
              failures: list[str], max_frame: int | None = None, keylog=None,
              request_timeout: float | None = None, wanted=None) -> Iterator[dict]:
    """The output rows of the files, one capture (``conv.rows``): their packets merged by
    timestamp into one reassembly, so that connections go on across rotated files; a file that is
    not a capture is reported in ``failures`` and left out."""
    from kwire_cli.capture import DEFAULT_MAX_FRAME, iter_capture
    from kwire_cli.capture.inputs import is_stream
    if max_frame is None:
        max_frame = DEFAULT_MAX_FRAME
    progress = None
    wrap = None
    if _progress_enabled():
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        from kwire_cli.render.console import make_console
        progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                            TransferSpeedColumn(), console=make_console(stderr=True), transient=True)
        progress.start()

        def wrap(f, label: str):
            total = None if is_stream(label) else os.path.getsize(label)
            task = progress.add_task(escape(os.path.basename(label)), total=total)
            return io.BufferedReader(_Counting(f, functools.partial(progress.advance, task)))
    try:
        for group in captures(paths):
            events = iter_capture(group, broker_ports=ports or None, stats=stats, max_frame=max_frame,
                                  failures=failures, wrap=wrap, reopenable=lambda p: not is_stream(p),
                                  keylog=keylog, request_timeout=request_timeout)
            yield from conv.rows(events, wanted)
    except KwireError as e:
        failures.append(str(e))
    finally:
        if progress is not None:
            progress.stop()


@click.command(epilog=EPILOG)
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl", "json", "fields", "records"]), default="table",
              show_default=True, help="One line per frame (table), one JSON object per line (jsonl), one JSON "
              "document, the -e fields of each frame, tab-separated (fields; -e implies it), or one line per "
              "record produced or fetched, as kcat prints them (records; --record-format implies it).")
@click.option("-e", "--field", "fields", multiple=True, metavar="FIELD",
              help="A field to print, as tshark -T fields -e (repeatable; one tab-separated line per frame): a "
                   "column of the rows (api_name, latency_ms, client_id...) or a dot path into one "
                   "(body.Topics.Name, header.ClientId); lists are stepped into and several values joined "
                   "with commas.")
@click.option("-E", "field_layout", multiple=True, metavar="KEY=VALUE",
              help="How -e fields are printed, as tshark's -E: header=y (a first line naming them), "
                   "separator=/t|/s|C, aggregator=,|/s|C, quote=d|s|n (repeatable).")
@click.option("--record-format", "record_format", metavar="FMT",
              help="How --format records prints a record, with kcat's -f tokens: %t topic, %p partition, "
                   "%o offset, %T timestamp, %k key, %K key size, %s value, %S value size, %h headers; also "
                   "%a API, %c client id, %f frame, %e error; \\n \\t; or json (one JSON object per record, as "
                   "kcat -J). A Produce's records print when it is answered, with the offsets the broker gave them.")
@click.option("--summary", is_flag=True, help="Print the summary (counts, latency, errors, clients, "
              "negotiation audit, what-if, record batches, damage) and the answers (latency by broker and "
              "client, connections, who did what, groups, lag, commits, producers, expert findings: see "
              "below) instead of the frames.")
@click.option("--filter", "filter_expr", metavar="EXPR", help="Show only frames matching EXPR (see below).")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True, metavar="N",
              help="A broker port (repeatable). Default: 9092 and any port seen answering Kafka requests.")
@click.option("--raw-records", is_flag=True, help="Keep records fields as hex instead of decoding batches.")
@click.option("--follow", "follow", is_flag=True, help="FILE is still being written (tcpdump -w FILE -U): "
              "read what is there, then wait for more, until Ctrl-C; truncated, written again from its start "
              "or replaced, it is read again from its start (as tail -F), with a note. A directory: its files "
              "in rotation order, then the rotated files as they appear (tcpdump -C, -G).")
@click.option("--request-timeout", "request_timeout", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
              help="A request unanswered this long (capture time) expires and is counted in the summary. "
                   "Default: 60 for - and --follow, never for files. A JoinGroup may wait up to the "
                   "group's rebalance timeout: raise it for those.")
@click.option("--strict", is_flag=True, help="A frame that breaks a rule of the format (a null where none is "
              "allowed, a string that is not UTF-8, trailing bytes...) is undecodable, not read leniently with its "
              "violations listed; exit 1 when any frame did not decode or the capture is damaged.")
@tls_keylog_option()
@limit_options(capture=True)
@show_secrets_option()
@values_options
def pcap(files: tuple[str, ...], fmt: str, fields: tuple[str, ...], field_layout: tuple[str, ...],
         record_format: str | None, summary: bool, filter_expr: str | None,
         ports: tuple[int, ...], raw_records: bool, follow: bool, request_timeout: float | None, strict: bool,
         tls_keylogs: tuple[str, ...], limits: DecodeLimits, show_secrets: bool) -> None:
    """Decode Kafka conversations from pcap/pcapng FILES (a directory or a quoted glob: the
    captures in it, in rotation order: cap, cap1, cap2 ... cap10; -: standard input, read as it comes).

    Every Kafka frame becomes one output row: requests decode from their header, responses by pairing
    with their request through the correlation id on the same connection. Damaged captures still
    give every intact frame, and the summary accounts for the rest.

    Secrets are redacted in every output unless --show-secrets; SASL exchanges are decoded (Sasl
    beside AuthBytes) and the summary lists each connection's authentication.

    The files of one run are one capture: their packets are merged by timestamp, so connections go
    on across tcpdump's rotated files (-C, -G); each row keeps its file and packet number. A file
    named twice is read twice. In a directory, files that are not captures are skipped with one
    note, FIFOs, sockets and devices with a note each; a file named on the command line is read
    (one that is not a capture is an error, exit 1), a FIFO as a stream (alone: live, as -); a
    name that does not exist is a usage error (exit 2). A connection caught mid-stream resynchronises only on
    frames the codec confirms (nothing is made of payload bytes); a segment that arrives after the
    ACK of later bytes still fills its hole (held 0.2 s or 64 packets) instead of being a gap.
    A capture cut by a snap length (tcpdump -s, editcap -s) still gives a row for every frame whose
    header was captured: API, version, correlation id, client id, paired with its answer, marked
    cut (the captured column; error_kind cut-frame; no body). Records longer than the file's snap
    length are read whole, as Wireshark reads them, with a note.

    TLS connections are recognised by their ClientHello on any port and decrypted with the secrets
    of --tls-keylog files and of the pcapng's Decryption Secrets Blocks; connections without their
    secrets are not damage: a note per TLS version and server says so (and which option gives
    them), and the summary shows each connection's TLS version and cipher suite.
    """
    if field_layout and not fields:
        raise KwireUsageError("-E lays out -e fields: give the fields with -e FIELD")
    if fields and fmt not in ("table", "fields"):
        raise KwireUsageError(f"-e prints fields, not --format {fmt}")
    if fmt == "fields" and not fields:
        raise KwireUsageError("--format fields needs the fields to print: -e FIELD (repeatable)")
    if fields:
        fmt = "fields"
    if record_format is not None:
        if fmt not in ("table", "records"):
            raise KwireUsageError(f"--record-format prints records, not --format {fmt}")
        fmt = "records"
    live = _live_input(files, follow)
    if live is None:
        files = expand_captures(files)  # before any output: a name that is not there is a usage error
    keylog = read_keylogs(tls_keylogs)
    with gc_tuned(), limits.apply():
        _pcap(files, fmt, summary, filter_expr, ports, raw_records, strict, limits.frame_size(), show_secrets,
              keylog, live=live, request_timeout=request_timeout, fields=fields, field_layout=field_layout,
              record_format=record_format)


def _live_input(files: tuple[str, ...], follow: bool):
    """The live input FILES name (``kwire_cli.capture.live.LiveInput``: - or --follow), or None
    for files read whole."""
    from kwire_cli.capture.inputs import is_stream
    from kwire_cli.capture.live import LiveInput
    if "-" not in files and not follow:
        if len(files) == 1 and is_stream(files[0]):
            return LiveInput.fifo(files[0])  # a FIFO alone: live too (with other files: merged)
        return None
    if len(files) != 1:
        what = "--follow" if follow else "- (standard input)"
        raise KwireUsageError(f"{what} reads one input: give it alone, not with other files")
    path = files[0]
    if path == "-":
        return LiveInput.stdin(std_binary("stdin"))
    if os.path.isdir(path):
        return LiveInput.follow_dir(path)
    if not os.path.exists(path):
        raise KwireUsageError(f"--follow: no such file or directory: {path}")
    return LiveInput.follow_file(path)


def live_rows(live, ports: tuple[int, ...], stats: CaptureStats, conv: Conversation, failures: list[str],
              max_frame: int, keylog, request_timeout: float | None, stop, wanted=None) -> Iterator[dict]:
    """The output rows of a live capture as its frames complete (``kwire_cli.capture.live``)."""
    from kwire_cli.capture.events import Note
    from kwire_cli.capture.live import DEFAULT_REQUEST_TIMEOUT, FOLLOW_NOTE, iter_live
    events = iter_live(live, broker_ports=ports or None, max_frame=max_frame, stats=stats, keylog=keylog,
                       request_timeout=request_timeout or DEFAULT_REQUEST_TIMEOUT, stop=stop,
                       failures=failures, on_skip=note_skipped)

    def told(events):
        for ev in events:  # a followed file read again from its start: said as it happens, and in the summary
            if isinstance(ev, Note) and ev.kind == FOLLOW_NOTE:
                diagnostic("note", escape(f"{ev.file}: {ev.detail}"))
            yield ev
    try:
        yield from conv.rows(told(events), wanted)
    except KwireError as e:
        failures.append(str(e))


class _Interrupts:
    """While live: SIGINT and SIGTERM end reading (``stop`` is set) instead of killing kwire, so
    that the frames so far and the summary still print; a second one stops at once."""

    def __init__(self, stop) -> None:
        self.stop = stop
        self.saved: dict = {}

    def __enter__(self) -> _Interrupts:
        import signal
        if threading_main():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, _signum, _frame) -> None:
        if self.stop.is_set():
            raise SystemExit(130)  # the second one: now
        self.stop.set()

    def __exit__(self, *exc) -> None:
        import signal
        for sig, h in self.saved.items():
            signal.signal(sig, h)


def threading_main() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _pcap(files: tuple[str, ...], fmt: str, summary: bool, filter_expr: str | None, ports: tuple[int, ...],
          raw_records: bool, strict: bool, max_frame: int, show_secrets: bool = False, keylog=None,
          live=None, request_timeout: float | None = None, fields: tuple[str, ...] = (),
          field_layout: tuple[str, ...] = (), record_format: str | None = None) -> None:
    from kwire_cli.analysis import AnalysedSummary
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.filter import compile_filter
    from kwire_cli.capture.rows import json_ordered, table_cells, table_header
    from kwire_cli.capture.session import MAX_DAMAGE_KEPT, Conversation

    def to_jsonable(value):
        from kwire_cli.render.json import to_jsonable as conv  # imports yaml: only when needed
        return conv(value)

    try:
        keep = compile_filter(filter_expr)
        wanted = None
        if not summary and fmt != "json" and not strict:
            # a filter on header fields only: the frames it rejects are not decoded at all (the summary,
            # --format json's summary and --strict's verdict need every frame decoded)
            from kwire_cli.capture.filter import header_filter
            wanted = header_filter(filter_expr)
            if wanted is not None and fmt == "records":
                head_keep = wanted
                wanted = lambda h: head_keep(h) or (h["api_key"] == 0 and h["kind"] == "response")  # noqa: E731
        if fields:
            from kwire_cli.capture.fields import FieldsLayout, compile_fields
            layout = FieldsLayout.parse(field_layout)
            field_cells = compile_fields(fields, layout.aggregator)
        if fmt == "records":
            from kwire_cli.capture.recordlines import RecordLines
            record_lines = RecordLines(record_format)
    except FilterError as e:  # the filter and the fields are part of the command line: a usage error (exit 2)
        raise KwireUsageError(str(e)) from None
    stats = CaptureStats()
    conv = Conversation(records_mode="hex" if raw_records else None, show_secrets=show_secrets, strict=strict,
                        max_damage=MAX_DAMAGE_KEPT if live is not None else None)
    summ = AnalysedSummary()
    failures: list[str] = []
    out = sys.stdout
    bout = None  # frames as JSON go out as bytes (orjson's output), straight to the binary stdout
    t0 = None
    first_json = True
    if fmt in ("json", "jsonl") and not summary:
        out.flush()
        bout = std_binary("stdout")
        write = bout.write
        write_line = line_writer()
        sep = b"\n" if fmt == "jsonl" else b",\n"
        if fmt == "json":
            write(b'{"frames": [\n')
    multi = len(files) > 1  # the table then starts with the file, and frame numbers are per file
    if fmt == "fields" and not summary and layout.header:
        out.write(layout.separator.join(escape(f) for f in fields) + "\n")  # (unquoted, as tshark's)
    if fmt == "table" and not summary:
        from kwire_cli.render.console import make_console
        con = make_console()
        head = table_header()
        if multi:
            head = "file  " + head.replace("frame", "frame (in its file)", 1)
        con.print(head, soft_wrap=True)  # a row is one line, however long
    shown = 0
    flush = None
    if live is not None:
        import threading
        stop = threading.Event()
        rows = live_rows(live, ports, stats, conv, failures, max_frame, keylog, request_timeout, stop, wanted)
        flush = (bout.flush if bout is not None else out.flush) if not summary else None
        interrupts = _Interrupts(stop)
    else:
        rows = iter_rows(list(files), ports, stats, conv, failures, max_frame, keylog,
                         request_timeout=request_timeout, wanted=wanted)
        interrupts = None
    if interrupts is not None:
        interrupts.__enter__()
    try:
        r: dict | None = None
        while True:
            # the row before is let go of first: a frame's tree can be hundreds of MB, and two of them
            # alive at once (a for loop's variable holds one while the next decodes) double the peak
            r = None
            r = next(rows, None)
            if r is None:
                break
            summ.add(r)
            if t0 is None:  # times count from the capture's first Kafka frame, whether --filter shows it or not
                t0 = conv.first_ts
            if not keep(r):
                if fmt == "records" and not summary:
                    for line in record_lines.feed(r, shown=False):
                        out.write(line)  # a Produce's answer: its request's records, with their offsets
                continue
            shown += 1
            if summary:
                continue
            if fmt == "table":
                cells = table_cells(r, t0)
                if multi:
                    cells.insert(0, escape(os.path.basename(r["file"] or "")))
                con.print("  ".join(cells), soft_wrap=True)
            elif fmt == "fields":
                out.write(layout.line(field_cells(r)))
            elif fmt == "records":
                for line in record_lines.feed(r):
                    out.write(line)
            else:
                if fmt == "jsonl":
                    write_line(json_ordered(r), write)
                    write(sep)
                elif live is not None:
                    # live: each row a whole line (the comma opens the next one's line)
                    if not first_json:
                        write(b",")
                    write_line(json_ordered(r), write)
                    write(b"\n")
                    first_json = False
                else:
                    if not first_json:
                        write(sep)
                    write_line(json_ordered(r), write)
                    first_json = False
            if flush is not None:
                flush()  # a live capture's row goes out now, not with the next buffer
    finally:
        if interrupts is not None:
            interrupts.__exit__()
    if fmt == "records" and not summary:
        for line in record_lines.finish():  # requests never answered: offsets unknown
            out.write(line)
    result = summ.to_dict(stats.to_dict(), conv.damage, conv.notes, conv.damage_kinds)
    if filter_expr:
        result["shown"] = shown
    if summary:
        if fmt in ("table", "fields", "records"):
            from kwire_cli.render.summary import print_summary
            print_summary(result)
        else:
            out.write(json_text(json.dumps(to_jsonable(result), ensure_ascii=False, allow_nan=False,
                                           indent=2 if fmt == "json" else None)) + "\n")
    elif fmt == "json":
        write(("\n], \"summary\": " + json_text(json.dumps(to_jsonable(result), ensure_ascii=False,
                                                           allow_nan=False)) + "}\n").encode())
    if bout is not None:
        bout.flush()
    out.flush()  # text output (tables, --summary) before any diagnostics
    for msg in failures:
        diagnostic("error", msg)
    cut = (result.get("record_batches") or {}).get("item_cap")
    if cut:
        diagnostic("warning", f"{cut} record batch(es) cut at a frame's cap of records and headers "
                              "(--max-records raises it)")
    stopped = (result.get("record_batches") or {}).get("byte_cap")
    if stopped:
        diagnostic("warning", f"{stopped} record batch(es) not decoded at a frame's cap of decompressed bytes and "
                              "value text (--max-decompressed raises it)")
    bad = result["undecodable"]
    dmg = sum(v["events"] for v in (result.get("damage") or {}).values())
    warning = damage_warning(result, skipped=conv.skipped)
    if warning:
        diagnostic("warning", warning)
    from kwire_cli.capture.events import OVER_SNAPLEN
    from kwire_cli.capture.summary import tls_not_decrypted_notes
    for note in tls_not_decrypted_notes(stats.tls_not_decrypted, keylog is not None and len(keylog) > 0):
        diagnostic("note", note)
    if stats.cut_frames:
        diagnostic("note", f"{stats.cut_frames:,} frame(s) cut by the capture's snap length: rows with what their "
                           "headers say, marked cut (captured); the bytes it cut are counted as gaps")
    for n in conv.notes:  # a file whose records are longer than its snap length (read whole)
        if n["kind"] == OVER_SNAPLEN:
            diagnostic("note", escape(f"{n['file']}: {n['detail']}"))
    if failures or (strict and (bad or dmg)):
        sys.exit(1)
