"""Broker addresses in answers, rewritten so that every later connection goes through the proxy.

A client learns where brokers are from its answers: Metadata's Brokers, FindCoordinator's node
(the top-level fields up to v3, ``Coordinators`` from v4), DescribeCluster's Brokers, Produce
(v10+) and Fetch (v16+) ``NodeEndpoints``, ShareFetch's and ShareAcknowledge's ``NodeEndpoints``,
DescribeQuorum's node listeners. Every ``{Host, Port}`` in such an answer is replaced by the
proxy's own address for that broker (``AddressBook``: one local port per broker, given when the
broker first appears). Everything else in the answer is written back exactly as it came (the
codec re-encodes what it decoded byte for byte: unknown tags and records bytes are kept).

ApiVersions answers are read too: for an address-carrying API whose advertised MaxVersion is
newer than kwire's specs, the proxy could not rewrite the answers of that version, so it caps
MaxVersion at the newest version the specs know (and says so): the client then asks a version
the proxy can rewrite.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kwire_cli.codec import decode_response, encode_response
from kwire_cli.spec.registry import registry

# api key -> the first version whose answers carry broker addresses
ADDRESS_APIS: dict[int, int] = {
    0: 10,   # Produce: NodeEndpoints (tagged)
    1: 16,   # Fetch: NodeEndpoints (tagged)
    3: 0,    # Metadata: Brokers
    10: 0,   # FindCoordinator: NodeId/Host/Port (v0-3), Coordinators (v4+)
    55: 0,   # DescribeQuorum: Nodes[].Listeners (v2+)
    60: 0,   # DescribeCluster: Brokers
    78: 0,   # ShareFetch: NodeEndpoints
    79: 0,   # ShareAcknowledge: NodeEndpoints
}
API_VERSIONS = 18


def carries_addresses(api_key: int, version: int) -> bool:
    first = ADDRESS_APIS.get(api_key)
    return first is not None and version >= first


def may_rewrite(api_key: int, version: int) -> bool:
    """Whether the answer to this request may be changed (and so is held whole before forwarding)."""
    return api_key == API_VERSIONS or carries_addresses(api_key, version)


@dataclass
class AddressBook:
    """Real broker address -> the proxy's local address for it. ``bind(host, port)`` is called for
    a broker seen for the first time and returns the local (host, port) it now listens on."""

    bind: Callable[[str, int], tuple[str, int]]
    local: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    def local_for(self, host: str, port: int) -> tuple[str, int]:
        key = (host, port)
        loc = self.local.get(key)
        if loc is None:
            loc = self.local[key] = self.bind(host, port)
        return loc


def _rewrite(node: Any, book: AddressBook, seen: list[tuple[str, int, str, int]]) -> None:
    if isinstance(node, list):
        for x in node:
            _rewrite(x, book, seen)
        return
    if not isinstance(node, dict):
        return
    host, port = node.get("Host"), node.get("Port")
    if isinstance(host, str) and host and isinstance(port, int) and not isinstance(port, bool) and port > 0:
        lhost, lport = book.local_for(host, port)
        if (lhost, lport) != (host, port):
            node["Host"], node["Port"] = lhost, lport
            seen.append((host, port, lhost, lport))
    for k, v in node.items():
        if isinstance(v, (dict, list)) and k != "Records":
            _rewrite(v, book, seen)


@dataclass
class Rewritten:
    data: bytes                    # the frame to forward, size prefix included
    changes: list[str]             # what was changed, one line each (for the output's notes)


def rewrite_response(frame: bytes, api_key: int, version: int, book: AddressBook) -> Rewritten | None:
    """The answer with its broker addresses replaced (or its ApiVersions capped); None when nothing
    changes (the original bytes are forwarded). ``frame`` includes the size prefix."""
    if api_key == API_VERSIONS:
        return _cap_versions(frame, version)
    if not carries_addresses(api_key, version):
        return None
    msg = decode_response(frame, api_key, version, size_prefixed=True, records="hex")
    if msg.layout_version is not None:
        return None
    seen: list[tuple[str, int, str, int]] = []
    _rewrite(msg.body, book, seen)
    if not seen:
        return None
    data = encode_response(api_key, version, msg.header, msg.body, size_prefix=True)
    changes = sorted({f"{h}:{p} -> {lh}:{lp}" for h, p, lh, lp in seen})
    return Rewritten(data, [f"{msg.api_name} v{version}: broker addresses rewritten: " + ", ".join(changes)])


def _cap_versions(frame: bytes, version: int) -> Rewritten | None:
    msg = decode_response(frame, API_VERSIONS, version, size_prefixed=True, records="hex")
    if msg.layout_version is not None:  # a KIP-511 answer: the client asks again
        return None
    reg = registry()
    capped = []
    for entry in msg.body.get("ApiKeys") or []:
        key = entry.get("ApiKey")
        if key not in ADDRESS_APIS or key not in reg.apis:
            continue
        newest = min(reg.apis[key].request.valid_versions.hi, reg.apis[key].response.valid_versions.hi)
        if entry.get("MaxVersion", -1) > newest >= entry.get("MinVersion", 0):
            capped.append(f"{reg.apis[key].name} {entry['MaxVersion']} -> {newest}")
            entry["MaxVersion"] = newest
    if not capped:
        return None
    data = encode_response(API_VERSIONS, version, msg.header, msg.body, size_prefix=True)
    return Rewritten(data, ["ApiVersions: MaxVersion capped at the newest version kwire can rewrite "
                            "addresses in: " + ", ".join(capped)])
