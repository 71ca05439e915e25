"""Which header version goes with which API version (KIP-482).

Requests: header v0 only for ControlledShutdown v0 (it had no client id), v2 in the API's
flexible versions, v1 otherwise. Responses: v1 in flexible versions, v0 otherwise, except
ApiVersions, whose response header is always v0 so that a client that sent a version the
broker does not know can still read the answer.
"""
from __future__ import annotations

from kwire_cli.spec.registry import Api

CONTROLLED_SHUTDOWN = 7
API_VERSIONS = 18


def request_header_version(api: Api, version: int) -> int:
    if api.key == CONTROLLED_SHUTDOWN and version == 0:
        return 0
    return 2 if version in api.request.flexible_versions else 1


def response_header_version(api: Api, version: int) -> int:
    if api.key == API_VERSIONS:
        return 0
    return 1 if version in api.response.flexible_versions else 0
