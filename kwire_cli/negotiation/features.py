"""What a KRaft cluster's finalized features (KIP-584) mean for its clients, as an ApiVersions
answer's FinalizedFeatures gives them: a feature name and the level the cluster runs at.

A broker advertises the versions of an API whatever the feature levels, but several APIs only
work (or a broker only advertises them) once the feature that gates them is finalized at a level.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# feature -> (what it gates, meaning per level); a level not listed is explained as "level N"
FEATURES: dict[str, tuple[str, dict[int, str]]] = {
    "metadata.version": ("the cluster's metadata format and inter-broker protocol (KIP-778)", {
        7: "3.3-IV3, the lowest a 4.x broker accepts",
        22: "4.0-IV0",
        30: "4.3-IV0",
    }),
    "kraft.version": ("the controller quorum (KIP-853)", {
        0: "a static quorum (controller.quorum.voters)",
        1: "a dynamic quorum: AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter",
    }),
    "group.version": ("the consumer group protocol (KIP-848)", {
        0: "classic groups only (JoinGroup / SyncGroup / Heartbeat)",
        1: "KIP-848 consumer groups too: ConsumerGroupHeartbeat, group.protocol=consumer",
    }),
    "transaction.version": ("the transaction protocol (KIP-890)", {
        0: "classic transactions",
        1: "flexible transaction log records",
        2: "KIP-890 part 2, server-side defense: the producer epoch is bumped at every transaction's "
           "end (EndTxn v5+)",
    }),
    "share.version": ("share groups (KIP-932, queues)", {
        0: "off: ShareGroupHeartbeat / ShareFetch / ShareAcknowledge refused",
        1: "share groups on: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge",
    }),
    "streams.version": ("the Streams rebalance protocol (KIP-1071)", {
        0: "off: Kafka Streams uses classic groups",
        1: "streams groups on: StreamsGroupHeartbeat, StreamsGroupDescribe",
    }),
    "eligible.leader.replicas.version": ("eligible leader replicas (KIP-966)", {
        0: "off",
        1: "on: a partition keeps an ELR set for clean leader election",
    }),
}


def explain(name: str, level: int) -> str:
    """One line: what the feature at this level means ("group.version 1: KIP-848 consumer groups ...")."""
    known = FEATURES.get(name)
    if known is None:
        return f"{name} {level}"
    what, levels = known
    return f"{name} {level} ({what}): {levels.get(level, f'level {level}')}"


def finalized(brokers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The finalized features every broker answer gave (the highest level any gave), explained."""
    levels: dict[str, int] = {}
    for b in brokers:
        for name, rng in (b.get("finalized_features") or {}).items():
            top = rng[1] if isinstance(rng, (list, tuple)) else int(rng)
            levels[name] = max(levels.get(name, top), top)
    return [{"feature": n, "level": lv, "meaning": explain(n, lv)} for n, lv in sorted(levels.items())]
