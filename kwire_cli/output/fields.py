"""Fields of output rows as tab-separated text: `kwire pcap -e FIELD ...`, as `tshark -T fields -e`.

A field is a column of the row schema (``kwire_cli.capture.rows``: ``api_name``, ``latency_ms``,
``client_id``, ...) or a path into one of its nested values, dot-separated: ``body.Topics.Name``,
``header.ClientId``, ``body.Topics.Partitions.Records.batches.Records.Key.text``. A step over a
list goes into every element, so a path can give several values; they are joined with commas, as
tshark joins the occurrences of a field. A field the frame does not have is an empty cell. Values
that are objects (a path that stops early) are compact JSON. Every cell is made safe for
a terminal and free of tabs and newlines (``kwire_cli.render.safe.escape``): one frame, one line.

``-E`` options as tshark's (``FieldsLayout.parse``): ``header=y`` (a first line naming the
fields, unquoted), ``separator=/t|/s|C``, ``aggregator=,|/s|C`` and ``quote=d|s|n`` (each cell in double or
single quotes, a quote inside doubled, as CSV does).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kwire_cli.capture.rows import BY_NAME
from kwire_cli.errors import FilterError
from kwire_cli.render.safe import escape

#: what joins the values a field has several of in one frame (tshark's default, -E aggregator=,)
AGGREGATOR = ","


@dataclass(frozen=True)
class FieldsLayout:
    """How the fields of a frame make a line (tshark's -E options)."""

    header: bool = False
    separator: str = "\t"
    aggregator: str = AGGREGATOR
    quote: str = ""

    @classmethod
    def parse(cls, options: Iterable[str]) -> FieldsLayout:
        """The layout of ``-E KEY=VALUE`` options; a ``FilterError`` names one that is not."""
        got: dict[str, Any] = {}
        for opt in options:
            key, eq, value = opt.partition("=")
            if not eq:
                raise FilterError(f"-E {opt}: expected KEY=VALUE (header, separator, aggregator, quote)")
            if key == "header" and value in ("y", "n"):
                got["header"] = value == "y"
            elif key in ("separator", "aggregator") and (value in ("/t", "/s")
                                                         or (len(value) == 1 and value not in "\n\r")):
                got[key] = {"/t": "\t", "/s": " "}.get(value, value)
            elif key == "quote" and value in ("d", "s", "n"):
                got["quote"] = {"d": '"', "s": "'", "n": ""}[value]
            else:
                raise FilterError(f"-E {opt}: not a field layout option (header=y|n, separator=/t|/s|C, "
                                  "aggregator=,|/s|C, quote=d|s|n)")
        return cls(**got)

    def line(self, cells: list[str]) -> str:
        q = self.quote
        if q:
            cells = [q + c.replace(q, q + q) + q for c in cells]
        return self.separator.join(cells) + "\n"


def _values(node: Any, path: tuple[str, ...]) -> Iterable[Any]:
    """The values at ``path`` below ``node``: lists are stepped into, element by element."""
    todo: list[tuple[Any, int]] = [(node, 0)]
    while todo:
        value, i = todo.pop()
        if isinstance(value, list):
            todo.extend((v, i) for v in reversed(value))
            continue
        if i == len(path):
            yield value
        elif isinstance(value, dict) and path[i] in value:
            todo.append((value[path[i]], i + 1))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def compile_fields(names: Iterable[str], aggregator: str = AGGREGATOR) -> Callable[[dict[str, Any]], list[str]]:
    """A function from a row to its cells, one per field name; a name whose first step is not a
    column of the row schema is a ``FilterError`` naming the columns."""
    paths: list[tuple[str, ...]] = []
    for name in names:
        steps = tuple(name.split("."))
        if steps[0] not in BY_NAME or any(not s for s in steps):
            raise FilterError(f"-e {name}: not a column of the rows or a path into one "
                              f"(columns: {', '.join(BY_NAME)}; paths like body.Topics.Name)")
        paths.append(steps)

    def cells(row: dict[str, Any]) -> list[str]:
        out = []
        for steps in paths:
            col = row.get(steps[0])
            if len(steps) == 1 and not isinstance(col, list):
                out.append(escape(_text(col)))
            else:
                out.append(escape(aggregator.join(_text(v) for v in _values(col, steps[1:]))))
        return out
    return cells
