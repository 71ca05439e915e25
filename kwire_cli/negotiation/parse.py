"""Read what brokers advertise: one `BrokerAnswer` per broker, whatever form the input takes.

Forms, detected from the content (never from the file name):

* hex of an ApiVersionsResponse (any version v0-v4, with or without the 4-byte size prefix and the
  response header), decoded with kwire's codec; the layout that consumes every byte wins;
* raw bytes of the same;
* the text `kafka-broker-api-versions.sh` prints (several brokers, log noise around the blocks);
* librdkafka `debug=feature` log lines (`ApiKey Produce (0) Versions 0..9`), one broker per log
  source;
* YAML or JSON: `{ApiKeys: [{ApiKey, MinVersion, MaxVersion}]}`, alone or as the body of kwire's
  own decode output (`{"api_key": 18, "kind": "response", "body": {...}}`), several documents
  allowed;
* a pcap/pcapng capture (the ApiVersions answers in it, one per broker address), through
  `kwire_cli.capture` when it is installed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kwire_cli.errors import KwireError, NegotiationError
from kwire_cli.protocol_errors import UNSUPPORTED_VERSION, error_name

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


# --------------------------------------------------------------------------------------------
# entry points


def load_broker_file(path: str | Path) -> list[BrokerAnswer]:
    """Read one input file (any form); `-` is standard input."""
    if str(path) != "-":
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError as e:
            raise NegotiationError(f"{path}: cannot read: {e.strerror or e}") from None
        if head in _PCAP_MAGICS:
            return _from_capture(Path(path), str(path))
    data = _read(path)
    return parse_broker_input(data, source=str(path))


def parse_broker_input(data: bytes | str, source: str = "<input>") -> list[BrokerAnswer]:
    """Detect the form of `data` and return the broker answers it holds (at least one)."""
    form, payload = detect_form(data, source)
    if form == "capture":
        answers = _from_capture(payload, source)
    elif form in ("hex", "raw"):
        if form == "hex" and len(_clean_hex(payload)) % 2:
            raise NegotiationError(f"{source}: odd number of hex digits ({len(_clean_hex(payload))}): "
                                   "a byte needs two")
        raw = bytes.fromhex(_clean_hex(payload)) if form == "hex" else payload
        answers = [decode_api_versions_bytes(raw, address=_default_address(source), source=source,
                                             form=form)]
    elif form == "kafka-broker-api-versions":
        answers = parse_kafka_broker_api_versions(payload, source)
    elif form == "librdkafka":
        answers = parse_librdkafka_log(payload, source)
    else:
        answers = parse_yaml_answers(payload, source)
    if not answers:
        raise NegotiationError(f"{source}: no broker answer found")
    return answers


_HEX_RE = re.compile(r"^(?:0x)?[0-9a-fA-F\s:]+$")
_PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                b"\x0a\x0d\x0d\x0a")


def detect_form(data: bytes | str, source: str = "<input>") -> tuple[str, Any]:
    """Return (form, payload): payload is bytes for "capture"/"raw", text otherwise."""
    if isinstance(data, bytes):
        if data[:4] in _PCAP_MAGICS:
            return "capture", data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return "raw", data
        if "\x00" in text:
            return "raw", data
    else:
        text = data
    if text.startswith("\ufeff"):
        text = text[1:]
    stripped = text.strip()
    if not stripped:
        raise NegotiationError(f"{source}: empty input")
    uncommented = "\n".join(line for line in stripped.splitlines()
                            if not line.lstrip().startswith("#")).strip()
    if uncommented and _HEX_RE.match(uncommented) and len(_clean_hex(uncommented)) >= 2:
        return "hex", uncommented
    if _KBAV_HEADER.search(text):
        return "kafka-broker-api-versions", text
    if _RDK_ENTRY.search(text) or _RDK_START.search(text):
        return "librdkafka", text
    return "yaml", text


# --------------------------------------------------------------------------------------------
# hex / raw ApiVersionsResponse


def _clean_hex(text: str) -> str:
    t = re.sub(r"[\s:]", "", text)
    if t[:2].lower() == "0x":
        t = t[2:]
    return t


def decode_api_versions_bytes(data: bytes, address: str, source: str = "<input>",
                              form: str = "hex") -> BrokerAnswer:
    """Decode bytes as an ApiVersionsResponse of any version, with or without size prefix/header.

    Every combination (size prefix yes/no, header yes/no, version 0-4) is tried; a parse counts
    only when it consumes every byte. ApiVersionsResponse always has response header v0 (just
    the int32 correlation id), even in its flexible versions.
    """
    from kwire_cli.codec import decode_body, decode_response  # lazy: other forms need no codec
    from kwire_cli.codec.framing import has_size_prefix
    from kwire_cli.spec import registry

    if len(data) < 6:
        raise NegotiationError(f"{source}: {len(data)} bytes is too short for an ApiVersionsResponse "
                               "(at least 6: error code and an empty array)")
    vv = registry().api(API_VERSIONS_KEY).response.valid_versions
    versions = list(range(vv.lo, vv.hi + 1))

    def with_header(prefixed: bool):
        return lambda v: decode_response(data, API_VERSIONS_KEY, v, size_prefixed=prefixed)

    def body_only(payload: bytes):
        return lambda v: decode_body(payload, API_VERSIONS_KEY, v, "response")

    layouts = []
    if has_size_prefix(data):
        layouts += [("size prefix, header", with_header(True)),
                    ("size prefix, no header", body_only(data[4:]))]
    layouts += [("no size prefix, header", with_header(False)),
                ("no size prefix, no header", body_only(data))]

    first_error: str | None = None
    for layout, decode in layouts:
        matches = []
        for v in versions:
            try:
                matches.append((v, decode(v)))
            except KwireError as e:
                if first_error is None:
                    first_error = f"v{v}, {layout}: {e}"
        if matches:
            v, msg = _pick(matches)
            answer = answer_from_body(msg.body, address=address, source=source, form=form)
            answer.api_version = v
            same = sorted(m for m, _ in matches)
            desc = f"decoded as ApiVersionsResponse v{v} ({layout}"
            if len(same) > 1:
                desc += "; v" + ", v".join(str(s) for s in same) + " share this layout"
            desc += ")"
            if msg.header:
                desc += f", correlation id {msg.header.get('CorrelationId')}"
            answer.notes.insert(0, desc)
            return answer
    what = _request_description(data) or _response_description(data)
    if what is not None:
        raise NegotiationError(f"{source}: this is {what}, not an ApiVersionsResponse")
    raise NegotiationError(f"{source}: not an ApiVersionsResponse: no layout (v{versions[0]}-"
                           f"v{versions[-1]}, with or without size prefix and header) reads all "
                           f"{len(data)} bytes (first failure: {first_error})")


def _pick(matches: list) -> tuple[int, Any]:
    """Several versions may read the same bytes (v1 and v2 share a layout, so do v3 and v4):
    keep the lowest version that reads them."""
    return min(matches, key=lambda m: m[0])


def _request_description(data: bytes) -> str | None:
    """When bytes meant as an ApiVersionsResponse are in fact a request, say which one."""
    try:
        from kwire_cli.codec import decode_request
        msg = decode_request(data)
    except KwireError:
        return None
    return f"a request: {msg.api_name} v{msg.api_version} (api key {msg.api_key})"


def _response_description(data: bytes, most: int = 3) -> str | None:
    """Which other responses these bytes read as completely (header included), when few do.

    A response does not name its API, so this is a guess: every (API, version) whose layout
    consumes all the bytes. Silent when none or more than `most` APIs match.
    """
    from kwire_cli.codec import decode_response
    from kwire_cli.spec import registry

    hits: dict[int, list[int]] = {}
    for key, api in registry().apis.items():
        if key == API_VERSIONS_KEY:
            continue
        vv = api.response.valid_versions
        for v in range(vv.lo, vv.hi + 1):
            try:
                decode_response(data, key, v)
            except KwireError:
                continue
            hits.setdefault(key, []).append(v)
            if len(hits) > most:
                return None
    if not hits:
        return None
    reg = registry()
    parts = []
    for key, vs in hits.items():
        span = f"v{vs[0]}" if len(vs) == 1 else f"v{vs[0]}-{vs[-1]}" if vs == list(
            range(vs[0], vs[-1] + 1)) else "v" + ", v".join(map(str, vs))
        parts.append(f"{reg.api_name(key)} {span} (api key {key})")
    return "probably a response: " + " or ".join(parts)


def answer_from_body(body: dict, address: str, source: str = "<input>",
                     form: str = "yaml") -> BrokerAnswer:
    """Turn an ApiVersionsResponse value tree (spec field names) into a `BrokerAnswer`."""
    if not isinstance(body, dict):
        raise NegotiationError(f"{source}: expected a mapping with ApiKeys, got {type(body).__name__}")
    ans = BrokerAnswer(address=address, form=form, source=source)
    keys = _get(body, "ApiKeys", "api_keys", "apiKeys")
    if keys is None:
        raise NegotiationError(f"{source}: no ApiKeys list (expected {{ApiKeys: [{{ApiKey, MinVersion, "
                               "MaxVersion}]}})")
    if isinstance(keys, dict):  # tolerate a mapping keyed by ApiKey
        keys = [dict(v, ApiKey=k) if isinstance(v, dict) else v for k, v in keys.items()]
    if not isinstance(keys, list):
        raise NegotiationError(f"{source}: ApiKeys is a {type(keys).__name__}, expected a list")
    for i, entry in enumerate(keys):
        where = f"{source}: ApiKeys[{i}]"
        if isinstance(entry, (list, tuple)) and len(entry) == 3:
            key, lo, hi = entry
        elif isinstance(entry, dict):
            key = _get(entry, "ApiKey", "api_key", "apiKey", "key")
            lo = _get(entry, "MinVersion", "min_version", "minVersion", "min")
            hi = _get(entry, "MaxVersion", "max_version", "maxVersion", "max")
            for n, v in (("ApiKey", key), ("MinVersion", lo), ("MaxVersion", hi)):
                if v is None:
                    raise NegotiationError(f"{where}: missing {n}")
        else:
            raise NegotiationError(f"{where}: expected {{ApiKey, MinVersion, MaxVersion}}, got {entry!r}")
        key, lo, hi = (_int(key, f"{where}.ApiKey"), _int(lo, f"{where}.MinVersion"),
                       _int(hi, f"{where}.MaxVersion"))
        _add_range(ans, key, lo, hi, where)
    code = _get(body, "ErrorCode", "error_code")
    if code is not None:
        code = _int(code, f"{source}: ErrorCode")
        if code != 0:
            ans.error_code = code
            ans.error = f"{error_name(code)} ({code})"
            if code == UNSUPPORTED_VERSION:
                av = ans.ranges.get(API_VERSIONS_KEY)
                listed = f"v{av[0]}-v{av[1]}" if av else "nothing"
                ans.notes.append(
                    f"the broker answered UNSUPPORTED_VERSION (35): it does not speak the ApiVersions "
                    f"version of the request; as KIP-511 has it, the answer still lists the ApiVersions "
                    f"versions the broker supports ({listed}), so a client retries with "
                    f"{'v' + str(av[1]) if av else 'an older version'}. The other APIs are not in "
                    f"this answer.")
            else:
                ans.notes.append(f"the broker answered {error_name(code)} ({code}); the list may be "
                                 "incomplete")
    for f in _get(body, "SupportedFeatures", "supported_features") or []:
        if isinstance(f, dict):
            name = _get(f, "Name", "name")
            ans.supported_features[str(name)] = (
                _int(_get(f, "MinVersion", "min_version"), f"{source}: SupportedFeatures.{name}"),
                _int(_get(f, "MaxVersion", "max_version"), f"{source}: SupportedFeatures.{name}"))
    epoch = _get(body, "FinalizedFeaturesEpoch", "finalized_features_epoch")
    if epoch is not None:
        ans.finalized_epoch = _int(epoch, f"{source}: FinalizedFeaturesEpoch")
    for f in _get(body, "FinalizedFeatures", "finalized_features") or []:
        if isinstance(f, dict):
            name = _get(f, "Name", "name")
            ans.finalized_features[str(name)] = (
                _int(_get(f, "MinVersionLevel", "min_version_level"), f"{source}: FinalizedFeatures.{name}"),
                _int(_get(f, "MaxVersionLevel", "max_version_level"), f"{source}: FinalizedFeatures.{name}"))
    if ans.finalized_features and (ans.finalized_epoch is None or ans.finalized_epoch < 0):
        ans.notes.append("FinalizedFeatures are listed but FinalizedFeaturesEpoch is "
                         f"{ans.finalized_epoch}: Kafka treats them as not valid")
    return ans


def _get(d: dict, *names: str) -> Any:
    for n in names:
        if n in d:
            return d[n]
    return None


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise NegotiationError(f"{where}: expected an integer, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise NegotiationError(f"{where}: expected an integer, got {v!r}") from None


def _add_range(ans: BrokerAnswer, key: int, lo: int, hi: int, where: str) -> None:
    if key in ans.ranges:
        ans.notes.append(f"{where}: API key {key} is listed twice; the later entry is used")
    if lo > hi:
        ans.notes.append(f"{where}: API key {key} has MinVersion {lo} > MaxVersion {hi}; "
                         "treated as not supported")
    ans.ranges[key] = (lo, hi)


# --------------------------------------------------------------------------------------------
# kafka-broker-api-versions.sh


_KBAV_HEADER = re.compile(
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
            m = _KBAV_HEADER.match(line)
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
            _add_range(current, key, lo, hi, f"{source}:{lineno}")
            continue
        if _KBAV_HEADER.match(line):
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


# --------------------------------------------------------------------------------------------
# librdkafka debug=feature


_RDK_START = re.compile(r"(?P<broker>[^\s\[\]]+): Broker API support:\s*$", re.MULTILINE)
_RDK_ENTRY = re.compile(
    r"(?P<broker>[^\s\[\]]+):\s+ApiKey (?P<name>\S+) \((?P<key>-?\d+)\) "
    r"Versions (?P<min>-?\d+)\.\.(?P<max>-?\d+)\s*$", re.MULTILINE)
_RDK_LOOSE = re.compile(r":\s+ApiKey\s.*\bVersions\b")


def parse_librdkafka_log(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    """Parse librdkafka `debug=feature` (or `all`) log lines, one broker per log source.

    librdkafka names a broker `host:port/<id or bootstrap>`; the `/...` part (and a `proto://`
    scheme) is dropped so a bootstrap connection and the same broker under its node id merge.
    Each `Broker API support:` line starts a fresh answer; the last one per broker is kept.
    """
    blocks: dict[str, BrokerAnswer] = {}
    counts: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _RDK_START.search(line)
        if m:
            addr, node = _rdk_address(m["broker"])
            counts[addr] = counts.get(addr, 0) + 1
            ans = BrokerAnswer(address=addr, form="librdkafka", source=f"{source}:{lineno}")
            ans.node_id = node
            blocks[addr] = ans
            continue
        if not _RDK_LOOSE.search(line):
            continue
        m = _RDK_ENTRY.search(line)
        if not m:
            raise NegotiationError(f"{source}:{lineno}: cannot read librdkafka ApiKey line "
                                   f"{line.strip()[-80:]!r} (expected 'ApiKey Produce (0) Versions 0..9')")
        addr, node = _rdk_address(m["broker"])
        ans = blocks.get(addr)
        if ans is None:
            counts[addr] = counts.get(addr, 0) + 1
            ans = blocks[addr] = BrokerAnswer(address=addr, form="librdkafka",
                                              source=f"{source}:{lineno}")
        if node is not None:
            ans.node_id = node
        key = int(m["key"])
        name = m["name"]
        if not name.startswith("Unknown-"):
            ans.names[key] = name
        _add_range(ans, key, int(m["min"]), int(m["max"]), f"{source}:{lineno}")
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
    node = int(suffix) if suffix and suffix.lstrip("-").isdigit() else None
    return m["addr"], node


# --------------------------------------------------------------------------------------------
# YAML / JSON


def parse_yaml_answers(text: str, source: str = "<input>") -> list[BrokerAnswer]:
    import yaml

    from kwire_cli.inputs.yamlsafe import safe_load_all

    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise NegotiationError(f"{where}: not a recognised broker answer (hex, kafka-broker-api-versions "
                               f"output, librdkafka log) and not valid YAML/JSON: {problem}") from None
    except RecursionError:
        raise NegotiationError(f"{source}: YAML/JSON nested too deep to read") from None
    if not docs:
        raise NegotiationError(f"{source}: empty input")
    items: list[Any] = []
    for d in docs:
        if isinstance(d, list) and all(isinstance(x, dict) and ("body" in x or "ApiKeys" in x) for x in d):
            items.extend(d)
        else:
            items.append(d)
    answers = []
    for i, doc in enumerate(items):
        where = source if len(items) == 1 else f"{source}[{i}]"
        if not isinstance(doc, dict):
            raise NegotiationError(f"{where}: not a recognised broker answer: expected a mapping with "
                                   f"ApiKeys, got {type(doc).__name__} {str(doc)[:40]!r}")
        address = str(_get(doc, "address", "Address", "broker", "Broker") or _default_address(source))
        if len(items) > 1 and _get(doc, "address", "Address", "broker", "Broker") is None:
            address = f"{address}#{i}"
        body = doc
        if "body" in doc and isinstance(doc["body"], dict):
            key, kind = doc.get("api_key"), doc.get("kind")
            if key is not None and int(key) != API_VERSIONS_KEY or kind == "request":
                name = doc.get("api_name") or f"api key {key}"
                version = f" v{doc['api_version']}" if "api_version" in doc else ""
                raise NegotiationError(f"{where}: this is a {kind or 'message'}: {name}{version} "
                                       f"(api key {key}), not an ApiVersionsResponse")
            body = doc["body"]
        ans = answer_from_body(body, address=address, source=where,
                               form="json" if text.lstrip().startswith(("{", "[")) else "yaml")
        if "api_version" in doc:
            try:
                ans.api_version = int(doc["api_version"])
            except (TypeError, ValueError):
                pass
        answers.append(ans)
    unique_addresses(answers)
    return answers


# --------------------------------------------------------------------------------------------
# capture files


def _from_capture(data: bytes | str | Path, source: str) -> list[BrokerAnswer]:
    """The ApiVersions answers in a pcap/pcapng capture, one per broker address (the last one).

    Each answer is decoded at the version of the request it answers (the capture reader pairs
    them); when that fails (a KIP-511 answer to a version the broker does not know uses the v0
    layout) the layout is detected as for hex input.
    """
    import io

    from kwire_cli.capture import KafkaFrame, iter_capture

    src = io.BytesIO(data) if isinstance(data, bytes) else str(data)
    found: dict[str, list[tuple[KafkaFrame, BrokerAnswer]]] = {}
    unpaired = 0
    for ev in iter_capture(src, file_label=source):
        if not isinstance(ev, KafkaFrame) or ev.kind != "response":
            continue
        if ev.api_key is None:
            unpaired += 1
            continue
        if ev.api_key != API_VERSIONS_KEY:
            continue
        where = f"{source} frame {ev.frame}"
        ans = _decode_paired(ev, where)
        found.setdefault(ev.src, []).append((ev, ans))
    answers = []
    for address, items in found.items():
        ev, ans = items[-1]
        ans.address = address
        ans.form = "capture"
        if len(items) > 1:
            ans.notes.append(f"{len(items)} ApiVersions answers from this broker in the capture; the "
                             f"last one (frame {ev.frame}) is used")
            if any(a.ranges != ans.ranges for _, a in items[:-1]):
                ans.notes.append("earlier answers from this broker listed other ranges")
        answers.append(ans)
    if not answers:
        extra = f" ({unpaired} responses could not be paired with a request)" if unpaired else ""
        raise NegotiationError(f"{source}: the capture holds no ApiVersions answer{extra}")
    return answers


def _decode_paired(ev: Any, where: str) -> BrokerAnswer:
    from kwire_cli.codec import decode_response

    try:
        msg = decode_response(ev.data, API_VERSIONS_KEY, ev.api_version, size_prefixed=False)
    except KwireError:
        ans = decode_api_versions_bytes(ev.data, address=ev.src, source=where, form="capture")
        ans.notes.insert(0, f"the request was ApiVersions v{ev.api_version}; the answer does not "
                            "decode at that version")
        return ans
    ans = answer_from_body(msg.body, address=ev.src, source=where, form="capture")
    ans.api_version = ev.api_version
    ans.notes.insert(0, f"ApiVersionsResponse v{ev.api_version} to the request of frame "
                        f"{ev.request_frame}, correlation id {ev.correlation_id}")
    return ans


# --------------------------------------------------------------------------------------------
# helpers


def _read(path: str | Path) -> bytes:
    import sys

    if str(path) == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise NegotiationError(f"{path}: cannot read: {e.strerror or e}") from None


def _default_address(source: str) -> str:
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
