"""One writer per output format of rows: table, fields, records, JSON, JSON lines, summary.

A writer is told each row ``--filter`` keeps (``row``, with ``t0``, the capture's first time, that
the table counts times from), each row it leaves out (``dropped``: only the records format wants
those, for a Produce answer that gives its request's records their offsets), and the summary at the
end (``finish``). ``flush`` pushes a live capture's row out at once. ``make_writer`` picks the writer
of an ``OutputOptions``; ``kwire pcap`` (files, standard input, ``--follow``) and ``kwire proxy``
write through them.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from kwire_cli.capture.rows import json_ordered
from kwire_cli.errors import InputError
from kwire_cli.render.safe import escape, json_text

from .gather import Gathered
from .table import Clock, Layout, table_cells, table_headings

if TYPE_CHECKING:
    from .options import OutputOptions

Row = dict[str, Any]


class RowWriter:
    """The writer of one format (this base writes nothing: ``--summary`` while rows are read).
    ``holds_summary``: ``finish`` writes the summary it is given (else only the run's diagnostics
    read it: ``kwire_cli.capture.summary.RunCounts`` is enough)."""

    holds_summary = False

    def start(self) -> None:
        """Before the first row (a header line, an opening bracket)."""

    def row(self, row: Row, t0: float | None) -> None:
        """A row the filter keeps."""

    def dropped(self, row: Row) -> None:
        """A row the filter leaves out."""

    def finish(self, summary: dict[str, Any]) -> None:
        """After the last row: what is left, then the summary where the format holds it."""

    def flush(self) -> None:
        """Everything written so far out now (a live capture's row)."""


class TableWriter(RowWriter):
    """The pcap table, a line per row through ``print_line`` (``multi``: several files, each line
    starts with the row's file)."""

    def __init__(self, print_line: Callable[[str], None], flush: Callable[[], None], multi: bool = False,
                 time_format: str = "r") -> None:
        self.print_line = print_line
        self._flush = flush
        self.multi = multi
        self.clock = Clock(time_format)
        heads = table_headings()
        self.layout = Layout((("file",) if multi else ()) + heads, time_format)

    def start(self) -> None:
        heads = list(table_headings())
        if self.multi:
            heads = ["file", "frame (in its file)", *heads[1:]]
        self.print_line(self.layout.line(heads))

    def row(self, row: Row, t0: float | None) -> None:
        cells = table_cells(row, t0, self.clock)
        if self.multi:
            cells.insert(0, escape(os.path.basename(row["file"] or "")))
        self.print_line(self.layout.line(cells))

    def flush(self) -> None:
        self._flush()


class FieldsWriter(RowWriter):
    """``-e`` fields, a line per row (tshark's -T fields)."""

    def __init__(self, out: IO[str], names: tuple[str, ...], layout_options: tuple[str, ...]) -> None:
        from .fields import FieldsLayout, compile_fields
        self.out = out
        self.names = names
        self.layout = FieldsLayout.parse(layout_options)
        self.cells = compile_fields(names, self.layout.aggregator)

    def start(self) -> None:
        if self.layout.header:
            self.out.write(self.layout.separator.join(escape(f) for f in self.names) + "\n")  # (unquoted, as tshark's)

    def row(self, row: Row, _t0: float | None) -> None:
        self.out.write(self.layout.line(self.cells(row)))

    def flush(self) -> None:
        self.out.flush()


class RecordsWriter(RowWriter):
    """A line per record produced or fetched (``kwire_cli.output.records``)."""

    def __init__(self, out: IO[str], template: str | None) -> None:
        from .records import RecordLines
        self.out = out
        self.lines = RecordLines(template)

    def row(self, row: Row, _t0: float | None) -> None:
        for line in self.lines.feed(row):
            self.out.write(line)

    def dropped(self, row: Row) -> None:
        for line in self.lines.feed(row, shown=False):
            self.out.write(line)  # a Produce's answer: its request's records, with their offsets

    def finish(self, _summary: dict[str, Any]) -> None:
        for line in self.lines.finish():  # requests never answered: offsets unknown
            self.out.write(line)

    def flush(self) -> None:
        self.out.flush()


class JsonLinesWriter(RowWriter):
    """A JSON object per row, a line each (bytes: orjson's output, to the binary stdout)."""

    def __init__(self, out: IO[bytes]) -> None:
        from kwire_cli.render.jsonlines import line_writer
        self.out = Gathered(out)
        self.write_line = line_writer()

    def row(self, row: Row, _t0: float | None) -> None:
        write = self.out.write
        self.write_line(json_ordered(row), write)
        write(b"\n")

    def finish(self, _summary: dict[str, Any]) -> None:
        self.out.flush()

    def flush(self) -> None:
        self.out.flush()


class JsonWriter(RowWriter):
    """One JSON document: ``{"frames": [ROW, ...], "summary": {...}}``. ``live``: each row a whole
    line (the comma opens the next row's line), so that a reader sees every row as it comes."""

    holds_summary = True

    def __init__(self, out: IO[bytes], live: bool = False) -> None:
        from kwire_cli.render.jsonlines import line_writer
        self.out = Gathered(out)
        self.live = live
        self.write_line = line_writer()
        self.first = True

    def start(self) -> None:
        self.out.write(b'{"frames": [\n')

    def row(self, row: Row, _t0: float | None) -> None:
        write = self.out.write
        if self.live:
            if not self.first:
                write(b",")
            self.write_line(json_ordered(row), write)
            write(b"\n")
        else:
            if not self.first:
                write(b",\n")
            self.write_line(json_ordered(row), write)
        self.first = False

    def finish(self, summary: dict[str, Any]) -> None:
        self.out.write(("\n], \"summary\": " + json_text(json.dumps(_jsonable(summary), ensure_ascii=False,
                                                                    allow_nan=False)) + "}\n").encode())
        self.out.flush()

    def flush(self) -> None:
        self.out.flush()


class TreeWriter(RowWriter):
    """Each row's decoded message as the tree `kwire decode` prints (``kwire pcap --frame N``)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.shown = 0

    def row(self, row: Row, _t0: float | None) -> None:
        from kwire_cli.codec.headers import request_header_version, response_header_version
        from kwire_cli.render.plaintree import Label
        from kwire_cli.render.printtree import print_tree
        from kwire_cli.render.tree import message_tree
        from kwire_cli.spec.registry import registry
        head = f"frame {row.get('frame')}  {row.get('src')} -> {row.get('dst')}"
        if row.get("file"):
            head = f"{os.path.basename(row['file'])}  " + head
        print_tree(Label(escape(("\n" if self.shown else "") + head), style="bold"))
        self.shown += 1
        key, kind, version = row.get("api_key"), row.get("kind"), row.get("api_version")
        if key is None or version is None or kind not in ("request", "response"):
            self.out.write(escape(f"{row.get('api_name') or '?'} {kind}: {row.get('error') or 'not decoded'}") + "\n")
            return
        reg = registry()
        try:
            api = reg.api(key)
        except Exception:
            self.out.write(escape(f"{row.get('api_name')} {kind}: {row.get('error') or 'unknown API'}") + "\n")
            return
        hv = hs = None
        if row.get("header") is not None:
            hv = request_header_version(api, version) if kind == "request" else response_header_version(api, version)
            hs = reg.schema("RequestHeader" if kind == "request" else "ResponseHeader").struct
        print_tree(message_tree(row.get("api_name") or "?", key, version, kind, row.get("header"), row.get("body"),
                                row.get("size"), header_struct=hs, header_version=hv,
                                body_struct=api.spec(kind).struct, error=row.get("error"),
                                notes=row.get("notes") or (), violations=row.get("violations") or ()))

    def finish(self, _summary: dict[str, Any]) -> None:
        if not self.shown:
            raise InputError("--frame: no Kafka frame ends at that packet (kwire pcap --format jsonl lists the "
                             "frames' numbers; --filter may leave it out)")

    def flush(self) -> None:
        self.out.flush()


class SummaryWriter(RowWriter):
    """``--summary``: no rows, the summary at the end (the table's text for table, fields and
    records; JSON for json, indented, and jsonl, one line)."""

    holds_summary = True

    def __init__(self, out: IO[str], fmt: str) -> None:
        self.out = out
        self.fmt = fmt

    def finish(self, summary: dict[str, Any]) -> None:
        write_summary(summary, self.fmt, self.out, indent=2 if self.fmt == "json" else None)


def _jsonable(value: Any) -> Any:
    from kwire_cli.render.jsonable import to_jsonable
    return to_jsonable(value)


def write_summary(summary: dict[str, Any], fmt: str, out: IO[str], indent: int | None = None) -> None:
    """The summary as a table's text (``fmt`` table, fields or records) or as JSON."""
    if fmt in ("table", "fields", "records"):
        from kwire_cli.render.summary import print_summary
        print_summary(summary)
    else:
        out.write(json_text(json.dumps(_jsonable(summary), ensure_ascii=False, allow_nan=False,
                                       indent=indent)) + "\n")


def make_writer(opts: OutputOptions, text: IO[str], binary: Callable[[], IO[bytes]]) -> RowWriter:
    """The writer of ``opts`` on stdout: ``text`` (the text stream), ``binary()`` (its binary side,
    taken only by the JSON formats, after the text stream is flushed)."""
    if opts.summary:
        return SummaryWriter(text, opts.fmt)
    if opts.fmt == "table":
        from kwire_cli.render.console import make_console
        con = make_console()
        return TableWriter(lambda line: con.print(line, soft_wrap=True), text.flush,  # a row is one line
                           multi=opts.multi, time_format=opts.time_format)
    if opts.fmt == "fields":
        return FieldsWriter(text, opts.fields, opts.field_layout)
    if opts.fmt == "records":
        return RecordsWriter(text, opts.record_format)
    if opts.fmt == "tree":
        return TreeWriter(text)
    text.flush()
    if opts.fmt == "jsonl":
        return JsonLinesWriter(binary())
    return JsonWriter(binary(), live=opts.live)
