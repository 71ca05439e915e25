"""The summary of `kwire pcap --summary`, counted from output rows as they stream past.

``Summary.add`` counts one row (``kwire_cli.capture.rows``); ``Summary.merge`` adds the summary of
another part of the same capture, exactly (spark-decode: each task counts its own rows, the driver
merges them); ``Summary.to_dict`` is the document `kwire pcap --summary --format json` prints.
Undecodable frames are counted by their ``error_kind`` (a typed error's kind), never by message text.
"""
from __future__ import annotations

import math
from typing import Any

from kwire_cli.capture.auth import SASL_AUTHENTICATE, SASL_HANDSHAKE, SASL_TOKEN, AuthSummary
from kwire_cli.capture.bodyfields import may_hold_records, records_paths
from kwire_cli.capture.events import Damage, Note
from kwire_cli.capture.reservoir import first_by_position
from kwire_cli.capture.rows import DECODE_ERROR
from kwire_cli.errors import KwireError
from kwire_cli.records.stats import batch_stats, count_records_field, new_batch_stats
from kwire_cli.spec.registry import registry


def damage_entry(d: Damage, file: Any = None) -> dict[str, Any]:
    """A damage event as the summary lists it (``file``: instead of ``d.file``). Its ``frame`` is
    the number of the packet where it was noticed (None: no one packet)."""
    return {"file": d.file if file is None else file, "frame": d.packet, "conn": d.conn, "kind": d.kind,
            "bytes": d.bytes, "detail": d.detail}


def note_entry(n: Note, file: Any = None) -> dict[str, Any]:
    """A note (a TLS handshake, alert or key update) as the summary lists it."""
    return {"file": n.file if file is None else file, "frame": n.packet, "conn": n.conn, "kind": n.kind,
            "detail": n.detail}


def tls_not_decrypted_notes(not_decrypted: dict[str, int], have_keys: bool) -> list[str]:
    """One line per TLS version and server whose connections were not decrypted for want of keys
    (``CaptureStats.tls_not_decrypted``), saying what to give: ``have_keys``, a key log was read."""
    out = []
    for where, n in sorted(not_decrypted.items()):
        conns = "1 connection" if n == 1 else f"{n} connections"
        if have_keys:
            why = "its client random is not in the key log" if n == 1 else "their client randoms are not in the key log"
            out.append(f"{where}: {conns} not decrypted: {why}")
        else:
            out.append(f"{where}: {conns} not decrypted; give --tls-keylog FILE (the client's SSLKEYLOGFILE)")
    return out


def tls_section(stats: dict[str, Any], notes: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The summary's ``tls`` section: TLS connections, how many were decrypted, the versions and
    cipher suites, the connections not decrypted for want of keys per version and server, and each
    connection's handshake (from the capture counters and the notes)."""
    if not stats.get("tls_connections"):
        return None
    out: dict[str, Any] = {"connections": stats["tls_connections"], "decrypted": stats.get("tls_decrypted", 0),
                           "record_bytes": stats.get("tls_bytes", 0), "plaintext_bytes": stats.get("tls_plaintext", 0),
                           "sessions": dict(sorted((stats.get("tls_sessions") or {}).items())),
                           "not_decrypted": dict(sorted((stats.get("tls_not_decrypted") or {}).items()))}
    if notes is not None:
        out["handshakes"] = [{"conn": n["conn"], "detail": n["detail"]} for n in notes if n["kind"] == "tls"][:200]
    return out


def what_if_for_row(r: dict[str, Any]) -> dict[str, Any] | None:
    """`kwire diff --what-if-tagged ErrorCode,ErrorMessage` for one decoded response row."""
    if r.get("kind") != "response" or r.get("error") is not None or r.get("body") is None:
        return None
    from kwire_cli.whatif import what_if_tagged
    try:
        spec = registry().api(r["api_key"]).response
        return what_if_tagged(spec, r["api_version"], r["body"], size=r.get("size"))
    except KwireError:
        return None


# (specs folder, api key, version) of responses with no tagged fields: the what-if does not apply
# (known once the first such response is sized; keys and versions the specs know, so few)
_NOT_FLEXIBLE: set[tuple[str, int, int]] = set()
_WHAT_IF_TOTALS: dict[str, Any] = {}  # "f": whatif.what_if_totals, imported at the first response that needs it
MAX_SHAPES = 4096  # (api key, name, version, kind) of rows whose lookups a summary keeps (``Summary._shape``)


_UNKNOWN: Any = object()
# a row's fields that the summary and every analysis section read: (kind, api key, api name, api
# version, error, body, size, latency_ms, error_codes), read once per row (``row_facts``)
Facts = tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any]


def row_facts(r: dict[str, Any]) -> Facts:
    """The ``Facts`` of a row."""
    get = r.get
    return (r["kind"], get("api_key"), get("api_name"), get("api_version"), get("error"), get("body"), get("size"),
            get("latency_ms"), get("error_codes"))


def count_batches(r: dict[str, Any], into: dict[str, Any], at: Any = _UNKNOWN) -> None:
    """``records.stats.batch_stats`` of a row's body, the records fields found where the spec puts
    them (``bodyfields.records_paths``, or ``at``: its answer for the row) instead of by a walk of
    the whole body; the walk where the spec cannot say."""
    body = r["body"]
    if at is _UNKNOWN:
        at = records_paths(r)
    if at is None:
        batch_stats(body, into)
        return
    for path in at:
        if len(path) == 3 and isinstance(body, dict):
            _count_three(body, path, into)
        else:
            _count_from(body, path, into)


def _count_from(node: Any, path: tuple[str, ...], into: dict[str, Any]) -> None:
    """The records fields at ``path`` under ``node`` (lists looked through), counted in order."""
    level = [node]
    for name in path[:-1]:
        found: list[Any] = []
        _step(level, name, found)
        level = found
    found = []
    _step(level, path[-1], found)
    for v in found:
        _count_value(v, into)


def _count_value(v: Any, into: dict[str, Any]) -> None:
    """One value where the spec puts a records field, as ``batch_stats``' walk counts it."""
    if isinstance(v, dict) and "batches" in v and "partial_trailing_batch" in v:
        if v["batches"] or v["partial_trailing_batch"] is not None:  # (else nothing to count)
            count_records_field(v, into)
    elif isinstance(v, (dict, list)):
        batch_stats(v, into)  # (not a decoded records field: the walk would look inside)


def _count_three(body: dict[str, Any], path: tuple[str, ...], into: dict[str, Any]) -> None:
    """``_count_from`` for paths of three names (topics, partitions, records: Produce requests,
    Fetch answers), without its lists of values where the body is lists of dicts."""
    a, b, c = path
    ts = body.get(a)
    if type(ts) is not list:
        if ts is not None:
            _count_from(ts, (b, c), into)
        return
    for t in ts:
        if type(t) is not dict:
            _count_from(t, (b, c), into)
            continue
        ps = t.get(b)
        if type(ps) is not list:
            if ps is not None:
                _count_from(ps, (c,), into)
            continue
        for p in ps:
            if type(p) is not dict:
                _count_from(p, (c,), into)
                continue
            v = p.get(c)
            if v is None:
                continue
            if type(v) is dict and "partial_trailing_batch" in v:
                bs = v.get("batches", v)
                if bs is not v:
                    if bs or v["partial_trailing_batch"] is not None:
                        count_records_field(v, into)
                    continue
            _count_value(v, into)


def _step(nodes: list[Any], name: str, out: list[Any]) -> None:
    """The values of ``name`` in the dicts among ``nodes`` (lists in them looked through), in order."""
    for n in nodes:
        if isinstance(n, dict):
            v = n.get(name)
            if v is not None:
                out.append(v)
        elif isinstance(n, list):
            _step(n, name, out)


def _percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least a fraction ``q`` of the values at or below it."""
    if not sorted_values:
        return None
    k = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[k]


class Summary:
    """Aggregates output rows as they stream past; memory grows with distinct keys, not frames."""

    RESERVOIR = 100_000  # latencies kept per (api, version) for percentiles

    def __init__(self) -> None:
        self.frames = 0
        self.decoded = 0
        self.undecodable: dict[str, int] = {}
        self.with_violations = 0  # decoded frames that break a rule of the format (lenient decoding)
        self.violations: dict[str, int] = {}  # rule -> violations of it
        self.apis: dict[tuple[Any, ...], list[Any]] = {}  # (name, version, kind) -> [count, bytes, latencies, errors]
        self.errors: dict[str, int] = {}
        self.clients: dict[str, dict[str, Any]] = {}
        self.advertised: dict[str, dict[int, tuple[int, int]]] = {}
        self.requests_seen: dict[tuple[Any, ...], int] = {}  # (broker, client, api_key, api_name, version) -> n
        self.what_if = {"responses": 0, "applicable": 0, "bytes_now": 0, "bytes_tagged": 0, "saving": 0}
        self.record_batches = new_batch_stats()
        # where things were first / last seen, so that partial summaries merge exactly (``merge``)
        self.error_first: dict[str, Any] = {}
        self.advertised_at: dict[str, Any] = {}
        self.auth = AuthSummary()  # SASL authentications per connection (the "auth" section)
        self._shapes: dict[tuple[Any, ...], list[Any]] = {}  # (api key, name, version, kind) -> ``_shape``
        self._advertised_keys: dict[str, Any] = {}  # broker -> the ApiKeys its ``advertised`` ranges were made of

    def add(self, r: dict[str, Any], pos: Any = None) -> None:
        """Count one row. ``pos``: its place in the capture's row order (default: the order of
        ``add`` calls); summaries of parts of one capture, added with comparable positions,
        ``merge`` into exactly the summary of the whole."""
        if pos is None:
            pos = self.frames
        self.count(r, pos, row_facts(r))

    def count(self, r: dict[str, Any], pos: Any, facts: Facts) -> tuple[Any, Any] | None:
        """``add`` with the row's ``row_facts`` read by the caller (once for every section).
        Returns the (position, response time) pair kept for the latency percentiles (None: none)."""
        kind, key, api_name, version, error, body, size, lat, codes = facts
        self.frames += 1
        get = r.get
        shape = self._shapes.get((key, api_name, version, kind))
        if shape is None:
            shape = self._shape(key, api_name, version, kind)
        if shape[1]:
            self.auth.add(r, pos)
        a = shape[0]  # [count, bytes, latencies, errors]
        a[0] += 1
        if size:
            a[1] += size
        if error is not None:
            k = get("error_kind") or DECODE_ERROR
            self.undecodable[k] = self.undecodable.get(k, 0) + 1
            a[3] += 1
        else:
            self.decoded += 1
        vs = get("violations")
        if vs:
            self.with_violations += 1
            for v in vs:
                self.violations[v["rule"]] = self.violations.get(v["rule"], 0) + 1
        pair = None
        if lat is not None and len(a[2]) < self.RESERVOIR:
            pair = (pos, lat)
            a[2].append(pair)
        if body is not None and shape[2]:
            at = shape[5]
            if at is _UNKNOWN:
                at = shape[5] = records_paths(r)
            count_batches(r, self.record_batches, at)
        if codes:
            errors = self.errors
            for name in codes:
                n = errors.get(name)
                if n is None:
                    errors[name] = 1
                    self.error_first[name] = pos
                else:
                    errors[name] = n + 1
        if error is not None:
            return pair
        if kind == "request":
            cid = get("client_id")
            cidk = cid if cid is not None else "(null)"
            c = self.clients.get(cidk)
            if c is None:
                c = self.clients[cidk] = {"requests": 0, "versions": {}}
            c["requests"] += 1
            versions = c["versions"]
            vs = versions.get(api_name)
            if vs is None:
                versions[api_name] = [version]
            elif version not in vs:
                vs.append(version)
                vs.sort()
            k2 = (r["dst"], cid, key, api_name, version)
            seen = self.requests_seen
            seen[k2] = seen.get(k2, 0) + 1
        elif kind == "response":
            if shape[3]:  # ApiVersions
                self._advertised(r, body, pos)
            if body is not None:
                if shape[4] and size is not None:
                    self.what_if["responses"] += 1  # (what_if_totals: not applicable)
                else:
                    self._what_if(shape, key, version, size, body)
        return pair

    def _advertised(self, r: dict[str, Any], body: Any, pos: Any) -> None:
        """An ApiVersions answer: the versions its broker advertises, the last answer's by position."""
        keys = body.get("ApiKeys") or []
        src = r["src"]
        if keys and keys == self._advertised_keys.get(src):  # the ranges it gave last time: only the position
            if body.get("ErrorCode", 0) == 0 and pos >= self.advertised_at[src]:
                self.advertised_at[src] = pos
            return
        ranges = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in keys}
        if ranges and body.get("ErrorCode", 0) == 0:
            at = self.advertised_at.get(src)
            if at is None or pos >= at:
                self.advertised[src] = ranges
                self.advertised_at[src] = pos
                self._advertised_keys[src] = keys

    def _shape(self, key: Any, api_name: Any, version: Any, kind: Any) -> list[Any]:
        """What ``add`` needs of rows of one API, version and kind, looked up once: [the ``apis``
        bucket, SASL (``auth``), may hold records, an ApiVersions answer, a response with no
        tagged fields (the what-if does not apply), the records paths (``records_paths``, on first use)]."""
        bucket_key = (api_name or "?", version, kind)
        a = self.apis.get(bucket_key)
        if a is None:
            a = self.apis[bucket_key] = [0, 0, [], 0]
        sasl = key in (SASL_AUTHENTICATE, SASL_HANDSHAKE) or kind == SASL_TOKEN
        row = {"kind": kind, "api_key": key, "api_version": version}
        not_flexible = kind == "response" and (registry().folder, key, version) in _NOT_FLEXIBLE
        shape = [a, sasl, may_hold_records(row), api_name == "ApiVersions", not_flexible, _UNKNOWN]
        if len(self._shapes) < MAX_SHAPES:
            self._shapes[(key, api_name, version, kind)] = shape
        return shape

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_shapes"] = {}  # (made again where the summary is unpickled: they hold its own buckets)
        state["_advertised_keys"] = {}
        return state

    def merge(self, o: Summary) -> Summary:
        """Add another part's summary (positions of both comparable): the result is the summary
        ``add`` would have built over both parts' rows in position order."""
        self.frames += o.frames
        self.decoded += o.decoded
        self.auth.merge(o.auth)
        for k, n in o.undecodable.items():
            self.undecodable[k] = self.undecodable.get(k, 0) + n
        self.with_violations += o.with_violations
        for k, n in o.violations.items():
            self.violations[k] = self.violations.get(k, 0) + n
        for key, b in o.apis.items():
            a = self.apis.get(key)
            if a is None:
                a = self.apis[key] = [0, 0, [], 0]
            a[0] += b[0]
            a[1] += b[1]
            a[3] += b[3]
            lat = first_by_position(a[2], b[2], self.RESERVOIR)  # the first RESERVOIR of both, by position
            if lat is not a[2]:
                a[2][:] = lat
        for name, n in o.errors.items():
            at = o.error_first[name]
            if name in self.errors:
                self.errors[name] += n
                self.error_first[name] = min(self.error_first[name], at)
            else:
                self.errors[name] = n
                self.error_first[name] = at
        for cid, c in o.clients.items():
            m = self.clients.setdefault(cid, {"requests": 0, "versions": {}})
            m["requests"] += c["requests"]
            for api, vs in c["versions"].items():
                m["versions"][api] = sorted(set(m["versions"].get(api, [])) | set(vs))
        for seen, n in o.requests_seen.items():
            self.requests_seen[seen] = self.requests_seen.get(seen, 0) + n
        for src, ranges in o.advertised.items():
            at = o.advertised_at[src]
            mine = self.advertised_at.get(src)
            if mine is None or at >= mine:
                self.advertised[src] = ranges
                self.advertised_at[src] = at
                self._advertised_keys.pop(src, None)
        for k, v in o.what_if.items():
            self.what_if[k] = self.what_if.get(k, 0) + v
        mine = self.record_batches
        for k, v in o.record_batches.items():
            if k == "compression":
                for c, n in v.items():
                    mine[k][c] = mine[k].get(c, 0) + n
            else:
                mine[k] += v
        return self

    def add_what_if(self, r: dict[str, Any]) -> None:
        """Count one decoded response into the ErrorCode/ErrorMessage what-if total (the sums of
        ``what_if_for_row``'s answer, by ``whatif.what_if_totals``)."""
        if r.get("kind") != "response" or r.get("error") is not None or r.get("body") is None:
            return
        key, version, size = r["api_key"], r["api_version"], r.get("size")
        if size is not None and (registry().folder, key, version) in _NOT_FLEXIBLE:
            self.what_if["responses"] += 1  # (what_if_totals: not applicable)
            return
        self._what_if(None, key, version, size, r["body"])

    def _what_if(self, shape: list[Any] | None, key: Any, version: Any, size: Any, body: Any) -> None:
        reg = registry()
        try:
            spec = reg.api(key).response
        except KwireError:
            return
        if size is not None and not spec.flexible(version):  # (what_if_totals' answer: not applicable)
            w = None
        else:
            totals = _WHAT_IF_TOTALS.get("f")
            if totals is None:
                from kwire_cli.whatif import what_if_totals  # (imports the records encoder: only when needed)
                totals = _WHAT_IF_TOTALS["f"] = what_if_totals
            try:
                w = totals(spec, version, body, size=size)
            except KwireError:
                return
        if w is None and not spec.flexible(version):
            _NOT_FLEXIBLE.add((reg.folder, key, version))
            if shape is not None:
                shape[4] = True
        self.what_if["responses"] += 1
        if w is not None:
            self.what_if["applicable"] += 1
            self.what_if["bytes_now"] += w[0]
            self.what_if["bytes_tagged"] += w[1]
            self.what_if["saving"] += w[2]

    def audit(self) -> list[dict[str, Any]]:
        """Requests whose version is outside what that broker advertised in this capture."""
        out = []
        for (broker, cid, key, name, version), n in sorted(self.requests_seen.items(), key=lambda kv: str(kv[0])):
            adv = self.advertised.get(broker)
            if adv is None or key == 18:  # ApiVersions itself may probe any version (KIP-511)
                continue
            rng = adv.get(key)
            if rng is None or not rng[0] <= version <= rng[1]:
                out.append({"broker": broker, "client_id": cid, "api_key": key, "api_name": name,
                            "api_version": version, "requests": n,
                            "advertised": list(rng) if rng else None})
        return out

    def to_dict(self, stats: dict[str, Any] | None = None, damage: list[dict[str, Any]] | None = None,
                notes: list[dict[str, Any]] | None = None,
                damage_kinds: dict[str, list[int]] | None = None) -> dict[str, Any]:
        """The summary document. ``damage``: the damage events (the first 200 are listed); their
        counts by kind are made from them, or given as ``damage_kinds`` (kind -> [events, bytes]
        of all events, when only the first ones are kept: ``Conversation.damage_kinds``)."""
        apis = []
        by_api = sorted(self.apis.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or -1, kv[0][2]))
        for (name, version, kind), a in by_api:
            lat = sorted(v for _, v in a[2])
            apis.append({"api_name": name, "api_version": version, "kind": kind, "count": a[0],
                         "bytes": a[1], "undecodable": a[3],
                         "latency_p50_ms": _percentile(lat, 0.5), "latency_p99_ms": _percentile(lat, 0.99)})
        out = {
            "frames": self.frames, "decoded": self.decoded,
            "undecodable": sum(self.undecodable.values()),
            "undecodable_by_reason": dict(sorted(self.undecodable.items())),
            "reconciled": self.frames == self.decoded + sum(self.undecodable.values()),
            "decoded_with_violations": self.with_violations,
            "violations_by_rule": dict(sorted(self.violations.items())),
            "apis": apis,
            "error_codes": dict(sorted(self.errors.items(), key=lambda kv: (-kv[1], self.error_first[kv[0]]))),
            "clients": {k: self.clients[k] for k in sorted(self.clients, key=str)},
            "negotiation_audit": self.audit(),
            "advertised_by": sorted(self.advertised),
            "what_if_tagged_error_fields": self.what_if,
            "record_batches": dict(self.record_batches,
                                   compression=dict(sorted(self.record_batches["compression"].items()))),
        }
        auth = self.auth.to_dict()
        if auth is not None:
            out["auth"] = auth
        if stats is not None:
            out["capture"] = stats
            tls = tls_section(stats, notes)
            if tls is not None:
                out["tls"] = tls
        if damage is not None:
            kinds: dict[str, dict[str, Any]] = {}
            if damage_kinds is not None:
                for kind, (n, b) in damage_kinds.items():
                    kinds[kind] = {"events": n, "bytes": b}
            else:
                for d in damage:
                    k = kinds.setdefault(d["kind"], {"events": 0, "bytes": 0})
                    k["events"] += 1
                    k["bytes"] += d["bytes"]
            out["damage"] = kinds
            out["damage_events"] = damage[:200]
        return out


class RunCounts(Summary):
    """Only the counts a run's diagnostics read (frames, undecodable frames by kind, the record
    batches counted, cut at a cap among them), for an output that does not hold the summary (JSON
    lines, the table, fields, records): the rest of the summary and the analysis are not counted.
    ``to_dict`` gives the summary's document with those counts and everything else empty."""

    def add(self, r: dict[str, Any], pos: Any = None) -> None:  # noqa: ARG002 (no first-seen positions kept)
        self.frames += 1
        get = r.get
        if get("error") is not None:
            k = get("error_kind") or DECODE_ERROR
            self.undecodable[k] = self.undecodable.get(k, 0) + 1
        else:
            self.decoded += 1
        if get("body") is not None:
            at = (get("api_key"), get("api_version"), get("kind"))
            holds = self._holds.get(at)
            if holds is None:
                holds = (may_hold_records(r), records_paths(r))
                if len(self._holds) < MAX_SHAPES:
                    self._holds[at] = holds
            if holds[0]:
                count_batches(r, self.record_batches, holds[1])

    def __init__(self) -> None:
        super().__init__()
        # (api key, version, kind) -> (may hold records, where: ``records_paths``)
        self._holds: dict[tuple[Any, ...], tuple[bool, Any]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_holds"] = {}
        return state
