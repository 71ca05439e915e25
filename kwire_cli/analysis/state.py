"""The analysis of a conversation: every section's state, fed one output row at a time.

``Analysis.add`` takes each row once (with its position in the capture's row order) and hands it
to the sections that want it; a request the sections need at its answer is kept per connection by
correlation id until that answer (``pending``). ``merge`` adds another part's state: parts are
whole connections (as spark-decode's tasks decode them), positions of both parts comparable, and
the merged state is the one ``add`` would have built over both parts' rows. ``sections`` gives the
plain data of every section (the keys of `kwire pcap --summary --format json`).
"""
from __future__ import annotations

from typing import Any

from kwire_cli.analysis.expert import MAX_LISTED, Expert
from kwire_cli.analysis.groups import EPOCH_HEARTBEATS, HEARTBEAT, JOIN, LEAVE, SYNC, Groups
from kwire_cli.analysis.names import endpoints, topic_name
from kwire_cli.analysis.offsets import FETCH, OFFSET_COMMIT, TXN_OFFSET_COMMIT, Offsets
from kwire_cli.analysis.producers import ADD_OFFSETS, ADD_PARTITIONS, END_TXN, INIT_PID, PRODUCE, Producers
from kwire_cli.analysis.traffic import Traffic

GROUP_APIS = frozenset({JOIN, SYNC, HEARTBEAT, LEAVE, *EPOCH_HEARTBEATS})
TXN_APIS = frozenset({INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN})
MAX_PENDING = 10_000  # requests awaiting an answer per connection


class Analysis:
    """State of every analysis section (see the module doc)."""

    def __init__(self) -> None:
        self.traffic = Traffic()
        self.groups = Groups()
        self.offsets = Offsets()
        self.producers = Producers()
        self.expert = Expert()
        # (file, client, broker) -> correlation id -> (pos, api key, row, what the sections keep)
        self.pending: dict[tuple[Any, ...], dict[Any, tuple[Any, ...]]] = {}

    def add(self, r: dict[str, Any], pos: Any) -> None:
        self.traffic.add(r, pos)
        self.expert.row(r, pos)
        kind = r["kind"]
        key = r.get("api_key")
        if key is None or r.get("error") is not None:
            if kind == "response" and key is not None:
                self._pop(r)
            return
        if kind == "request":
            client, broker = r["src"], r["dst"]
            conn = (r.get("file"), client, broker)
            keep: Any = None
            if key == FETCH:
                keep = self.offsets.fetch_request(r, conn)
            elif key == PRODUCE:
                keep = self.producers.request(r, pos)
                self._batches(r, pos, "TopicData", "PartitionData")
                body = r.get("body")
                if isinstance(body, dict) and body.get("Acks") == 0:
                    return  # no answer comes
            elif key in GROUP_APIS:
                keep = self.groups.request(r)
            elif key in (OFFSET_COMMIT, TXN_OFFSET_COMMIT):
                keep = self.offsets.commit_request(r)
                body = r.get("body")
                if isinstance(body, dict):
                    self.groups.note_client(r.get("client_id"), body.get("GroupId"), pos)
            elif key in TXN_APIS:
                keep = self.producers.txn_request(r)
            p = self.pending.get(conn)
            if p is None:
                p = self.pending[conn] = {}
            if len(p) < MAX_PENDING:
                p[r.get("correlation_id")] = (pos, key, _brief(r), keep)
        elif kind == "response":
            got = self._pop(r)
            if got is None:
                return
            keep = got[3]
            if key == FETCH:
                self.offsets.fetch_answer(r, pos, keep)
                self._batches(r, pos, "Responses", "Partitions")
            elif key == PRODUCE:
                self.producers.answer(r, pos, keep)
            elif key in GROUP_APIS:
                if keep is not None:
                    self.groups.answer(r, pos, keep)
            elif key in (OFFSET_COMMIT, TXN_OFFSET_COMMIT):
                self.offsets.commit_answer(r, pos, keep)
            elif key in TXN_APIS:
                self.producers.txn_answer(r, pos, keep)

    def _pop(self, r: dict[str, Any]) -> tuple[Any, ...] | None:
        client, broker = endpoints(r)
        p = self.pending.get((r.get("file"), client, broker))
        if p is None:
            return None
        return p.pop(r.get("correlation_id"), None)

    def _batches(self, r: dict[str, Any], pos: Any, topics: str, parts: str) -> None:
        body = r.get("body")
        if not isinstance(body, dict):
            return
        names = r.get("topic_names")
        for t in body.get(topics) or []:
            for p in t.get(parts) or []:
                recs = p.get("Records")
                if isinstance(recs, dict):
                    bs = recs.get("batches")
                    if bs:
                        where = f"{topic_name(t, names)}-{p.get('Index', p.get('PartitionIndex'))}"
                        for b in bs:
                            self.expert.batch(b, r, pos, where)

    def merge(self, o: Analysis) -> Analysis:
        self.traffic.merge(o.traffic)
        self.groups.merge(o.groups)
        self.offsets.merge(o.offsets)
        self.producers.merge(o.producers)
        self.expert.merge(o.expert)
        for conn, p in o.pending.items():
            self.pending.setdefault(conn, {}).update(p)
        return self

    def sections(self, auth: dict[str, Any] | None = None, audit: list[dict[str, Any]] | None = None,
                 tls: dict[str, str] | None = None) -> dict[str, Any]:
        """Every section's plain data. ``auth``: the summary's auth section (for principals);
        ``audit``: its negotiation audit (versions the broker did not advertise)."""
        principals = {(c["client"], c["broker"]): c for c in (auth or {}).get("by_connection") or []}
        groups = self.groups.to_list()
        anomalies = self.producers.anomalies()
        ex = Expert()
        ex.merge(self.expert)
        for conn, p in self.pending.items():
            for corr, (pos, _key, brief, _keep) in p.items():
                ex.add(pos, "warning", "unanswered", f"{brief[0]} v{brief[1]} request (correlation id {corr}) "
                       "has no answer in the capture", None, brief[2], conn[2])
                ex.found[-1][1].update(file=brief[3], frame=brief[4])
        for pos, pid, epoch, a in anomalies:
            kind = "retry" if a["kind"] == "resent" else "sequence_anomaly"
            ex.add(pos, "warning", kind, f"producer {pid} epoch {epoch} {a['topic']}-{a['partition']}: {a['detail']}",
                   None)
            ex.found[-1][1].update(file=a["file"], frame=a["frame"])
        for g in groups:
            for gen in g["generations"][1:]:
                ex.add((gen["start_ts"] or 0.0,), "note", "rebalance",
                       f"group {g['group_id']} generation {gen['generation_id']}: {gen['cause']}", None)
        ex.found.sort(key=_order)
        listed = [f for _, f in ex.found[:MAX_LISTED]]
        for a in audit or []:
            ex.counts["version_not_advertised"] = ex.counts.get("version_not_advertised", 0) + 1
            if len(listed) < MAX_LISTED:
                listed.append({"severity": "warning", "kind": "version_not_advertised",
                               "message": f"{a['api_name']} v{a['api_version']} used {a['requests']} time(s); the "
                                          f"broker advertised {a['advertised']}", "file": None, "frame": None,
                               "client_id": a["client_id"], "broker": a["broker"]})
        return {
            "latency": self.traffic.latency(),
            "connections": self.traffic.connections(principals, tls),
            "who": self.traffic.who(principals),
            "groups": groups,
            "lag": self.offsets.lag_list(self.groups.client_group),
            "commits": self.offsets.commit_list(),
            "producers": self.producers.to_list(anomalies),
            "expert": listed,
            "expert_counts": dict(sorted(ex.counts.items())),
        }


def _brief(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r.get("api_name"), r.get("api_version"), r.get("client_id"), r.get("file"), r.get("frame"))


def _order(pf: tuple[Any, ...]) -> tuple[Any, ...]:
    """Findings in position order; a rebalance (placed by its time, a 1-tuple) after the rest."""
    pos = pf[0]
    return (1, pos) if isinstance(pos, tuple) and len(pos) == 1 else (0, pos)
