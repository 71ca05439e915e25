"""The pcap table: one line per output row (``kwire pcap``, live captures, ``kwire proxy``).

Its cells come from the row declaration (``kwire_cli.capture.rows.COLUMNS``: each column names the
cell, ``heading``, that shows it; columns sharing a heading share a cell). Every cell is made safe
for a terminal (``kwire_cli.render.safe.escape``: client ids, topic names, addresses and error
messages come from the capture).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kwire_cli.capture.rows import COLUMNS
from kwire_cli.render.safe import escape


def table_headings() -> tuple[str, ...]:
    """The pcap table's cells, in column order (columns sharing a heading share a cell)."""
    seen: dict[str, None] = {}
    for c in COLUMNS:
        if c.heading is not None:
            seen.setdefault(c.heading)
    return tuple(seen)


def table_header() -> str:
    return "  ".join(table_headings())


def _api(r: dict[str, Any], _t0: float | None) -> str:
    if r.get("api_version") is not None:
        return f"{r['api_name'] or '?'} v{r['api_version']}"
    return r.get("api_name") or "?"


CAPPED = "batch(es) cut at the frame's cap of records and headers (--max-records raises it)"
BYTE_CAPPED = "batch(es) not decoded at the frame's cap of bytes (--max-decompressed raises it)"


def _note(r: dict[str, Any], _t0: float | None) -> str:
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
    if names and not r["error"]:
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
    "note": _note,
}
_TABLE = tuple(_CELLS[h] for h in table_headings())


def table_cells(row: dict[str, Any], t0: float | None) -> list[str]:
    """A row's cells in the pcap table (``t0``: the first row's time, times are shown from it), each
    made safe for a terminal (``kwire_cli.render.safe.escape``: client ids, topic names, addresses
    and error messages come from the capture)."""
    return [escape(cell(row, t0)) for cell in _TABLE]


def _check() -> None:
    """Every heading of the declaration has its cell (checked at import)."""
    if set(_CELLS) != set(table_headings()):
        raise RuntimeError("output rows: every table heading needs one cell renderer")


_check()
