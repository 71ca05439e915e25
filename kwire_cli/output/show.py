"""Rows in, output out: every row counted in the summary, those ``--filter`` keeps written.

``RowPrinter`` is the one place a row meets the filter, the summary and the writer: ``kwire pcap``
drives it over the rows of files or of a live capture (``print_rows``), ``kwire proxy``'s decoding
side over the frames it is handed (``FrameRows``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kwire_cli.capture.summary import Summary

if TYPE_CHECKING:
    from kwire_cli.capture import CaptureStats
    from kwire_cli.capture.events import KafkaFrame
    from kwire_cli.capture.session import Conversation

    from .writers import RowWriter

Row = dict[str, Any]


class RowPrinter:
    """Counts each row (``summary``: a ``kwire_cli.capture.summary.Summary``), writes those ``keep``
    keeps through ``writer``, flushing each one when ``live``."""

    def __init__(self, writer: RowWriter, keep: Callable[[Row], bool], live: bool = False,
                 summary: Summary | None = None) -> None:
        self.writer = writer
        self.keep = keep
        self.live = live
        self.summary = summary if summary is not None else Summary()  # (the commands give the analysis' own)
        self.shown = 0

    def add(self, row: Row, t0: float | None) -> None:
        self.summary.add(row)
        if not self.keep(row):
            self.writer.dropped(row)
            return
        self.shown += 1
        self.writer.row(row, t0)
        if self.live:
            self.writer.flush()  # a live capture's row goes out now, not with the next buffer


def print_rows(rows: Iterator[Row], printer: RowPrinter, conv: Conversation, stats: CaptureStats,
               filtered: bool = False) -> dict[str, Any]:
    """Write ``rows`` (of ``conv``, read with ``stats``) and return the summary, written too where
    the format holds it (``filtered``: it says how many rows were shown)."""
    printer.writer.start()
    t0 = None
    r: Row | None = None
    try:
        while True:
            # the row before is let go of first: a frame's tree can be hundreds of MB, and two of them
            # alive at once (a for loop's variable holds one while the next decodes) double the peak
            r = None
            r = next(rows, None)
            if r is None:
                break
            if t0 is None:  # times count from the capture's first Kafka frame, whether --filter shows it or not
                t0 = conv.first_ts
            printer.add(r, t0)
    except BaseException:
        printer.writer.flush()  # the rows written before the error are out, as the writers hold some
        raise
    result = printer.summary.to_dict(stats.to_dict(), conv.damage, conv.notes, conv.damage_kinds)
    if filtered:
        result["shown"] = printer.shown
    printer.writer.finish(result)
    return result


class FrameRows:
    """``kwire proxy``'s decoding side (its own process): each frame becomes kwire pcap's row
    (``conv``), printed by ``printer``; ``result`` goes back to the proxy at the end."""

    def __init__(self, conv: Conversation, printer: RowPrinter) -> None:
        self.conv = conv
        self.printer = printer
        self.t0: float | None = None

    def frame(self, frame: KafkaFrame, notes: list[str]) -> None:
        row = self.conv.row(frame)
        if notes:
            row["notes"] = list(row.get("notes") or ()) + notes
        if self.t0 is None:
            self.t0 = row.get("ts")
        self.printer.add(row, self.t0)

    def result(self) -> dict[str, Any]:
        self.printer.writer.flush()
        return {"summary": self.printer.summary.to_dict(), "shown": self.printer.shown}
