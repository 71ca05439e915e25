"""The interpreted walk behind `kwire decode --partial` agrees with the compiled codec."""
from __future__ import annotations

import pytest

from cli_run import ROOT, pairs
from kwire_cli.codec import DecodeError, decode_request, decode_response
from kwire_cli.codec.partial import walk_message

PAIRS = pairs()
HEXES = sorted((ROOT / "fixtures" / "hex").glob("*.hex"))


def _messages():
    """(label, bytes, kind, api_key, version) for every recorded and fixture message."""
    out = []
    for name, p in PAIRS:
        req = bytes.fromhex(p["request"])
        out.append((name + ":request", req, "request", None, None))
        if p["response"]:
            out.append((name + ":response", bytes.fromhex(p["response"]), "response", p["api_key"], p["api_version"]))
    for h in HEXES:
        data = bytes.fromhex(h.read_text().split()[0])
        m = h.stem.rsplit("-v", 1)
        kind = "response" if "-response-" in h.name else "request"
        if kind == "request":
            out.append((h.name, data, kind, None, None))
        else:
            api = m[0].rsplit("-", 1)[0]
            out.append((h.name, data, kind, api, int(m[1])))
    return out


MESSAGES = _messages()


def _codec(data, kind, key, version, **kw):
    if kind == "request":
        return decode_request(data, **kw)
    return decode_response(data, key, version, **kw)


@pytest.mark.parametrize("label,data,kind,key,version", MESSAGES, ids=[m[0] for m in MESSAGES])
def test_walk_of_complete_bytes_equals_the_codec(label, data, kind, key, version):
    want = _codec(data, kind, key, version).to_json()
    pm = walk_message(data, kind, key, version)
    assert pm.error is None
    assert pm.to_json() == want


def _is_prefix(partial, full) -> bool:
    """Everything the walk kept is what the full decode has (lists may be shorter)."""
    if isinstance(partial, dict):
        return isinstance(full, dict) and all(k in full and _is_prefix(v, full[k]) for k, v in partial.items())
    if isinstance(partial, list):
        return (isinstance(full, list) and len(partial) <= len(full)
                and all(_is_prefix(a, b) for a, b in zip(partial, full)))
    return partial == full


CUT = [m for m in MESSAGES if m[0].startswith(("kafka-python/001-3", "kafka-python/011-0", "kafka-python/017-9"))
       or m[0] in ("metadata-response-v12.hex", "apiversions-response-v3.hex", "fetch-response-v13.hex",
                   "produce-response-v9.hex")]


@pytest.mark.parametrize("label,data,kind,key,version", CUT, ids=[m[0] for m in CUT])
def test_every_truncation_fails_alike_and_keeps_a_prefix_of_the_tree(label, data, kind, key, version):
    assert CUT, "expected recorded messages to cut"
    full = _codec(data, kind, key, version, records="hex").to_json()
    body = data[4:]
    step = max(1, len(body) // 300)  # at most ~300 cut points per message
    for n in range(0, len(body), step):
        cut = body[:n]
        try:
            _codec(cut, kind, key, version, size_prefixed=False, records="hex")
        except DecodeError as e:
            codec_err = str(e)
        else:  # pragma: no cover - a cut message must not decode
            pytest.fail(f"{label}: {n} bytes decoded")
        try:
            pm = walk_message(cut, kind, key, version, size_prefixed=False, records="hex")
        except DecodeError as e:  # nothing to show (e.g. fewer than 4 bytes of a request)
            assert str(e) == codec_err
            continue
        assert pm.error is not None and str(pm.error) == codec_err, (label, n)
        assert _is_prefix(pm.header, full["header"]), (label, n)
        if pm.body is not None:
            assert _is_prefix(pm.body, full["body"]), (label, n)
