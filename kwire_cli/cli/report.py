"""`kwire report`: a capture's analysis (or spark-decode's summary) as one self-contained HTML page."""
from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic, expand_captures
from kwire_cli.cli.options import read_keylogs, tls_keylog_option
from kwire_cli.errors import FilterError, KwireError

EPILOG = """\b
Examples:
  kwire report fixtures/captures/*.pcap -o report.html
  kwire report fixtures/analysis/analysis-group.pcap --filter 'client_id~an-member' -o group.html
  kwire report --from out/ -o cluster.html   (spark-decode's output directory)

\b
Sections (each an element with this id): latency (response-time percentiles per
API over time; latency by API, version, broker and client id), throughput (record
batch bytes and records per topic over time, produce and fetch; producers),
groups (a timeline per consumer group: generations as bands, events as marks;
generations with members and causes), lag (lag per partition over time, commits
marked; lag and committed offsets), errors (error codes over time; expert
findings), clients (requests per client id; versions used; negotiation audit;
who did what), connections (bytes per connection; TLS, SASL principal, bytes).

Every figure comes from the analysis `kwire pcap --summary --format json` prints
(its document is embedded in the page as data); time series have at most 240
points each. Charts: Apache ECharts, embedded (about 1.1 MB): the page opens
offline and loads nothing. Tables sort by a click on a column's header.
"""


@click.command(epilog=EPILOG)
@click.argument("files", nargs=-1, type=click.Path())
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The HTML file to write (- for standard output).")
@click.option("--from", "from_dir", type=click.Path(), metavar="SPARK_OUT",
              help="Make the page from spark-decode's output directory (its _kwire_summary.json) instead of "
                   "captures.")
@click.option("--filter", "filter_expr", metavar="EXPR",
              help="Analyse only the frames matching EXPR (as kwire pcap --filter; a request and its answer "
                   "both need to match for latency and lag).")
@click.option("--port", "ports", type=click.IntRange(1, 65535), multiple=True, metavar="N",
              help="A broker port (repeatable). Default: 9092 and any port seen answering Kafka requests.")
@click.option("--title", metavar="TEXT", help="The page's title. Default: kwire report: and the inputs.")
@tls_keylog_option()
def report(files: tuple[str, ...], output: str, from_dir: str | None, filter_expr: str | None,
           ports: tuple[int, ...], title: str | None, tls_keylogs: tuple[str, ...]) -> None:
    """Write one HTML page showing the capture FILES (pcap/pcapng; a directory: the captures under
    it, as kwire pcap reads them) to a person: charts of latency, throughput, consumer group
    generations, lag, errors, and sortable tables of clients, connections and findings.

    The page is one self-contained file: the analysis as data, the charting library and the
    page's script embedded; it opens offline in a browser and loads nothing from the network.
    """
    from kwire_cli.report import render
    if from_dir is not None:
        if files or filter_expr or ports or tls_keylogs:
            raise KwireUsageError("--from reads spark-decode's summary: give no captures, --filter, --port or "
                                  "--tls-keylog with it")
        summary = _spark_summary(from_dir)
        sources = [from_dir]
        failures: list[str] = []
    else:
        if not files:
            raise KwireUsageError("give the captures to report on (or --from SPARK_OUT)")
        paths = expand_captures(files)
        keylog = read_keylogs(tls_keylogs)
        summary, failures = _capture_summary(paths, ports, filter_expr, keylog)
        sources = list(files)
    page = render(summary, sources, title)
    if output == "-":
        sys.stdout.write(page)
        sys.stdout.flush()
    else:
        try:
            with open(output, "w", encoding="utf-8") as f:
                f.write(page)
        except OSError as e:
            raise KwireUsageError(f"-o: cannot write {output}: {e.strerror or e}") from None
    for msg in failures:
        diagnostic("error", msg)
    if failures:
        sys.exit(1)


def _spark_summary(out: str) -> dict[str, Any]:
    path = os.path.join(out, "_kwire_summary.json") if os.path.isdir(out) else out
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise KwireUsageError(f"--from: {path} does not exist (spark-decode writes it in its output "
                              "directory)") from None
    except OSError as e:
        raise KwireUsageError(f"--from: cannot read {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise KwireError(f"--from: {path} is not JSON: {e}") from None
    if not isinstance(doc, dict) or "frames" not in doc:
        raise KwireError(f"--from: {path} is not kwire's summary (no frames count)")
    return doc


def _capture_summary(paths: list[str] | tuple[str, ...], ports: tuple[int, ...], filter_expr: str | None,
                     keylog: Any) -> tuple[dict[str, Any], list[str]]:
    """The summary document of the captures, as `kwire pcap --summary --format json` makes it (only
    the frames matching ``filter_expr`` counted): rows streamed, the analysis state bounded."""
    from kwire_cli.analysis import AnalysedSummary
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.filter import compile_filter
    from kwire_cli.capture.session import Conversation
    from kwire_cli.cli.pcap import iter_rows
    from kwire_cli.render.json import to_jsonable
    try:
        keep = compile_filter(filter_expr)
    except FilterError as e:
        raise KwireUsageError(str(e)) from None
    stats = CaptureStats()
    conv = Conversation()
    summ = AnalysedSummary()
    failures: list[str] = []
    rows = iter_rows(list(paths), ports, stats, conv, failures, keylog=keylog)
    r: dict[str, Any] | None = None
    while True:
        r = None  # (the row before is let go of first, as kwire pcap does)
        r = next(rows, None)
        if r is None:
            break
        if keep(r):
            summ.add(r)
    result = summ.to_dict(stats.to_dict(), conv.damage, conv.notes, conv.damage_kinds)
    if filter_expr:
        result["shown"] = summ.frames
    return to_jsonable(result), failures
