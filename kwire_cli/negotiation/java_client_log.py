"""The Java client's DEBUG log (``org.apache.kafka.clients.NetworkClient``): what a broker
answered to ApiVersions, one line per connection.

* Kafka 0.10.2 to 3.x: ``Recorded API versions for node -1: (Produce(0): 0 to 9 [usable: 9],
  Fetch(1): ..., ...)``;
* later 3.x and 4.x: ``Node 1 has finalized features epoch: 3, finalized features: ..., supported
  features: ..., API versions: (Produce(0): ...)``.

The entries are those ``kafka-broker-api-versions.sh`` prints (``negotiation.kafka_broker_api_versions``
reads them). A broker is named by the address an ``Initiating connection to node HOST:PORT (id:
N ...)`` line of the same log gives its node id, else ``node N`` (-1, -2, ...: a bootstrap
connection). A line cut off before its closing parenthesis (a truncated paste) is read and
marked incomplete; of several answers from one node the last is used.
"""
from __future__ import annotations

import re

from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.kafka_broker_api_versions import EXAMPLE, add_entry, mark_cut, split_entries, unquote
from kwire_cli.negotiation.model import BrokerAnswer, last_answers

ANSWER = re.compile(r"(?:Recorded API versions for node (?P<node>-?\d+): "
                    r"|Node (?P<node2>-?\d+) has finalized features epoch: .*?API versions: )\(")
_CONNECT = re.compile(r"(?:Initiating connection to|Completed connection to) node (?P<host>[^\s()]+):(?P<port>\d+)"
                      r" \(id: (?P<id>-?\d+)")


def parse_java_client_log(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    """The answers a Java client's DEBUG log recorded, one per node (the last one)."""
    addresses: dict[str, str] = {}
    found: dict[str, list[BrokerAnswer]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = unquote(raw)
        c = _CONNECT.search(line)
        if c:
            addresses[c["id"]] = f"{c['host']}:{c['port']}"
        m = ANSWER.search(line)
        if not m:
            continue
        node = m["node"] if m["node"] is not None else m["node2"]
        where = f"{source}:{lineno}"
        ans = BrokerAnswer(address=addresses.get(node, f"node {node}"), form="java-client-log", source=where)
        ans.node_id = int(node)
        entries, closed = split_entries(line[m.end():])
        last = None
        for e in entries:
            entry = e.strip()
            if not add_entry(ans, entry, where):
                if not closed and e is entries[-1]:
                    break  # cut inside the last entry
                raise NegotiationError(f"{where}: cannot read API entry {entry!r} of node {node} (expected e.g. "
                                       f"{EXAMPLE})")
            last = entry.rstrip(",")
        if not closed:
            mark_cut(ans, where, last)
        found.setdefault(ans.address, []).append(ans)
    return last_answers(found, who="node", where="log")
