"""The records of Kafka's internal topics, decoded from the record specs (kwire_cli.spec.records).

The topic decides the family, since the same type numbers mean different records in different
topics:

* ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``: coordinator records.
  Key: int16 key type (naming the record), then the key struct read at that version. Value: int16
  value version, then the value struct; a null value is a tombstone. A value version newer than
  the specs know is read with the newest known one (KIP-915: newer versions only add tagged
  fields), and bytes left over are kept as ``unknown_tail``.
* ``__cluster_metadata``: KRaft metadata records, no key; the value is an unsigned-varint frame
  version (1), apiKey and version, then the record, with nothing left over. Records of a control
  batch are KRaft control records: key int16 version and int16 type, value that type's struct
  (message specs: LeaderChangeMessage, SnapshotHeaderRecord, ...) read at version 0.

``decode_internal(topic, key, value, control=...)`` never raises for bad bytes: a record that does
not decode has ``error`` (one line naming the field and offset) and what decoded before it
(``partial: true`` on that part). Secrets of metadata records go through the one redaction table
(``secrets.redact_record``) unless ``show_secrets``; ``hidden`` then counts them, and whoever shows
the record's raw value must hide it too (``secrets.RECORD_VALUE``). Classic group members' consumer-protocol
subscription and assignment bytes are decoded too (``embedded``, as in JoinGroup/SyncGroup).
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from kwire_cli import wire
from kwire_cli.codec.compiler import compile_plan
from kwire_cli.codec.embedded import ASSIGNMENT, SUBSCRIPTION, decode_embedded
from kwire_cli.codec.partial import Walker
from kwire_cli.codec.secrets import RECORD_VALUE, redact_record, redacted
from kwire_cli.errors import DecodeError, TrailingBytes
from kwire_cli.spec.model import MessageSpec
from kwire_cli.spec.records import (
    CLUSTER_METADATA,
    CONTROL_TYPES,
    COORDINATOR_TOPICS,
    INTERNAL_TOPICS,
    record_specs,
)
from kwire_cli.spec.registry import registry

__all__ = ["INTERNAL_TOPICS", "decode_control", "decode_coordinator", "decode_coordinator_value", "decode_internal",
           "decode_internal_batch", "decode_internal_records", "decode_metadata", "is_internal"]

_I16 = struct.Struct(">h")
METADATA_FRAME_VERSION = 1


def is_internal(topic: str | None) -> bool:
    """Whether records of this topic are decoded here."""
    return topic in INTERNAL_TOPICS


def _struct(spec: MessageSpec, version: int, data: bytes, pos: int, *, exact: bool = True,
            context: str = "") -> tuple[dict[str, Any], int, DecodeError | None]:
    """Decode ``spec`` at ``version`` from ``data[pos:]``: (value, end, None), or on failure (the
    fields read before the error, the position, the error). ``exact``: bytes left over are an error."""
    label = context or f"{spec.name} v{version}"
    try:
        value, end = compile_plan(spec, version, "hex").decode(data, pos, len(data))
    except DecodeError as e:
        partial: dict[str, Any] = {}
        try:
            Walker(spec, version).struct(spec.struct, data, pos, len(data), partial, 0)
        except (DecodeError, RecursionError):
            pass
        e.context = e.context or label
        return partial, pos, e
    if exact and end != len(data):
        return value, end, TrailingBytes(f"{len(data) - end} bytes left over after {label} at offset {end}", end,
                                         context=label)
    return value, end, None


def _fail(out: dict[str, Any], part: str, partial: dict[str, Any], e: DecodeError) -> dict[str, Any]:
    out[part]["data"] = partial
    out[part]["partial"] = True
    out["error"] = f"{part}: {e}"
    return out


# ------------------------------------------------------------------------------ coordinator records
def _embedded_bytes(path: str, schema: str, hexdata: Any, found: list[dict[str, Any]]) -> None:
    if not isinstance(hexdata, str) or not hexdata:
        return
    try:
        found.append({"path": path, **decode_embedded(schema, bytes.fromhex(hexdata))})
    except (DecodeError, ValueError) as e:
        found.append({"path": path, "schema": schema, "error": str(e)})


def _consumer_protocol(schema: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """Consumer-protocol bytes inside a classic group's metadata (protocol type "consumer") or a
    KIP-848 group member that joined with the classic protocol."""
    found: list[dict[str, Any]] = []
    if schema == "GroupMetadataValue" and data.get("protocolType") == "consumer":
        for i, m in enumerate(data.get("members") or []):
            _embedded_bytes(f"members[{i}].subscription", SUBSCRIPTION, m.get("subscription"), found)
            _embedded_bytes(f"members[{i}].assignment", ASSIGNMENT, m.get("assignment"), found)
    elif schema == "ConsumerGroupMemberMetadataValue":
        classic = data.get("ClassicMemberMetadata")
        if isinstance(classic, dict):
            for i, p in enumerate(classic.get("SupportedProtocols") or []):
                _embedded_bytes(f"ClassicMemberMetadata.SupportedProtocols[{i}].Metadata", SUBSCRIPTION,
                                p.get("Metadata"), found)
    return found


def decode_coordinator(topic: str, key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """One record of a coordinator's topic: ``{"key": {"type", "schema", "version", "data"},
    "value": {"schema", "version", "data"} | None (a tombstone)}``, or with ``error``."""
    out: dict[str, Any] = {"family": "coordinator"}
    if key is None:
        out["error"] = "key: a coordinator record needs a key; this one is null"
        return out
    if len(key) < 2:
        out["error"] = f"key: needs an int16 key type, {len(key)} byte(s) given"
        return out
    key_type = _I16.unpack_from(key, 0)[0]
    rec = record_specs().coordinator_record(topic, key_type)
    out["key"] = {"type": key_type}
    if rec is None:
        out["error"] = f"key: unknown record type {key_type} in {topic}"
        return out
    out["key"].update(schema=rec.key.name, version=rec.key_version)
    kdata, _, err = _struct(rec.key, rec.key_version, key, 2, context=f"{rec.key.name} (type {key_type})")
    if err is not None:
        return _fail(out, "key", kdata, err)
    out["key"]["data"] = kdata
    out.update(decode_coordinator_value(topic, key_type, value))
    return out


def decode_coordinator_value(topic: str, key_type: int, value: bytes | None, *,
                             version: int | None = None) -> dict[str, Any]:
    """The value part of a coordinator record whose key type is ``key_type``: ``{"value": ...}``
    (None and ``tombstone`` for a null value), with ``error`` and ``embedded`` when there are.
    ``version``: the value bytes are the struct alone, at that version (no int16 prefix)."""
    out: dict[str, Any] = {}
    rec = record_specs().coordinator_record(topic, key_type)
    if rec is None:
        out["error"] = f"key: unknown record type {key_type} in {topic}"
        return out
    if value is None:
        out["value"] = None
        out["tombstone"] = True
        return out
    start = 0
    if version is None:
        if len(value) < 2:
            out["error"] = f"value: needs an int16 value version, {len(value)} byte(s) given"
            return out
        version = _I16.unpack_from(value, 0)[0]
        start = 2
    spec = rec.value
    out["value"] = {"schema": spec.name, "version": version}
    if version < spec.valid_versions.lo:
        out["error"] = f"value: {spec.name} version {version} is below the lowest known ({spec.valid_versions})"
        return out
    read_as = min(version, spec.valid_versions.hi)
    data, end, err = _struct(spec, read_as, value, start, exact=read_as == version)
    if err is not None:
        return _fail(out, "value", data, err)
    out["value"]["data"] = data
    if read_as != version:
        out["value"]["read_as"] = read_as
        if end != len(value):
            out["value"]["unknown_tail"] = value[end:].hex()
    embedded = _consumer_protocol(spec.name, data)
    if embedded:
        out["embedded"] = embedded
    return out


# ------------------------------------------------------------------------------- metadata records
def decode_metadata(value: bytes | None, *, show_secrets: bool = False) -> dict[str, Any]:
    """One ``__cluster_metadata`` record value: ``{"frame_version", "api_key", "schema", "version",
    "data"}``, or with ``error``."""
    out: dict[str, Any] = {"family": "metadata"}
    if value is None:
        out["error"] = "value: a metadata record needs a value; this one is null"
        return out
    end = len(value)
    pos = 0
    fields = []
    for what in ("frame version", "apiKey", "version"):
        try:
            n, pos = wire.read_uvarint(value, pos, end)
        except DecodeError as e:
            out["error"] = f"value: {what}: {e}"
            return out
        fields.append(n)
        if what == "frame version":
            out["frame_version"] = n
            if n != METADATA_FRAME_VERSION:
                out["error"] = f"value: unknown frame version {n} (only {METADATA_FRAME_VERSION} exists)"
                return out
    _, api_key, version = fields
    out["api_key"] = api_key
    if version > 0x7FFF:
        out["error"] = f"value: version {version} is too large for an int16"
        return out
    out["version"] = version
    spec = record_specs().metadata_record(api_key)
    if spec is None:
        out["error"] = f"value: unknown metadata record type (apiKey) {api_key}"
        return out
    out["schema"] = spec.name
    if version not in spec.valid_versions:
        out["error"] = f"value: {spec.name} version {version} is unknown (known: {spec.valid_versions})"
        return out
    data, _, err = _struct(spec, version, value, pos)
    hidden = redact_record(spec.name, data, show=show_secrets)
    out["data"] = data
    if hidden:
        out["hidden"] = hidden  # the caller hides the record's raw value too (secrets.RECORD_VALUE)
    if err is not None:
        out["partial"] = True
        out["error"] = f"value: {err}"
    return out


# -------------------------------------------------------------------------------- control records
def decode_control(key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """A KRaft control record (types 2-6): ``{"type", "schema", "data"}``, or with ``error``; None
    for the transaction markers (0 ABORT, 1 COMMIT) and types kwire does not know."""
    if key is None or len(key) < 4:
        return None  # the records layer reports a control key it cannot read
    ctype = _I16.unpack_from(key, 2)[0]
    name = CONTROL_TYPES.get(ctype)
    if name is None:
        return None
    out: dict[str, Any] = {"family": "control", "type": ctype, "schema": name}
    if value is None:
        out["error"] = f"value: a {name} needs a value; this one is null"
        return out
    spec = registry().schema(name)
    out["data"], _, err = _struct(spec, 0, value, 0)
    if err is not None:
        out["partial"] = True
        out["error"] = f"value: {err}"
    return out


def decode_internal(topic: str | None, key: bytes | None, value: bytes | None, *, control: bool = False,
                    show_secrets: bool = False) -> dict[str, Any] | None:
    """The decoded record of an internal topic, or None when ``topic`` is not one (or a control
    record holds nothing more than the records layer shows)."""
    if control:
        return decode_control(key, value) if topic == CLUSTER_METADATA or topic is None else None
    if topic in COORDINATOR_TOPICS:
        return decode_coordinator(topic, key, value)
    if topic == CLUSTER_METADATA:
        return decode_metadata(value, show_secrets=show_secrets)
    return None


def _attach(rec: dict[str, Any], got: dict[str, Any] | None, value: bytes | None) -> None:
    if got is None:
        return
    rec["Internal"] = got
    if got.get("hidden") and value is not None:  # a secret in the record: its raw bytes go too
        rec["Value"] = redacted(RECORD_VALUE, len(value))


def decode_internal_batch(batch: dict[str, Any], topic: str, show_secrets: bool = False) -> None:
    """Add ``Internal`` (the decoded key and value) to each record of a decoded batch of an internal
    topic (a v2 batch's records, a legacy wrapper's messages, or a legacy message itself), in place;
    a record that holds a secret has its raw ``Value`` redacted too, unless ``show_secrets``."""
    from kwire_cli.records.forms import raw_bytes
    if "error" in batch:
        return
    control = bool(batch.get("IsControlBatch"))
    for rec in batch.get("Records") or ():
        value = raw_bytes(rec.get("Value"))
        _attach(rec, decode_internal(topic, raw_bytes(rec.get("Key")), value, control=control,
                                     show_secrets=show_secrets), value)
    messages = batch.get("Messages")
    if messages is not None:
        for m in messages:
            decode_internal_batch(m, topic, show_secrets)
    elif "Value" in batch and "Records" not in batch:  # a legacy message
        value = raw_bytes(batch.get("Value"))
        _attach(batch, decode_internal(topic, raw_bytes(batch.get("Key")), value, show_secrets=show_secrets), value)


_TOPIC_KEYS = ("Name", "Topic", "TopicName")


def records_by_topic(body: Any, topic_name: Callable[[str], str | None] | None = None,
                     max_depth: int = 32) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """Every decoded records value (``{"batches": ...}``) of a message body, with the topic the
    struct above it names (``Name``, ``Topic``, ``TopicName``, or ``TopicId`` through
    ``topic_name(id)``; None when nothing names it), in body order; nothing below ``max_depth``."""

    found: list[tuple[str | None, dict[str, Any]]] = []
    _collect(body, None, 0, topic_name, max_depth, found)
    return iter(found)


def _collect(node: Any, topic: str | None, depth: int, topic_name: Callable[[str], str | None] | None,
             max_depth: int, found: list[tuple[str | None, dict[str, Any]]]) -> None:
    """``records_by_topic``'s walk (a plain recursion, not a chain of generators: a row's body is
    walked for every Produce and Fetch frame)."""
    if depth > max_depth:
        return
    if isinstance(node, list):
        for x in node:
            if isinstance(x, (dict, list)):
                _collect(x, topic, depth + 1, topic_name, max_depth, found)
        return
    if not isinstance(node, dict):
        return
    if isinstance(node.get("batches"), list):
        found.append((topic, node))
        return
    for k in _TOPIC_KEYS:
        t = node.get(k)
        if isinstance(t, str) and t:
            topic = t
            break
    else:
        tid = node.get("TopicId")
        if isinstance(tid, str) and topic_name is not None:
            named = topic_name(tid)
            if named:
                topic = named
    for v in node.values():
        if isinstance(v, (dict, list)):
            _collect(v, topic, depth + 1, topic_name, max_depth, found)


def decode_internal_records(body: Any, topic_name: Callable[[str], str | None] | None = None,
                            show_secrets: bool = False) -> int:
    """In a decoded message body, decode the records of internal topics (Produce, Fetch, replica and
    KRaft Fetch, FetchSnapshot...) in place: every decoded records value under a struct that names
    its topic (``records_by_topic``). FetchSnapshot's ``UnalignedRecords`` of ``__cluster_metadata``
    are KRaft records like any other. Returns the number of batches decoded so."""
    n = 0
    for topic, records in records_by_topic(body, topic_name):
        if topic is not None and is_internal(topic):
            for b in records["batches"]:
                if isinstance(b, dict):
                    decode_internal_batch(b, topic, show_secrets)
                    n += 1
    return n
