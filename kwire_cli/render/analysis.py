"""The analysis sections of a summary as tables (``kwire_cli.analysis``'s plain data, as
`kwire pcap --summary --format json` gives it: this module reads the dict, it imports no analysis).
Every cell goes through ``kwire_cli.render.safe.escape``: names, ids and messages come from captures."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kwire_cli.render.safe import escape

MAX_ROWS = 50  # rows per table; the JSON has them all


def _opt(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def _table(con: Console, title: str, heads: tuple[str, ...], rows: Iterable[tuple], numeric: frozenset[str],
           total: int) -> None:
    t = Table(title=title, title_justify="left")
    for h in heads:
        t.add_column(h, justify="right" if h in numeric else "left")
    for row in rows:
        t.add_row(*(Text(escape(_opt(c))) for c in row))
    con.print(t)
    if total > MAX_ROWS:
        con.print(Text(f"  ({total - MAX_ROWS} more rows in --format json)"))


def _assignment(a: Any) -> str:
    if not a:
        return "" if a is None else "(none)"
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in a.items())


def print_analysis(s: dict, con: Console) -> None:
    """Print the analysis sections of a summary dict that has them (latency, connections, who,
    groups, lag, commits, producers, expert)."""
    lat = s.get("latency") or []
    if lat:
        _table(con, "Latency by API, broker and client id (ms)",
               ("API", "version", "broker", "client id", "count", "min", "p50", "p90", "p99", "max", "errors",
                "throttled"),
               ((e["api_name"], e["api_version"], e["broker"], e["client_id"], e["count"], e["min_ms"], e["p50_ms"],
                 e["p90_ms"], e["p99_ms"], e["max_ms"], e["errors"], e["throttled"]) for e in lat[:MAX_ROWS]),
               frozenset({"version", "count", "min", "p50", "p90", "p99", "max", "errors", "throttled"}), len(lat))
    conns = s.get("connections") or []
    if conns:
        _table(con, "Connections", ("client", "broker", "client ids", "seconds", "requests", "responses",
                                    "bytes out", "bytes in", "TLS", "principal"),
               ((c["client"], c["broker"], ", ".join(map(str, c["client_ids"])),
                 c["last_ts"] - c["first_ts"], c["requests"], c["responses"], c["request_bytes"],
                 c["response_bytes"], c["tls_version"], c["principal"]) for c in conns[:MAX_ROWS]),
               frozenset({"seconds", "requests", "responses", "bytes out", "bytes in"}), len(conns))
    who = s.get("who") or []
    if who:
        _table(con, "Who did what", ("principal", "client id", "connections", "APIs", "topics", "groups",
                                     "transactional ids"),
               ((w["principal"], w["client_id"], w["connections"],
                 ", ".join(f"{k} {n}" for k, n in w["apis"].items()), ", ".join(w["topics"][:20]),
                 ", ".join(w["groups"][:20]), ", ".join(w["transactional_ids"][:20])) for w in who[:MAX_ROWS]),
               frozenset({"connections"}), len(who))
    rows: list[tuple]
    for g in s.get("groups") or []:
        rows = []
        for gen in g["generations"]:
            for i, m in enumerate(gen["members"] or [{}]):
                rows.append((gen["generation_id"] if i == 0 else "", gen["rebalance_ms"] if i == 0 else "",
                             gen["cause"] if i == 0 else "", m.get("member_id"), m.get("client_id"),
                             _assignment(m.get("assignment"))))
        _table(con, f"Group {g['group_id']} ({g['protocol']}"
               + (f", {g['assignor']}" if g.get("assignor") else "") + ")",
               ("generation", "rebalance ms", "cause", "member", "client id", "assignment"), rows[:MAX_ROWS],
               frozenset({"generation", "rebalance ms"}), len(rows))
    lag = s.get("lag") or []
    if lag:
        _table(con, "Consumer lag (high watermark - fetch offset)",
               ("client id", "group", "topic", "partition", "samples", "max lag", "last lag", "fetch offset",
                "high watermark"),
               ((e["client_id"], e["group_id"], e["topic"], e["partition"], e["samples"], e["max_lag"],
                 e["last_lag"], e["last_fetch_offset"], e["last_high_watermark"]) for e in lag[:MAX_ROWS]),
               frozenset({"partition", "samples", "max lag", "last lag", "fetch offset", "high watermark"}),
               len(lag))
    commits = s.get("commits") or []
    if commits:
        _table(con, "Committed offsets", ("group", "topic", "partition", "commits", "last committed",
                                          "high watermark", "committed lag"),
               ((e["group_id"], e["topic"], e["partition"], e["commits"], e["last_committed_offset"],
                 e["high_watermark"], e["committed_lag"]) for e in commits[:MAX_ROWS]),
               frozenset({"partition", "commits", "last committed", "high watermark", "committed lag"}),
               len(commits))
    prods = s.get("producers") or []
    if prods:
        rows = []
        for p in prods:
            tx = p["transactions"]
            txt = f"{tx['begun']} begun, {tx['committed']} committed, {tx['aborted']} aborted" if tx["begun"] or \
                tx["committed"] or tx["aborted"] else ""
            for part in p["partitions"] or [{}]:
                rows.append((p["producer_id"], p["producer_epoch"], p["transactional_id"], part.get("topic"),
                             part.get("partition"), part.get("batches"), part.get("records"), part.get("bytes"),
                             ", ".join(part.get("compression") or {}), part.get("compression_ratio"),
                             part.get("p50_ms"), len(p["anomalies"]), txt))
        _table(con, "Producers", ("producer id", "epoch", "transactional id", "topic", "partition", "batches",
                                  "records", "bytes", "compression", "ratio", "p50 ms", "anomalies",
                                  "transactions"), rows[:MAX_ROWS],
               frozenset({"producer id", "epoch", "partition", "batches", "records", "bytes", "ratio", "p50 ms",
                          "anomalies"}), len(rows))
    ex = s.get("expert") or []
    if ex:
        counts = ", ".join(f"{k} {n}" for k, n in (s.get("expert_counts") or {}).items())
        _table(con, f"Expert findings ({counts})", ("severity", "kind", "file", "frame", "message"),
               ((f["severity"], f["kind"], f["file"], f["frame"], f["message"]) for f in ex[:MAX_ROWS]),
               frozenset({"frame"}), len(ex))
