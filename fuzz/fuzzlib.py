"""Shared pieces of kwire's fuzzing: seed corpora from the real fixtures, hostile mutators, and the
targets (one per decoder) with the single rule they are held to.

The rule: a target may return, or raise kwire's own documented error (`KwireError` and its
subclasses: `DecodeError`, `RecordsError`, `CaptureError`, ...) whose message is one line. Any other
exception is a bug. `run_one(target, data)` applies the rule and returns None (fine) or a short
description of the violation.

Used by the bounded hypothesis tests in tests/test_fuzz_*.py and by the long runs in fuzz/*.py.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
import struct
import traceback
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"

# ----------------------------------------------------------------------------------- seed corpora


@cache
def pairs() -> tuple[tuple[int, int, bytes, bytes | None], ...]:
    """(api_key, api_version, request frame, response frame or None) of every recorded pair."""
    out = []
    for p in sorted((FIXTURES / "pairs").glob("*/*.json")):
        d = json.loads(p.read_text())
        resp = d.get("response")
        out.append((d["api_key"], d["api_version"], bytes.fromhex(d["request"]),
                    bytes.fromhex(resp) if resp else None))
    return tuple(out)


@cache
def hex_fixtures() -> tuple[bytes, ...]:
    from kwire_cli.inputs import parse_hex
    return tuple(parse_hex(p.read_text()) for p in sorted((FIXTURES / "hex").glob("*.hex")))


@cache
def captures() -> tuple[bytes, ...]:
    paths = sorted((FIXTURES / "captures").glob("*.pcap")) + sorted((FIXTURES / "captures" / "rotated").glob("*.pcap"))
    paths += sorted((FIXTURES / "negotiate").glob("*.pcap"))
    return tuple(p.read_bytes() for p in paths)


@cache
def tls_captures() -> tuple[bytes, ...]:
    """The recorded TLS and SASL-over-TLS captures (fixtures/secure), decrypted with tls_keys()."""
    secure = FIXTURES / "secure"
    return tuple(p.read_bytes() for d in ("tls", "sasl") for p in sorted((secure / d).glob("*.pcap"))
                 if ".plain." not in p.name and p.with_suffix(".keylog").exists())


@cache
def tls_keys():
    """Every key log of fixtures/secure in one KeyLog."""
    from kwire_cli.tls import KeyLog
    keys = KeyLog()
    for p in sorted((FIXTURES / "secure").glob("*/*.keylog")):
        keys.add_text(p.read_bytes(), source=p.name)
    return keys


@cache
def records_fields() -> tuple[bytes, ...]:
    """The raw bytes of every non-empty records field in the recorded pairs (produce/fetch)."""
    from kwire_cli.codec import decode_request, decode_response
    found: list[bytes] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "Records" and isinstance(v, str) and v:
                    found.append(bytes.fromhex(v))
                else:
                    walk(v, k)
        elif isinstance(node, list):
            for x in node:
                walk(x, key)

    for key, ver, req, resp in pairs():
        if key not in (0, 1):
            continue
        walk(decode_request(req, records="hex").body)
        if resp:
            walk(decode_response(resp, key, ver, records="hex").body)
    # one of each codec and magic, built by kwire's own encoder, so every decompressor is reached
    from kwire_cli.records import encode_records
    recs = [{"Key": "k%d" % i, "Value": "value %d " % i * 3, "Headers": [{"Key": "h", "Value": "x"}]}
            for i in range(4)]
    for comp in ("none", "gzip", "snappy", "lz4", "zstd"):
        found.append(encode_records({"batches": [{"Compression": comp, "Records": recs}]}))
    for comp in ("none", "gzip", "snappy", "lz4"):
        for magic in (0, 1):
            msgs = [{"Key": "k", "Value": "legacy %d" % i, "Offset": i} for i in range(3)]
            found.append(encode_records({"batches": [{"Magic": magic, "Compression": comp, "Messages": msgs}]
                                         if comp != "none" else
                                         [{"Magic": magic, "Key": "k", "Value": "v", "Offset": 0}]}))
    found.append(encode_records({"batches": [{"Compression": "snappy", "CompressionFraming": "raw",
                                              "Records": recs}]}))
    return tuple(dict.fromkeys(found))


@cache
def compressed_payloads() -> tuple[tuple[int, bytes], ...]:
    """(codec id, compressed payload) for every codec and framing kwire reads."""
    from kwire_cli.records.compression import compress
    data = b"".join(b"kwire %d hostile input " % i for i in range(400))
    out = [(1, compress(1, data)), (2, compress(2, data)), (2, compress(2, data, framing="raw")),
           (3, compress(3, data)), (3, compress(3, data, magic=0)), (4, compress(4, data))]
    import cramjam
    out.append((3, bytes(cramjam.lz4.compress(data))))  # cramjam's own frame (linked blocks)
    return tuple(out)


@cache
def api_versions() -> tuple[tuple[int, int, str], ...]:
    """Every (api key, version, kind) the bundled specs define."""
    from kwire_cli.spec.registry import registry
    out = []
    for key, api in sorted(registry().apis.items()):
        for kind in ("request", "response"):
            vv = api.spec(kind).valid_versions
            for v in range(vv.lo, vv.hi + 1):
                out.append((key, v, kind))
    return tuple(out)


# ----------------------------------------------------------------------------------- mutators

def _flip(rng: random.Random, b: bytearray) -> None:
    if b:
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)


def _set_byte(rng: random.Random, b: bytearray) -> None:
    if b:
        b[rng.randrange(len(b))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))


def _truncate(rng: random.Random, b: bytearray) -> None:
    if b:
        del b[rng.randrange(len(b)):]


def _inflate_len(rng: random.Random, b: bytearray) -> None:
    """Overwrite a 2/4-byte big-endian integer with a length that lies (huge, negative, off by one)."""
    if len(b) < 4:
        return
    size = rng.choice((2, 4, 4))
    i = rng.randrange(len(b) - size + 1)
    if size == 4:
        v = rng.choice((0x7FFFFFFF, 0x7FFFFFF0, 0x10000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x80000000,
                        len(b), len(b) - i, len(b) - i - 3, rng.randrange(1 << 32)))
        struct.pack_into(">I", b, i, v & 0xFFFFFFFF)
    else:
        v = rng.choice((0x7FFF, 0xFFFF, 0xFFFE, 0x8000, len(b) & 0xFFFF, rng.randrange(1 << 16)))
        struct.pack_into(">H", b, i, v)


def _huge_varint(rng: random.Random, b: bytearray) -> None:
    """Insert or overwrite with an over-long / huge unsigned varint."""
    v = rng.choice((b"\xff" * rng.randrange(1, 16), b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x7f",
                    b"\x80" * rng.randrange(1, 12) + b"\x01", b"\xfe\xff\xff\xff\x0f",
                    b"\xff" * 9 + b"\x01", b"\xff" * 10 + b"\x01"))
    i = rng.randrange(len(b) + 1)
    if rng.random() < 0.5:
        b[i:i] = v
    else:
        b[i:i + len(v)] = v


def _tag_count(rng: random.Random, b: bytearray) -> None:
    """Where a tagged-field section would be (a zero byte), put a bogus count."""
    zeros = [i for i, x in enumerate(b) if x == 0]
    if not zeros:
        return
    i = rng.choice(zeros)
    b[i:i + 1] = rng.choice((b"\x7f", b"\xff\xff\xff\xff\x0f", b"\x01\x00\xff\xff\xff\xff\x0f",
                             b"\x02\x00\x00\x00\x00", b"\x01\xff\xff\xff\xff\x0f\x00",
                             b"\x03\x05\x01\x00\x05\x01\x00\x05\x01\x00"))


def _insert(rng: random.Random, b: bytearray) -> None:
    i = rng.randrange(len(b) + 1)
    b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))


def _delete(rng: random.Random, b: bytearray) -> None:
    if b:
        i = rng.randrange(len(b))
        del b[i:i + rng.randrange(1, 9)]


def _duplicate(rng: random.Random, b: bytearray) -> None:
    if b:
        i = rng.randrange(len(b))
        j = min(len(b), i + rng.randrange(1, 64))
        k = rng.randrange(len(b) + 1)
        b[k:k] = b[i:j]


MUTATORS: tuple[Callable[[random.Random, bytearray], None], ...] = (
    _flip, _flip, _set_byte, _truncate, _inflate_len, _inflate_len, _huge_varint, _tag_count,
    _insert, _delete, _duplicate)


def mutate(rng: random.Random, data: bytes, rounds: int | None = None) -> bytes:
    b = bytearray(data)
    for _ in range(rounds if rounds is not None else rng.choice((1, 1, 1, 2, 3, 5))):
        rng.choice(MUTATORS)(rng, b)
    return bytes(b)


# ----------------------------------------------------------------------------------- targets
# Each target takes (data, rng) and runs one decoder the way kwire's users reach it.


def t_request(data: bytes, rng: random.Random) -> None:
    from kwire_cli.codec import decode_request
    decode_request(data, records=rng.choice(("decode", "hex")))


def t_response(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None) -> None:
    from kwire_cli.codec import decode_response
    if key is None:
        key, version, _ = rng.choice([x for x in api_versions() if x[2] == "response"])
    decode_response(data, key, version, records=rng.choice(("decode", "hex")))


def t_body(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
           kind: str | None = None) -> None:
    from kwire_cli.codec import decode_body
    if key is None:
        key, version, kind = rng.choice(api_versions())
    decode_body(data, key, version, kind, records=rng.choice(("decode", "hex")))


def t_partial(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
              kind: str | None = None, header: bool = False) -> None:
    """The --partial walker (a second, interpreted decoder): never crashes."""
    from kwire_cli.codec.partial import walk_message
    if key is None:
        key, version, kind = rng.choice(api_versions())
    if header and kind == "request":
        walk_message(data, "request", records=rng.choice(("decode", "hex")))
    else:
        walk_message(data, kind, key, version, header=header, records=rng.choice(("decode", "hex")))


def t_records(data: bytes, rng: random.Random) -> None:
    from kwire_cli.records import decode_records
    decode_records(data, max_decompressed=rng.choice((1 << 20, 1 << 16, 4096)))


def t_decompress(data: bytes, rng: random.Random, codec: int | None = None) -> None:
    """The decompressors on their own; CompressionError is their documented failure (decode_records
    turns it into a per-batch "error")."""
    from kwire_cli.records.compression import CompressionError, decompress
    codec = codec if codec is not None else rng.randrange(1, 5)
    cap = rng.choice((1 << 20, 1 << 16, 1000))
    try:
        out, _ = decompress(codec, data, cap)
    except CompressionError as e:
        _one_line(e)
        return
    if len(out) > cap:
        raise AssertionError(f"codec {codec} returned {len(out)} bytes over the cap {cap}")


def t_embedded(data: bytes, rng: random.Random) -> None:
    from kwire_cli.codec.embedded import ASSIGNMENT, SUBSCRIPTION, decode_embedded
    decode_embedded(rng.choice((SUBSCRIPTION, ASSIGNMENT)), data)


def t_capture(data: bytes, _rng: random.Random) -> None:
    """The whole pcap pipeline: reader, reassembly, framing, pairing, per-frame decode, summary."""
    from kwire_cli.capture import CaptureStats, iter_capture
    from kwire_cli.capture.session import Conversation
    from kwire_cli.capture.summary import RunCounts, Summary
    from kwire_cli.records.stats import batch_stats, new_batch_stats
    stats = CaptureStats()
    conv = Conversation()
    summ = Summary()
    counts = RunCounts()
    walked = new_batch_stats()
    for rec in conv.rows(iter_capture(io.BytesIO(data), file_label="fuzz.pcap", stats=stats)):
        summ.add(rec)
        counts.add(rec)
        if rec.get("body") is not None:
            batch_stats(rec["body"], walked)  # every records field of the body, by a walk of all of it
    out = summ.to_dict(stats=None, damage=conv.damage)
    json.dumps(out, default=str)
    if not out["reconciled"]:
        raise AssertionError("summary does not reconcile")
    if out["record_batches"] != walked:
        raise AssertionError("the record batches counted where the spec puts them differ from a walk's")
    light = counts.to_dict(stats=None, damage=conv.damage)
    for k in ("frames", "undecodable", "undecodable_by_reason", "record_batches", "damage"):
        if light[k] != out[k]:  # what kwire pcap's diagnostics read when the output holds no summary
            raise AssertionError(f"RunCounts' {k} differs from the summary's")


def t_hexdump(data: bytes, _rng: random.Random) -> None:
    """The CLI's input reader (hex, xxd, hexdump -C, tshark dumps, raw bytes)."""
    from kwire_cli.inputs import bytes_from_source
    bytes_from_source(data, binary=None)


TARGETS: dict[str, Callable[..., None]] = {
    "request": t_request, "response": t_response, "body": t_body, "partial": t_partial,
    "records": t_records, "decompress": t_decompress, "embedded": t_embedded, "capture": t_capture,
    "hexdump": t_hexdump,
}


def seeds_for(name: str) -> list[tuple[bytes, dict]]:
    """Seed inputs of a target, each with the keyword arguments that say how to decode it (the
    response's own API and version, a body's kind); targets pick at random when given none."""
    if name in _PEER_SEEDS:
        return _PEER_SEEDS[name]()
    if name == "request":
        return [(p[2], {}) for p in pairs()] + [(h, {}) for h in hex_fixtures()]
    if name == "response":
        return [(p[3], {"key": p[0], "version": p[1]}) for p in pairs() if p[3]]
    if name in ("body", "partial", "partial_agrees", "native_agrees", "lenient"):
        out = [(p[2][4:], {"key": p[0], "version": p[1], "kind": "request"}) for p in pairs()]
        out += [(p[3][4:], {"key": p[0], "version": p[1], "kind": "response"}) for p in pairs() if p[3]]
        if name in ("partial", "partial_agrees", "native_agrees", "lenient"):
            out += [(p[2], {"key": p[0], "version": p[1], "kind": "request", "header": True}) for p in pairs()]
            out += [(p[3], {"key": p[0], "version": p[1], "kind": "response", "header": True})
                    for p in pairs() if p[3]]
        return out
    if name in ("records", "records_long", "records_big"):
        return [(r, {}) for r in records_fields()]
    if name == "decompress":
        return [(p, {"codec": c}) for c, p in compressed_payloads()]
    if name == "embedded":
        return [(e, {}) for e in embedded_seeds()]
    if name == "capture":
        return [(c, {}) for c in captures()]
    if name in ("capture_tls", "tls_native_agrees"):
        return [(c, {}) for c in tls_captures()]
    if name == "hexdump":
        return [(p.read_bytes(), {}) for p in sorted((FIXTURES / "hex").glob("*.hex"))]
    if name == "relay":
        return [(b"".join(bytes.fromhex(p.read_text().strip()) for p in sorted((FIXTURES / "hex").glob("*.hex"))
                          if p.read_text().strip()[:8] != "00000000"), {})]
    if name == "segment":
        return [(p.read_bytes(), {"topic": p.parent.name.rsplit("-", 1)[0]})
                for p in sorted((FIXTURES / "logs").glob("*/*.log"))]
    if name == "negotiate":
        return [(p.read_bytes(), {}) for p in sorted((FIXTURES / "negotiate").iterdir())
                if p.is_file() and p.suffix != ".md"]
    if name == "yaml":
        return [(p.read_bytes(), {}) for p in sorted((FIXTURES / "yaml").glob("*.yaml"))]
    raise KeyError(name)


@cache
def embedded_seeds_t() -> tuple[bytes, ...]:
    from kwire_cli.codec import decode_request, decode_response
    out = []
    for key, ver, req, resp in pairs():
        if key == 11:  # JoinGroup
            for p in decode_request(req).body.get("Protocols") or []:
                if p.get("Metadata"):
                    out.append(bytes.fromhex(p["Metadata"]))
        if key == 14 and resp:  # SyncGroup
            a = decode_response(resp, key, ver).body.get("Assignment")
            if a:
                out.append(bytes.fromhex(a))
    return tuple(dict.fromkeys(out))


def embedded_seeds() -> list[bytes]:
    return list(embedded_seeds_t())


# ----------------------------------------------------------------------------------- the rule

def _one_line(e: BaseException) -> None:
    s = str(e)
    if "\n" in s or not s.strip():
        raise AssertionError(f"error message is not one non-empty line: {s!r}")


def run_one(target: Callable[..., None], data: bytes, rng: random.Random, **kw: Any) -> str | None:
    """None when the target behaved; else a one-line description of the bug (exception + where)."""
    from kwire_cli.errors import KwireError
    try:
        target(data, rng, **kw)
    except KwireError as e:
        try:
            _one_line(e)
        except AssertionError as a:
            return f"{type(e).__name__} {a}"
        return None
    except RecursionError:
        return "RecursionError"
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(tb)
                      if "kwire_cli" in f.filename or "<kwire" in f.filename), "?")
        return f"{type(e).__name__}: {str(e)[:120]} @ {where}"
    return None


def _codec_decode(data: bytes, key: int, version: int | None, kind: str | None, header: bool,
                  records: str) -> tuple[Any, Any]:
    """(message, None) as the compiled codec decodes ``data`` (a bare body, a request, or a response
    of key/version), or (None, the DecodeError): decode_lenient's strict path, the one dispatch."""
    from kwire_cli.codec.lenient import decode_lenient
    from kwire_cli.errors import DecodeError
    try:
        return decode_lenient(data, kind or "request", key, version, header=header, records=records,
                              strict=True), None
    except DecodeError as e:
        return None, e


@contextlib.contextmanager
def item_budget(rng: random.Random) -> Any:
    """Half the time, a message's item budget (array elements and unknown tagged fields: 400,000,
    which no seed comes near) set to a few dozen for the block, in the generated decoders, the
    walker and the native decoder alike, so that the differential targets cross it."""
    from kwire_cli.codec import native, runtime
    if rng.random() < 0.5:
        yield
        return
    before = runtime.MAX_ITEMS[0]
    n = rng.randrange(0, 40)
    runtime.MAX_ITEMS[0] = n
    if native.extension is not None:
        native.extension.set_max_items(n)
    try:
        yield
    finally:
        runtime.MAX_ITEMS[0] = before
        if native.extension is not None:
            native.extension.set_max_items(before)


def t_partial_agrees(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
                     kind: str | None = None, header: bool = False) -> None:
    with item_budget(rng):
        _partial_agrees(data, rng, key, version, kind, header)


def _partial_agrees(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
                    kind: str | None = None, header: bool = False) -> None:
    """Differential: `kwire decode --partial` (the walker) and the compiled codec must agree: the
    same value when the bytes decode, the same error (message) when they do not."""
    from kwire_cli.codec.partial import walk_message
    from kwire_cli.errors import DecodeError
    if key is None:
        key, version, kind = rng.choice(api_versions())
    records = rng.choice(("decode", "hex"))
    msg, err = _codec_decode(data, key, version, kind, header, records)
    try:
        pm = walk_message(data, kind, None if (header and kind == "request") else key, version,
                          header=header, records=records)
    except DecodeError as e:
        if err is None or str(e) != str(err):
            raise AssertionError(f"walker raised {e!s:.100} but the codec said {err!s:.100}") from None
        return
    if err is None:
        if pm.error is not None:
            raise AssertionError(f"walker failed ({pm.error!s:.100}) where the codec decoded")
        if pm.body != msg.body:
            raise AssertionError("walker and codec decoded different bodies")
    elif pm.error is None or str(pm.error) != str(err):
        raise AssertionError(f"walker error {pm.error!s:.100} differs from the codec's {err!s:.100}")


TARGETS["partial_agrees"] = t_partial_agrees

LENIENT_RULES = frozenset({"truncated", "null-not-nullable", "invalid-utf8", "bad-length", "tag-size", "tag-order",
                           "trailing-bytes", "records", "too-deep", "unreadable", "missing-tags",
                           "too-many-items"})


def t_lenient(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
              kind: str | None = None, header: bool = False) -> None:
    """Lenient decoding (kwire decode / pcap without --strict): where the strict codec decodes, the same
    message and no violation; where it refuses, either a message whose violations name known rules at
    offsets inside the input, or a DecodeError whose partial tree (when there is one) ends with the stop."""
    from kwire_cli.codec.lenient import decode_lenient
    from kwire_cli.errors import DecodeError
    if key is None:
        key, version, kind = rng.choice(api_versions())
    assert kind is not None
    records = rng.choice(("decode", "hex"))
    strict, _ = _codec_decode(data, key, version, kind, header, records)
    try:
        msg = decode_lenient(data, kind, None if (header and kind == "request") else key, version,
                             header=header, records=records)
    except DecodeError as e:
        if strict is not None:
            raise AssertionError(f"lenient raised {e!s:.100} where the codec decoded") from None
        stopped = e.partial.violations[-1].rule if e.partial is not None and e.partial.violations else None
        if e.partial is not None and stopped not in LENIENT_RULES:
            raise AssertionError(f"a partial tree whose last violation is {stopped!r}") from None
        return
    if strict is not None:
        assert msg.body == strict.body and not msg.violations, "lenient differs from the codec"
        return
    assert msg.violations, "lenient decoded without a violation what the codec refused"
    for v in msg.violations:
        assert v.rule in LENIENT_RULES, v
        assert v.offset is None or 0 <= v.offset <= len(data), v


TARGETS["lenient"] = t_lenient


def t_negotiate(data: bytes, rng: random.Random) -> None:
    """`kwire negotiate` input: any broker-answer form (hex, raw bytes, kafka-broker-api-versions
    output, librdkafka log, YAML/JSON, capture), then the intersection and its renderings."""
    from kwire_cli.negotiation.client import kwire_client_ranges
    from kwire_cli.negotiation.forms import parse_broker_input
    from kwire_cli.negotiation.negotiate import negotiate
    from kwire_cli.negotiation.render import render_json
    if rng.random() < 0.3:
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    answers = parse_broker_input(data, "fuzz")
    render_json(negotiate(kwire_client_ranges(), answers))


def t_yaml_doc(data: bytes, _rng: random.Random) -> None:
    """`kwire encode` input: YAML/JSON message documents, then the encoder."""
    from kwire_cli.inputs.messages import message_docs
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    for doc in message_docs(text, "fuzz.yaml"):
        doc.encode()


TARGETS["negotiate"] = t_negotiate
TARGETS["yaml"] = t_yaml_doc


def t_native_agrees(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
                    kind: str | None = None, header: bool = False) -> None:
    with item_budget(rng):
        _native_agrees(data, rng, key, version, kind, header)


def _native_agrees(data: bytes, rng: random.Random, key: int | None = None, version: int | None = None,
                   kind: str | None = None, header: bool = False) -> None:
    """Differential: the optional native decoder (codec/_speedups.c) and the generated Python one it
    falls back to must give the same value, or both refuse (the native one hands anything it does
    not fully accept to Python, so an error is always Python's). Skipped without the extension."""
    from kwire_cli.codec.message import body_plan
    from kwire_cli.errors import DecodeError
    from kwire_cli.spec.registry import registry
    if key is None:
        key, version, kind = rng.choice(api_versions())
    plan = body_plan(registry().api(key), version, kind, rng.choice(("hex", "bytes")))
    if getattr(plan, "py_decode", None) is None or plan.decode is plan.py_decode:
        return
    if header:
        _frame_agrees(data, key, kind, version, rng.choice(("hex", "bytes", None)))
        data = data[4:]
    start = rng.randrange(0, 3) if len(data) > 3 and rng.random() < 0.1 else 0
    try:
        got = plan.decode(data, start, len(data))
    except DecodeError as e:
        got = ("error", str(e))
    try:
        want = plan.py_decode(data, start, len(data))
    except DecodeError as e:
        want = ("error", str(e))
    if got != want:
        raise AssertionError(f"native and Python decoders differ on {key} v{version} {kind}: "
                             f"{str(got)[:80]} vs {str(want)[:80]}")


def _frame_agrees(data: bytes, key: int, kind: str, version: int, records: str | None) -> None:
    """A whole frame through decode_request / decode_response with the native decoder on (its
    whole-frame entry) and off: the same Message, or the same error."""
    from kwire_cli.codec import decode_request, decode_response
    from kwire_cli.codec.native import use_speedups
    from kwire_cli.errors import KwireError

    def outcome() -> object:
        try:
            if kind == "request":
                return decode_request(data, records=records).to_json()
            return decode_response(data, key, version, records=records).to_json()
        except KwireError as e:
            decoded = getattr(e, "decoded", None)
            return ("error", type(e).__name__, str(e), decoded.to_json() if decoded is not None else None)

    on = outcome()
    previous = use_speedups(False)
    try:
        off = outcome()
    finally:
        use_speedups(previous)
    if repr(on) != repr(off):  # repr: a NaN float64 equals itself there
        raise AssertionError(f"whole-frame decode differs with the native decoder on and off ({key} v{version} "
                             f"{kind}, records={records}): {repr(on)[:80]} vs {repr(off)[:80]}")


TARGETS["native_agrees"] = t_native_agrees


def t_capture_tls(data: bytes, _rng: random.Random) -> None:
    """The pcap pipeline on TLS captures with their key logs: TLS records decrypted inside the
    reassembly, KIP-43 tokens, SASL secrets; the capture's bytes still reconcile."""
    from kwire_cli.capture import CaptureStats, iter_capture
    from kwire_cli.capture.session import Conversation
    from kwire_cli.capture.summary import Summary
    stats = CaptureStats()
    conv = Conversation()
    summ = Summary()
    events = iter_capture(io.BytesIO(data), file_label="fuzz.pcap", stats=stats, broker_ports={9093, 9095},
                          keylog=tls_keys())
    for rec in conv.rows(events):
        summ.add(rec)
    out = summ.to_dict(stats=stats.to_dict(), damage=conv.damage, notes=conv.notes)
    json.dumps(out, default=str)
    if not out["reconciled"] or not stats.reconcile()["ok"]:
        raise AssertionError("summary does not reconcile")


TARGETS["capture_tls"] = t_capture_tls


def _tls_capture_events(data: bytes) -> tuple[list[str], dict]:
    from kwire_cli.capture import CaptureStats, iter_capture
    stats = CaptureStats()
    events = [repr(ev) for ev in iter_capture(io.BytesIO(data), file_label="fuzz.pcap", stats=stats,
                                              broker_ports={9093, 9095}, keylog=tls_keys())]
    return events, stats.to_dict()


def t_tls_native_agrees(data: bytes, _rng: random.Random) -> None:
    """The TLS 1.3 records opened and keys derived through OpenSSL's libcrypto (tls/_records13.c)
    and through cryptography give the same capture: every frame, damage and note, and the stats.
    Nothing to compare when the extension is not built."""
    from kwire_cli.tls import keys
    native_opener = keys.native_opener
    if native_opener is None:
        return
    native = _tls_capture_events(data)
    keys.native_opener = None
    try:
        python = _tls_capture_events(data)
    finally:
        keys.native_opener = native_opener
    if native != python:
        raise AssertionError("the native TLS 1.3 path and the Python one disagree")


TARGETS["tls_native_agrees"] = t_tls_native_agrees


def t_relay(data: bytes, rng: random.Random) -> None:
    """kwire proxy's relay (one direction of a connection): fed in random chunks with a random choice
    of frames to hold, it only ever raises DecodeError, and what it forwards (bytes as they come,
    held frames where they complete) is exactly the input it consumed, in order."""
    from kwire_cli.errors import DecodeError
    from kwire_cli.proxy.relay import FrameRelay
    salt = rng.random()
    relay = FrameRelay(1 << 20, hold=lambda head: (hash(head) ^ int(salt * 1e9)) % 3 == 0)
    out = bytearray()
    pos = 0
    try:
        while pos < len(data):
            n = rng.choice((1, 2, 3, 7, 64, 1500, 65536))
            for act in relay.feed(data[pos:pos + n]):
                if act[0] == "bytes" or act[2]:  # forwarded bytes, or a held frame forwarded whole
                    out += act[1]
            pos += n
    except DecodeError:
        return
    consumed = len(data) - relay.unforwarded
    if bytes(out) != data[:consumed]:
        raise AssertionError(f"the relay forwarded {len(out)} bytes that differ from the {consumed} it forwards")


TARGETS["relay"] = t_relay


def t_segment(data: bytes, rng: random.Random, topic: str | None = None) -> None:
    """kwire dump-log's segment reader over mutated segments (internal topics' records decoded too):
    entries one at a time, damage as entries, never anything but a KwireError."""
    import io

    from kwire_cli.logs import iter_segment
    for entry in iter_segment(io.BytesIO(data), topic=topic, size=len(data), show_secrets=rng.random() < 0.5):
        entry.to_json()


TARGETS["segment"] = t_segment


def t_records_long(data: bytes, rng: random.Random) -> None:
    """The long-value paths: decode_records with every key and value of a few bytes or
    more taken as a long one (records.forms.LONG lowered, the native path off: memoryviews, looks
    a few bytes at a time, costs charged before a form is made) gives the tree the normal path
    gives whenever no cap stopped it, and under small frame caps only KwireErrors; the writers'
    long-string paths (LONG_TEXT lowered: pieces of a few characters) give the same bytes as
    line_encoder and dumps_json."""
    from kwire_cli.records import decode_records, forms, v2
    from kwire_cli.records import native as records_native
    from kwire_cli.render import json as render_json
    from kwire_cli.render import jsonlines
    normal = decode_records(data, max_frame_decompressed=1 << 30)
    saved = (forms.LONG, v2.LONG, forms._STEP, jsonlines.LONG_TEXT, render_json.LONG_TEXT)
    native = records_native.set_enabled(False)
    try:
        forms.LONG = v2.LONG = rng.choice((1, 3, 8))
        forms._STEP = rng.choice((1, 2, 5, 64))
        long = decode_records(data, max_frame_decompressed=1 << 30)
        decode_records(data, max_frame_decompressed=rng.choice((0, 16, 200, 4096)))
        jsonlines.LONG_TEXT = render_json.LONG_TEXT = rng.choice((1, 2, 7))
        row = {"api_key": 0, "body": long}
        forms.note_long_form()
        pieces: list[bytes] = []
        jsonlines.line_writer()(row, pieces.append)
        if b"".join(pieces) != jsonlines.line_encoder()(row):
            raise AssertionError("line_writer's pieces differ from line_encoder's line")
        doc: list[bytes] = []
        render_json.write_json(long, doc.append)
        if b"".join(doc) != (render_json.dumps_json(long) + "\n").encode("utf-8", "surrogatepass"):
            raise AssertionError("write_json's long strings differ from dumps_json")
    finally:
        forms.LONG, v2.LONG, forms._STEP, jsonlines.LONG_TEXT, render_json.LONG_TEXT = saved
        records_native.set_enabled(native)
    if "raises it)" not in json.dumps(normal, default=str) and long != normal:
        raise AssertionError("the long-value path made a different tree")


TARGETS["records_long"] = t_records_long


def t_records_big(data: bytes, rng: random.Random) -> None:
    """The native records path over long batches: one batch of 1-3 records whose keys,
    values and headers are a few bytes or about a megabyte (zeros, ASCII, ASCII with emoji, random
    bytes: hex and text forms), uncompressed (read in place: a memoryview of the field) or zstd (a
    bytearray), a few bytes past its header overwritten with the input's; the native path and the
    Python one give the same tree under a random frame cap."""
    from kwire_cli.records import decode_records, encode_records
    from kwire_cli.records import native as records_native

    def blob() -> dict[str, str]:
        n = rng.choice((0, 7, (1 << 20) + rng.randrange(-2, 3)))
        kind = rng.randrange(4)
        if kind == 0:
            return {"hex": "00" * n}
        if kind == 1:
            return {"text": "a" * n}
        if kind == 2:
            return {"text": ("x" * 1020 + "\U0001F600") * (n // 1024) + "y" * (n % 1024)}
        return {"hex": rng.randbytes(n).hex()}
    def headers() -> list[dict[str, Any]]:
        return [{"Key": "h" * rng.choice((1, (1 << 20) + 1)), "Value": blob()} for _ in range(rng.randrange(3))]
    recs = [{"Key": blob() if rng.random() < 0.7 else None, "Value": blob(), "Headers": headers()}
            for _ in range(rng.randrange(1, 4))]
    codec = rng.choice(("none", "none", "zstd"))
    field = bytearray(encode_records({"batches": [{"Compression": codec, "Records": recs}]}))
    for i in range(min(len(data), rng.randrange(5))):
        field[rng.randrange(61, len(field))] = data[i]
    if data and rng.random() < 0.2:
        del field[rng.randrange(61, len(field)):]
    cap = rng.choice((1 << 30, 3 << 20, 1 << 20, 100))
    native = decode_records(bytes(field), max_frame_decompressed=cap)
    was = records_native.set_enabled(False)
    try:
        python = decode_records(bytes(field), max_frame_decompressed=cap)
    finally:
        records_native.set_enabled(was)
    if native != python:
        raise AssertionError("the native records path and the Python one differ on a long batch")


TARGETS["records_big"] = t_records_big


# the proxy's rewriting and dump-log's index and state files (fuzz_peers.py)
import fuzz_peers  # noqa: E402 (registers into TARGETS, defined above)

TARGETS.update(fuzz_peers.TARGETS)
_PEER_SEEDS = fuzz_peers.SEEDS
