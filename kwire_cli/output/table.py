"""The pcap table: one line per output row (``kwire pcap``, live captures, ``kwire proxy``).

Its cells come from the row declaration (``kwire_cli.capture.rows.COLUMNS``: each column names the
cell, ``heading``, that shows it; columns sharing a heading share a cell). Every cell is made safe
for a terminal (``kwire_cli.render.safe.escape``: client ids, topic names, addresses and error
messages come from the capture).
"""
from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable
from typing import Any

from kwire_cli.capture.names import topic_name
from kwire_cli.capture.rows import COLUMNS
from kwire_cli.render.safe import escape


def table_headings() -> tuple[str, ...]:
    """The pcap table's cells, in column order (columns sharing a heading share a cell)."""
    seen: dict[str, None] = {}
    for c in COLUMNS:
        if c.heading is not None:
            seen.setdefault(c.heading)
    return tuple(seen)


#: how the time cell reads, as tshark's -t: r seconds since the capture's first Kafka frame, a the
#: time of day, ad date and time (both UTC), e seconds since the epoch, d since the row before
TIME_FORMATS = ("r", "a", "ad", "e", "d")

# each cell's starting width and side (numbers to the right); a width grows to the widest cell seen
# (up to WIDEST), so columns align from the first rows on without holding rows back
_WIDTHS = {"file": (20, "<"), "frame": (5, ">"), "time": (9, ">"), "src -> dst": (41, "<"), "kind": (8, "<"),
           "api": (18, "<"), "corr": (4, ">"), "client": (16, "<"), "size": (6, ">"), "latency_ms": (10, ">")}
_TIME_WIDTHS = {"r": 9, "a": 15, "ad": 26, "e": 17, "d": 9}
WIDEST = 48


class Layout:
    """Aligned columns for a table written a line at a time: each cell padded to its column's width,
    which grows to the widest cell seen so far (never past ``WIDEST``); the last cell is not padded."""

    def __init__(self, headings: tuple[str, ...], time_format: str = "r") -> None:
        self.align = [_WIDTHS.get(h, (0, "<"))[1] for h in headings]
        self.widths = [max(len(h), _TIME_WIDTHS[time_format] if h == "time" else _WIDTHS.get(h, (0, "<"))[0])
                       for h in headings]

    def line(self, cells: list[str]) -> str:
        out = []
        last = len(cells) - 1
        for i, cell in enumerate(cells):
            if i == last:
                out.append(cell)
                break
            w = self.widths[i]
            if len(cell) > w and w < WIDEST:
                w = self.widths[i] = min(len(cell), WIDEST)
            out.append(cell.rjust(w) if self.align[i] == ">" else cell.ljust(w))
        return "  ".join(out).rstrip()


def table_header(layout: Layout | None = None) -> str:
    heads = list(table_headings())
    return "  ".join(heads) if layout is None else layout.line(heads)


class Clock:
    """The time cell: ``TIME_FORMATS``; ``t0`` (relative times) is the capture's first Kafka frame."""

    def __init__(self, time_format: str = "r") -> None:
        if time_format not in TIME_FORMATS:
            raise ValueError(time_format)
        self.format = time_format
        self.prev: float | None = None

    def cell(self, ts: float | None, t0: float | None) -> str:
        if ts is None:
            return ""
        f = self.format
        if f == "r":
            return "" if t0 is None else f"{ts - t0:.6f}"
        if f == "e":
            return f"{ts:.6f}"
        if f == "d":
            prev, self.prev = self.prev, ts
            return f"{0.0 if prev is None else ts - prev:.6f}"
        when = _dt.datetime.fromtimestamp(ts, _dt.timezone.utc)
        return when.strftime("%Y-%m-%d %H:%M:%S.%f" if f == "ad" else "%H:%M:%S.%f")


def _api(r: dict[str, Any], _t0: float | None) -> str:
    if r.get("api_version") is not None:
        return f"{r['api_name'] or '?'} v{r['api_version']}"
    return r.get("api_name") or "?"


CAPPED = "batch(es) cut at the frame's cap of records and headers (--max-records raises it)"
BYTE_CAPPED = "batch(es) not decoded at the frame's cap of bytes (--max-decompressed raises it)"


_PARTITION_KEYS = ("PartitionIndex", "Partition", "Index", "PartitionId")
_TOPIC_LISTS = ("Topics", "TopicData", "Responses")
_MAX_TOPICS = 3


def _partitions(entry: dict[str, Any]) -> list[int]:
    for v in entry.values():
        if type(v) is list and v and type(v[0]) is dict:
            for key in _PARTITION_KEYS:
                if key in v[0]:
                    return [p[key] for p in v if type(p) is dict and type(p.get(key)) is int]
    return []


def _topics(body: dict[str, Any], names: dict[str, Any] | None) -> str:
    """``topic[0,1] other[2]`` of a body's topic list (topic ids by the names the capture gave them)."""
    for key in _TOPIC_LISTS:
        entries = body.get(key)
        if type(entries) is list and entries and type(entries[0]) is dict:
            break
    else:
        return ""
    shown = []
    for e in entries[:_MAX_TOPICS]:
        if type(e) is not dict:
            continue
        parts = _partitions(e)
        shown.append(topic_name(e, names) + (f"[{','.join(map(str, parts[:8]))}{',...' if len(parts) > 8 else ''}]"
                                         if parts else ""))
    more = len(entries) - _MAX_TOPICS
    return " ".join(shown) + (f" +{more} topics" if more > 0 else "")


def _short(v: Any, n: int = 24) -> str:
    t = str(v)
    return t if len(t) <= n else t[: n - 1] + "…"


def _resources(r: dict[str, Any]) -> str:
    """What a frame is about, as tshark's Info column says it: topics and partitions, the group,
    member, transactional id, the records a Produce or Fetch carries."""
    body = r.get("body")
    if type(body) is not dict:
        return ""
    out = []
    topics = _topics(body, r.get("topic_names"))
    if topics:
        out.append(topics)
    for key, label in (("GroupId", "group"), ("MemberId", "member"), ("TransactionalId", "txn")):
        v = body.get(key)
        if v:
            out.append(f"{label} {_short(v)}")
    if r["api_key"] in (0, 1):
        from kwire_cli.records.stats import batch_stats, new_batch_stats
        n = batch_stats(body, new_batch_stats())["records"]
        if n:
            out.append(f"{n} record{'s' if n != 1 else ''}")
    return " ".join(out)


def _info(r: dict[str, Any], t0: float | None) -> str:
    what = _resources(r)
    note = _note(r, t0, topics_named=bool(what))
    return what + ("; " if what and note else "") + note


def _note(r: dict[str, Any], _t0: float | None, topics_named: bool = False) -> str:
    note = r["error"] or ", ".join(r.get("error_codes") or [])
    if r.get("body") is not None:
        from kwire_cli.records.stats import batch_stats, new_batch_stats
        b = batch_stats(r["body"], new_batch_stats())
        bad = [f"{n} {what}" for n, what in ((b["item_cap"], CAPPED), (b["byte_cap"], BYTE_CAPPED),
                                            (b["batch_errors"] - b["item_cap"] - b["byte_cap"],
                                             "batch(es) not decoded (see --format jsonl)"),
                                            (b["crc_invalid"], "batch(es) with a bad CRC")) if n]
        if bad:
            note = (note + "; " if note else "") + ", ".join(bad)
    if r["api_key"] == 36 and r.get("body") is not None:  # SaslAuthenticate: what the SASL message says
        note = (note + "; " if note else "") + _sasl_note(r["body"].get("Sasl"))
    names = r.get("topic_names")
    if names and not r["error"] and not topics_named:
        shown = ", ".join(f"{k}={v or '?'}" for k, v in names.items())
        note = (note + "; " if note else "") + "topics " + shown
    for n in r.get("notes") or ():
        note = (note + "; " if note else "") + str(n).split(":", 1)[0]  # "KIP-511", "assumed version"
    vs = r.get("violations")
    if vs:
        first = vs[0]
        at = f" at {first['path']}" if first.get("path") else ""
        more = f" (+{len(vs) - 1} more)" if len(vs) > 1 else ""
        note = (note + "; " if note else "") + f"⚠ {first['rule']}{at}{more}"
    return note


def _sasl_note(s: Any) -> str:
    if not isinstance(s, dict):
        return "SASL"
    out = f"SASL {s.get('Mechanism') or '?'} {s.get('Message') or ''}".rstrip()
    for key, label in (("User", "user"), ("AuthorizationId", "authzid"), ("Error", "error")):
        v = s.get(key)
        if v:
            out += f" {label} {v if isinstance(v, str) else json.dumps(v)}"
    return out


def _opt(v: Any) -> str:
    return "" if v is None else str(v)


_CELLS: dict[str, Callable[[dict[str, Any], float | None], str]] = {
    "frame": lambda r, t0: str(r["frame"]),
    "time": lambda r, t0: "" if r.get("ts") is None or t0 is None else f"{r['ts'] - t0:.6f}",
    "src -> dst": lambda r, t0: f"{r['src']} -> {r['dst']}",
    "kind": lambda r, t0: r["kind"],
    "api": _api,
    "corr": lambda r, t0: _opt(r.get("correlation_id")),
    "client": lambda r, t0: str(r.get("client_id") or ""),
    "size": lambda r, t0: str(r["size"]),
    "latency_ms": lambda r, t0: "" if r.get("latency_ms") is None else f"{r['latency_ms']:.3f}",
    "info": _info,
}
_TABLE = tuple(_CELLS[h] for h in table_headings())


_TIME = table_headings().index("time")


def table_cells(row: dict[str, Any], t0: float | None, clock: Clock | None = None) -> list[str]:
    """A row's cells in the pcap table (``t0``: the first row's time, times are shown from it, or as
    ``clock`` says), each made safe for a terminal (``kwire_cli.render.safe.escape``: client ids,
    topic names, addresses and error messages come from the capture)."""
    cells = [escape(cell(row, t0)) for cell in _TABLE]
    if clock is not None:
        cells[_TIME] = clock.cell(row.get("ts"), t0)
    return cells


def _check() -> None:
    """Every heading of the declaration has its cell (checked at import)."""
    if set(_CELLS) != set(table_headings()):
        raise RuntimeError("output rows: every table heading needs one cell renderer")


_check()
