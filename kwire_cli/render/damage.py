"""What a capture's damage means, in plain words, and whether it is worth a warning.

The summary counts damage by kind (``{"gap": {"events": 2, "bytes": 1460}, ...}``: the
``damage`` of ``kwire_cli.capture.summary.Summary.to_dict``); ``damage_warning`` makes the one
line `kwire pcap` and `kwire spark-decode` print on stderr after a run. A request still waiting
for its answer when its connection closes or the capture ends is what every capture cut while
clients are busy holds (a consumer's long-poll Fetch, a request sent as the client closed): it
is listed in the summary and never warned about alone.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: kinds that happen in healthy traffic: counted in the summary, never a warning by themselves
NORMAL = frozenset({"unanswered-request"})


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def _words(kind: str, events: int, nbytes: int) -> str:
    """One damage kind as a phrase."""
    if kind == "gap":
        return f"{_n(events, 'gap')} in the captured bytes ({_n(nbytes, 'byte')} never captured: dropped packets)"
    if kind == "resync-skip":
        return f"{_n(nbytes, 'byte')} skipped while finding where frames start (connections caught mid-stream)"
    if kind == "partial-frame":
        return f"{_n(events, 'frame')} cut short"
    if kind == "oversize-frame":
        return (f"{_n(events, 'size prefix', 'size prefixes')} over the frame cap or not a size "
                "(--max-frame-size raises the cap)")
    if kind == "truncated-record":
        return "a file that ends inside a packet" if events == 1 else f"{events:,} files that end inside a packet"
    if kind == "oversize-record":
        return f"{_n(events, 'packet')} longer than the snap length, skipped"
    if kind == "corrupt-block":
        return f"{_n(events, 'pcapng block')} whose lengths do not add up"
    if kind == "unsupported-link":
        return f"{_n(events, 'interface')} of a link type kwire does not read"
    if kind == "unpaired-response":
        return f"{_n(events, 'response')} to no request in the capture"
    if kind == "unparseable":
        return f"{_n(events, 'frame')} too short for a Kafka header"
    if kind == "unanswered-request":
        return f"{_n(events, 'request')} not answered"
    if kind == "non-kafka":
        return f"{_n(events, 'connection')} that {'is' if events == 1 else 'are'} not Kafka"
    if kind == "after-close":
        return f"{_n(nbytes, 'byte')} after a connection closed, ignored"
    if kind == "tls-no-key":
        return (f"{_n(events, 'TLS connection')} not decrypted: no secrets for {'it' if events == 1 else 'them'} "
                "(give the client's key log with --tls-keylog FILE)")
    if kind.startswith("tls-"):
        return f"{_n(events, 'TLS record problem')} ({kind[4:]})"
    return f"{events:,} {kind}"


def damage_warning(summary: Mapping[str, Any], *, skipped: int = 0, see: str = "--summary") -> str | None:
    """The line to warn with after a run, or None when nothing went wrong that matters: frames
    that did not decode (``skipped``: more, left out by a filter, that were not decoded) and the
    damage in plain words, the normal kinds (``NORMAL``) only beside others."""
    bad = int(summary.get("undecodable") or 0)
    dmg: Mapping[str, Mapping[str, int]] = summary.get("damage") or {}
    serious = {k: v for k, v in dmg.items() if k not in NORMAL and v.get("events")}
    if not bad and not serious:
        return None
    parts = []
    if bad:
        frames = int(summary.get("frames") or 0)
        left = f" ({skipped:,} more, left out by --filter, were not decoded)" if skipped else ""
        parts.append(f"{bad:,} of {frames:,} frames did not decode{left}")
    parts += [_words(k, int(v.get("events", 0)), int(v.get("bytes", 0))) for k, v in dmg.items() if v.get("events")]
    events = sum(int(v.get("events", 0)) for v in dmg.values())
    tail = f" ({_n(events, 'damage event')}; see {see})" if events else f" (see {see})"
    return "; ".join(parts) + tail
