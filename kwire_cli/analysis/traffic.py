"""Latency by API, version, broker and client id; connections; who did what (the audit trail).

``Traffic.add`` counts one output row; ``merge`` adds another part's counts (positions comparable);
``latency``, ``connections`` and ``who`` give the summary's sections. Resources a request touches are
read from its body's top level: topic lists (``Topics``, ``TopicData``, ``TopicNames``), group ids
(``GroupId``, ``Groups``, ``GroupIds``) and ``TransactionalId``.
"""
from __future__ import annotations

from typing import Any

from kwire_cli.analysis.dist import Dist
from kwire_cli.analysis.names import endpoints
from kwire_cli.capture.names import topic_name
from kwire_cli.capture.summary import Facts, row_facts
from kwire_cli.codec.secrets import ENVELOPE
from kwire_cli.errors import KwireError
from kwire_cli.spec.registry import registry

MAX_NAMES = 1000  # topics, groups or transactional ids kept per connection and client id
MAX_CONNECTIONS = 2000  # connections listed (the first by position); later ones are counted together
MAX_LATENCY_KEYS = 5000  # (API, version, broker, client id) keys; past them client ids are "(other)"
OTHER = "(other connections)"
OVERFLOW = (None, OTHER, OTHER)


class Conn:
    """One connection's counts."""

    __slots__ = ("first", "last_pos", "last_ts", "requests", "responses", "request_bytes", "response_bytes",
                 "client_ids")

    def __init__(self, first: tuple[Any, float]) -> None:
        self.first = first  # (position, ts)
        self.last_pos, self.last_ts = first
        self.requests = 0
        self.responses = 0
        self.request_bytes = 0
        self.response_bytes = 0
        self.client_ids: dict[Any, Usage] = {}

    def merge(self, o: Conn) -> None:
        if o.first[0] < self.first[0]:
            self.first = o.first
        if o.last_pos > self.last_pos:
            self.last_pos, self.last_ts = o.last_pos, o.last_ts
        self.requests += o.requests
        self.responses += o.responses
        self.request_bytes += o.request_bytes
        self.response_bytes += o.response_bytes
        for cid, u in o.client_ids.items():
            mine = self.client_ids.get(cid)
            if mine is None:
                self.client_ids[cid] = u
            else:
                mine.merge(u)


TOPIC_LISTS = ("Topics", "TopicData", "TopicNames", "V3AndBelowTopics")
GROUP_LISTS = ("Groups", "GroupIds")
MAX_SHAPES = 4096  # bodies' key tuples whose lookups are kept (``_LOOK``)
Look = tuple[tuple[str, ...], bool, tuple[str, ...], bool, bool]
# a request body's keys, in order -> which of the keys ``Usage.touch`` reads it has: the same for
# every body of one API and version, so the keys a body lacks are not looked up row after row
_LOOK: dict[tuple[Any, ...], Look] = {}


# (specs folder, api key) -> the keys ``Usage.touch`` reads that the API's requests may have in some
# version (the spec's top-level fields): the keys a body lacks read as absent, so a look made from
# more keys than the body has counts the same
_LOOK_BY_API: dict[tuple[str, int], Look | None] = {}


def _look(body: Any) -> Look:
    return (tuple(k for k in TOPIC_LISTS if k in body), "GroupId" in body, tuple(k for k in GROUP_LISTS if k in body),
            "TransactionalId" in body or "V3AndBelowTransactionalId" in body, "Transactions" in body)


def api_look(key: Any) -> Look | None:
    """The look of every request of API ``key`` (None: by each body's keys: an unknown API, an
    Envelope whose body is the message it forwards)."""
    reg = registry()
    at = (reg.folder, key)
    if at in _LOOK_BY_API:
        return _LOOK_BY_API[at]
    look: Look | None = None
    if type(key) is int and key != ENVELOPE:
        try:
            look = _look({f.name for f in reg.api(key).request.fields})
        except KwireError:
            look = None
    _LOOK_BY_API[at] = look
    return look


class Usage:
    """What one client id did on one connection: requests per API, resources touched."""

    __slots__ = ("apis", "topics", "groups", "txns")

    def __init__(self) -> None:
        self.apis: dict[str, int] = {}
        self.topics: set[str] = set()
        self.groups: set[str] = set()
        self.txns: set[str] = set()

    def merge(self, o: Usage) -> None:
        for k, n in o.apis.items():
            self.apis[k] = self.apis.get(k, 0) + n
        for mine, theirs in ((self.topics, o.topics), (self.groups, o.groups), (self.txns, o.txns)):
            for x in theirs:
                if len(mine) < MAX_NAMES:
                    mine.add(x)

    def touch(self, r: dict[str, Any], body: dict[str, Any], look: Look | None = None) -> None:
        """The resources one request names (``look``: which keys to read; None: by the body's keys)."""
        if look is None:
            shape = tuple(body)
            look = _LOOK.get(shape)
            if look is None:
                look = _look(body)
                if len(_LOOK) < MAX_SHAPES:
                    _LOOK[shape] = look
        topic_keys, group, group_lists, txn, txns = look
        names = r.get("topic_names")
        for key in topic_keys:
            ts = body.get(key)
            if isinstance(ts, list):
                for t in ts:
                    if len(self.topics) >= MAX_NAMES:
                        break
                    if isinstance(t, dict):
                        self.topics.add(topic_name(t, names))
                    elif isinstance(t, str):
                        self.topics.add(t)
        if group:
            g = body.get("GroupId")
            if isinstance(g, str) and len(self.groups) < MAX_NAMES:
                self.groups.add(g)
        for key in group_lists:
            gs = body.get(key)
            if isinstance(gs, list):
                for x in gs:
                    if isinstance(x, dict):
                        x = x.get("GroupId", x.get("Group"))
                    if isinstance(x, str) and len(self.groups) < MAX_NAMES:
                        self.groups.add(x)
        if txn:
            tx = body.get("TransactionalId", body.get("V3AndBelowTransactionalId"))
            if isinstance(tx, str) and len(self.txns) < MAX_NAMES:
                self.txns.add(tx)
        txs = body.get("Transactions") if txns else None
        if isinstance(txs, list):
            for t in txs:
                tx = t.get("TransactionalId") if isinstance(t, dict) else None
                if isinstance(tx, str) and len(self.txns) < MAX_NAMES:
                    self.txns.add(tx)


class Traffic:
    """Latency per (API, version, broker, client id); per connection counts and usage."""

    def __init__(self) -> None:
        self.lat: dict[tuple[Any, ...], list[Any]] = {}  # key -> [Dist, errors, throttled]
        self.conns: dict[tuple[Any, ...], Conn] = {}  # (file, client, broker) -> counts
        self._looks: dict[Any, Look | None] = {}  # api key -> ``api_look``

    def add(self, r: dict[str, Any], pos: Any) -> None:
        self.count(r, pos, row_facts(r), r.get("ts"), None)

    def count(self, r: dict[str, Any], pos: Any, facts: Facts, ts: Any, pair: tuple[Any, Any] | None) -> None:
        """``add`` with the row's ``row_facts`` and time read by the caller; ``pair``: the
        (position, response time) tuple the summary keeps, if any (kept here too, not made again)."""
        kind, key, name, version, _error, body, size, lat, codes = facts
        get = r.get
        if kind == "response":
            client, broker = r["dst"], r["src"]  # (endpoints(r))
        elif kind == "request":
            client, broker = r["src"], r["dst"]
        else:
            client, broker = endpoints(r)
        ck = (get("file"), client, broker)
        conns = self.conns
        c = conns.get(ck)
        ts = ts or 0.0
        if c is None:
            if len(conns) >= MAX_CONNECTIONS:  # memory stays flat over many connections
                ck = OVERFLOW
                c = conns.get(ck)
            if c is None:
                c = conns[ck] = Conn((pos, ts))
            else:
                c.last_pos, c.last_ts = pos, ts
        else:
            c.last_pos, c.last_ts = pos, ts
        size = size or 0
        if kind == "request":
            c.requests += 1
            c.request_bytes += size
            cid = get("client_id")
            u = c.client_ids.get(cid)
            if u is None:
                u = c.client_ids[cid] = Usage()
            api = name or "?"
            apis = u.apis
            apis[api] = apis.get(api, 0) + 1
            if isinstance(body, dict):
                look = self._looks.get(key)
                if look is None and key not in self._looks:
                    look = self._looks[key] = api_look(key)
                u.touch(r, body, look)
        elif kind == "response":
            c.responses += 1
            c.response_bytes += size
            if lat is not None:
                lk = (key, name or "?", version, broker, get("client_id"))
                e = self.lat.get(lk)
                if e is None:
                    e = self._new_lat(lk)
                if pair is None:
                    e[0].add(pos, lat)
                else:
                    e[0].add_pair(pair)
                if codes:
                    e[1] += 1
                if isinstance(body, dict):
                    t = body.get("ThrottleTimeMs")
                    if isinstance(t, int) and t > 0:
                        e[2] += 1

    def _new_lat(self, key: tuple[Any, ...]) -> list[Any]:
        """The [response times, errors, throttled] of a latency key, made on first use; past
        ``MAX_LATENCY_KEYS`` keys, its client id's is "(other)"."""
        if len(self.lat) >= MAX_LATENCY_KEYS:
            key = key[:4] + ("(other)",)
            e = self.lat.get(key)
            if e is not None:
                return e
        e = self.lat[key] = [Dist(), 0, 0]
        return e

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_looks"] = {}  # (from the specs where it is unpickled)
        return state

    def merge(self, o: Traffic) -> None:
        for key, d in o.lat.items():
            mine = self.lat.get(key)
            if mine is None:
                self.lat[key] = [d[0], d[1], d[2]]
            else:
                mine[0].merge(d[0])
                mine[1] += d[1]
                mine[2] += d[2]
        for ck, c in o.conns.items():
            m = self.conns.get(ck)
            if m is None:
                self.conns[ck] = c
            else:
                m.merge(c)
        listed = [ck for ck in self.conns if ck != OVERFLOW]
        if len(listed) > MAX_CONNECTIONS:  # the first by position stay listed, as one part would list them
            listed.sort(key=lambda ck: self.conns[ck].first[0])
            for ck in listed[MAX_CONNECTIONS:]:
                c = self.conns.pop(ck)
                m = self.conns.get(OVERFLOW)
                if m is None:
                    self.conns[OVERFLOW] = c
                else:
                    m.merge(c)

    def latency(self) -> list[dict[str, Any]]:
        out = []
        for key in sorted(self.lat, key=lambda k: (k[1], k[2] if k[2] is not None else -1, k[3], str(k[4]))):
            api_key, name, version, broker, cid = key
            e = {"api_key": api_key, "api_name": name, "api_version": version, "broker": broker, "client_id": cid}
            d, errors, throttled = self.lat[key]
            e.update(d.to_dict())
            e["errors"], e["throttled"] = errors, throttled
            out.append(e)
        return out

    def connections(self, principals: dict[tuple[Any, ...], dict[str, Any]],
                    tls: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """``principals``: (client, broker) -> the auth section's connection entry; ``tls``:
        "client broker" endpoints -> TLS version."""
        out = []
        for (file, client, broker), c in sorted(self.conns.items(), key=lambda kv: (kv[0] == OVERFLOW, kv[1].first[0])):
            a = principals.get((client, broker)) or {}
            out.append({"client": client, "broker": broker, "file": file,
                        "client_ids": sorted(c.client_ids, key=str),
                        "first_ts": c.first[1], "last_ts": c.last_ts, "requests": c.requests,
                        "responses": c.responses, "request_bytes": c.request_bytes,
                        "response_bytes": c.response_bytes,
                        "tls_version": (tls or {}).get(f"{client} {broker}"),
                        "sasl_mechanism": a.get("mechanism"), "principal": a.get("principal")})
        return out

    def who(self, principals: dict[tuple[Any, ...], dict[str, Any]]) -> list[dict[str, Any]]:
        acc: dict[tuple[Any, ...], dict[str, Any]] = {}
        for (_file, client, broker), c in self.conns.items():
            p = (principals.get((client, broker)) or {}).get("principal")
            for cid, u in c.client_ids.items():
                w = acc.get((p, cid))
                if w is None:
                    w = acc[(p, cid)] = {"principal": p, "client_id": cid, "connections": 0, "apis": {},
                                         "topics": set(), "groups": set(), "transactional_ids": set()}
                w["connections"] += 1
                for k, n in u.apis.items():
                    w["apis"][k] = w["apis"].get(k, 0) + n
                w["topics"] |= u.topics
                w["groups"] |= u.groups
                w["transactional_ids"] |= u.txns
        out = []
        for pk in sorted(acc, key=lambda pk: (str(pk[0]), str(pk[1]))):
            w = acc[pk]
            w["apis"] = dict(sorted(w["apis"].items()))
            for s in ("topics", "groups", "transactional_ids"):
                w[s] = sorted(w[s])
            out.append(w)
        return out
