"""Output rows (one per Kafka frame) as compact JSON lines, fast (shared by `kwire pcap` and the Spark job)."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kwire_cli.errors import KwireError
from kwire_cli.render.jsonable import json_default, to_jsonable
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


# a string of at least this many characters is written a piece of this size at a time
LONG_TEXT = 1 << 20


def string_pieces(s: str) -> Iterator[bytes]:
    """The JSON string of ``s`` (as ``line_encoder`` writes it: controls and format characters
    escaped), a megabyte of characters at a time, quotes included: the same bytes, never a copy
    of the whole of ``s``."""
    try:
        import orjson
        dumps: Any = orjson.dumps
    except ImportError:
        dumps = None
    yield b'"'
    for i in range(0, len(s), LONG_TEXT):
        part = s[i:i + LONG_TEXT]
        enc = None
        if dumps is not None:
            try:
                enc = dumps(part)
            except TypeError:  # surrogates
                enc = None
        if enc is None:
            enc = json.dumps(part, ensure_ascii=False).encode("utf-8", "surrogatepass")
        yield json_bytes(enc[1:-1])
    yield b'"'


LONG_LIST = 10_000  # items of a list that a row of a big frame writes one at a time


def long_holders(value: Any, records: bool = True) -> set[int]:
    """The ids of the dicts and lists in ``value`` that hold (at any depth) a string of
    ``LONG_TEXT`` characters or more, or that are or hold a list of more than ``LONG_LIST`` items
    (a Fetch answer's 400,000 partitions: 120 MB of text as one line); ``records=False``: not
    looking into decoded records fields (``{"batches": ..., "partial_trailing_batch": ...}``,
    where most of a big frame's tree is)."""
    held: set[int] = set()

    def visit(x: Any) -> bool:
        found = type(x) is list and len(x) > LONG_LIST
        if not records and type(x) is dict and "batches" in x and "partial_trailing_batch" in x:
            return False
        for y in (x.values() if type(x) is dict else x):
            t = type(y)
            if t is str:
                if len(y) >= LONG_TEXT:
                    found = True
            elif (t is dict or t is list) and visit(y):
                found = True
        if found:
            held.add(id(x))
        return found
    if type(value) is dict or type(value) is list:
        visit(value)
    return held


def line_writer() -> Callable[[dict, Callable[[bytes], Any]], None]:
    """A function: (output row, write) -> writes ``line_encoder``'s line of the row (no newline)
    through ``write``, the same bytes. A row that may hold a long string (a key or value of a
    megabyte or more: ``kwire_cli.records.forms.long_forms`` moved since the row before) is
    written a piece at a time, each long string a megabyte at a time, so the line is never made
    whole next to the tree (a 256 MiB value would be 512 MiB of hex twice over). So is a row
    of a frame of half a megabyte or more (``size``), whose other strings may be that long (the
    hex of a bytes field: twice the bytes) and whose lists may be long (each item of a list of
    more than ``LONG_LIST`` is written apart), its records fields not looked into unless the
    count moved. Any other row is one ``line_encoder`` call."""
    from kwire_cli.records.forms import long_forms
    encode = line_encoder()
    seen = [long_forms()]

    def write_line(rec: dict, write: Callable[[bytes], Any]) -> None:
        now = long_forms()
        moved = now != seen[0]
        size = rec.get("size")
        if not moved and not (type(size) is int and size >= LONG_TEXT // 2):
            write(encode(rec))
            return
        seen[0] = now
        held = long_holders(rec, records=moved)
        if not held:
            write(encode(rec))
            return
        # the row's subtrees without a long string go out as line_encoder writes them (a list
        # wrapped around each one keeps its rules: floats, odd keys), the rest a piece at a time
        buf: list[bytes] = []

        def put(b: bytes) -> None:
            buf.append(b)
            if len(buf) >= 64:
                write(b"".join(buf))
                buf.clear()

        def walk(v: Any) -> None:
            t = type(v)
            if t is str and len(v) >= LONG_TEXT:
                if buf:
                    write(b"".join(buf))
                    buf.clear()
                for piece in string_pieces(v):
                    write(piece)
            elif id(v) not in held:
                put(encode({"api_key": rec.get("api_key"), "_": [v]})[len(head):-2])
            elif t is dict:
                put(b"{")
                for i, (k, x) in enumerate(v.items()):
                    put((b"," if i else b"") + _key(k) + b":")
                    walk(x)
                put(b"}")
            else:
                put(b"[")
                for i, x in enumerate(v):
                    if i:
                        put(b",")
                    walk(x)
                put(b"]")
        head = encode({"api_key": rec.get("api_key"), "_": [None]})[:-6]  # up to the "[" before null
        walk(rec)
        if buf:
            write(b"".join(buf))
    return write_line


def _key(k: Any) -> bytes:
    return json_text(json.dumps(str(k), ensure_ascii=False)).encode("utf-8", "surrogatepass")


GC_TUNED = (100_000, 50, 100)  # the collector's thresholds in ``gc_tuned``


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

    if gc.get_threshold() == GC_TUNED:  # tuned already: an outer gc_tuned, or the process (``tune_gc``)
        yield
        return
    try:
        registry()
    except KwireError:
        pass  # reported where the specs are first used
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*GC_TUNED)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def tune_gc() -> None:
    """``gc_tuned`` for the rest of the process's life (a Python worker that decodes one task after
    another): what is alive now frozen, the thresholds set; ``gc_tuned`` then leaves them as they
    are: each task's end no longer unfreezes the specs and codecs for a full collection that scans
    them all again (about 5 ms a task)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_TUNED)
