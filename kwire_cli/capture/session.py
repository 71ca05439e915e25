"""Decoded Kafka conversations from capture events: one output row per Kafka frame.

The capture layers below give ``KafkaFrame``s (paired by correlation id) and ``Damage``; a
``Conversation`` runs the codec on each frame and adds what only a whole conversation knows: the
client id of a response (from its request), names for the topic ids in a body (from Metadata-like
answers seen earlier), and the consumer protocol inside JoinGroup/SyncGroup.

A row is a plain dict with the columns of ``kwire_cli.capture.rows``; ``kwire_cli.capture.summary``
counts rows into the summary.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kwire_cli.capture.bodyfields import may_hold_records
from kwire_cli.capture.bodyscan import scan_body
from kwire_cli.capture.events import Damage, KafkaFrame, Note
from kwire_cli.capture.rows import CUT_FRAME, DECODE_ERROR, INTERNAL_ERROR, UNPAIRED_RESPONSE
from kwire_cli.capture.stream import SASL_TOKEN
from kwire_cli.capture.summary import damage_entry, note_entry
from kwire_cli.codec.embedded import consumer_protocol
from kwire_cli.codec.internal import decode_internal_records
from kwire_cli.codec.lenient import decode_lenient, shown_string
from kwire_cli.codec.peek import peek_request_header
from kwire_cli.codec.sasl import Side
from kwire_cli.codec.secrets import (
    CONTEXT_APIS,
    ENVELOPE,
    SASL_HANDSHAKE,
    decode_sasl,
    envelope_inner,
    redact_message,
    redacted,
)
from kwire_cli.errors import KwireError
from kwire_cli.spec.registry import registry
from kwire_cli.values.records import decode_body as decode_values

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
MAX_OPEN = 10000  # remembered requests per connection (client id, group protocol type)
# answers whose Topics name topic ids (Metadata, CreateTopics, DescribeTopicPartitions)
TOPIC_NAMING_APIS = frozenset({"Metadata", "CreateTopics", "DescribeTopicPartitions"})
# frames decoded whatever a header-only filter says, because later rows depend on them: the SASL
# and Envelope context (CONTEXT_APIS), the topic names of Metadata (3), CreateTopics (19) and
# DescribeTopicPartitions (75) answers, the protocol type a JoinGroup (11) or SyncGroup (14) request
# names for its answer's consumer-protocol bytes
ALWAYS_DECODED = CONTEXT_APIS | {3, 19, 75, 11, 14}
_NO_REQUEST: tuple[Any, Any] = (None, None)

MAX_NOTES = 10000  # notes kept for the summary (one or two per TLS connection)
MAX_DAMAGE_KEPT = 1000  # live captures: damage events kept as entries (the summary lists 200; all are counted)
MAX_CONNECTIONS = 100_000  # connections whose open requests / SASL mechanism are remembered (the least recent go)

def _framing_row(f: KafkaFrame) -> dict[str, Any]:
    """A new row with what the capture layers know of a frame: where and when, its kind, api key and
    version, correlation id, size and latency; every other ``ALWAYS`` column null (``error_codes``
    empty), all in ``rows.ROW_KEYS``' order (one dict display, the cheapest way to make it;
    tests/test_rows.py checks the order on every fixture's rows)."""
    req_ts = f.request_ts
    return {"file": f.file, "frame": f.packet, "ts": f.ts, "src": f.src, "dst": f.dst, "kind": f.kind,
            "api_key": f.api_key, "api_name": None, "api_version": f.api_version,
            "correlation_id": f.correlation_id, "client_id": None, "size": f.size,
            "latency_ms": None if req_ts is None else round((f.ts - req_ts) * 1000.0, 3),
            "header": None, "body": None, "error_codes": [], "error": None, "error_kind": None}


class Conversation:
    """Turns capture events into output rows. State: per connection, the requests still open (client
    id, group protocol type: what their responses need), and the topic names learned so far.

    ``on_topic_name(topic_id, name)``, if given, is called for each topic id this conversation
    learns a name for the first time (spark-decode gathers them across connections).

    Secrets are redacted in every row (``kwire_cli.codec.secrets``) unless ``show_secrets``; for
    that a conversation also keeps, per connection, the SASL mechanism its last SaslHandshake
    named, and the request an open Envelope forwards.

    ``max_damage``: keep only the first so many damage events in ``damage`` (a live capture:
    ``MAX_DAMAGE_KEPT``); all of them are counted by kind in ``damage_kinds`` either way."""

    def __init__(self, records_mode: str | None = None,
                 on_topic_name: Callable[[str, str], None] | None = None, show_secrets: bool = False,
                 strict: bool = False, max_damage: int | None = None) -> None:
        self.records_mode = records_mode
        self.show_secrets = show_secrets
        self.strict = strict  # --strict: a frame that breaks the format is undecodable, not read leniently
        self._mechanisms: dict[str, str | None] = {}
        self._envelopes: OrderedDict[tuple[str, int], tuple[int, int]] = OrderedDict()
        self.damage: list[dict[str, Any]] = []  # the first Damage events seen by ``rows``, as the summary lists them
        self.damage_kinds: dict[str, list[int]] = {}  # kind -> [events, bytes] of all of them
        self.max_damage = max_damage
        self.notes: list[dict[str, Any]] = []   # the Note events (TLS handshakes, alerts), as the summary lists them
        self._names: dict[str, str] = {}
        # per connection (least recently used first: a live capture's closed connections go)
        self._open: OrderedDict[str, OrderedDict[int, tuple[Any, Any]]] = OrderedDict()
        self._on_topic_name = on_topic_name
        self.skipped = 0  # frames a header-only filter left out undecoded (rows)
        self.first_ts: float | None = None  # the time of the first Kafka frame, decoded or left out

    # ------------------------------------------------------------------ state
    def remember_request(self, conn: str, corr: int, client_id: str | None, protocol_type: str | None) -> None:
        """Keep what the response to request ``corr`` on ``conn`` will need (at most ``MAX_OPEN`` per
        connection: the oldest are forgotten)."""
        opened = self._open
        od = opened.get(conn)
        if od is None:
            od = opened[conn] = OrderedDict()
            if len(opened) > MAX_CONNECTIONS:
                opened.popitem(last=False)
        else:
            opened.move_to_end(conn)
        od[corr] = (client_id, protocol_type)
        if len(od) > MAX_OPEN:
            od.popitem(last=False)

    def take_request(self, conn: str, corr: int | None) -> tuple[Any, Any]:
        """``(client_id, protocol_type)`` of the open request ``corr`` on ``conn``, forgotten now;
        ``(None, None)`` when it is not known."""
        if corr is None:
            return _NO_REQUEST
        od = self._open.get(conn)
        if od is None:
            return _NO_REQUEST
        info = od.pop(corr, _NO_REQUEST)
        if not od:
            del self._open[conn]  # (nothing open: a connection's state goes with its last answer)
        return info

    def _forget(self, conn: str, corrs: Iterable[int]) -> None:
        """Requests the assembler gave up (unanswered: expired, or their connection ended)."""
        od = self._open.get(conn)
        if od is None:
            return
        for corr in corrs:
            od.pop(corr, None)
        if not od:
            del self._open[conn]

    def sasl_mechanism(self, conn: str) -> str | None:
        """The SASL mechanism the last SaslHandshake request on ``conn`` named (None: none seen)."""
        return self._mechanisms.get(conn)

    def _protect(self, rec: dict[str, Any], f: KafkaFrame, body: Any) -> None:
        """Redact the row's body (an API of the redaction table), with what this connection knows."""
        key, conn = rec["api_key"], f.conn
        if key == SASL_HANDSHAKE:
            if f.kind == "request":
                mechs = self._mechanisms
                mechs.pop(conn, None)
                mechs[conn] = body.get("Mechanism")
                if len(mechs) > MAX_CONNECTIONS:
                    del mechs[next(iter(mechs))]
            return
        inner = None
        if key == ENVELOPE and f.kind == "response":
            inner = self._envelopes.pop((conn, rec["correlation_id"]), None)
        redact_message(key, f.kind, body, show=self.show_secrets, mechanism=self._mechanisms.get(conn),
                       inner=inner, records=self.records_mode)
        if key == ENVELOPE and f.kind == "request":
            fwd = envelope_inner(body)
            if fwd is not None:
                self._envelopes[(conn, rec["correlation_id"])] = fwd
                if len(self._envelopes) > MAX_OPEN:
                    self._envelopes.popitem(last=False)

    def topic_name(self, topic_id: str) -> str | None:
        return self._names.get(topic_id)

    def learn_topic_names(self, names: Iterable[tuple[str, str]]) -> None:
        """Learn ``(topic id, name)`` pairs (from an answer, or learned elsewhere); a later name for
        an id replaces the earlier one."""
        for tid, name in names:
            if tid not in self._names and self._on_topic_name is not None:
                self._names[tid] = name
                self._on_topic_name(tid, name)
            else:
                self._names[tid] = name

    # ------------------------------------------------------------------ rows
    def row(self, f: KafkaFrame) -> dict[str, Any]:
        """The output row of one Kafka frame (a frame that does not decode is a row with ``error``
        and ``error_kind``; what did decode is kept)."""
        rec = _framing_row(f)
        if f.kind == SASL_TOKEN:
            return self._sasl_token(rec, f)
        if f.size > len(f.data):
            return self._cut(rec, f)
        if f.api_key is not None:
            try:
                rec["api_name"] = registry().api(f.api_key).name
            except KwireError:
                rec["api_name"] = f"UNKNOWN({f.api_key})"
        info = _NO_REQUEST
        try:
            if f.kind == "request":
                msg = decode_lenient(f.data, "request", size_prefixed=False, records=self.records_mode,
                                     strict=self.strict)
                header = msg.header
                assert header is not None  # a decoded request has its header
                rec["api_key"], rec["api_name"], rec["api_version"] = msg.api_key, msg.api_name, msg.api_version
                rec["client_id"] = shown_string(header.get("ClientId"))
                rec["correlation_id"] = header["CorrelationId"]
                if f.acks != 0:
                    self.remember_request(f.conn, rec["correlation_id"], rec["client_id"],
                                          msg.body.get("ProtocolType"))
            else:
                info = self.take_request(f.conn, f.correlation_id)
                rec["client_id"] = info[0]
                if f.api_key is None or f.api_version is None:  # (pairing sets both)
                    rec["error"] = (f"unpaired response: no request with correlation id "
                                    f"{f.correlation_id} was seen on {f.conn}")
                    rec["error_kind"] = UNPAIRED_RESPONSE
                    return rec
                msg = decode_lenient(f.data, "response", f.api_key, f.api_version, size_prefixed=False,
                                     records=self.records_mode, strict=self.strict)
            rec["header"], rec["body"] = msg.header, msg.body
            if msg.violations:
                rec["violations"] = [v.to_json() for v in msg.violations]
            if msg.notes:
                rec["notes"] = list(msg.notes)
        except Exception as e:  # one frame's failure never stops the capture
            if not isinstance(e, KwireError):  # a kwire bug: say so, keep going
                rec["error"] = f"internal error: {type(e).__name__}: {e}"
                rec["error_kind"] = INTERNAL_ERROR
                return rec
            rec["error"] = str(e)
            rec["error_kind"] = getattr(e, "kind", DECODE_ERROR)
            decoded = getattr(e, "decoded", None)  # complete message followed by stray bytes
            if decoded is None:
                return rec
            rec["api_version"] = decoded.api_version
            rec["header"], rec["body"] = decoded.header, decoded.body
            if f.kind == "request":
                rec["client_id"] = shown_string(decoded.header.get("ClientId"))
        body = rec["body"]
        if self.records_mode is None and body is not None and may_hold_records(rec):
            # records of internal topics (__consumer_offsets, __cluster_metadata...) decoded into their
            # key and value, the topic named by the body or, for a topic id, by the names learned so far
            decode_internal_records(body, self._names.get, self.show_secrets)
            # keys and values framed by a Schema Registry, when --schema-registry/--schemas/--*-format ask
            decode_values(body)
        if rec["api_key"] in CONTEXT_APIS:
            self._protect(rec, f, body)
        rec["error_codes"], ids = scan_body(body)
        name = rec["api_name"]
        if f.kind == "response" and name in TOPIC_NAMING_APIS:
            self.learn_topic_names((t["TopicId"], t["Name"]) for t in body.get("Topics") or []
                                   if t.get("TopicId") and t["TopicId"] != ZERO_UUID and t.get("Name"))
        if ids:
            names = self._names
            rec["topic_names"] = {i: names.get(i) for i in sorted(ids)}
        if name in ("JoinGroup", "SyncGroup"):
            ptype = body.get("ProtocolType")
            if ptype is None and f.kind == "response":
                ptype = info[1]
            embedded = consumer_protocol(name, f.kind, body, ptype)
            if embedded:
                rec["embedded"] = embedded
        return rec

    def _cut(self, rec: dict[str, Any], f: KafkaFrame) -> dict[str, Any]:
        """A frame a gap cut after its header: what its first bytes say (the request header's API,
        version, correlation id and client id; a response: its request's), no body."""
        rec["captured"] = len(f.data)
        rec["error"] = f"cut: {len(f.data)} of {f.size} bytes captured (a snap length, lost packets); body not decoded"
        rec["error_kind"] = CUT_FRAME
        if f.api_key is not None:
            try:
                rec["api_name"] = registry().api(f.api_key).name
            except KwireError:
                rec["api_name"] = f"UNKNOWN({f.api_key})"
        if f.kind == "request":
            try:
                header = peek_request_header(f.data)
                rec["header"] = header
                rec["client_id"] = shown_string(header.get("ClientId"))
            except KwireError:
                pass  # (the client id, or the header's tagged fields, were not captured)
            if f.acks != 0 and rec["correlation_id"] is not None:
                self.remember_request(f.conn, rec["correlation_id"], rec["client_id"], None)
        else:
            rec["client_id"] = self.take_request(f.conn, f.correlation_id)[0]
        return rec

    def _sasl_token(self, rec: dict[str, Any], f: KafkaFrame) -> dict[str, Any]:
        """A KIP-43 raw SASL token (after a SaslHandshake v0): decoded for the mechanism that
        handshake named, shown as SaslAuthenticate's AuthBytes are (secrets redacted)."""
        side: Side = "client" if f.conn.startswith(f.src + "->") else "server"
        data = bytes(f.data)
        fields, secret = decode_sasl(data, self._mechanisms.get(f.conn), side, self.show_secrets)
        rec["api_name"] = "SaslToken"
        rec["body"] = {"Side": side, "AuthBytes": redacted(secret, len(data)) if secret is not None else data,
                       "Sasl": fields}
        rec["error_codes"] = []
        return rec

    def head(self, f: KafkaFrame) -> dict[str, Any] | None:
        """The row of a frame with only what is known before its body is decoded
        (``rows.HEADER_COLUMNS``: framing, pairing, the request header), or None for a frame that
        is decoded whatever a filter says (``ALWAYS_DECODED``, KIP-43 raw SASL tokens, an unpaired
        answer) or whose header does not read (decoding it says why)."""
        key = f.api_key
        if key is None or key in ALWAYS_DECODED or f.kind == SASL_TOKEN or f.api_version is None \
                or f.correlation_id is None:
            return None
        rec = _framing_row(f)
        try:
            rec["api_name"] = registry().api(key).name
            if f.kind == "request":
                header = peek_request_header(f.data)
                rec["client_id"] = shown_string(header.get("ClientId"))
                rec["correlation_id"] = header["CorrelationId"]
            else:
                od = self._open.get(f.conn)
                info = od.get(f.correlation_id, _NO_REQUEST) if od is not None else _NO_REQUEST
                rec["client_id"] = info[0]
        except KwireError:
            return None
        return rec

    def skip(self, f: KafkaFrame, head: dict[str, Any]) -> None:
        """Leave a frame out undecoded (a filter rejected its ``head``), keeping what later rows
        need: a request's client id for its answer; an answer ends its request."""
        self.skipped += 1
        if f.kind == "request":
            if f.acks != 0:
                self.remember_request(f.conn, head["correlation_id"], head["client_id"], None)
        else:
            self.take_request(f.conn, f.correlation_id)

    def rows(self, events: Iterable[KafkaFrame | Damage | Note],
             wanted: Callable[[dict[str, Any]], bool] | None = None) -> Iterator[dict[str, Any]]:
        """A row per Kafka frame; damage events are kept in ``damage``, notes in ``notes``.
        ``wanted``: a predicate over ``head`` rows (``filter.header_filter``): a frame it rejects is
        not decoded and gives no row (counted in ``skipped``)."""
        for ev in events:
            if isinstance(ev, KafkaFrame):
                if self.first_ts is None:
                    self.first_ts = ev.ts
                if wanted is not None:
                    head = self.head(ev)
                    if head is not None and not wanted(head):
                        self.skip(ev, head)
                        continue
                yield self.row(ev)
            elif isinstance(ev, Note):
                if len(self.notes) < MAX_NOTES:
                    self.notes.append(note_entry(ev))
            else:
                if ev.corrs and ev.conn is not None:
                    self._forget(ev.conn, ev.corrs)
                k = self.damage_kinds.get(ev.kind)
                if k is None:
                    k = self.damage_kinds[ev.kind] = [0, 0]
                k[0] += 1
                k[1] += ev.bytes
                if self.max_damage is None or len(self.damage) < self.max_damage:
                    self.damage.append(damage_entry(ev))
