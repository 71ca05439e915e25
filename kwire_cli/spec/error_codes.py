"""Kafka protocol error codes, as facts: code -> (NAME, retriable).

Names, codes and the retriable flag follow the error table Apache Kafka publishes in its protocol
documentation (generated from ``org.apache.kafka.common.protocol.Errors``; checked against the
Kafka 4.2 table, codes -1..133). A code is "retriable" when Kafka maps it to a
``RetriableException``: the same request may succeed if sent again later.
"""
from __future__ import annotations

from typing import NamedTuple


class ErrorInfo(NamedTuple):
    name: str
    retriable: bool


_R, _N = True, False

#: code -> (NAME, retriable)
ERRORS: dict[int, ErrorInfo] = {code: ErrorInfo(name, retriable) for code, name, retriable in (
    (-1, "UNKNOWN_SERVER_ERROR", _N),
    (0, "NONE", _N),
    (1, "OFFSET_OUT_OF_RANGE", _N),
    (2, "CORRUPT_MESSAGE", _R),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", _R),
    (4, "INVALID_FETCH_SIZE", _N),
    (5, "LEADER_NOT_AVAILABLE", _R),
    (6, "NOT_LEADER_OR_FOLLOWER", _R),
    (7, "REQUEST_TIMED_OUT", _R),
    (8, "BROKER_NOT_AVAILABLE", _N),
    (9, "REPLICA_NOT_AVAILABLE", _R),
    (10, "MESSAGE_TOO_LARGE", _N),
    (11, "STALE_CONTROLLER_EPOCH", _N),
    (12, "OFFSET_METADATA_TOO_LARGE", _N),
    (13, "NETWORK_EXCEPTION", _R),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", _R),
    (15, "COORDINATOR_NOT_AVAILABLE", _R),
    (16, "NOT_COORDINATOR", _R),
    (17, "INVALID_TOPIC_EXCEPTION", _N),
    (18, "RECORD_LIST_TOO_LARGE", _N),
    (19, "NOT_ENOUGH_REPLICAS", _R),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", _R),
    (21, "INVALID_REQUIRED_ACKS", _N),
    (22, "ILLEGAL_GENERATION", _N),
    (23, "INCONSISTENT_GROUP_PROTOCOL", _N),
    (24, "INVALID_GROUP_ID", _N),
    (25, "UNKNOWN_MEMBER_ID", _N),
    (26, "INVALID_SESSION_TIMEOUT", _N),
    (27, "REBALANCE_IN_PROGRESS", _N),
    (28, "INVALID_COMMIT_OFFSET_SIZE", _N),
    (29, "TOPIC_AUTHORIZATION_FAILED", _N),
    (30, "GROUP_AUTHORIZATION_FAILED", _N),
    (31, "CLUSTER_AUTHORIZATION_FAILED", _N),
    (32, "INVALID_TIMESTAMP", _N),
    (33, "UNSUPPORTED_SASL_MECHANISM", _N),
    (34, "ILLEGAL_SASL_STATE", _N),
    (35, "UNSUPPORTED_VERSION", _N),
    (36, "TOPIC_ALREADY_EXISTS", _N),
    (37, "INVALID_PARTITIONS", _N),
    (38, "INVALID_REPLICATION_FACTOR", _N),
    (39, "INVALID_REPLICA_ASSIGNMENT", _N),
    (40, "INVALID_CONFIG", _N),
    (41, "NOT_CONTROLLER", _R),
    (42, "INVALID_REQUEST", _N),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", _N),
    (44, "POLICY_VIOLATION", _N),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", _N),
    (46, "DUPLICATE_SEQUENCE_NUMBER", _N),
    (47, "INVALID_PRODUCER_EPOCH", _N),
    (48, "INVALID_TXN_STATE", _N),
    (49, "INVALID_PRODUCER_ID_MAPPING", _N),
    (50, "INVALID_TRANSACTION_TIMEOUT", _N),
    (51, "CONCURRENT_TRANSACTIONS", _R),
    (52, "TRANSACTION_COORDINATOR_FENCED", _N),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", _N),
    (54, "SECURITY_DISABLED", _N),
    (55, "OPERATION_NOT_ATTEMPTED", _N),
    (56, "KAFKA_STORAGE_ERROR", _R),
    (57, "LOG_DIR_NOT_FOUND", _N),
    (58, "SASL_AUTHENTICATION_FAILED", _N),
    (59, "UNKNOWN_PRODUCER_ID", _N),
    (60, "REASSIGNMENT_IN_PROGRESS", _N),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", _N),
    (62, "DELEGATION_TOKEN_NOT_FOUND", _N),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", _N),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", _N),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", _N),
    (66, "DELEGATION_TOKEN_EXPIRED", _N),
    (67, "INVALID_PRINCIPAL_TYPE", _N),
    (68, "NON_EMPTY_GROUP", _N),
    (69, "GROUP_ID_NOT_FOUND", _N),
    (70, "FETCH_SESSION_ID_NOT_FOUND", _R),
    (71, "INVALID_FETCH_SESSION_EPOCH", _R),
    (72, "LISTENER_NOT_FOUND", _R),
    (73, "TOPIC_DELETION_DISABLED", _N),
    (74, "FENCED_LEADER_EPOCH", _R),
    (75, "UNKNOWN_LEADER_EPOCH", _R),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", _N),
    (77, "STALE_BROKER_EPOCH", _N),
    (78, "OFFSET_NOT_AVAILABLE", _R),
    (79, "MEMBER_ID_REQUIRED", _N),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", _R),
    (81, "GROUP_MAX_SIZE_REACHED", _N),
    (82, "FENCED_INSTANCE_ID", _N),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", _R),
    (84, "ELECTION_NOT_NEEDED", _R),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", _N),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", _N),
    (87, "INVALID_RECORD", _N),
    (88, "UNSTABLE_OFFSET_COMMIT", _R),
    (89, "THROTTLING_QUOTA_EXCEEDED", _R),
    (90, "PRODUCER_FENCED", _N),
    (91, "RESOURCE_NOT_FOUND", _N),
    (92, "DUPLICATE_RESOURCE", _N),
    (93, "UNACCEPTABLE_CREDENTIAL", _N),
    (94, "INCONSISTENT_VOTER_SET", _N),
    (95, "INVALID_UPDATE_VERSION", _N),
    (96, "FEATURE_UPDATE_FAILED", _N),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", _N),
    (98, "SNAPSHOT_NOT_FOUND", _N),
    (99, "POSITION_OUT_OF_RANGE", _N),
    (100, "UNKNOWN_TOPIC_ID", _R),
    (101, "DUPLICATE_BROKER_REGISTRATION", _N),
    (102, "BROKER_ID_NOT_REGISTERED", _N),
    (103, "INCONSISTENT_TOPIC_ID", _R),
    (104, "INCONSISTENT_CLUSTER_ID", _N),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", _N),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", _R),
    (107, "INELIGIBLE_REPLICA", _N),
    (108, "NEW_LEADER_ELECTED", _N),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", _N),
    (110, "FENCED_MEMBER_EPOCH", _N),
    (111, "UNRELEASED_INSTANCE_ID", _N),
    (112, "UNSUPPORTED_ASSIGNOR", _N),
    (113, "STALE_MEMBER_EPOCH", _N),
    (114, "MISMATCHED_ENDPOINT_TYPE", _N),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", _N),
    (116, "UNKNOWN_CONTROLLER_ID", _N),
    (117, "UNKNOWN_SUBSCRIPTION_ID", _N),
    (118, "TELEMETRY_TOO_LARGE", _N),
    (119, "INVALID_REGISTRATION", _N),
    (120, "TRANSACTION_ABORTABLE", _N),
    (121, "INVALID_RECORD_STATE", _N),
    (122, "SHARE_SESSION_NOT_FOUND", _R),
    (123, "INVALID_SHARE_SESSION_EPOCH", _R),
    (124, "FENCED_STATE_EPOCH", _N),
    (125, "INVALID_VOTER_KEY", _N),
    (126, "DUPLICATE_VOTER", _N),
    (127, "VOTER_NOT_FOUND", _N),
    (128, "INVALID_REGULAR_EXPRESSION", _N),
    (129, "REBOOTSTRAP_REQUIRED", _N),
    (130, "STREAMS_INVALID_TOPOLOGY", _N),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", _N),
    (132, "STREAMS_TOPOLOGY_FENCED", _N),
    (133, "SHARE_SESSION_LIMIT_REACHED", _R),
)}

_BY_NAME: dict[str, int] = {info.name: code for code, info in ERRORS.items()}

NONE = 0
UNSUPPORTED_VERSION = 35


def error_name(code: int) -> str:
    """The Kafka name of an error code; ``UNKNOWN_ERROR_CODE_<n>`` for a code Kafka has not defined."""
    info = ERRORS.get(code)
    return info.name if info is not None else f"UNKNOWN_ERROR_CODE_{code}"


def error_code(name: str) -> int:
    """The code for a Kafka error name (case-insensitive); ``KeyError`` naming it when unknown."""
    try:
        return _BY_NAME[name.strip().upper()]
    except KeyError:
        raise KeyError(f"unknown Kafka error name {name!r}") from None


def is_retriable(code: int) -> bool:
    """Whether Kafka treats the error as retriable; ``False`` for unknown codes."""
    info = ERRORS.get(code)
    return bool(info and info.retriable)
