"""Specs of the records Kafka keeps in its internal topics, and which topic holds which.

Three families, chosen by topic name (the same record type numbers mean different records in
different coordinators' topics):

* coordinator records (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``):
  the key is an int16 *key type* then the key struct, the value an int16 value version then the
  value struct. In Kafka's ``"type": "data"`` files the key type is the ``validVersions`` of the
  ``...Key`` spec (OffsetCommitKey: 0 and 1, GroupMetadataKey: 2, ...), and the key struct is read
  at that version; in the later ``"coordinator-key"`` / ``"coordinator-value"`` form it is the
  ``apiKey`` and the key is read at version 0.
* KRaft metadata records (``__cluster_metadata``): ``"type": "metadata"`` with an ``apiKey``.
* KRaft control records: in the message specs (LeaderChangeMessage, SnapshotHeaderRecord, ...).

kwire's own facts-only copies live in ``record-specs/`` (``scripts/import_record_specs.py``); a
folder of Kafka's files, or a Kafka checkout, loads the same way (``use_record_specs``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from kwire_cli.errors import KwireError, SpecError
from kwire_cli.spec.jsonc import loads_jsonc
from kwire_cli.spec.model import MessageSpec, build_message_spec

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
SHARE_GROUP_STATE = "__share_group_state"
CLUSTER_METADATA = "__cluster_metadata"
COORDINATOR_TOPICS = (CONSUMER_OFFSETS, TRANSACTION_STATE, SHARE_GROUP_STATE)
INTERNAL_TOPICS = COORDINATOR_TOPICS + (CLUSTER_METADATA,)

# the records of each coordinator's topic, by name prefix (a record of any other name is a group
# coordinator's: offsets, classic groups, KIP-848 consumer groups, share groups, streams groups)
_TOPIC_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (TRANSACTION_STATE, ("TransactionLog",)),
    (SHARE_GROUP_STATE, ("ShareSnapshot", "ShareUpdate")),
)

# KRaft control record types (the key's int16 type) and the message spec of each value;
# 0 and 1 are transaction markers (the records layer decodes those itself)
CONTROL_TYPES: dict[int, str] = {
    2: "LeaderChangeMessage",
    3: "SnapshotHeaderRecord",
    4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord",
    6: "VotersRecord",
}


def coordinator_topic(name: str) -> str:
    """The internal topic a coordinator record of this spec name lives in."""
    for topic, prefixes in _TOPIC_PREFIXES:
        if name.startswith(prefixes):
            return topic
    return CONSUMER_OFFSETS


@dataclass(frozen=True)
class CoordinatorRecord:
    """One coordinator record type: its key type, key and value specs, and the version its key
    struct is read at."""

    topic: str
    key_type: int
    key: MessageSpec
    value: MessageSpec
    key_version: int


@dataclass
class RecordSpecs:
    """All record specs of one folder."""

    folder: str
    coordinator: dict[str, dict[int, CoordinatorRecord]] = field(default_factory=dict)
    metadata: dict[int, MessageSpec] = field(default_factory=dict)
    by_name: dict[str, MessageSpec] = field(default_factory=dict)

    def coordinator_record(self, topic: str, key_type: int) -> CoordinatorRecord | None:
        return self.coordinator.get(topic, {}).get(key_type)

    def metadata_record(self, api_key: int) -> MessageSpec | None:
        return self.metadata.get(api_key)


def _record_files(path: Path) -> list[Path]:
    files = sorted(path.rglob("*.json"))
    # a Kafka checkout: only the folders of message definitions, not build output or tests
    return [f for f in files if "build" not in f.parts and "test" not in f.parts]


def load_record_folder(folder: str | os.PathLike[str]) -> RecordSpecs:
    """Every record spec under ``folder`` (searched recursively; request, response and header
    specs found there are skipped)."""
    path = Path(folder)
    if not path.is_dir():
        raise KwireError(f"record specs folder {folder} does not exist")
    out = RecordSpecs(str(path))
    keys: list[MessageSpec] = []
    for f in _record_files(path):
        try:
            raw = loads_jsonc(f.read_text(encoding="utf-8"), source=str(f))
        except UnicodeDecodeError:
            raise SpecError(f"{f}: not UTF-8 text") from None
        if not isinstance(raw, dict) or raw.get("type") not in ("data", "metadata", "coordinator-key",
                                                                  "coordinator-value"):
            continue
        spec = build_message_spec(raw, source=str(f))
        if spec.name in out.by_name:
            raise SpecError(f"{f}: record {spec.name} is also defined in {out.by_name[spec.name].source}")
        out.by_name[spec.name] = spec
        if spec.type == "metadata":
            if spec.api_key is None:
                raise SpecError(f"{f}: metadata record {spec.name} has no apiKey")
            if spec.api_key in out.metadata:
                raise SpecError(f"{f}: metadata apiKey {spec.api_key} is also {out.metadata[spec.api_key].name}")
            out.metadata[spec.api_key] = spec
        elif spec.name.endswith("Key") and spec.type in ("data", "coordinator-key"):
            keys.append(spec)
    for key in keys:
        value = out.by_name.get(key.name[:-3] + "Value")
        if value is None:
            continue  # a "...Key" data spec without a value: not a coordinator record
        topic = coordinator_topic(key.name)
        table = out.coordinator.setdefault(topic, {})
        if key.type == "coordinator-key":
            if key.api_key is None:
                raise SpecError(f"{key.source}: coordinator key {key.name} has no apiKey")
            types = [(key.api_key, key.valid_versions.lo)]
        else:
            types = [(t, t) for t in range(key.valid_versions.lo, key.valid_versions.hi + 1)]
        for key_type, key_version in types:
            if key_type in table:
                raise SpecError(f"{key.source}: key type {key_type} of {topic} is also {table[key_type].key.name}")
            table[key_type] = CoordinatorRecord(topic, key_type, key, value, key_version)
    if not out.by_name:
        raise KwireError(f"record specs folder {folder} holds no record specs")
    return out


@cache
def bundled_record_folder() -> Path:
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_bundled_record_specs", here.parent / "record-specs"):
        if candidate.is_dir():
            return candidate
    raise KwireError("kwire's bundled record specs are missing from this installation")


_override: str | None = None
_current: RecordSpecs | None = None


def use_record_specs(folder: str | None) -> None:
    """Read record specs from another folder (a Kafka checkout, or its record folders)."""
    global _override, _current
    _override = folder
    _current = None


@cache
def _load(folder: str) -> RecordSpecs:
    return load_record_folder(folder)


def record_specs() -> RecordSpecs:
    """The record specs in use: from ``use_record_specs``, ``KWIRE_RECORD_SPECS`` or the bundled ones."""
    global _current
    specs = _current
    if specs is None:
        folder = _override or os.environ.get("KWIRE_RECORD_SPECS") or str(bundled_record_folder())
        specs = _current = _load(folder)
    return specs
