"""Expert findings: what in a capture deserves a look, each pointing at a file and frame.

Kinds: ``unanswered`` (a request with no answer in the capture; Produce with acks 0 expects none),
``error_code`` (an answer with a non-zero error code; MEMBER_ID_REQUIRED and REBALANCE_IN_PROGRESS,
steps of a normal rebalance, are notes), ``throttled`` (ThrottleTimeMs > 0), ``retry`` (a Produce
batch resent), ``sequence_anomaly``, ``version_not_advertised`` (a request version outside the
broker's ApiVersions answer), ``deprecated_version``, ``removed_version`` (a version below the
oldest the specs know), ``undecodable``, ``violation`` (the frame breaks a rule of the format),
``unknown_tagged_field`` (tagged fields the specs do not know, in the header or the body's top
level), ``crc_failure`` (a record batch whose CRC does not match), ``oversized_batch`` (a record
batch over 1,048,588 bytes, the broker's default message.max.bytes), ``rebalance`` (a group
generation after the first). The first ``MAX_LISTED`` by position are listed; ``expert_counts``
counts every finding by kind.
"""
from __future__ import annotations

from typing import Any

from kwire_cli.capture.summary import Facts, row_facts
from kwire_cli.errors import KwireError
from kwire_cli.spec.registry import registry

MAX_LISTED = 1000
OVERSIZED = 1_048_588
NORMAL_CODES = frozenset({"MEMBER_ID_REQUIRED", "REBALANCE_IN_PROGRESS"})


_deprecated_range: dict[tuple[str, Any], tuple[int, int]] = {}  # (specs folder, api key) -> deprecated versions


def deprecated(key: int, version: int) -> bool:
    reg = registry()
    rng = _deprecated_range.get((reg.folder, key))
    if rng is None:
        rng = _deprecated_versions(reg.folder, key)
    return rng[0] <= version <= rng[1]


def _deprecated_versions(folder: str, key: Any) -> tuple[int, int]:
    try:
        v = registry().api(key).request.deprecated_versions
        rng = (v.lo, v.hi)
    except KwireError:
        rng = (1, 0)  # (none)
    _deprecated_range[(folder, key)] = rng
    return rng


def oldest(key: int) -> int | None:
    try:
        return registry().api(key).request.valid_versions.lo
    except KwireError:
        return None


class Expert:
    """Findings with positions; counts by kind."""

    def __init__(self) -> None:
        self.found: list[tuple[Any, dict[str, Any]]] = []
        self.counts: dict[str, int] = {}
        self._deprecated: dict[Any, tuple[int, int]] = {}  # api key -> deprecated versions (lo, hi)

    def add(self, pos: Any, severity: str, kind: str, message: str, r: dict[str, Any] | None,
            client_id: Any = None, broker: Any = None) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self.found) >= 2 * MAX_LISTED:
            self._trim()
        if r is not None:
            f = {"severity": severity, "kind": kind, "message": message, "file": r.get("file"),
                 "frame": r.get("frame"), "client_id": r.get("client_id"),
                 "broker": r["dst"] if r.get("kind") == "request" else r.get("src")}
        else:
            f = {"severity": severity, "kind": kind, "message": message, "file": None, "frame": None,
                 "client_id": client_id, "broker": broker}
        self.found.append((pos, f))

    def _trim(self) -> None:
        self.found.sort(key=lambda pf: pf[0])
        del self.found[MAX_LISTED:]

    def row(self, r: dict[str, Any], pos: Any) -> None:
        """The findings one row shows by itself."""
        self.count(r, pos, row_facts(r))

    def count(self, r: dict[str, Any], pos: Any, facts: Facts) -> None:
        """``row`` with the row's ``row_facts`` read by the caller."""
        kind, key, _name, version, err, body, _size, _lat, codes = facts
        get = r.get
        if err is not None:
            kind = get("error_kind")
            if kind == "unknown-version" and get("api_key") is not None and get("api_version") is not None:
                lo = oldest(r["api_key"])
                if lo is not None and r["api_version"] < lo:
                    self.add(pos, "error", "removed_version",
                             f"{_api(r)} {r['kind']}: a version older than any the specs know (removed)", r)
                    return
            self.add(pos, "error", "undecodable", f"{r['kind']} did not decode: {err}", r)
            return
        if get("violations"):
            rules = sorted({v.get("rule") for v in r["violations"]}, key=str)
            self.add(pos, "warning", "violation", f"{_api(r)} {r['kind']} breaks {', '.join(map(str, rules))}", r)
        if kind == "request":
            if key is not None and version is not None:
                rng = self._deprecated.get(key)
                if rng is None:
                    rng = self._deprecated[key] = _deprecated_versions(registry().folder, key)
                if rng[0] <= version <= rng[1]:
                    self.add(pos, "note", "deprecated_version", f"{_api(r)} is a deprecated version", r)
        elif kind == "response":
            if codes:
                sev = "note" if all(c in NORMAL_CODES for c in codes) else "warning"
                self.add(pos, sev, "error_code", f"{_api(r)} answered {', '.join(sorted(set(codes)))}", r)
            if isinstance(body, dict):
                t = body.get("ThrottleTimeMs")
                if isinstance(t, int) and t > 0:
                    self.add(pos, "note", "throttled", f"{_api(r)} answer throttled {t} ms", r)
        if isinstance(body, dict) and "_unknown_tags" in body:
            self.add(pos, "note", "unknown_tagged_field", f"{_api(r)} {kind} carries tagged fields the specs "
                     "do not know", r)
            return
        header = get("header")
        if isinstance(header, dict) and "_unknown_tags" in header:
            self.add(pos, "note", "unknown_tagged_field", f"{_api(r)} {kind} carries tagged fields the specs "
                     "do not know", r)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_deprecated"] = {}  # (from the specs where it is unpickled)
        return state

    def batch(self, b: dict[str, Any], r: dict[str, Any], pos: Any, where: str) -> None:
        """The findings of one record batch."""
        if b.get("CrcValid") is False:
            self.add(pos, "error", "crc_failure", f"record batch at offset {b.get('BaseOffset')} of {where}: CRC "
                     f"{b.get('Crc')} does not match {b.get('CrcComputed')}", r)
        n = b.get("BatchLength")
        if isinstance(n, int) and n > OVERSIZED:
            self.add(pos, "warning", "oversized_batch", f"record batch of {n} bytes in {where} (over "
                     f"{OVERSIZED}, the broker's default message.max.bytes)", r)

    def merge(self, o: Expert) -> None:
        for k, n in o.counts.items():
            self.counts[k] = self.counts.get(k, 0) + n
        self.found.extend(o.found)
        if len(self.found) > 2 * MAX_LISTED:
            self._trim()

    def to_list(self) -> list[dict[str, Any]]:
        self._trim()
        return [f for _, f in self.found]


def _api(r: dict[str, Any]) -> str:
    """A row's API and version as findings name them ("Fetch v11")."""
    return f"{r.get('api_name')} v{r.get('api_version')}"
