"""JSON and YAML output of value trees (DESIGN.md: non-finite floats become strings).

Every command that writes JSON or YAML goes through `dumps_json` / `dumps_yaml`, so the same
tree prints the same way everywhere: dicts keep their order, bytes become lowercase hex, and
NaN and infinities become the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (which
`kwire encode` reads back as floats).
"""
from __future__ import annotations

import json
from typing import Any

import yaml

from kwire_cli.render.jsonable import json_default, to_jsonable
from kwire_cli.render.jsonlines import LONG_TEXT, string_pieces
from kwire_cli.render.safe import UNSAFE, json_text


def dumps_json(value: Any, *, indent: int | None = 2) -> str:
    """Strict JSON (no NaN literals), one document, no trailing newline; controls and format
    characters are ``\\uXXXX`` escapes (``kwire_cli.render.safe.json_text``: the same value)."""
    return json_text(json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False, allow_nan=False))


class _Dumper(yaml.SafeDumper):
    """Block style, insertion order, multi-line strings as literal blocks; a string holding a
    character a terminal must not see raw (``kwire_cli.render.safe.UNSAFE``: controls, bidi and
    other format characters) is double-quoted with every non-ASCII character escaped (the same
    value: YAML's ``\\e``, ``\\x9B``, ``\\u202E`` escapes)."""

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        if not _has_unsafe(text):
            super().write_double_quoted(text, split)
            return
        unicode = self.allow_unicode
        self.allow_unicode = False  # PyYAML escapes what is not printable ASCII
        try:
            super().write_double_quoted(text, split)
        finally:
            self.allow_unicode = unicode


def _has_unsafe(text: str) -> bool:
    return any(m.group() != "\n" for m in UNSAFE.finditer(text))


def _str_repr(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if _has_unsafe(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_repr)


def dumps_yaml(value: Any) -> str:
    """YAML with the same tree as `dumps_json` (ends with a newline)."""
    return yaml.dump(to_jsonable(value), Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=100)


# --------------------------------------------------------------------------- streamed JSON

_SMALL = 256     # containers in a subtree written with one orjson call
_CHUNK = 1 << 20  # bytes gathered before each write


def _at_most(value: Any, n: int) -> bool:
    """Whether ``value`` holds at most ``n`` dicts and lists (itself included) and no string of
    ``LONG_TEXT`` characters or more; stops counting at n."""
    stack = [value]
    count = 0
    while stack:
        x = stack.pop()
        count += 1
        if count > n:
            return False
        for y in (x.values() if type(x) is dict else x):
            if type(y) is dict or type(y) is list:
                stack.append(y)
            elif type(y) is str and len(y) >= LONG_TEXT:
                return False
    return True


def _piece_encoder(careful: bool):
    """A function: (subtree, nesting level) -> its ``dumps_json`` text at that level, as bytes
    (lines after the first indented by the level). orjson writes it (a decoded tree is JSON-shaped
    already) unless ``careful`` (trees that may hold floats: orjson would write NaN as null and
    floats in its own digits) or orjson refuses it (ints past 64 bits, non-str keys, surrogates)."""
    import orjson

    from kwire_cli.render.safe import json_bytes
    dumps = orjson.dumps
    opt = orjson.OPT_INDENT_2

    def slow(v: Any) -> bytes:
        return dumps_json(v).encode("utf-8", "surrogatepass")

    def encode(v: Any, level: int) -> bytes:
        if careful:
            out = slow(v)
        else:
            try:
                out = json_bytes(dumps(v, option=opt, default=json_default))
            except TypeError:
                out = slow(v)
        if level and b"\n" in out:  # a JSON string holds no raw newline: each one starts a line
            out = out.replace(b"\n", b"\n" + b"  " * level)
        return out
    return encode


def write_json(value: Any, write, *, careful: bool = False, level: int = 0, end: bytes = b"\n") -> None:
    """Write ``dumps_json(value)`` and a newline through ``write`` (a function taking bytes), the
    same text, without building it whole: small subtrees (a record, a header) are written one
    orjson call each, and the containers above them one item at a time, so a decoded frame of a
    million records costs its value tree and a megabyte of text, not a copy of the tree and all
    of its text. ``careful``: the tree may hold floats (see ``_piece_encoder``). ``level``: the
    value is an item at that nesting level of a document written around it (its lines after the
    first indented to match); ``end`` is written after it."""
    enc = _piece_encoder(careful)
    buf: list[bytes] = []
    size = 0

    def put(b: bytes) -> None:
        nonlocal size
        buf.append(b)
        size += len(b)
        if size >= _CHUNK:
            write(b"".join(buf))
            buf.clear()
            size = 0

    def key(k: Any) -> bytes:
        return json_text(json.dumps(str(k), ensure_ascii=False)).encode("utf-8", "surrogatepass")

    def walk(v: Any, level: int) -> None:
        t = type(v)
        if t is str and len(v) >= LONG_TEXT:  # a megabyte at a time, never the whole text
            for piece in string_pieces(v):
                put(piece)
            return
        if (t is not dict and t is not list) or not v or _at_most(v, _SMALL):
            put(enc(v, level))
            return
        pad = b"\n" + b"  " * (level + 1)
        if t is dict:
            put(b"{")
            first = True
            for k, x in v.items():
                put(pad if first else b"," + pad)
                first = False
                put(key(k) + b": ")
                walk(x, level + 1)
            put(b"\n" + b"  " * level + b"}")
        else:
            put(b"[")
            first = True
            for x in v:
                put(pad if first else b"," + pad)
                first = False
                walk(x, level + 1)
            put(b"\n" + b"  " * level + b"]")

    walk(value, level)
    put(end)
    if buf:
        write(b"".join(buf))


# --------------------------------------------------------------------------- streamed YAML

_YAML_BIG = 10_000  # values (containers and their items) in a list written block style by PyYAML


def _values_at_most(value: Any, n: int) -> bool:
    """Whether ``value`` holds at most ``n`` values, counting each dict and list and each list's
    items (a dict's scalar values, a few per schema struct, are not counted), and no string of
    ``LONG_TEXT`` characters or more; stops at n."""
    stack = [value]
    count = 0
    while stack:
        x = stack.pop()
        if type(x) is dict:
            count += 1
            for y in x.values():
                if type(y) is dict or type(y) is list:
                    stack.append(y)
                elif type(y) is str and len(y) >= LONG_TEXT:
                    return False
        else:
            count += 1 + len(x)
            for y in x:
                if type(y) is dict or type(y) is list:
                    stack.append(y)
                elif type(y) is str and len(y) >= LONG_TEXT:
                    return False
        if count > n:
            return False
    return True


def write_yaml(value: Any, write, *, big: int | None = None) -> None:
    """Write ``dumps_yaml(value)`` through ``write`` (a function taking bytes) without building it
    whole, and fast where it is large: a list holding more than 10,000 values (a decoded frame's
    records) is written one item a line, each item that holds fewer as flow-style JSON
    (``- {"Length": 6, "Attributes": 0, ...}``: YAML too, the same value when read back; PyYAML
    takes ~300 us a record, 2 minutes for 400,000); everything else is PyYAML's block style, the
    same text as ``dumps_yaml``, written a piece at a time."""
    limit = _YAML_BIG if big is None else big
    if (type(value) is not dict and type(value) is not list) or _values_at_most(value, limit):
        write(dumps_yaml(value).encode("utf-8", "surrogatepass"))
        return
    flow = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(", ", ": "),
                            default=json_default).encode
    buf: list[str] = []
    size = 0

    def put(t: str) -> None:
        nonlocal size
        buf.append(t)
        size += len(t)
        if size >= _CHUNK:
            write("".join(buf).encode("utf-8", "surrogatepass"))
            buf.clear()
            size = 0

    def piece(k: Any, x: Any, col: int) -> str:
        """PyYAML's text of the entry ``k: x`` of a mapping at column ``col`` (nested so that long
        scalars fold where they would in the whole document)."""
        doc: Any = {k: x}
        for _ in range(col // 2):
            doc = {"_": doc}
        text = dumps_yaml(doc).split("\n", col // 2)[-1]
        # a document ending in a kept block scalar ("|2+") ends with "..."; only the whole one may
        ends[0] = text.endswith("\n...\n")
        return text[:-4] if ends[0] else text

    ends = [False]  # whether the last piece written ended the document with "..."

    def large(x: Any) -> bool:
        return (type(x) is dict or type(x) is list) and bool(x) and not _values_at_most(x, limit)

    def long_string(lead: str, x: str) -> None:
        """``x`` as a JSON string, which YAML reads as the same double-quoted scalar, a
        megabyte at a time (PyYAML takes minutes over a 256 MiB one, and copies it several times)."""
        if buf:
            write("".join(buf).encode("utf-8", "surrogatepass"))
            buf.clear()
        write(lead.encode("utf-8", "surrogatepass"))
        for piece in string_pieces(x):
            write(piece)
        write(b"\n")
        ends[0] = False

    def walk_dict(d: dict, col: int, lead: str) -> None:
        for k, x in d.items():
            if type(x) is str and len(x) >= LONG_TEXT:
                head = piece(k, None, col)
                if head.count("\n") == 1 and head.endswith(" null\n"):
                    long_string(lead + head[col:-5], x)
                    lead = " " * col
                    continue
            if large(x):
                head = piece(k, None, col)
                if head.count("\n") == 1 and head.endswith(" null\n"):
                    put(lead + head[col:-6] + "\n")
                    if type(x) is dict:
                        walk_dict(x, col + 2, " " * (col + 2))
                    else:
                        walk_list(x, col, " " * col)
                    lead = " " * col
                    continue
            put(lead + piece(k, x, col)[col:])
            lead = " " * col

    def walk_list(items: list, col: int, lead: str) -> None:
        for x in items:
            if type(x) is str and len(x) >= LONG_TEXT:
                long_string(lead + "- ", x)
            elif large(x):
                if type(x) is dict:
                    walk_dict(x, col + 2, lead + "- ")
                else:
                    walk_list(x, col + 2, lead + "- ")
            else:
                try:
                    line = flow(x)
                except (TypeError, ValueError):
                    line = json.dumps(to_jsonable(x), ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
                if not line.isascii() or "\x7f" in line:  # both run at memory speed
                    line = json_text(line)
                put(lead + "- " + line + "\n")
                ends[0] = False
            lead = " " * col

    if isinstance(value, dict):
        walk_dict(value, 0, "")
    elif isinstance(value, list):
        walk_list(value, 0, "")
    if ends[0]:
        put("...\n")
    if buf:
        write("".join(buf).encode("utf-8", "surrogatepass"))


def dumps(value: Any, fmt: str) -> str:
    """`fmt` is "json" or "yaml"; the text ends with exactly one newline."""
    if fmt == "json":
        return dumps_json(value) + "\n"
    if fmt == "yaml":
        return dumps_yaml(value)
    raise ValueError(f"unknown output format {fmt!r}")
