"""Answers from a conversation: groups and rebalances, lag, commits, producers, latency by broker and
client, connections and the who-did-what audit, expert findings.

Every statistic is computed once from the output rows (``state.Analysis``: mergeable state, so that
spark-decode's tasks each compute a part and the driver merges them) and shown many ways: the JSON
sections of `kwire pcap --summary --format json` (``AnalysedSummary.to_dict``), the tables of
`kwire pcap --summary` (``kwire_cli.render.analysis``), proxy --summary and spark-decode's summary.
"""
from __future__ import annotations

from typing import Any

from kwire_cli.analysis.state import Analysis
from kwire_cli.capture.summary import Summary, row_facts

SECTIONS = ("latency", "connections", "who", "groups", "lag", "commits", "producers", "expert", "expert_counts",
            "series")

__all__ = ["SECTIONS", "AnalysedSummary", "Analysis"]


class AnalysedSummary(Summary):
    """The summary with the analysis sections: counts each row into both; merges and prints both."""

    def __init__(self) -> None:
        super().__init__()
        self.analysis = Analysis()

    def add(self, r: dict[Any, Any], pos: Any = None) -> None:
        if pos is None:
            pos = self.frames
        facts = row_facts(r)  # (the fields both read, read once)
        self.analysis.count(r, pos, facts, self.count(r, pos, facts))

    def merge(self, o: Summary) -> AnalysedSummary:
        super().merge(o)
        if isinstance(o, AnalysedSummary):
            self.analysis.merge(o.analysis)
        return self

    def to_dict(self, stats: dict[Any, Any] | None = None, damage: list[dict[Any, Any]] | None = None,
                notes: list[dict[Any, Any]] | None = None,
                damage_kinds: dict[str, list[int]] | None = None) -> dict[Any, Any]:
        out = super().to_dict(stats, damage, notes, damage_kinds)
        out.update(self.analysis.sections(out.get("auth"), out.get("negotiation_audit"), tls_versions(out)))
        return out


def tls_versions(summary: dict[str, Any]) -> dict[str, str]:
    """"client broker" -> the TLS version its handshake gave, from the summary's ``tls`` section
    (its handshakes are listed when the capture's notes are at hand: kwire pcap and the proxy)."""
    out: dict[str, str] = {}
    for h in (summary.get("tls") or {}).get("handshakes") or []:
        client, _, broker = str(h.get("conn") or "").partition("->")
        words = str(h.get("detail") or "").rsplit(": ", 1)[-1].split()
        if broker and words and words[0].startswith(("TLS", "SSL")):
            out.setdefault(f"{client} {broker}", words[0])
    return out
