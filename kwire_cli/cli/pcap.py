"""`kwire pcap`: capture files to decoded, paired Kafka conversations."""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, expand_captures, note_skipped, std_binary
from kwire_cli.cli.options import DecodeLimits, limit_options, read_keylogs, show_secrets_option, tls_keylog_option
from kwire_cli.cli.schemas import values_options
from kwire_cli.errors import FilterError, KwireError
from kwire_cli.render.damage import damage_warning
from kwire_cli.render.jsonlines import gc_tuned
from kwire_cli.render.safe import escape

if TYPE_CHECKING:
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.session import Conversation
    from kwire_cli.output.options import OutputOptions

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
              request_timeout: float | None = None, wanted=None, rows_to_stdout: bool = True) -> Iterator[dict]:
    """The output rows of the files, one capture (``conv.rows``): their packets merged by
    timestamp into one reassembly, so that connections go on across rotated files; a file that is
    not a capture is reported in ``failures`` and left out."""
    from kwire_cli.capture import DEFAULT_MAX_FRAME, iter_capture
    from kwire_cli.capture.inputs import is_stream
    if max_frame is None:
        max_frame = DEFAULT_MAX_FRAME
    from kwire_cli.output import progress as bar
    progress = bar.FileProgress() if bar.enabled(rows_to_stdout) else None
    wrap = None
    if progress is not None:
        progress.__enter__()

        def wrap(f, label: str):
            return progress.wrap(f, label, None if is_stream(label) else os.path.getsize(label))
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
            progress.__exit__()


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
@click.option("-t", "--time-format", "time_format", type=click.Choice(["r", "a", "ad", "e", "d"]), default="r",
              show_default=True, help="The table's time column, as tshark's -t: r seconds since the capture's "
              "first Kafka frame, a time of day and ad date and time (both UTC), e seconds since the epoch, "
              "d seconds since the row before.")
@click.option("--frame", "frame", type=click.IntRange(1), metavar="N",
              help="Print frame N (its packet number; in each file with several) as the tree `kwire decode` shows, "
                   "instead of the table (with --filter: the frames both choose).")
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
         record_format: str | None, time_format: str, frame: int | None, summary: bool, filter_expr: str | None,
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
    from kwire_cli.output.options import OutputOptions
    try:
        if frame is not None:
            if fmt != "table" or fields or record_format is not None or summary:
                raise FilterError("--frame prints one frame's tree: not with --format, -e, --record-format, --summary")
            filter_expr = f"frame={frame}" + (f" and ({filter_expr})" if filter_expr else "")
        opts = OutputOptions.from_flags(fmt, fields=fields, field_layout=field_layout, record_format=record_format,
                                        summary=summary, filter_expr=filter_expr)
        if frame is not None:
            opts = replace(opts, fmt="tree")
    except FilterError as e:
        raise KwireUsageError(str(e)) from None
    live = _live_input(files, follow)
    if live is None:
        files = expand_captures(files)  # before any output: a name that is not there is a usage error
    keylog = read_keylogs(tls_keylogs)
    opts = replace(opts, multi=len(files) > 1, live=live is not None, time_format=time_format)
    run = _Run(ports=ports, raw_records=raw_records, strict=strict, max_frame=limits.frame_size(),
               show_secrets=show_secrets, keylog=keylog, live=live, request_timeout=request_timeout)
    with gc_tuned(), limits.apply():
        _pcap(files, opts, run)


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


@dataclass(frozen=True)
class _Run:
    """How the capture is read (the output's options are apart: ``OutputOptions``)."""

    ports: tuple[int, ...]
    raw_records: bool
    strict: bool
    max_frame: int
    show_secrets: bool = False
    keylog: Any = None
    live: Any = None  # kwire_cli.capture.live.LiveInput: - or --follow
    request_timeout: float | None = None


def _pcap(files: tuple[str, ...], opts: OutputOptions, run: _Run) -> None:
    from kwire_cli.analysis import AnalysedSummary
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.session import MAX_DAMAGE_KEPT, Conversation
    from kwire_cli.capture.summary import RunCounts
    from kwire_cli.output.show import RowPrinter, print_rows
    from kwire_cli.output.writers import make_writer

    try:
        keep = opts.keep()
        wanted = opts.wanted(run.strict)
        writer = make_writer(opts, sys.stdout, lambda: std_binary("stdout"))
    except FilterError as e:  # the filter and the fields are part of the command line: a usage error (exit 2)
        raise KwireUsageError(str(e)) from None
    stats = CaptureStats()
    conv = Conversation(records_mode="hex" if run.raw_records else None, show_secrets=run.show_secrets,
                        strict=run.strict, max_damage=MAX_DAMAGE_KEPT if run.live is not None else None)
    failures: list[str] = []
    # the summary and the analysis are counted where the output holds them; else only what _report reads
    summary = AnalysedSummary() if writer.holds_summary else RunCounts()
    printer = RowPrinter(writer, keep, live=run.live is not None and not opts.summary, summary=summary)
    filtered = bool(opts.filter_expr)
    if run.live is not None:
        import threading
        stop = threading.Event()
        rows = live_rows(run.live, run.ports, stats, conv, failures, run.max_frame, run.keylog, run.request_timeout,
                         stop, wanted)
        with _Interrupts(stop):
            result = print_rows(rows, printer, conv, stats, filtered=filtered)
    else:
        rows = iter_rows(list(files), run.ports, stats, conv, failures, run.max_frame, run.keylog,
                         request_timeout=run.request_timeout, wanted=wanted, rows_to_stdout=not opts.summary)
        result = print_rows(rows, printer, conv, stats, filtered=filtered)
    sys.stdout.flush()  # text output (tables, --summary) before any diagnostics
    _report(result, failures, conv, run, stats)


def _report(result: dict, failures: list[str], conv: Conversation, run: _Run, stats: CaptureStats) -> None:
    """The run's diagnostics on stderr, and its exit status."""
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
    for note in tls_not_decrypted_notes(stats.tls_not_decrypted, run.keylog is not None and len(run.keylog) > 0):
        diagnostic("note", note)
    if stats.cut_frames:
        diagnostic("note", f"{stats.cut_frames:,} frame(s) cut by the capture's snap length: rows with what their "
                           "headers say, marked cut (captured); the bytes it cut are counted as gaps")
    for n in conv.notes:  # a file whose records are longer than its snap length (read whole)
        if n["kind"] == OVER_SNAPLEN:
            diagnostic("note", escape(f"{n['file']}: {n['detail']}"))
    if failures or (run.strict and (bad or dmg)):
        sys.exit(1)
