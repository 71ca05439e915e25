"""What some values of the group protocols mean, as protocol facts: the codes and sentinels that
KIP-848 consumer groups, KIP-932 share groups and KIP-1071 streams groups carry as plain integers,
and one-line readings of the small structs those APIs repeat (a task, an endpoint, a batch of
acquired records or of acknowledgements).

Keyed by the struct (or message) a field is in and the field's name, as the specs name them, so a
MemberEpoch of a heartbeat reads "join" while OffsetCommit's MemberEpoch is left alone.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_JOIN_LEAVE = {0: "join", -1: "leave"}
_JOIN_LEAVE_STATIC = {0: "join", -1: "leave", -2: "leave, the static member will rejoin"}
ACKNOWLEDGE_TYPES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}

# (struct or message name, field name) -> value -> meaning
VALUES: dict[tuple[str, str], dict[int, str]] = {
    ("ConsumerGroupHeartbeatRequest", "MemberEpoch"): _JOIN_LEAVE_STATIC,
    ("StreamsGroupHeartbeatRequest", "MemberEpoch"): _JOIN_LEAVE_STATIC,
    ("ShareGroupHeartbeatRequest", "MemberEpoch"): _JOIN_LEAVE,
    ("AcknowledgementBatch", "AcknowledgeTypes"): ACKNOWLEDGE_TYPES,
    ("ShareFetchRequest", "ShareAcquireMode"): {0: "batch-optimized", 1: "record-limit"},
    ("Status", "StatusCode"): {0: "STALE_TOPOLOGY", 1: "MISSING_SOURCE_TOPICS", 2: "INCORRECTLY_PARTITIONED_TOPICS",
                               3: "MISSING_INTERNAL_TOPICS", 4: "SHUTDOWN_APPLICATION", 5: "ASSIGNMENT_DELAYED"},
}


def value_meaning(struct: str | None, field: str, value: Any) -> str | None:
    """What an integer value of a field means ("accept", "join"), or None."""
    if struct is None or isinstance(value, bool) or not isinstance(value, int):
        return None
    table = VALUES.get((struct, field))
    return table.get(value) if table is not None else None


def _task_ids(v: Mapping[str, Any]) -> str | None:
    sub, parts = v.get("SubtopologyId"), v.get("Partitions")
    if not isinstance(parts, list):
        return None
    return "tasks " + ", ".join(f"{sub}_{p}" for p in parts) if parts else f"subtopology {sub}: no tasks"


def _acquired(v: Mapping[str, Any]) -> str | None:
    first, last, count = v.get("FirstOffset"), v.get("LastOffset"), v.get("DeliveryCount")
    if not (isinstance(first, int) and isinstance(last, int)):
        return None
    return f"offsets {first}-{last} ({last - first + 1} records), delivery {count}"


def _acknowledged(v: Mapping[str, Any]) -> str | None:
    first, last, types = v.get("FirstOffset"), v.get("LastOffset"), v.get("AcknowledgeTypes")
    if not (isinstance(first, int) and isinstance(last, int) and isinstance(types, list)):
        return None
    names = [ACKNOWLEDGE_TYPES.get(t, str(t)) if isinstance(t, int) else str(t) for t in types]
    if len(set(names)) == 1:
        return f"offsets {first}-{last}: {names[0]}"
    return f"offsets {first}-{last}: " + ", ".join(names)  # one type per offset


def _endpoint(v: Mapping[str, Any]) -> str | None:
    host, port = v.get("Host"), v.get("Port")
    return f"{host}:{port}" if isinstance(host, str) and isinstance(port, int) else None


def _task_offset(v: Mapping[str, Any]) -> str | None:
    sub, p, off = v.get("SubtopologyId"), v.get("Partition"), v.get("Offset")
    return f"task {sub}_{p} at offset {off}" if p is not None else None


def _key_value(v: Mapping[str, Any]) -> str | None:
    key, value = v.get("Key"), v.get("Value")
    return f"{key}={value}" if isinstance(key, str) else None


def _topic_info(v: Mapping[str, Any]) -> str | None:
    name, parts, rf = v.get("Name"), v.get("Partitions"), v.get("ReplicationFactor")
    if not isinstance(name, str):
        return None
    return f"{name}: {parts or 'as its source'} partitions, replication {rf or 'default'}"


def _topic_partitions(v: Mapping[str, Any]) -> str | None:
    """A KIP-848 / share assignment's entry (TopicId) or a streams endpoint's (Topic)."""
    topic, parts = v.get("TopicId", v.get("Topic")), v.get("Partitions")
    if not isinstance(parts, list) or topic is None:
        return None
    return f"{topic}: partition{'' if len(parts) == 1 else 's'} {', '.join(map(str, parts)) or 'none'}"


# struct name -> its value in one line
STRUCTS = {"TaskIds": _task_ids, "AcquiredRecords": _acquired, "AcknowledgementBatch": _acknowledged,
           "Endpoint": _endpoint, "TaskOffset": _task_offset, "KeyValue": _key_value, "TopicInfo": _topic_info,
           "TopicPartitions": _topic_partitions, "TopicPartition": _topic_partitions}


def struct_reading(struct: str | None, value: Any) -> str | None:
    """One line saying what a struct value is ("tasks 0_1, 0_2", "offsets 10-19 (10 records),
    delivery 1", "host:8080"), or None for structs without one."""
    read = STRUCTS.get(struct or "")
    if read is None or not isinstance(value, Mapping):
        return None
    try:
        return read(value)
    except (TypeError, ValueError):  # a hand-written value tree of the wrong shape
        return None
