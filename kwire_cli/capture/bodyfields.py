"""Values inside a row's body that the display filter matches: topics, partitions, groups, members,
producer and transactional ids, record keys and record headers.

Which fields hold them comes from the specs, not from a list kept by hand: a field whose spec says
``"entityType": "topicName"`` (``groupId``, ``producerId``, ``transactionalId``) holds one (a
string, a number, or an array of them), at every depth of the body; members and partitions are the
fields of those names (``MemberId``, ``GroupInstanceId``; ``PartitionIndex``, ``Partition``,
``PartitionId``, ``PartitionIndexes``, and Produce's and FetchSnapshot's ``Index``), which the specs
give no entity type; producer ids also come from the record batches' ``ProducerId``. Topics also come from
the ``topic_names`` column (topic ids named by an earlier Metadata-like answer). Record keys and
headers are read from the decoded records fields (``records`` type), batches and legacy messages.

The paths of each (api, version, kind) are found once and cached.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from kwire_cli.codec.secrets import ENVELOPE
from kwire_cli.errors import KwireError
from kwire_cli.spec.model import FieldSpec, StructSpec
from kwire_cli.spec.registry import registry

Path = tuple[str, ...]


@dataclass(frozen=True)
class BodyField:
    """A filter field read from bodies: ``entity`` (the specs' entityType) or field ``names``."""

    name: str
    entity: str | None = None
    names: frozenset[str] = frozenset()
    numeric: bool = False
    doc: str = ""

    def wants(self, f: FieldSpec) -> bool:
        return (self.entity is not None and f.entity_type == self.entity) or f.name in self.names


BODY_FIELDS: dict[str, BodyField] = {b.name: b for b in (
    BodyField("topic", entity="topicName", doc="a topic name anywhere in the body (or a topic id's name)"),
    BodyField("partition", names=frozenset({"PartitionIndex", "Partition", "PartitionId", "PartitionIndexes",
                                            "Index"}),
              numeric=True, doc="a partition index anywhere in the body"),
    BodyField("group", entity="groupId", doc="a group id (consumer, share and transactional offset groups)"),
    BodyField("member", names=frozenset({"MemberId", "GroupInstanceId"}), doc="a group member id or instance id"),
    BodyField("producer_id", entity="producerId", numeric=True, doc="a producer id"),
    BodyField("transactional_id", entity="transactionalId", doc="a transactional id"),
)}
RECORD_FIELDS = {"key": "a record key (its text, or its hex when it is not text)",
                 "header": "a record header's key or value"}


def _paths(s: StructSpec, version: int, wants: Callable[[FieldSpec], bool], depth: int = 0) -> list[Path]:
    out: list[Path] = []
    if depth > 32:
        return out
    for f in s.fields:
        if version not in f.versions:
            continue
        if wants(f):
            out.append((f.name,))
        if f.struct is not None:
            out += [(f.name, *p) for p in _paths(f.struct, version, wants, depth + 1)]
    return out


@cache
def _cached_paths(folder: str, field: str, api_key: int, version: int, kind: str) -> tuple[Path, ...]:
    """(``folder``: the specs in use, part of the cache key: --specs may change them)"""
    reg = registry()
    assert reg.folder == folder
    try:
        spec = reg.api(api_key).spec(kind)
    except KwireError:
        return ()
    v = min(version, spec.valid_versions.hi)  # a version newer than the specs: read with the newest layout
    if field in BODY_FIELDS:
        return tuple(_paths(spec.struct, v, BODY_FIELDS[field].wants))
    return tuple(_paths(spec.struct, v, lambda f: f.type.kind == "records"))  # records fields


def paths(field: str, api_key: int, version: int, kind: str) -> tuple[Path, ...]:
    return _cached_paths(registry().folder, field, api_key, version, kind)


def _has_records(s: StructSpec, seen: set[int]) -> bool:
    for f in s.fields:
        t = f.type
        while t.kind == "array" and t.element is not None:
            t = t.element
        if t.kind == "records":
            return True
        if f.struct is not None and id(f.struct) not in seen:
            seen.add(id(f.struct))
            if _has_records(f.struct, seen):
                return True
    return False


@cache
def _cached_records_apis(folder: str) -> frozenset[tuple[int, str]]:
    reg = registry()
    assert reg.folder == folder
    return frozenset((k, kind) for k, a in reg.apis.items() for kind in ("request", "response")
                     if _has_records(a.spec(kind).struct, set()))


_HOLDS: dict[tuple[str, int, str], bool] = {}  # (specs folder, api key, kind) -> may_hold_records


def may_hold_records(row: dict[str, Any]) -> bool:
    """False when the row's body cannot hold a records field: a request or response of an API whose
    spec has no ``records`` field in any version (Fetch requests, Metadata, Heartbeat...); then the
    walks that look for decoded records (internal topics' records, the record batches counted)
    have nothing to find. True for anything else (SASL tokens, an unknown API, an Envelope: the
    message it forwards is decoded into its body)."""
    kind = row.get("kind")
    key = row.get("api_key")
    if type(key) is not int or (kind != "request" and kind != "response"):
        return True
    reg = registry()
    at = (reg.folder, key, kind)
    holds = _HOLDS.get(at)
    if holds is None:
        if key not in reg.apis:
            return True
        holds = _HOLDS[at] = key == ENVELOPE or (key, kind) in _cached_records_apis(reg.folder)
    return holds


def records_paths(row: dict[str, Any]) -> tuple[Path, ...] | None:
    """The paths of the records fields the spec gives the row's body (its API, version and kind;
    a version newer than the specs: the newest), or None when the spec cannot say where they are
    (an Envelope: the message it forwards is decoded into its body; a SASL token; an unknown API
    or version)."""
    kind = row.get("kind")
    key = row.get("api_key")
    version = row.get("api_version")
    if type(key) is not int or type(version) is not int or (kind != "request" and kind != "response") \
            or key == ENVELOPE:
        return None
    reg = registry()
    api = reg.apis.get(key)
    if api is None or version < api.spec(kind).valid_versions.lo:
        return None
    return paths("records", key, version, kind)


def _follow(node: Any, path: Path, out: list[Any]) -> None:
    if isinstance(node, list):
        for x in node:
            _follow(x, path, out)
        return
    if not isinstance(node, dict):
        return
    v = node.get(path[0])
    if v is None:
        return
    if len(path) == 1:
        if isinstance(v, list):
            out.extend(x for x in v if x is not None)
        else:
            out.append(v)
    else:
        _follow(v, path[1:], out)


def _text(v: Any) -> str | None:
    """A record key or header value (``{"text": ...}`` or ``{"hex": ...}``) or a header key, as text."""
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        t = v.get("text")
        if isinstance(t, str):
            return t
        h = v.get("hex")
        if isinstance(h, str):
            return h
    return None


def _records(batches: Any) -> Iterator[dict[str, Any]]:
    """Every record (v2) or legacy message in a decoded records value, wrappers opened."""
    if isinstance(batches, dict):
        batches = batches.get("batches")
    if not isinstance(batches, list):
        return
    for b in batches:
        if not isinstance(b, dict):
            continue
        recs = b.get("Records")
        if isinstance(recs, list):
            yield from (r for r in recs if isinstance(r, dict))
        elif isinstance(b.get("Messages"), list):  # a compressed legacy wrapper
            yield from _records(b["Messages"])
        elif "Key" in b:  # a legacy message
            yield b


def _batches(body: Any, key: int, version: int, kind: str) -> Iterator[dict[str, Any]]:
    values: list[Any] = []
    for p in paths("records", key, version, kind):
        _follow(body, p, values)
    for v in values:
        bs = v.get("batches") if isinstance(v, dict) else None
        if isinstance(bs, list):
            yield from (b for b in bs if isinstance(b, dict))


def row_values(field: str, row: dict[str, Any]) -> list[Any]:
    """The values of filter field ``field`` (a BODY_FIELDS or RECORD_FIELDS name) in ``row``."""
    body, key, version, kind = row.get("body"), row.get("api_key"), row.get("api_version"), row.get("kind")
    out: list[Any] = []
    if body is None or key is None or version is None or kind is None:
        return out
    if field in BODY_FIELDS:
        for p in paths(field, key, version, kind):
            _follow(body, p, out)
        if field == "topic":
            out += [n for n in (row.get("topic_names") or {}).values() if n]
        elif field == "producer_id":
            out += [b["ProducerId"] for b in _batches(body, key, version, kind) if "ProducerId" in b]
        return out
    values: list[Any] = []
    for p in paths("records", key, version, kind):
        _follow(body, p, values)
    for v in values:
        for rec in _records(v):
            if field == "key":
                t = _text(rec.get("Key"))
                if t is not None:
                    out.append(t)
            else:
                for h in rec.get("Headers") or ():
                    if isinstance(h, dict):
                        out += [t for t in (_text(h.get("Key")), _text(h.get("Value"))) if t is not None]
    return out
