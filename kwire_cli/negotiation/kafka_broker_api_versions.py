"""The text Kafka's ``kafka-broker-api-versions.sh`` prints: one block per broker,
``host:port (id: 1 rack: null) -> (`` then ``Produce(0): 0 to 9 [usable: 9],`` lines and ``)``.
"""
from __future__ import annotations

import re

from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.model import BrokerAnswer, add_range, unique_addresses

HEADER = re.compile(
    r"^(?P<host>\S+):(?P<port>\d+)(?:\s+\((?P<props>[^)]*)\))?\s+->\s+(?P<rest>\(|ERROR:.*)\s*$",
    re.MULTILINE)
_KBAV_ENTRY_START = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9_]*|UNKNOWN)\(-?\d+\)\s*:")
_KBAV_ENTRY = re.compile(
    r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_]*)\((?P<key>-?\d+)\):\s*"
    r"(?:(?P<unsupported>UNSUPPORTED)"
    r"|(?P<min>-?\d+)(?:\s+to\s+(?P<max>-?\d+))?"
    r"(?:\s+\[(?:usable:\s*-?\d+|unusable:\s*node too (?:new|old))\])?)"
    r"\s*,?\s*$")


def parse_kafka_broker_api_versions(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    """Parse the output of Kafka's `kafka-broker-api-versions.sh` (several brokers, any order).

    Lines outside a broker block (log lines, warnings) are skipped. Inside a block an entry line
    that cannot be read is an error naming its line number. The broker's own MIN/MAX are kept;
    the `[usable: N]` annotations describe the tool's client, not the broker.
    """
    answers: list[BrokerAnswer] = []
    current: BrokerAnswer | None = None
    start_line = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if current is None:
            m = HEADER.match(line)
            if not m:
                continue  # noise between blocks
            address = f"{m['host']}:{m['port']}"
            ans = BrokerAnswer(address=address, form="kafka-broker-api-versions",
                               source=f"{source}:{lineno}")
            if m["props"]:
                _kbav_props(ans, m["props"])
            rest = m["rest"]
            if rest.startswith("ERROR:"):
                ans.error = rest.strip()
                answers.append(ans)
                continue
            current, start_line = ans, lineno
            continue
        stripped = line.strip()
        if stripped == ")":
            answers.append(current)
            current = None
            continue
        if not stripped:
            continue
        if _KBAV_ENTRY_START.match(line):
            m = _KBAV_ENTRY.match(line)
            if not m:
                raise NegotiationError(f"{source}:{lineno}: cannot read API entry {stripped!r} in the "
                                       f"block of broker {current.address} (expected e.g. "
                                       "'Produce(0): 0 to 9 [usable: 9],')")
            key = int(m["key"])
            if m["name"] != "UNKNOWN":
                current.names[key] = m["name"]
            if m["unsupported"]:
                continue  # the tool's client knows the API, the broker does not list it
            lo = int(m["min"])
            hi = int(m["max"]) if m["max"] is not None else lo
            add_range(current, key, lo, hi, f"{source}:{lineno}")
            continue
        if HEADER.match(line):
            raise NegotiationError(f"{source}:{lineno}: broker block of {current.address} opened at line "
                                   f"{start_line} has no closing ')' before the next broker")
        current.notes.append(f"{source}:{lineno}: skipped a line that is not an API entry: "
                             f"{stripped[:60]!r}")
    if current is not None:
        raise NegotiationError(f"{source}:{start_line}: broker block of {current.address} is not closed "
                               "with ')' before the end of the input")
    unique_addresses(answers)
    return answers


def _kbav_props(ans: BrokerAnswer, props: str) -> None:
    for m in re.finditer(r"(\w+):\s*(\S+)", props):
        k, v = m.group(1), m.group(2)
        if k == "id":
            try:
                ans.node_id = int(v)
            except ValueError:
                pass
        elif k == "rack":
            ans.rack = None if v == "null" else v
        elif k == "isFenced" and v == "true":
            ans.notes.append("the broker is fenced (isFenced: true)")
