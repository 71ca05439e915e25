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

from kwire_cli.analysis.expert import MAX_LISTED, OVERSIZED, Expert
from kwire_cli.analysis.groups import EPOCH_HEARTBEATS, HEARTBEAT, JOIN, LEAVE, SYNC, Groups
from kwire_cli.analysis.offsets import FETCH, OFFSET_COMMIT, TXN_OFFSET_COMMIT, Offsets
from kwire_cli.analysis.producers import ADD_OFFSETS, ADD_PARTITIONS, END_TXN, INIT_PID, PRODUCE, Producers
from kwire_cli.analysis.series import BATCH_OVERHEAD, Series
from kwire_cli.analysis.traffic import Traffic
from kwire_cli.capture.names import topic_name
from kwire_cli.capture.summary import Facts, row_facts

GROUP_APIS = frozenset({JOIN, SYNC, HEARTBEAT, LEAVE, *EPOCH_HEARTBEATS})
TXN_APIS = frozenset({INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN})
COMMITS = frozenset({OFFSET_COMMIT, TXN_OFFSET_COMMIT})
ASKED = GROUP_APIS | TXN_APIS | COMMITS | {FETCH, PRODUCE}  # APIs whose answers meet what their requests kept
MAX_PENDING = 10_000  # requests awaiting an answer per connection
MAX_WAITING_CONNECTIONS = 50_000  # connections with requests awaiting an answer (memory stays bounded)
MAX_SAME_ID = 64  # answers awaiting their request that share one correlation id, per connection


class Analysis:
    """State of every analysis section (see the module doc)."""

    def __init__(self) -> None:
        self.traffic = Traffic()
        self.groups = Groups()
        self.offsets = Offsets()
        self.producers = Producers()
        self.expert = Expert()
        self.series = Series()
        # (client, broker) -> correlation id -> (pos, api key, what the sections keep, api name, version,
        # client id, file, frame)
        self.pending: dict[tuple[Any, ...], dict[Any, tuple[Any, ...]]] = {}
        # (client, broker) -> correlation id -> [(pos, api key, what the answer said), ...]: answers
        # whose requests this part has not seen, in order (several answers may share an id)
        self.orphans: dict[tuple[Any, ...], dict[Any, list[tuple[Any, ...]]]] = {}

    def add(self, r: dict[str, Any], pos: Any) -> None:
        self.count(r, pos, row_facts(r), None)

    def count(self, r: dict[str, Any], pos: Any, facts: Facts, pair: tuple[Any, Any] | None) -> None:
        """``add`` with the row's ``row_facts`` read by the caller (``pair``: the summary's
        (position, response time) tuple, if it kept one)."""
        get = r.get
        ts = get("ts")
        self.traffic.count(r, pos, facts, ts, pair)
        self.expert.count(r, pos, facts)
        self.series.count(r, facts, ts, False)  # (batches: ``_batches``, ``_fetch_answer``)
        kind, key, name, version, error, body, _size, _lat, _codes = facts
        if key is None:
            return
        if kind == "request":
            keep: Any = None
            if error is None and key in ASKED:
                if key == FETCH:
                    keep = self.offsets.fetch_request(r, (r["src"], r["dst"]))
                elif key == PRODUCE:
                    keep = self.producers.request(r, pos)
                    self._batches(r, pos, "produce", "TopicData", "PartitionData")
                    if isinstance(body, dict) and body.get("Acks") == 0:
                        return  # no answer comes
                elif key in GROUP_APIS:
                    keep = self.groups.request(r)
                elif key in COMMITS:
                    keep = self.offsets.commit_request(r)
                    if isinstance(body, dict):
                        self.groups.note_client(get("client_id"), body.get("GroupId"), pos)
                else:  # (TXN_APIS)
                    keep = self.producers.txn_request(r)
            # kept for its answer (``pending``)
            conn = (r["src"], r["dst"])
            p = self.pending.get(conn)
            if p is None:
                if len(self.pending) >= MAX_WAITING_CONNECTIONS:
                    return  # (its answer is then an orphan: counted, not paired)
                p = self.pending[conn] = {}
            if len(p) < MAX_PENDING:
                p[get("correlation_id")] = (pos, key, keep, name, version, get("client_id"), get("file"),
                                            get("frame"))
        elif kind == "response":
            ext: Any = None
            if key in ASKED and error is None:
                if key == FETCH:
                    ext = self._fetch_answer(r, pos)
                elif key == PRODUCE:
                    ext = self.producers.extract(r)
                elif key in GROUP_APIS:
                    ext = self.groups.extract(r)
                elif key in COMMITS:
                    ext = self.offsets.commit_extract(r)
                else:  # (TXN_APIS)
                    ext = self.producers.txn_extract(r)
            conn = (r["dst"], r["src"])
            corr = get("correlation_id")
            p = self.pending.get(conn)
            if p is None:
                got = None
            else:
                got = p.pop(corr, None)
                if not p:
                    del self.pending[conn]  # (memory stays flat over many connections)
            if got is None:  # its request is in another part (spark-decode cuts a heavy connection)
                self._orphan(conn, corr, (pos, key, ext))
                return
            if ext is not None:
                self._apply(key, pos, got[2], ext)

    def _orphan(self, conn: tuple[Any, ...], corr: Any, answer: tuple[Any, ...]) -> None:
        o = self.orphans.get(conn)
        if o is None:
            if len(self.orphans) >= MAX_WAITING_CONNECTIONS:
                return
            o = self.orphans[conn] = {}
        same = o.get(corr)
        if same is None:
            if len(o) < MAX_PENDING:
                o[corr] = [answer]
        elif len(same) < MAX_SAME_ID:
            same.append(answer)

    def _apply(self, key: int, pos: Any, keep: Any, ext: Any) -> None:
        """An answer (what ``add`` extracted of it, at ``pos``) meets what its request kept."""
        if ext is None:
            return
        if key == FETCH:
            samples = self.offsets.fetch_apply(pos, keep, ext)
            if samples:
                self.series.fetch(pos, ext[1], samples)
        elif key == PRODUCE:
            self.producers.apply(pos, keep, ext)
        elif key in GROUP_APIS:
            self.groups.apply(pos, keep, ext)
        elif key in COMMITS:
            self.offsets.commit_apply(pos, keep, ext)
            self.series.commit(pos, keep, ext)
        elif key in TXN_APIS:
            self.producers.txn_apply(pos, keep, ext)

    def _batches(self, r: dict[str, Any], pos: Any, direction: str, topics: str, parts: str) -> None:
        """A Produce request's record batches: the expert's findings and the throughput series."""
        body = r.get("body")
        if not isinstance(body, dict):
            return
        names = r.get("topic_names")
        for t in body.get(topics) or []:
            if not isinstance(t, dict):
                continue
            size = records = 0
            for p in t.get(parts) or []:
                recs = p.get("Records") if isinstance(p, dict) else None
                if isinstance(recs, dict):
                    bs = recs.get("batches")
                    if bs:
                        s, n = self._batch_list(bs, r, pos, t, p, names)
                        size += s
                        records += n
            if size or records:
                self.series.throughput(direction, topic_name(t, names), r.get("ts"), size, records)

    def _batch_list(self, bs: list[Any], r: dict[str, Any], pos: Any, t: dict[str, Any], p: dict[str, Any],
                    names: Any) -> tuple[int, int]:
        """One partition's batches: the expert's findings; (bytes, records) for the series."""
        size = records = 0
        for b in bs:
            length = b.get("BatchLength")
            if isinstance(length, int):
                size += length + BATCH_OVERHEAD
                if length > OVERSIZED or b.get("CrcValid") is False:
                    self.expert.batch(b, r, pos, _where(t, p, names))
            elif b.get("CrcValid") is False:
                self.expert.batch(b, r, pos, _where(t, p, names))
            n = b.get("RecordCount")
            if isinstance(n, int):
                records += n
        return size, records

    def _fetch_answer(self, r: dict[str, Any], pos: Any) -> Any:
        """A decoded Fetch answer in one walk: ``Offsets.fetch_extract``'s answer (the high
        watermarks noted), the expert's findings of its batches, the throughput series."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        names = r.get("topic_names")
        ts = r.get("ts")
        marks = not body.get("ErrorCode")
        got: list[tuple[Any, ...]] = []
        hws = self.offsets.hw
        for t in body.get("Responses") or []:
            if not isinstance(t, dict):
                continue
            name = topic_name(t, names)
            size = records = 0
            for p in t.get("Partitions") or []:
                if not isinstance(p, dict):
                    continue
                if marks:
                    hw = p.get("HighWatermark")
                    if not p.get("ErrorCode") and isinstance(hw, int) and hw >= 0:
                        part = p.get("PartitionIndex")
                        tp = (name, part)
                        m = hws.get(tp)
                        if m is None or pos >= m[0]:  # (Offsets._hw)
                            hws[tp] = (pos, hw)
                        got.append((name, part, hw))
                recs = p.get("Records")
                if isinstance(recs, dict):
                    bs = recs.get("batches")
                    if bs:
                        s, n = self._batch_list(bs, r, pos, t, p, names)
                        size += s
                        records += n
            if size or records:
                self.series.throughput("fetch", name, ts, size, records)
        return (r.get("client_id"), ts, got) if marks else None

    def merge(self, o: Analysis) -> Analysis:
        self.traffic.merge(o.traffic)
        self.groups.merge(o.groups)
        self.offsets.merge(o.offsets)
        self.producers.merge(o.producers)
        self.expert.merge(o.expert)
        self.series.merge(o.series)
        # answers whose requests are in the other part meet them now (positions order them: a request
        # is answered by the first answer with its correlation id after it, as in one pass)
        for conn, orphans in o.orphans.items():
            p = self.pending.get(conn)
            for corr, answers in orphans.items():
                for pos, key, ext in sorted(answers, key=lambda a: a[0]):
                    got = p.get(corr) if p is not None else None
                    if p is not None and got is not None and got[0] < pos:
                        del p[corr]
                        self._apply(key, pos, got[2], ext)
                    else:
                        self._orphan(conn, corr, (pos, key, ext))
        for conn, reqs in o.pending.items():
            mine = self.orphans.get(conn)
            for corr, req in reqs.items():
                same = mine.get(corr) if mine is not None else None
                e = min((a for a in same if req[0] < a[0]), key=lambda a: a[0], default=None) if same else None
                if mine is not None and same is not None and e is not None:
                    same.remove(e)
                    if not same:
                        del mine[corr]
                    self._apply(e[1], e[0], req[2], e[2])
                else:
                    self.pending.setdefault(conn, {})[corr] = req
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
            for corr, (pos, _key, _keep, name, version, cid, file, frame) in p.items():
                ex.add(pos, "warning", "unanswered", f"{name} v{version} request (correlation id {corr}) "
                       "has no answer in the capture", None, cid, conn[1])
                ex.found[-1][1].update(file=file, frame=frame)
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
            "series": self.series.to_dict(groups, self.groups.client_group),
        }


def _where(t: dict[str, Any], p: dict[str, Any], names: Any) -> str:
    """A partition as the expert's batch findings name it ("topic-3")."""
    return f"{topic_name(t, names)}-{p.get('Index', p.get('PartitionIndex'))}"


def _order(pf: tuple[Any, ...]) -> tuple[Any, ...]:
    """Findings in position order; a rebalance (placed by its time, a 1-tuple) after the rest."""
    pos = pf[0]
    return (1, pos) if isinstance(pos, tuple) and len(pos) == 1 else (0, pos)
