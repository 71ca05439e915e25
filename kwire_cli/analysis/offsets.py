"""Consumer lag from Fetch requests and answers, and committed offsets.

A lag sample is one partition of a Fetch answer without an error: the answer's HighWatermark minus
the FetchOffset its request asked for that partition (in an incremental fetch session, KIP-227, a
partition the request leaves out keeps the offset last asked on that connection). Samples count per
(client id, topic, partition); the group id is the one that client id last joined or committed for.
A commit is one partition of an OffsetCommit or TxnOffsetCommit answered with error code 0; its
committed lag is the newest HighWatermark any Fetch answer gave for that partition minus the
committed offset.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kwire_cli.capture.names import topic_name

FETCH, OFFSET_COMMIT, TXN_OFFSET_COMMIT = 1, 8, 28


class Offsets:
    """Lag samples, commits and the newest high watermarks (see the module doc)."""

    def __init__(self) -> None:
        # (client id, topic, partition) -> [samples, max, pos, last lag, offset, hw, ts]
        self.lag: dict[tuple[Any, ...], list[Any]] = {}
        # (group, topic, partition) -> [commits, pos, offset, ts]
        self.commits: dict[tuple[Any, ...], list[Any]] = {}
        # (topic, partition) -> (pos, high watermark)
        self.hw: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # (file, client, broker) -> {(topic, partition): fetch offset}
        self.sessions: dict[tuple[Any, ...], dict[Any, Any]] = {}

    def fetch_request(self, r: dict[str, Any], conn: tuple[Any, ...]) -> Any:
        """The offsets a Fetch request asks, by (topic, partition): its own, and in an incremental
        session (epoch > 0) those the connection asked before for partitions it leaves out."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        names = r.get("topic_names")
        asked: dict[Any, Any] = {}
        for t in body.get("Topics") or []:
            name = topic_name(t, names)
            for p in t.get("Partitions") or []:
                asked[(name, p.get("Partition"))] = p.get("FetchOffset")
        epoch = body.get("SessionEpoch")
        if not epoch or epoch < 0:  # a full fetch (or none in a session): starts over
            self.sessions[conn] = dict(asked)
            return asked
        sess = self.sessions.setdefault(conn, {})
        for t in body.get("ForgottenTopicsData") or []:
            name = topic_name(t, names)
            for p in t.get("Partitions") or []:
                sess.pop((name, p), None)
        sess.update(asked)
        return dict(sess)

    def fetch_extract(self, r: dict[str, Any], pos: Any) -> Any:
        """A Fetch answer's (topic, partition, high watermark) without an error; the newest high
        watermarks noted."""
        body = r.get("body")
        if not isinstance(body, dict) or body.get("ErrorCode"):
            return None
        names = r.get("topic_names")
        got = []
        for t in body.get("Responses") or []:
            name = topic_name(t, names)
            for p in t.get("Partitions") or []:
                hw = p.get("HighWatermark")
                if p.get("ErrorCode") or not isinstance(hw, int) or hw < 0:
                    continue
                part = p.get("PartitionIndex")
                self._hw((name, part), pos, hw)
                got.append((name, part, hw))
        return r.get("client_id"), r.get("ts"), got

    def fetch_apply(self, pos: Any, asked: Any, ext: Any) -> list[tuple[Any, int, int]]:
        """A Fetch answer met its request: its lag samples counted; returned as ((client id,
        topic, partition), lag, high watermark) for the series (``Series.fetch``)."""
        samples: list[tuple[Any, int, int]] = []
        if ext is None or not asked:
            return samples
        cid, ts, got = ext
        for name, part, hw in got:
            off = asked.get((name, part))
            if not isinstance(off, int):
                continue
            lag = hw - off
            k = (cid, name, part)
            samples.append((k, lag, hw))
            e = self.lag.get(k)
            if e is None:
                self.lag[k] = [1, lag, pos, lag, off, hw, ts]
            else:
                e[0] += 1
                if lag > e[1]:
                    e[1] = lag
                if pos >= e[2]:
                    e[2:] = [pos, lag, off, hw, ts]
        return samples

    def _hw(self, tp: tuple[Any, ...], pos: Any, hw: int) -> None:
        m = self.hw.get(tp)
        if m is None or pos >= m[0]:
            self.hw[tp] = (pos, hw)

    def commit_request(self, r: dict[str, Any]) -> Any:
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        names = r.get("topic_names")
        offs = {}
        for t in body.get("Topics") or []:
            name = topic_name(t, names)
            for p in t.get("Partitions") or []:
                offs[(name, p.get("PartitionIndex"))] = p.get("CommittedOffset")
        return body.get("GroupId"), offs

    @staticmethod
    def commit_extract(r: dict[str, Any]) -> Any:
        """The (topic, partition) an OffsetCommit answer accepted (error code 0)."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        names = r.get("topic_names")
        ok = [(topic_name(t, names), p.get("PartitionIndex")) for t in body.get("Topics") or []
              for p in t.get("Partitions") or [] if not p.get("ErrorCode")]
        return r.get("ts"), ok

    def commit_apply(self, pos: Any, req: Any, ext: Any) -> None:
        for group, name, part, off, ts in committed(req, ext):
            k = (group, name, part)
            e = self.commits.get(k)
            if e is None:
                self.commits[k] = [1, pos, off, ts]
            else:
                e[0] += 1
                if pos >= e[1]:
                    e[1:] = [pos, off, ts]

    def merge(self, o: Offsets) -> None:
        for k, e in o.lag.items():
            m = self.lag.get(k)
            if m is None:
                self.lag[k] = list(e)
            else:
                m[0] += e[0]
                m[1] = max(m[1], e[1])
                if e[2] >= m[2]:
                    m[2:] = e[2:]
        for k, e in o.commits.items():
            m = self.commits.get(k)
            if m is None:
                self.commits[k] = list(e)
            else:
                m[0] += e[0]
                if e[1] >= m[1]:
                    m[1:] = e[1:]
        for tp, (pos, hw) in o.hw.items():
            self._hw(tp, pos, hw)

    def lag_list(self, groups: dict[Any, tuple[Any, ...]]) -> list[dict[str, Any]]:
        out = []
        for k in sorted(self.lag, key=lambda k: (str(k[0]), k[1], k[2] if k[2] is not None else -1)):
            cid, topic, part = k
            n, mx, _pos, last, off, hw, ts = self.lag[k]
            g = groups.get(cid)
            out.append({"client_id": cid, "group_id": g[1] if g else None, "topic": topic, "partition": part,
                        "samples": n, "max_lag": mx, "last_lag": last, "last_fetch_offset": off,
                        "last_high_watermark": hw, "last_ts": ts})
        return out

    def commit_list(self) -> list[dict[str, Any]]:
        out = []
        for k in sorted(self.commits, key=lambda k: (str(k[0]), k[1], k[2] if k[2] is not None else -1)):
            group, topic, part = k
            n, _pos, off, ts = self.commits[k]
            hw = self.hw.get((topic, part))
            out.append({"group_id": group, "topic": topic, "partition": part, "commits": n,
                        "last_committed_offset": off, "last_commit_ts": ts,
                        "high_watermark": hw[1] if hw else None,
                        "committed_lag": hw[1] - off if hw else None})
        return out


def committed(req: Any, ext: Any) -> Iterator[tuple[Any, str, Any, int, Any]]:
    """(group, topic, partition, offset, answer's time) of each partition an OffsetCommit answer
    accepted, from ``Offsets.commit_request``'s and ``commit_extract``'s data."""
    if req is None or ext is None:
        return
    group, offs = req
    ts, ok = ext
    for name, part in ok:
        off = offs.get((name, part))
        if isinstance(off, int):
            yield group, name, part, off, ts
