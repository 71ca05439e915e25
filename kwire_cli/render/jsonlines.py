"""Output rows (one per Kafka frame) as compact JSON lines, fast (shared by `kwire pcap` and the Spark job)."""
from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

from kwire_cli.errors import KwireError
from kwire_cli.render.safe import json_bytes, json_text


def float_apis() -> frozenset:
    """API keys whose request or response schema has a float64 field (the only source of
    non-finite floats in a row: the capture's own ts and latency_ms are always finite)."""
    from kwire_cli.spec.registry import registry

    def has_float(struct, seen: set) -> bool:
        for f in struct.fields:
            t = f.type
            while t.kind == "array" and t.element is not None:
                t = t.element
            if t.kind == "float64":
                return True
            if f.struct is not None and id(f.struct) not in seen:
                seen.add(id(f.struct))
                if has_float(f.struct, seen):
                    return True
        return False

    return frozenset(k for k, a in registry().apis.items()
                     if has_float(a.request.struct, set()) or has_float(a.response.struct, set()))


def json_default(value: Any) -> Any:
    """What to_jsonable does for values plain JSON has no type for."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    return str(value)


def line_encoder():
    """A function: output row -> one compact JSON line (UTF-8 bytes, no newline).

    Same JSON tree as json.dumps(to_jsonable(row)), written compactly. A decoded value tree is
    already JSON-shaped (DESIGN.md), so the copy to_jsonable makes is skipped: rows go straight
    to orjson (when installed) or json.dumps, and only the rare ones these cannot write as
    to_jsonable would (non-finite floats, non-str keys, ints past 64 bits) take the to_jsonable
    path. orjson writes NaN as null, so rows of APIs with float64 fields never go to it.

    Controls and format characters in strings (a client id's ESC, U+009B, U+202E; a file name
    that is not UTF-8) are written as JSON ``\\uXXXX`` escapes (``kwire_cli.render.safe``): the
    same value, nothing a terminal acts on.
    """
    floats = float_apis()
    std = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                           default=json_default).encode

    def careful(rec: dict) -> bytes:
        from kwire_cli.render.json import to_jsonable  # imports yaml: only when needed
        return json_text(json.dumps(to_jsonable(rec), ensure_ascii=False, allow_nan=False,
                                    separators=(",", ":"))).encode()

    try:
        import orjson
    except ImportError:
        orjson = None

    if orjson is None:
        def encode(rec: dict) -> bytes:
            try:
                return json_text(std(rec)).encode()
            except (TypeError, ValueError):
                return careful(rec)
        return encode

    dumps = orjson.dumps

    def encode(rec: dict) -> bytes:
        if rec.get("api_key") in floats:
            return careful(rec)
        try:
            return json_bytes(dumps(rec, default=json_default))
        except TypeError:  # orjson.JSONEncodeError: non-str key, int past 64 bits, deep nesting, surrogates
            return careful(rec)
    return encode


@contextmanager
def gc_tuned():
    """Fewer garbage-collector passes while decoding.

    A decoded Fetch or Produce frame is a tree of up to millions of containers (records, keys,
    values, headers), which with the default thresholds sets off full collections that scan them
    all again and again: 10-15% of the CPU time of `kwire pcap --format jsonl` on a 100k-record
    capture. The specs and compiled codecs loaded at start-up are frozen out of the collector's
    sight, and young collections happen every 100,000 allocations instead of 700. The trees hold
    no cycles, so nothing waits longer to be freed; the thresholds are restored afterwards.
    """
    import gc

    from kwire_cli.spec.registry import registry

    try:
        registry()
    except KwireError:
        pass  # reported where the specs are first used
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
