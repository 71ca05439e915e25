"""ApiVersionsResponse bytes (hex, raw, from a capture) and value trees -> a ``BrokerAnswer``.

The bytes are decoded with kwire's codec at every version and layout (size prefix or not, header
or not); the layout that consumes every byte wins. Bytes that are not an ApiVersionsResponse are
named when they read as a request or as few other responses.
"""
from __future__ import annotations

from typing import Any

from kwire_cli.errors import KwireError, NegotiationError
from kwire_cli.negotiation.model import (
    API_VERSIONS_KEY,
    BrokerAnswer,
    add_range,
    default_address,
    field_of,
    last_answers,
    to_int,
)
from kwire_cli.spec.error_codes import UNSUPPORTED_VERSION, error_name


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


def answers_from_frames(frames: list, source: str, form: str = "hex") -> list[BrokerAnswer]:
    """The ApiVersions answers among several Kafka frames of a dump (``kwire_cli.inputs.frames``:
    a tcpdump or Follow TCP Stream of a conversation, several answers one after another).

    Responses to an ApiVersions request of the dump are decoded at its version (the layout is
    detected, as for one answer, when that fails: a KIP-511 answer); frames that no request
    explains are tried as answers of any layout, and kept when they read as one. An answer is
    named by the address it came from (the dump's direction), else by ``source`` and its lines;
    of several from one broker the last is used."""
    from kwire_cli.inputs.frames import pair_frames

    found: dict[str, list[BrokerAnswer]] = {}
    for d in pair_frames(frames):
        f = d.frame
        shape = form if form == "raw" else f.blocks[0].form
        address = f.direction.split(" > ", 1)[0] if f.direction else f"{default_address(source)} {f.lines}"
        where = f"{source} {f.lines}"
        msg = d.message
        if msg is not None and msg.kind == "request":
            continue
        if msg is not None and msg.api_key == API_VERSIONS_KEY:
            ans = answer_from_body(msg.body, address=address, source=where, form=shape)
            ans.api_version = msg.api_version
            ans.notes.insert(0, f"ApiVersionsResponse v{msg.api_version} to the request of {frames_lines(d, frames)}, "
                                f"correlation id {msg.header.get('CorrelationId')}")
        elif msg is not None:
            continue  # the answer to another request
        else:
            try:
                ans = decode_api_versions_bytes(f.data, address=address, source=where, form=shape)
            except NegotiationError:
                continue
        found.setdefault(address, []).append(ans)
    if not found:
        raise NegotiationError(f"{source}: none of the {len(frames)} Kafka frames in the dump is an ApiVersions "
                               "answer")
    return last_answers(found, who="broker", where="dump")


def frames_lines(d: Any, frames: list) -> str:
    """Where the request a decoded response answers is: ``lines 7-8``."""
    return frames[d.request].lines if d.request is not None else "an earlier frame"


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
    keys = field_of(body, "ApiKeys", "api_keys", "apiKeys")
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
            key = field_of(entry, "ApiKey", "api_key", "apiKey", "key")
            lo = field_of(entry, "MinVersion", "min_version", "minVersion", "min")
            hi = field_of(entry, "MaxVersion", "max_version", "maxVersion", "max")
            for n, v in (("ApiKey", key), ("MinVersion", lo), ("MaxVersion", hi)):
                if v is None:
                    raise NegotiationError(f"{where}: missing {n}")
        else:
            raise NegotiationError(f"{where}: expected {{ApiKey, MinVersion, MaxVersion}}, got {entry!r}")
        key, lo, hi = (to_int(key, f"{where}.ApiKey"), to_int(lo, f"{where}.MinVersion"),
                       to_int(hi, f"{where}.MaxVersion"))
        add_range(ans, key, lo, hi, where)
    code = field_of(body, "ErrorCode", "error_code")
    if code is not None:
        code = to_int(code, f"{source}: ErrorCode")
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
    for f in field_of(body, "SupportedFeatures", "supported_features") or []:
        if isinstance(f, dict):
            name = field_of(f, "Name", "name")
            ans.supported_features[str(name)] = (
                to_int(field_of(f, "MinVersion", "min_version"), f"{source}: SupportedFeatures.{name}"),
                to_int(field_of(f, "MaxVersion", "max_version"), f"{source}: SupportedFeatures.{name}"))
    epoch = field_of(body, "FinalizedFeaturesEpoch", "finalized_features_epoch")
    if epoch is not None:
        ans.finalized_epoch = to_int(epoch, f"{source}: FinalizedFeaturesEpoch")
    for f in field_of(body, "FinalizedFeatures", "finalized_features") or []:
        if isinstance(f, dict):
            name = field_of(f, "Name", "name")
            ans.finalized_features[str(name)] = (
                to_int(field_of(f, "MinVersionLevel", "min_version_level"), f"{source}: FinalizedFeatures.{name}"),
                to_int(field_of(f, "MaxVersionLevel", "max_version_level"), f"{source}: FinalizedFeatures.{name}"))
    if ans.finalized_features and (ans.finalized_epoch is None or ans.finalized_epoch < 0):
        ans.notes.append("FinalizedFeatures are listed but FinalizedFeaturesEpoch is "
                         f"{ans.finalized_epoch}: Kafka treats them as not valid")
    return ans
