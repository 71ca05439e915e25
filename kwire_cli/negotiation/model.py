"""What a broker advertises: the ``BrokerAnswer`` every broker-answer parser produces, and the
helpers they share (ranges, field lookup, addresses, the last answer of each broker)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwire_cli.errors import NegotiationError

Range = tuple[int, int]

API_VERSIONS_KEY = 18


@dataclass
class BrokerAnswer:
    """What one broker advertised in one ApiVersions answer."""

    address: str
    ranges: dict[int, Range] = field(default_factory=dict)
    #: error text when the answer is not a full list: "UNSUPPORTED_VERSION (35)", "ERROR: ..." ...
    error: str | None = None
    error_code: int | None = None
    supported_features: dict[str, Range] = field(default_factory=dict)
    finalized_features: dict[str, Range] = field(default_factory=dict)
    finalized_epoch: int | None = None
    notes: list[str] = field(default_factory=list)
    #: API names the input itself gave (text forms), used for keys kwire's specs do not know
    names: dict[int, str] = field(default_factory=dict)
    form: str = ""
    source: str = ""
    #: ApiVersionsResponse version the bytes were decoded as (hex/raw/capture forms)
    api_version: int | None = None
    node_id: int | None = None
    rack: str | None = None

    @property
    def complete(self) -> bool:
        """True when the answer lists every API the broker supports (no error)."""
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "form": self.form,
            "source": self.source,
            "api_version": self.api_version,
            "node_id": self.node_id,
            "rack": self.rack,
            "error": self.error,
            "error_code": self.error_code,
            "complete": self.complete,
            "supported_features": {k: list(v) for k, v in self.supported_features.items()},
            "finalized_features": {k: list(v) for k, v in self.finalized_features.items()},
            "finalized_features_epoch": self.finalized_epoch,
            "notes": list(self.notes),
        }


def field_of(d: dict, *names: str) -> Any:
    """The value of the first of ``names`` that ``d`` has (spellings of one field), else None."""
    for n in names:
        if n in d:
            return d[n]
    return None


def to_int(v: Any, where: str) -> int:
    """``v`` as an integer (an int, or text of one), else a one-line error naming ``where``."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise NegotiationError(f"{where}: expected an integer, got {v!r}")
    try:
        return int(v)
    except ValueError:  # not a number, or more digits than Python converts (4300)
        text = str(v)  # (an int converts: only text fails)
        shown = text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"
        raise NegotiationError(f"{where}: expected an integer, got {shown!r}") from None


def add_range(ans: BrokerAnswer, key: int, lo: int, hi: int, where: str) -> None:
    """Record an API's range in ``ans``, noting a repeated key or a backwards range."""
    if key in ans.ranges:
        ans.notes.append(f"{where}: API key {key} is listed twice; the later entry is used")
    if lo > hi:
        ans.notes.append(f"{where}: API key {key} has MinVersion {lo} > MaxVersion {hi}; "
                         "treated as not supported")
    ans.ranges[key] = (lo, hi)


def default_address(source: str) -> str:
    """The name of an answer that does not say its broker: the file's name, or "broker"."""
    if source in ("-", "<input>", "<stdin>"):
        return "broker"
    return Path(source).name


def unique_addresses(answers: Iterable[BrokerAnswer]) -> None:
    """Rename answers whose address repeats (`addr#2`, ...), noting it, so each is a column."""
    seen: dict[str, int] = {}
    for a in answers:
        n = seen.get(a.address, 0)
        seen[a.address] = n + 1
        if n:
            a.notes.append(f"address {a.address} appears {n + 1} times; this answer is named "
                           f"{a.address}#{n + 1}")
            a.address = f"{a.address}#{n + 1}"


def last_answers(found: Mapping[str, Sequence[BrokerAnswer]], *, who: str = "broker", where: str = "dump",
                 which: Callable[[BrokerAnswer], str] | None = None, compare: bool = False) -> list[BrokerAnswer]:
    """One answer per broker: the last of each list of ``found`` (address -> its answers in input
    order), with a note when there were several (``N ApiVersions answers from this {who} in the
    {where}; the last one{which(answer)} is used``; ``compare``: and one when earlier answers
    listed other ranges)."""
    out = []
    for items in found.values():
        ans = items[-1]
        if len(items) > 1:
            label = which(ans) if which is not None else ""
            ans.notes.append(f"{len(items)} ApiVersions answers from this {who} in the {where}; the last "
                             f"one{label} is used")
            if compare and any(a.ranges != ans.ranges for a in items[:-1]):
                ans.notes.append(f"earlier answers from this {who} listed other ranges")
        out.append(ans)
    return out
