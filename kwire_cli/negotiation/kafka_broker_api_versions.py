"""The text Kafka's ``kafka-broker-api-versions.sh`` (and ``kafka-cluster.sh api-versions``)
prints: one block per broker, ``host:port (id: 1 rack: null) -> (`` then ``Produce(0): 0 to 9
[usable: 9],`` lines and ``)``.

Also as people paste it: indented, quoted with ``> `` (e-mail, GitHub replies), without the
host (``(id: 5 rack: null) -> (``: the address is then ``node 5``), the first form of the tool
(Kafka 0.10.2: one line per broker, the entries in braces, ``-> {Produce(0): 0 to 2 [usable:
2], ...}``), a list elided with a ``...`` line, and a block cut off at the end of the input (a
truncated paste: read, and marked incomplete). ``read_entries`` reads the entry lists, also for
the Java client's DEBUG log (``negotiation.java_client_log``).
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from kwire_cli.errors import NegotiationError
from kwire_cli.negotiation.model import BrokerAnswer, add_range, default_address, to_int, unique_addresses

_QUOTE = r"(?:[ \t]*>)*"
HEADER = re.compile(
    rf"^{_QUOTE}[ \t]*(?:(?P<host>[^\s()>]+):(?P<port>\d+)(?:[ \t]+\((?P<props>[^)]*)\))?"
    r"|\((?P<anon>id:[^)]*)\))[ \t]+->[ \t]+(?P<rest>[({].*|ERROR:.*?)\s*$",
    re.MULTILINE)
_QUOTED = re.compile(rf"^{_QUOTE}[ \t]?")
_KBAV_ENTRY_START = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9_]*|UNKNOWN)\(-?\d+\)\s*:")
_KBAV_ENTRY = re.compile(
    r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_]*)\((?P<key>-?\d+)\):\s*"
    r"(?:(?P<unsupported>UNSUPPORTED)"
    r"|(?P<min>-?\d+)(?:\s+to\s+(?P<max>-?\d+))?"
    r"(?:\s+\[(?:usable:\s*-?\d+|unusable:\s*node too (?:new|old))\])?)"
    r"\s*,?\s*$")
EXAMPLE = "'Produce(0): 0 to 9 [usable: 9],'"


def unquote(line: str) -> str:
    """A line without its ``> `` reply quoting."""
    return _QUOTED.sub("", line, count=1) if ">" in line[:8] else line


def split_entries(text: str) -> tuple[list[str], bool]:
    """The comma-separated entries of (part of) an entry list, and whether the list's closing
    parenthesis or brace ends it; parentheses and brackets inside an entry (``Produce(0)``,
    ``[usable: 9]``) are kept."""
    entries, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                entries.append(text[start:i])
                return [e for e in entries if e.strip()], True
            depth -= 1
        elif c == "," and depth == 0:
            entries.append(text[start:i + 1])
            start = i + 1
    entries.append(text[start:])
    return [e for e in entries if e.strip()], False


def add_entry(ans: BrokerAnswer, entry: str, where: str) -> bool:
    """Read one ``Name(key): min to max [usable: n]`` entry into ``ans``; False when it is not one
    (``UNSUPPORTED`` entries name the API but add no range: the broker does not list it)."""
    m = _KBAV_ENTRY.match(entry)
    if not m:
        return False
    key = to_int(m["key"], f"{where}: API key")
    if m["name"] != "UNKNOWN":
        ans.names[key] = m["name"]
    if m["unsupported"]:
        return True  # the tool's client knows the API, the broker does not list it
    lo = to_int(m["min"], f"{where}: version")
    hi = to_int(m["max"], f"{where}: version") if m["max"] is not None else lo
    add_range(ans, key, lo, hi, where)
    return True


def mark_elided(ans: BrokerAnswer, where: str) -> None:
    ans.error = f"the list is elided ('...' at {where}): the APIs it leaves out are unknown"


def mark_cut(ans: BrokerAnswer, where: str, after: str | None) -> None:
    last = f" after {after}" if after else ""
    ans.error = (f"the list opened at {where} is cut off{last} (no closing parenthesis before the end of the "
                 "input): the APIs after it are unknown")


def parse_kafka_broker_api_versions(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    """Parse the output of Kafka's `kafka-broker-api-versions.sh` (several brokers, any order).

    Lines outside a broker block (log lines, warnings) are skipped. Inside a block an entry line
    that cannot be read is an error naming its line number. The broker's own MIN/MAX are kept;
    the `[usable: N]` annotations describe the tool's client, not the broker.
    """
    answers: list[BrokerAnswer] = []
    current: BrokerAnswer | None = None
    start_line = 0
    last_entry: str | None = None
    for lineno, raw in _lines(text):
        line = unquote(raw)
        if current is None:
            m = HEADER.match(raw)
            if not m:
                continue  # noise between blocks
            ans = _answer(m, source, lineno)
            rest = m["rest"]
            if rest.startswith("ERROR:"):
                ans.error = rest.strip()
                answers.append(ans)
                continue
            current, start_line, last_entry = ans, lineno, None
            entries, closed = split_entries(rest[1:])
            for e in entries:  # the one-line form: the entries on the header's line
                if not add_entry(current, e.strip(), f"{source}:{lineno}"):
                    raise NegotiationError(f"{source}:{lineno}: cannot read API entry {e.strip()!r} in the "
                                           f"block of broker {current.address} (expected e.g. {EXAMPLE})")
                last_entry = e.strip().rstrip(",")
            if closed:
                answers.append(current)
                current = None
            continue
        stripped = line.strip()
        if stripped in (")", "}"):
            answers.append(current)
            current = None
            continue
        if not stripped:
            continue
        if stripped in ("...", "…", "[...]"):
            mark_elided(current, f"{source}:{lineno}")
            continue
        if _KBAV_ENTRY_START.match(line):
            entries, closed = split_entries(stripped)
            for e in entries:
                if not add_entry(current, e.strip(), f"{source}:{lineno}"):
                    shown = stripped if len(entries) == 1 else e.strip()
                    raise NegotiationError(f"{source}:{lineno}: cannot read API entry {shown!r} in the "
                                           f"block of broker {current.address} (expected e.g. {EXAMPLE})")
                last_entry = e.strip().rstrip(",")
            if closed:
                answers.append(current)
                current = None
            continue
        if HEADER.match(raw):
            raise NegotiationError(f"{source}:{lineno}: broker block of {current.address} opened at line "
                                   f"{start_line} has no closing ')' before the next broker")
        current.notes.append(f"{source}:{lineno}: skipped a line that is not an API entry: "
                             f"{stripped[:60]!r}")
    if current is not None:
        if not current.ranges and not current.names:
            raise NegotiationError(f"{source}:{start_line}: broker block of {current.address} is not closed "
                                   "with ')' and lists no API before the end of the input")
        mark_cut(current, f"{source}:{start_line}", last_entry)
        answers.append(current)
    unique_addresses(answers)
    return answers


def _lines(text: str) -> Iterator[tuple[int, str]]:
    return enumerate(text.splitlines(), start=1)


def _answer(m: re.Match[str], source: str, lineno: int) -> BrokerAnswer:
    props = m["props"] or m["anon"]
    if m["host"] is not None:
        address = f"{m['host']}:{m['port']}"
    else:
        node = re.search(r"\bid:\s*(-?\d+)", props or "")
        address = f"node {node.group(1)}" if node else default_address(source)
    ans = BrokerAnswer(address=address, form="kafka-broker-api-versions", source=f"{source}:{lineno}")
    if m["host"] is None:
        ans.notes.append("the block has no host:port (removed from the paste): the broker is named by its id")
    if props:
        _kbav_props(ans, props)
    return ans


def _kbav_props(ans: BrokerAnswer, props: str) -> None:
    for m in re.finditer(r"(\w+):\s*(\S+)", props):
        k, v = m.group(1), m.group(2)
        if k == "id":
            try:
                ans.node_id = int(v)
            except ValueError:  # not a number, or more digits than Python converts
                pass
        elif k == "rack":
            ans.rack = None if v == "null" else v
        elif k == "isFenced" and v == "true":
            ans.notes.append("the broker is fenced (isFenced: true)")
