"""Rich tables for list, describe, diff and the what-if (markup off, plain text when piped; text
cells, headings and titles escaped by ``kwire_cli.render.safe``: names and labels can come from
input)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from rich import box
from rich.console import Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from kwire_cli.render.safe import escape


def table(title: str | None, columns: Iterable[str | tuple[str, str]], rows: Iterable[Iterable[Any]]):
    """A simple table; a column given as (name, "right") is right-aligned (numbers). The title is
    a line of its own above the table (never folded to the table's width). Cells that are not
    already ``Text`` (which the caller made safe) are escaped."""
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for c in columns:
        name, just = (c, "left") if isinstance(c, str) else c
        t.add_column(escape(name), justify=cast(JustifyMethod, just), overflow="fold")
    for r in rows:
        t.add_row(*[v if isinstance(v, Text) else Text("" if v is None else escape(v)) for v in r])
    if title:
        return Group(Text(escape(title), style="bold"), t)
    return t


def signed(n: int) -> Text:
    """+3 in red (more bytes), -3 in green (fewer), 0 dim."""
    if n > 0:
        return Text(f"+{n}", style="red")
    if n < 0:
        return Text(str(n), style="green")
    return Text("0", style="dim")


def saving_text(n: int) -> Text:
    """A saving: positive is good (green), negative is a cost (red)."""
    if n > 0:
        return Text(f"saves {n}", style="green")
    if n < 0:
        return Text(f"costs {-n}", style="red")
    return Text("0", style="dim")
