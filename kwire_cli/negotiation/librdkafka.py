"""librdkafka ``debug=feature`` (or ``all``) log lines: ``Broker API support:`` then one
``ApiKey Produce (0) Versions 0..9`` line per API, each prefixed with the broker's name.

Whatever the logger put around them: librdkafka's own ``%7|ts|APIVERSION|name| [thrd:...]:``, an
application logger's ``%7 2020/09/24 18:17:47 (Success): APIVERSION[thrd:...]:``, ``LOG-7-APIVERSION:``,
or .NET's ``facility: "APIVERSION", ..., message: "[thrd:...]: host:9092/4:   ApiKey ..." `` (the
message in quotes)."""
from __future__ import annotations

import re

from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.model import BrokerAnswer, add_range, to_int

START = re.compile(r"(?P<broker>[^\s\[\]]+): Broker API support:[\"']?\s*$", re.MULTILINE)
ENTRY = re.compile(
    r"(?P<broker>[^\s\[\]]+):\s+ApiKey (?P<name>\S+) \((?P<key>-?\d+)\) "
    r"Versions (?P<min>-?\d+)\.\.(?P<max>-?\d+)[\"']?\s*$", re.MULTILINE)
_LOOSE = re.compile(r":\s+ApiKey\s.*\bVersions\b")


def parse_librdkafka_log(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    """Parse librdkafka `debug=feature` (or `all`) log lines, one broker per log source.

    librdkafka names a broker `host:port/<id or bootstrap>`; the `/...` part (and a `proto://`
    scheme) is dropped so a bootstrap connection and the same broker under its node id merge.
    Each `Broker API support:` line starts a fresh answer; the last one per broker is kept.
    """
    blocks: dict[str, BrokerAnswer] = {}
    counts: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = START.search(line)
        if m:
            addr, node = _rdk_address(m["broker"])
            counts[addr] = counts.get(addr, 0) + 1
            ans = BrokerAnswer(address=addr, form="librdkafka", source=f"{source}:{lineno}")
            ans.node_id = node
            blocks[addr] = ans
            continue
        if not _LOOSE.search(line):
            continue
        m = ENTRY.search(line)
        if not m:
            raise NegotiationError(f"{source}:{lineno}: cannot read librdkafka ApiKey line "
                                   f"{line.strip()[-80:]!r} (expected 'ApiKey Produce (0) Versions 0..9')")
        addr, node = _rdk_address(m["broker"])
        known = blocks.get(addr)
        if known is None:
            counts[addr] = counts.get(addr, 0) + 1
            ans = blocks[addr] = BrokerAnswer(address=addr, form="librdkafka",
                                              source=f"{source}:{lineno}")
        else:
            ans = known
        if node is not None:
            ans.node_id = node
        key = to_int(m["key"], f"{source}:{lineno}: API key")
        name = m["name"]
        if not name.startswith("Unknown-"):
            ans.names[key] = name
        add_range(ans, key, to_int(m["min"], f"{source}:{lineno}: version"),
                  to_int(m["max"], f"{source}:{lineno}: version"), f"{source}:{lineno}")
    for addr, n in counts.items():
        if n > 1:
            blocks[addr].notes.append(f"{n} ApiVersions answers were logged for this broker; the last "
                                      "one is used")
    return list(blocks.values())


def _rdk_address(name: str) -> tuple[str, int | None]:
    name = re.sub(r"^[A-Za-z_]+://", "", name)
    m = re.match(r"^(?P<addr>.+?:\d+)(?:/(?P<suffix>.*))?$", name)
    if not m:
        return name, None
    suffix = m["suffix"]
    node = int(suffix) if suffix and suffix.lstrip("-").isdigit() and len(suffix) < 20 else None
    return m["addr"], node
