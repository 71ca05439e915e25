"""Time series of a conversation, downsampled to a bounded number of points: response-time
percentiles per API, bytes and records per topic (produce and fetch), lag per partition, committed
offsets, error codes, heartbeats and group events over time.

Every series shares one grid of time buckets: a bucket is ``BASE_S * 2**k`` seconds wide, its index
``floor(ts / width)`` (capture time since the Unix epoch, so parts of one capture agree). When more
than ``MAX_POINTS`` buckets hold something, the width doubles and neighbouring buckets combine, so
each series has at most ``MAX_POINTS`` points whatever the capture's length. ``merge`` brings two
parts to the wider grid first and then combines bucket by bucket (the result is the one ``add``
would have built over both parts' rows). Series keys are bounded too: past ``MAX_SERIES`` keys of one
kind, later keys are counted under "(other)".
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kwire_cli.analysis.dist import percentile
from kwire_cli.analysis.groups import EPOCH_HEARTBEATS, HEARTBEAT
from kwire_cli.analysis.offsets import committed
from kwire_cli.capture.names import topic_name
from kwire_cli.capture.summary import Facts, row_facts

BASE_S = 0.001  # the narrowest bucket: 1 ms
MAX_POINTS = 240  # buckets (points per series) at most
MAX_SERIES = 64  # series of one kind (APIs, topics, partitions, error codes); later keys go to "(other)"
EXACT = 64  # response times kept exactly per bucket of one API; past them, counts in bins RATIO wide
RATIO = 1.02  # a bin's upper bound over its lower one: percentiles read from bins are within 2 %
OTHER = "(other)"
FETCH = 1
PRODUCE = 0
BATCH_OVERHEAD = 12  # a record batch's BaseOffset and BatchLength, before the BatchLength bytes

Cell = list[Any]
Grid = dict[int, Cell]


LOG_RATIO = math.log(RATIO)


def _bin(v: float) -> int:
    return 0 if v <= 0 else math.ceil(math.log(v) / LOG_RATIO)


def _count_bins(bins: dict[int, int], values: list[float]) -> None:
    """``values`` counted into ``bins`` (``_bin`` of each, in line: a merge bins thousands)."""
    log, ceil, lr = math.log, math.ceil, LOG_RATIO
    for v in values:
        i = 0 if v <= 0 else ceil(log(v) / lr)
        bins[i] = bins.get(i, 0) + 1


def _lat_combine(a: Cell, b: Cell) -> Cell:
    """Cells [exact values or None, bins or None, count, max]: ``a`` updated with ``b`` (the values
    kept while the bucket holds at most EXACT, then counted in bins: the same whatever the order)."""
    count = a[2] + b[2]
    if count <= EXACT:
        a[0].extend(b[0])
    else:
        bins: dict[int, int] = a[1]
        if bins is None:
            bins = a[1] = {}
            _count_bins(bins, a[0])
            a[0] = None
        if b[1] is not None:
            for i, n in b[1].items():
                bins[i] = bins.get(i, 0) + n
        else:
            _count_bins(bins, b[0])
    a[2] = count
    a[3] = max(a[3], b[3])
    return a


def _lat_points(cell: Cell) -> dict[str, Any]:
    """A latency bucket's count, percentiles (nearest-rank; from bins: the bin's upper bound, at
    most the maximum) and maximum."""
    out: dict[str, Any] = {"count": cell[2]}
    if cell[0] is not None:
        vs = sorted(cell[0])
        for name, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
            out[name] = percentile(vs, q)
    else:
        bins = sorted(cell[1].items())
        for name, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
            rank = max(1, math.ceil(q * cell[2]))
            seen = 0
            for i, n in bins:
                seen += n
                if seen >= rank:
                    out[name] = min(round(RATIO ** i, 3) if i else 0.0, cell[3])
                    break
    out["max_ms"] = cell[3]
    return out


def _sum_combine(a: Cell, b: Cell) -> Cell:
    """``a`` plus ``b``, element by element, in place (a bucket's cell belongs to its grid alone)."""
    for i, y in enumerate(b):
        a[i] += y
    return a


def _last_combine(a: Cell, b: Cell) -> Cell:
    """Cells [position, value, ..., maximum of value]: the later one's values, the larger maximum."""
    last = list(b) if b[0] >= a[0] else list(a)
    last[-1] = max(a[-1], b[-1])
    return last


def _commit_combine(a: Cell, b: Cell) -> Cell:
    return list(b) if b[0] >= a[0] else list(a)


COMBINE: dict[str, Callable[[Cell, Cell], Cell]] = {
    "latency": _lat_combine,
    "throughput": _sum_combine,
    "errors": _sum_combine,
    "heartbeats": _sum_combine,
    "lag": _last_combine,
    "commits": _commit_combine,
}


class Series:
    """Bucketed time series of every kind (see the module doc)."""

    def __init__(self) -> None:
        self.k = 0
        self.used: set[int] = set()
        self.data: dict[str, dict[tuple[Any, ...], Grid]] = {kind: {} for kind in COMBINE}
        self._lat_keys: dict[str, tuple[str]] = {}  # API name -> its latency series' key

    def width(self) -> float:
        return BASE_S * (1 << self.k)

    def _grid(self, kind: str, key: tuple[Any, ...]) -> Grid:
        """The buckets of one series, made on first use; past MAX_SERIES keys the ``(other)`` one."""
        series = self.data[kind]
        grid = series.get(key)
        if grid is None:
            if len(series) >= MAX_SERIES:
                key = (OTHER,) * len(key)
                grid = series.get(key)
            if grid is None:
                grid = series[key] = {}
        return grid

    def _put(self, kind: str, key: tuple[Any, ...], ts: Any, cell: Cell) -> None:
        if not isinstance(ts, (int, float)) or not math.isfinite(ts):
            return
        grid = self.data[kind].get(key)
        if grid is None:
            grid = self._grid(kind, key)
        i = math.floor(ts / (BASE_S * (1 << self.k)))  # (self.width())
        old = grid.get(i)
        grid[i] = cell if old is None else COMBINE[kind](old, cell)
        if i not in self.used:
            self.used.add(i)
            if len(self.used) > MAX_POINTS:
                self._coarsen(self.k + 1)

    def _coarsen(self, k: int) -> None:
        """Wider buckets (2**(k - self.k) times), until at most MAX_POINTS hold something."""
        while True:
            shift = k - self.k
            if shift > 0:
                for kind, series in self.data.items():
                    comb = COMBINE[kind]
                    for key, grid in series.items():
                        new: Grid = {}
                        for i, cell in grid.items():
                            j = i >> shift
                            old = new.get(j)
                            new[j] = cell if old is None else comb(old, cell)
                        series[key] = new
                self.used = {i >> shift for i in self.used}
                self.k = k
            if len(self.used) <= MAX_POINTS:
                return
            k = self.k + 1

    def add(self, r: dict[str, Any], _pos: Any) -> None:
        """One output row: its response time, error codes and record batches."""
        self.count(r, row_facts(r), r.get("ts"), True)

    def count(self, r: dict[str, Any], facts: Facts, ts: Any, batches: bool) -> None:
        """``add`` with the row's ``row_facts`` and time read by the caller (``batches`` False: the
        caller counts the record batches, ``throughput``)."""
        kind, key, name, _version, error, _body, _size, ms, codes = facts
        get = r.get
        if kind == "response":
            if isinstance(ms, (int, float)):
                lk = self._lat_keys.get(name) if name else None
                if lk is None:
                    lk = (name or str(key),)
                    if name:
                        self._lat_keys[name] = lk
                ms = float(ms)
                # one response time: ``_put`` of the cell [[ms], None, 1, ms], added in place where its
                # bucket keeps its values exactly (``_lat_combine`` then appends it)
                grid = self.data["latency"].get(lk)
                old = None
                if grid is not None and isinstance(ts, (int, float)) and math.isfinite(ts):
                    old = grid.get(math.floor(ts / (BASE_S * (1 << self.k))))
                if old is not None and old[0] is not None and old[2] < EXACT:
                    old[0].append(ms)
                    old[2] += 1
                    if ms > old[3]:
                        old[3] = ms
                else:
                    self._put("latency", lk, ts, [[ms], None, 1, ms])
            if codes:
                for code in codes:
                    self._put("errors", (str(code),), ts, [1])
            if batches and key == FETCH and error is None:
                self._batches(r, ts, "fetch", "Responses", "Partitions")
        elif kind == "request":
            if error is not None:
                return
            if key == HEARTBEAT or key in EPOCH_HEARTBEATS:
                body = get("body")
                group = body.get("GroupId") if isinstance(body, dict) else None
                if isinstance(group, str):
                    self._put("heartbeats", (group,), ts, [1])
            elif key == PRODUCE and batches:
                self._batches(r, ts, "produce", "TopicData", "PartitionData")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lat_keys"] = {}
        return state

    def _batches(self, r: dict[str, Any], ts: Any, direction: str, topics: str, parts: str) -> None:
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
                if not isinstance(recs, dict):
                    continue
                for b in recs.get("batches") or []:
                    length = b.get("BatchLength")
                    if isinstance(length, int):
                        size += length + BATCH_OVERHEAD
                    n = b.get("RecordCount")
                    if isinstance(n, int):
                        records += n
            if size or records:
                self._put("throughput", (direction, topic_name(t, names)), ts, [size, records])

    def throughput(self, direction: str, topic: str, ts: Any, size: int, records: int) -> None:
        """The record batches of one topic of a Produce request or Fetch answer (``_batches``' sums)."""
        self._put("throughput", (direction, topic), ts, [size, records])

    def fetch(self, pos: Any, ts: Any, samples: list[tuple[Any, int, int]]) -> None:
        """A Fetch answer (at ``ts``) met its request: its lag samples (``Offsets.fetch_apply``'s
        ((client id, topic, partition), lag, high watermark))."""
        lags = self.data["lag"] if isinstance(ts, (int, float)) and math.isfinite(ts) else None
        for key, lag, hw in samples:
            grid = lags.get(key) if lags is not None else None
            old = grid.get(math.floor(ts / (BASE_S * (1 << self.k)))) if grid is not None else None
            if old is None:
                self._put("lag", key, ts, [pos, lag, hw, lag])
                continue
            # (_last_combine with [pos, lag, hw, lag], in place)
            top = max(old[3], lag)
            if pos >= old[0]:
                old[0], old[1], old[2] = pos, lag, hw
            old[3] = top

    def commit(self, pos: Any, req: Any, ext: Any) -> None:
        """An OffsetCommit answer met its request (``Offsets.commit_request``/``commit_extract``'s data)."""
        for group, name, part, off, ts in committed(req, ext):
            self._put("commits", (group, name, part), ts, [pos, off])

    def merge(self, o: Series) -> Series:
        """Add another part's series; ``o`` is used up (its cells become this one's)."""
        if o.k > self.k:
            self._coarsen(o.k)
        shift = self.k - o.k
        used = self.used
        for kind, theirs in o.data.items():
            comb = COMBINE[kind]
            for key, grid in theirs.items():
                if not grid:
                    continue
                mine = self._grid(kind, key)
                for i, cell in grid.items():
                    j = i >> shift
                    old = mine.get(j)
                    mine[j] = cell if old is None else comb(old, cell)
                    used.add(j)
        self._coarsen(self.k)
        return self

    def to_dict(self, groups: list[dict[str, Any]], client_group: dict[Any, Any] | None = None) -> dict[str, Any]:
        """The `series` section; ``groups``: the groups section (its events are bucketed here);
        ``client_group``: client id -> (position, group id) (for the lag series)."""
        w = self.width()
        # group events on the same grid (the groups section keeps the first 1000)
        ev: dict[tuple[Any, ...], Grid] = {}
        for g in groups:
            for e in g.get("events") or []:
                ts = e.get("ts")
                if isinstance(ts, (int, float)):
                    grid = ev.setdefault((g["group_id"], e["kind"]), {})
                    i = math.floor(ts / w)
                    grid[i] = [grid.get(i, [0])[0] + 1]

        def at(i: int) -> float:
            return round(i * w, 6)

        d = self.data
        lat = []
        for (api,), grid in sorted(d["latency"].items(), key=_key):
            pts = [{"ts": at(i), **_lat_points(cell)} for i, cell in sorted(grid.items())]
            lat.append({"api_name": api, "points": pts})
        thr = [{"direction": dr, "topic": t,
                "points": [{"ts": at(i), "bytes": c[0], "records": c[1]} for i, c in sorted(grid.items())]}
               for (dr, t), grid in sorted(d["throughput"].items(), key=_key)]
        cg = client_group or {}
        lag = [{"client_id": cid, "group_id": (cg.get(cid) or (None, None))[1], "topic": t, "partition": p,
                "points": [{"ts": at(i), "lag": c[1], "high_watermark": c[2], "max_lag": c[3]}
                           for i, c in sorted(grid.items())]}
               for (cid, t, p), grid in sorted(d["lag"].items(), key=_key)]
        # the newest high watermark of each partition by bucket (from every lag series of it)
        hws: dict[tuple[Any, Any], dict[int, Cell]] = {}
        for (_cid, t, p), grid in d["lag"].items():
            per = hws.setdefault((t, p), {})
            for i, c in grid.items():
                old = per.get(i)
                if old is None or c[0] >= old[0]:
                    per[i] = c
        commits = []
        for (g, t, p), grid in sorted(d["commits"].items(), key=_key):
            seen = sorted(hws.get((t, p), {}).items())
            pts = []
            for i, c in sorted(grid.items()):
                hw = None
                for j, h in seen:  # the newest answer's high watermark at or before the commit's bucket
                    if j > i:
                        break
                    hw = h[2]
                pts.append({"ts": at(i), "committed_offset": c[1],
                            "committed_lag": hw - c[1] if hw is not None else None})
            commits.append({"group_id": g, "topic": t, "partition": p, "points": pts})
        errors = [{"error": e, "points": [{"ts": at(i), "count": c[0]} for i, c in sorted(grid.items())]}
                  for (e,), grid in sorted(d["errors"].items(), key=_key)]
        beats = [{"group_id": g, "points": [{"ts": at(i), "count": c[0]} for i, c in sorted(grid.items())]}
                 for (g,), grid in sorted(d["heartbeats"].items(), key=_key)]
        gev = [{"group_id": g, "kind": kind, "points": [{"ts": at(i), "count": c[0]} for i, c in sorted(grid.items())]}
               for (g, kind), grid in sorted(ev.items(), key=_key)]
        return {"bucket_ms": round(w * 1000, 6), "max_points": MAX_POINTS, "latency": lat, "throughput": thr,
                "lag": lag, "commits": commits, "errors": errors, "heartbeats": beats,
                "group_events": gev}


def _key(item: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
    """Sort keys with None and mixed types: by their text."""
    return tuple("" if x is None else str(x) for x in item[0])
