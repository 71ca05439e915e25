"""Decoded Kafka conversations from capture events: one record per frame, and the summary.

The capture layers below give `KafkaFrame`s (paired by correlation id) and `Damage`; this layer
runs the codec on each frame and adds what only a whole conversation knows: the client id of a
response (from its request), topic names for topic ids (from Metadata answers seen earlier),
the consumer protocol inside JoinGroup/SyncGroup, and per-capture aggregates.

A record is a plain dict with the keys `kwire pcap --format jsonl` writes (see RECORD_KEYS);
the summary is computed from records alone, so the Spark job can compute the same one with
aggregations over the same rows.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable, Iterator

from kwire_cli.capture.events import Damage, KafkaFrame
from kwire_cli.codec.embedded import consumer_protocol
from kwire_cli.codec.message import decode_request, decode_response
from kwire_cli.errors import KwireError
from kwire_cli.spec.registry import registry

RECORD_KEYS = ("file", "frame", "ts", "src", "dst", "kind", "api_key", "api_name", "api_version",
               "correlation_id", "client_id", "size", "latency_ms", "header", "body", "error_codes",
               "error")
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_MAX_OPEN = 10000  # remembered requests per connection (client id, group protocol type)


def error_kind(message: str | None) -> str | None:
    """A short, stable reason class for an undecodable frame (for summaries)."""
    if message is None:
        return None
    m = message
    if m.startswith("internal error"):
        return "internal-error"
    if m.startswith("unpaired response"):
        return "unpaired-response"
    if "unknown API key" in m:
        return "unknown-api-key"
    if "is not a valid version" in m:
        return "unknown-version"
    if "trailing bytes" in m:
        return "trailing-bytes"
    return "decode-error"


def error_codes(body: Any) -> list[str]:
    """Names of the non-zero error codes anywhere in a body (fields named *ErrorCode)."""
    from kwire_cli.protocol_errors import error_name
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k.endswith("ErrorCode") and isinstance(v, int) and not isinstance(v, bool):
                    if v != 0:
                        name = error_name(v)
                        if name not in found:
                            found.append(name)
                elif isinstance(v, (dict, list)) and k != "Records":
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(body)
    return found


def batch_stats(body: Any, into: dict) -> dict:
    """Add the record batches of a decoded body to ``into`` (see ``new_batch_stats``): batches,
    records, compression codecs, batches whose CRC does not match, batches that did not decode, and
    records fields ending in a partial batch (normal in Fetch answers). Records kept as hex
    (--raw-records) are not counted."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, dict) and "batches" in v and "partial_trailing_batch" in v:
                    _count(v)  # a records field, as kwire_cli.records decodes it
                elif isinstance(v, (dict, list)):
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    def _count(field: dict) -> None:
        if field.get("partial_trailing_batch") is not None:
            into["partial_trailing_batches"] += 1
        codecs = into["compression"]
        for b in field["batches"]:
            into["batches"] += 1
            into["records"] += len(b.get("Records") or b.get("Messages") or ())
            c = b.get("Compression")
            if c is not None:
                codecs[c] = codecs.get(c, 0) + 1
            if b.get("CrcValid") is False:
                into["crc_invalid"] += 1
            if "error" in b:
                into["batch_errors"] += 1

    walk(body)
    return into


def new_batch_stats() -> dict:
    return {"batches": 0, "records": 0, "compression": {}, "crc_invalid": 0, "batch_errors": 0,
            "partial_trailing_batches": 0}


def _topic_ids(node: Any, out: set) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "TopicId" and isinstance(v, str) and v != ZERO_UUID:
                out.add(v)
            elif isinstance(v, (dict, list)) and k != "Records":
                _topic_ids(v, out)
    elif isinstance(node, list):
        for x in node:
            _topic_ids(x, out)


class Conversation:
    """Turns capture events into records, keeping only per-connection open-request state."""

    def __init__(self, records_mode: str | None = None):
        self.records_mode = records_mode
        self.topic_names: dict[str, str] = {}
        self.open: dict[str, OrderedDict] = {}  # conn -> corr -> (client_id, protocol_type)
        self.damage: list[dict] = []

    def _remember(self, conn: str, corr: int, info: tuple) -> None:
        od = self.open.setdefault(conn, OrderedDict())
        od[corr] = info
        if len(od) > _MAX_OPEN:
            od.popitem(last=False)

    def record(self, f: KafkaFrame) -> dict:
        rec: dict[str, Any] = {
            "file": f.file, "frame": f.frame, "ts": f.ts, "src": f.src, "dst": f.dst, "kind": f.kind,
            "api_key": f.api_key, "api_name": None, "api_version": f.api_version,
            "correlation_id": f.correlation_id, "client_id": None, "size": f.size,
            "latency_ms": None if f.latency is None else round(f.latency * 1000.0, 3),
            "header": None, "body": None, "error_codes": [], "error": None,
        }
        if f.api_key is not None:
            try:
                rec["api_name"] = registry().api(f.api_key).name
            except KwireError:
                rec["api_name"] = f"UNKNOWN({f.api_key})"
        try:
            if f.kind == "request":
                msg = decode_request(f.data, size_prefixed=False, records=self.records_mode)
                rec["api_key"], rec["api_name"], rec["api_version"] = msg.api_key, msg.api_name, msg.api_version
                rec["client_id"] = msg.header.get("ClientId")
                rec["correlation_id"] = msg.header["CorrelationId"]
                if f.acks != 0:
                    self._remember(f.conn, rec["correlation_id"],
                                   (rec["client_id"], msg.body.get("ProtocolType")))
            else:
                info = self.open.get(f.conn, {}).pop(f.correlation_id, (None, None)) \
                    if f.correlation_id is not None else (None, None)
                rec["client_id"] = info[0]
                if f.api_key is None:
                    raise KwireError(f"unpaired response: no request with correlation id "
                                     f"{f.correlation_id} was seen on {f.conn}")
                msg = decode_response(f.data, f.api_key, f.api_version, size_prefixed=False,
                                      records=self.records_mode)
            rec["header"], rec["body"] = msg.header, msg.body
        except Exception as e:  # one frame's failure never stops the capture
            if not isinstance(e, KwireError):  # a kwire bug: say so, keep going
                rec["error"] = f"internal error: {type(e).__name__}: {e}"
                return rec
            rec["error"] = str(e)
            decoded = getattr(e, "decoded", None)  # complete message followed by stray bytes
            if decoded is None:
                return rec
            rec["api_version"] = decoded.api_version
            rec["header"], rec["body"] = decoded.header, decoded.body
            if f.kind == "request":
                rec["client_id"] = decoded.header.get("ClientId")
        body = rec["body"]
        rec["error_codes"] = error_codes(body)
        name = rec["api_name"]
        if f.kind == "response" and name in ("Metadata", "CreateTopics", "DescribeTopicPartitions"):
            for t in body.get("Topics") or []:
                tid, tname = t.get("TopicId"), t.get("Name")
                if tid and tid != ZERO_UUID and tname:
                    self.topic_names[tid] = tname
        ids: set = set()
        _topic_ids(body, ids)
        if ids:
            rec["topic_names"] = {i: self.topic_names.get(i) for i in sorted(ids)}
        if name in ("JoinGroup", "SyncGroup"):
            ptype = body.get("ProtocolType")
            if ptype is None and f.kind == "response":
                ptype = info[1]
            embedded = consumer_protocol(name, f.kind, body, ptype)
            if embedded:
                rec["embedded"] = embedded
        return rec

    def records(self, events: Iterable[KafkaFrame | Damage]) -> Iterator[dict]:
        for ev in events:
            if ev.__class__ is KafkaFrame:
                yield self.record(ev)
            else:
                self.damage.append({"file": ev.file, "frame": ev.frame, "conn": ev.conn, "kind": ev.kind,
                                    "bytes": ev.bytes, "detail": ev.detail})


# --------------------------------------------------------------------------------- summary

def what_if_for_record(r: dict) -> dict | None:
    """`kwire diff --what-if-tagged ErrorCode,ErrorMessage` for one decoded response record."""
    if r.get("kind") != "response" or r.get("error") is not None or r.get("body") is None:
        return None
    from kwire_cli.whatif import what_if_tagged
    try:
        spec = registry().api(r["api_key"]).response
        return what_if_tagged(spec, r["api_version"], r["body"], size=r.get("size"))
    except KwireError:
        return None


def _percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile, as Spark's percentile over a small exact set would give."""
    if not sorted_values:
        return None
    k = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[k]


class Summary:
    """Aggregates records as they stream past; memory grows with distinct keys, not frames."""

    RESERVOIR = 100_000  # latencies kept per (api, version) for percentiles

    def __init__(self) -> None:
        self.frames = 0
        self.decoded = 0
        self.undecodable: dict[str, int] = {}
        self.apis: dict[tuple, dict] = {}
        self.errors: dict[str, int] = {}
        self.clients: dict[str, dict] = {}
        self.advertised: dict[str, dict[int, tuple[int, int]]] = {}
        self.requests_seen: dict[tuple, int] = {}  # (broker, client, api_key, api_name, version) -> n
        self.what_if = {"responses": 0, "applicable": 0, "bytes_now": 0, "bytes_tagged": 0, "saving": 0}
        self.record_batches = new_batch_stats()
        # where things were first / last seen, so that partial summaries merge exactly (``merge``)
        self.error_first: dict[str, Any] = {}
        self.advertised_at: dict[str, Any] = {}

    def add(self, r: dict, pos: Any = None) -> None:
        """Count one record. ``pos``: its place in the capture's record order (default: the order
        of ``add`` calls); summaries of parts of one capture, added with comparable positions,
        ``merge`` into exactly the summary of the whole."""
        if pos is None:
            pos = self.frames
        self.frames += 1
        if r.get("error") is not None:
            k = error_kind(r["error"])
            self.undecodable[k] = self.undecodable.get(k, 0) + 1
        else:
            self.decoded += 1
        key = (r.get("api_name") or "?", r.get("api_version"), r["kind"])
        a = self.apis.get(key)
        if a is None:
            a = self.apis[key] = {"count": 0, "bytes": 0, "latencies": [], "errors": 0}
        a["count"] += 1
        a["bytes"] += r.get("size") or 0
        if r.get("error") is not None:
            a["errors"] += 1
        lat = r.get("latency_ms")
        if lat is not None and len(a["latencies"]) < self.RESERVOIR:
            a["latencies"].append((pos, lat))
        if r.get("body") is not None:
            batch_stats(r["body"], self.record_batches)
        for name in r.get("error_codes") or []:
            n = self.errors.get(name)
            if n is None:
                self.errors[name] = 1
                self.error_first[name] = pos
            else:
                self.errors[name] = n + 1
        if r["kind"] == "request" and r.get("error") is None:
            cid = r.get("client_id")
            c = self.clients.setdefault(cid if cid is not None else "(null)", {"requests": 0, "versions": {}})
            c["requests"] += 1
            vs = c["versions"].setdefault(r["api_name"], [])
            if r["api_version"] not in vs:
                vs.append(r["api_version"])
                vs.sort()
            k2 = (r["dst"], cid, r["api_key"], r["api_name"], r["api_version"])
            self.requests_seen[k2] = self.requests_seen.get(k2, 0) + 1
        if r["kind"] == "response" and r.get("error") is None:
            if r.get("api_name") == "ApiVersions":
                ranges = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"]) for k in r["body"].get("ApiKeys") or []}
                if ranges and r["body"].get("ErrorCode", 0) == 0:
                    at = self.advertised_at.get(r["src"])
                    if at is None or pos >= at:
                        self.advertised[r["src"]] = ranges
                        self.advertised_at[r["src"]] = pos
            self.add_what_if(r)

    def merge(self, o: "Summary") -> "Summary":
        """Add another part's summary (positions of both comparable): the result is the summary
        ``add`` would have built over both parts' records in position order."""
        self.frames += o.frames
        self.decoded += o.decoded
        for k, n in o.undecodable.items():
            self.undecodable[k] = self.undecodable.get(k, 0) + n
        for key, b in o.apis.items():
            a = self.apis.get(key)
            if a is None:
                a = self.apis[key] = {"count": 0, "bytes": 0, "latencies": [], "errors": 0}
            a["count"] += b["count"]
            a["bytes"] += b["bytes"]
            a["errors"] += b["errors"]
            if a["latencies"] and b["latencies"]:  # the first RESERVOIR of both, by position
                lat = sorted(a["latencies"] + b["latencies"], key=lambda pl: pl[0])
                a["latencies"] = lat[:self.RESERVOIR]
            elif b["latencies"]:
                a["latencies"] = list(b["latencies"])
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
        for k, n in o.requests_seen.items():
            self.requests_seen[k] = self.requests_seen.get(k, 0) + n
        for src, ranges in o.advertised.items():
            at = o.advertised_at[src]
            mine = self.advertised_at.get(src)
            if mine is None or at >= mine:
                self.advertised[src] = ranges
                self.advertised_at[src] = at
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

    def add_what_if(self, r: dict) -> None:
        """Count one decoded response into the ErrorCode/ErrorMessage what-if total."""
        w = what_if_for_record(r)
        if w is None:
            return
        self.what_if["responses"] += 1
        if w.get("applicable"):
            self.what_if["applicable"] += 1
            self.what_if["bytes_now"] += w["bytes_now"]
            self.what_if["bytes_tagged"] += w["bytes_tagged"]
            self.what_if["saving"] += w["saving"]

    def audit(self) -> list[dict]:
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

    def to_dict(self, stats: dict | None = None, damage: list[dict] | None = None) -> dict:
        apis = []
        for (name, version, kind), a in sorted(self.apis.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or -1, kv[0][2])):
            lat = sorted(v for _, v in a["latencies"])
            apis.append({"api_name": name, "api_version": version, "kind": kind, "count": a["count"],
                         "bytes": a["bytes"], "undecodable": a["errors"],
                         "latency_p50_ms": _percentile(lat, 0.5), "latency_p99_ms": _percentile(lat, 0.99)})
        out = {
            "frames": self.frames, "decoded": self.decoded,
            "undecodable": sum(self.undecodable.values()),
            "undecodable_by_reason": dict(sorted(self.undecodable.items())),
            "reconciled": self.frames == self.decoded + sum(self.undecodable.values()),
            "apis": apis,
            "error_codes": dict(sorted(self.errors.items(), key=lambda kv: (-kv[1], self.error_first[kv[0]]))),
            "clients": {k: self.clients[k] for k in sorted(self.clients, key=str)},
            "negotiation_audit": self.audit(),
            "advertised_by": sorted(self.advertised),
            "what_if_tagged_error_fields": self.what_if,
            "record_batches": dict(self.record_batches,
                                   compression=dict(sorted(self.record_batches["compression"].items()))),
        }
        if stats is not None:
            out["capture"] = stats
        if damage is not None:
            kinds: dict[str, dict] = {}
            for d in damage:
                k = kinds.setdefault(d["kind"], {"events": 0, "bytes": 0})
                k["events"] += 1
                k["bytes"] += d["bytes"]
            out["damage"] = kinds
            out["damage_events"] = damage[:200]
        return out
