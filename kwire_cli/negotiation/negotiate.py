"""KIP-35 version negotiation, pure logic: ranges in, a JSON-ready result out.

For each API:
* each broker advertises an inclusive range [min, max];
* the range common to all brokers is [max of the mins, min of the maxes] (KIP-35's "versions
  state built by client");
* the client uses the highest version in (client range ∩ common range), or none, with the reason.

A feature (KIP-35's scenario) needs, for each of its APIs, some version in its required range that
the brokers' common range and the client's range also hold; it is usable when every API it needs
passes.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.features import finalized
from kwire_cli.negotiation.model import BrokerAnswer, Range

Requirement = tuple[int, int, int]  # (api key, min version, max version)


def intersect(a: Range | None, b: Range | None) -> Range | None:
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def common_range(ranges: Iterable[Range]) -> Range | None:
    """KIP-35: the max of the mins and the min of the maxes; None when they cross or no range."""
    rs = list(ranges)
    if not rs:
        return None
    lo, hi = max(r[0] for r in rs), min(r[1] for r in rs)
    return (lo, hi) if lo <= hi else None


def fmt(r: Range | None) -> str:
    if r is None:
        return "none"
    return f"v{r[0]}" if r[0] == r[1] else f"v{r[0]}-{r[1]}"


def negotiate(client_ranges: Mapping[int, Range], brokers: Sequence[BrokerAnswer],
              required_features: Mapping[str, Sequence[Requirement]] | None = None,
              api_names: Mapping[int, str] | None = None) -> dict:
    """Compute the negotiation result.

    Returns {"apis": [...], "features": [...], "brokers": [...]}: one entry per API key known to
    the client or any broker, one per required feature, and what each broker answer said beyond
    its ranges (errors, notes, SupportedFeatures/FinalizedFeatures).

    A broker whose answer is incomplete (an error, or KIP-511's UNSUPPORTED_VERSION answer that
    lists only ApiVersions) takes part only for the APIs it lists; it is left out of an API's
    `brokers` map when it does not list it, instead of counting as "API missing".
    """
    names = _names(api_names, brokers)
    addresses = [b.address for b in brokers]
    if len(set(addresses)) != len(addresses):
        dup = sorted({a for a in addresses if addresses.count(a) > 1})
        raise NegotiationError(f"two broker answers share the address {dup[0]}")

    keys = sorted(set(client_ranges) | {k for b in brokers for k in b.ranges})
    apis = [_api_entry(k, names, client_ranges, brokers) for k in keys]

    features = []
    for fname, reqs in (required_features or {}).items():
        features.append(_feature_entry(fname, reqs, names, client_ranges, brokers))

    answers = [b.to_json() for b in brokers]
    return {"apis": apis, "features": features, "brokers": answers, "finalized_features": finalized(answers)}


def _names(api_names: Mapping[int, str] | None, brokers: Sequence[BrokerAnswer]) -> dict[int, str]:
    names: dict[int, str] = {}
    for b in brokers:
        for k, n in b.names.items():
            names.setdefault(k, n)
    names.update(api_names or {})
    return names


def _name(names: Mapping[int, str], key: int) -> str:
    return names.get(key, f"UNKNOWN({key})")


def _valid(r: Range | None) -> Range | None:
    return r if r is not None and r[0] <= r[1] else None


def _broker_view(key: int, brokers: Sequence[BrokerAnswer]) -> tuple[dict, list[str], list[Range]]:
    """(brokers map for the JSON, addresses missing the API, valid ranges of those that list it)."""
    view: dict[str, list[int] | None] = {}
    missing: list[str] = []
    ranges: list[Range] = []
    for b in brokers:
        r = b.ranges.get(key)
        if r is None:
            if b.complete:
                view[b.address] = None
                missing.append(b.address)
            continue
        view[b.address] = [r[0], r[1]]
        if _valid(r) is None:
            missing.append(b.address)
        else:
            ranges.append(r)
    return view, missing, ranges


def _api_entry(key: int, names: Mapping[int, str], client_ranges: Mapping[int, Range],
               brokers: Sequence[BrokerAnswer]) -> dict:
    client = client_ranges.get(key)
    view, missing, ranges = _broker_view(key, brokers)
    common = common_range(ranges) if ranges and not missing else None
    chosen: int | None = None
    reason: str | None = None
    name = _name(names, key)
    if not brokers:
        reason = "no broker answer given"
    elif missing:
        reason = f"not supported by broker{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    elif not ranges:
        reason = "no broker answer lists this API (the answers given are incomplete)"
    elif common is None:
        reason = ("the brokers share no version: "
                  + ", ".join(f"{a} {fmt(tuple(r))}" for a, r in view.items() if r is not None))
    if client is None or _valid(client) is None:
        creason = "the client does not support this API"
        reason = creason if reason is None else f"{creason}; {reason}"
    elif reason is None and common is not None:
        both = intersect(client, common)
        if both is None:
            side = "client too old" if client[1] < common[0] else "brokers too old"
            reason = (f"client range {fmt(client)} and brokers' common range {fmt(common)} do not "
                      f"overlap ({side})")
        else:
            chosen = both[1]
    return {
        "api_key": key,
        "api_name": name,
        "client": list(client) if client is not None else None,
        "brokers": view,
        "common": list(common) if common is not None else None,
        "chosen": chosen,
        "reason": reason,
    }


def _feature_entry(fname: str, reqs: Sequence[Requirement], names: Mapping[int, str],
                   client_ranges: Mapping[int, Range], brokers: Sequence[BrokerAnswer]) -> dict:
    entries = []
    for key, lo, hi in reqs:
        required = (lo, hi)
        name = _name(names, key)
        label = name if name.startswith("UNKNOWN(") else f"{name}({key})"
        client = _valid(client_ranges.get(key))
        _view, missing, ranges = _broker_view(key, brokers)
        common = common_range(ranges) if ranges and not missing else None
        both = intersect(intersect(required, common), client)
        chosen = None
        if lo > hi:
            reason = f"{label}: required range {lo}-{hi} runs backwards"
        elif not brokers:
            reason = f"{label}: no broker answer given"
        elif missing:
            reason = f"{label} is not supported by broker{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        elif not ranges:
            reason = f"{label}: no broker answer lists it"
        elif common is None:
            reason = f"{label}: the brokers share no version"
        elif intersect(required, common) is None:
            reason = f"{label} needs {fmt(required)}, the brokers' common range is {fmt(common)}"
        elif client is None:
            reason = f"{label}: the client does not support it"
        elif both is None:
            reason = (f"{label} needs {fmt(required)} within the brokers' common {fmt(common)}, "
                      f"the client supports {fmt(client)}")
        else:
            chosen = both[1]
            reason = None
        entries.append({
            "api_key": key,
            "api_name": name,
            "required": [lo, hi],
            "client": list(client) if client is not None else None,
            "common": list(common) if common is not None else None,
            "chosen": chosen,
            "reason": reason,
        })
    usable = all(e["chosen"] is not None for e in entries) and bool(entries)
    failing = [str(e["reason"]) for e in entries if e["reason"]]
    return {
        "name": fname,
        "usable": usable,
        "reason": None if usable else ("; ".join(failing) if failing else "the feature requires no API"),
        "apis": entries,
    }
