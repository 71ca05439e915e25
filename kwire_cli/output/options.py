"""What the user asked to see of the rows: ``OutputOptions``, made from a command's flags."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwire_cli.errors import FilterError

FORMATS = ("table", "jsonl", "json", "fields", "records")


@dataclass(frozen=True)
class OutputOptions:
    """How rows are written: the format (``FORMATS``), ``--summary`` instead of rows, the filter,
    the ``-e`` fields and their ``-E`` layout, the ``--record-format``; ``multi``: rows come from
    several files (the table names each row's file); ``live``: rows are written as frames complete
    (each flushed at once); ``time_format``: the table's times (``table.TIME_FORMATS``, tshark's -t)."""

    fmt: str = "table"
    summary: bool = False
    filter_expr: str | None = None
    fields: tuple[str, ...] = ()
    field_layout: tuple[str, ...] = ()
    record_format: str | None = None
    multi: bool = False
    live: bool = False
    time_format: str = "r"

    @classmethod
    def from_flags(cls, fmt: str, *, fields: tuple[str, ...] = (), field_layout: tuple[str, ...] = (),
                   record_format: str | None = None, **rest: Any) -> OutputOptions:
        """The options of ``kwire pcap``'s flags: ``-e`` implies ``--format fields``,
        ``--record-format`` implies ``--format records``; a combination that cannot be is a
        ``FilterError`` (a usage error) saying why."""
        if field_layout and not fields:
            raise FilterError("-E lays out -e fields: give the fields with -e FIELD")
        if fields and fmt not in ("table", "fields"):
            raise FilterError(f"-e prints fields, not --format {fmt}")
        if fmt == "fields" and not fields:
            raise FilterError("--format fields needs the fields to print: -e FIELD (repeatable)")
        if fields:
            fmt = "fields"
        if record_format is not None:
            if fmt not in ("table", "records"):
                raise FilterError(f"--record-format prints records, not --format {fmt}")
            fmt = "records"
        return cls(fmt=fmt, fields=fields, field_layout=field_layout, record_format=record_format, **rest)

    def keep(self) -> Callable[[dict[str, Any]], bool]:
        """The ``--filter`` predicate (a ``FilterError`` for one that does not parse)."""
        from kwire_cli.capture.filter import compile_filter
        return compile_filter(self.filter_expr)

    def wanted(self, strict: bool = False) -> Callable[[dict[str, Any]], bool] | None:
        """A filter on header fields only, for the frames it rejects not to be decoded at all; None
        when every frame must be decoded (the summary, ``--format json``'s summary and ``--strict``'s
        verdict count every frame). The records format also decodes Produce answers, which give
        the records of the requests it shows their offsets."""
        if self.summary or self.fmt == "json" or strict:
            return None
        from kwire_cli.capture.filter import header_filter
        head_keep = header_filter(self.filter_expr)
        if head_keep is not None and self.fmt == "records":
            return lambda h: head_keep(h) or (h["api_key"] == 0 and h["kind"] == "response")
        return head_keep
