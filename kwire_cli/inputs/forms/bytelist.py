"""Byte arrays as programs write and print them: a list of numbers in brackets or braces.

* Go: ``[]byte{0x0, 0x0, 0xa0}`` (``%#v``) and ``[0 0 160]`` (``%v``);
* Java: ``new byte[]{0, 0, -128}``, ``byte[] b = {(byte) 0x80, 0x01};`` (signed decimals, casts)
  and ``Arrays.toString``'s ``[0, 0, -96]``;
* C: ``unsigned char x[] = {0x00, ...};`` and ``xxd -i``'s array with its ``x_len = N;`` (the
  length is checked);
* Node: ``{"type":"Buffer","data":[0,0,160]}`` (``JSON.stringify(buffer)``);
* JSON, Python, JavaScript and Rust lists of numbers (``[0, 1]``, ``bytes([0, 1])``,
  ``Buffer.from([0, 1])``, ``vec![0x00u8, 0x01]``).

Numbers are decimal (-128..255: Java's negative bytes are two's complement) or ``0x`` hex; a list
whose items are bare two-digit hex with a letter among them (``[00 a0 ff]``) is hex. ``//``,
``/* */`` and ``#`` comments are skipped. One block per list; a list with anything but numbers in
it (``{ApiKey: 0, ...}``), lists inside lists (``[[0, 0, 9]]``) or a ``key: [...]`` are not this
form.
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Text

FORM = "byte-list"

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*|#[^\n]*", re.DOTALL)
_GROUP = re.compile(r"[\[{]([^\[\]{}]*)[\]}]")
_CAST = re.compile(r"\(\s*(?:byte|uint8_t|int8_t|u8|i8|char|unsigned\s+char|signed\s+char)\s*\)")
_ITEM = re.compile(r"^(?:(?P<hex>0[xX][0-9A-Fa-f]{1,2})|(?P<dec>[+-]?\d{1,3})|(?P<bare>[0-9A-Fa-f]{2}))"
                   r"(?:u8|i8|[uU])?$")
_NODE_JSON = re.compile(r'\{\s*"type"\s*:\s*"Buffer"\s*,\s*"data"\s*:\s*(?=\[)')
_LEN = re.compile(r"\b\w+_len\s*=\s*(\d+)\s*;")
#: what may stand around the lists: names, declarations, empty [] and {} and (), = := ; , . ! & *
_DECORATION = re.compile(r"^(?:[A-Za-z_]\w*\b|\[\s*\]|\{\s*\}|:=|[\s()=;,.!&*<>+-])*$")


def recognise(text: Text) -> list[Block] | None:
    src = text.text
    if "[" not in src and "{" not in src:
        return None
    code = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)
    node = _NODE_JSON.search(code)
    if node:  # JSON.stringify(buffer): drop the wrapper around the data list
        code = code[:node.start()] + " " * (node.end() - node.start()) + code[node.end():]
        code = re.sub(r"\]\s*\}", lambda m: "]" + " " * (len(m.group(0)) - 1), code, count=1)
    length = _LEN.search(code)
    expected = int(length.group(1)) if length else None
    if length:
        code = code[:length.start()] + " " * (length.end() - length.start()) + code[length.end():]
    groups = [m for m in _GROUP.finditer(code) if m.group(1).strip()]
    if not groups:
        return None
    rest = _GROUP.sub(lambda m: " " if m.group(1).strip() else m.group(0), code)
    if not _DECORATION.match(rest):
        return None
    blocks = []
    for m in groups:
        data = _items(m.group(1), src, m.start(1))
        if data is None:
            return None
        first = src.count("\n", 0, m.start()) + 1
        last = src.count("\n", 0, m.end()) + 1
        blocks.append(Block(data, first, last, FORM))
    if expected is not None and len(blocks) == 1 and len(blocks[0].data) != expected:
        raise InputError(f"the array holds {len(blocks[0].data)} bytes, but its length variable says {expected}")
    return blocks


def _items(content: str, src: str, start: int) -> bytes | None:
    """The bytes of one list's content; None when it holds anything but numbers."""
    content = _CAST.sub(lambda m: " " * len(m.group(0)), content)
    items = [(m.group(0), m.start()) for m in re.finditer(r"[^\s,]+", content)]
    if not items:
        return None
    matches = []
    for item, _ in items:
        m = _ITEM.match(item)
        if m is None:
            return None
        matches.append(m)
    bare_hex = (not any(m["hex"] for m in matches) and not any(t.startswith(("+", "-")) for t, _ in items)
                and any(re.search(r"[A-Fa-f]", t) for t, _ in items))
    out = bytearray()
    for (item, pos), m in zip(items, matches, strict=True):
        if m["hex"]:
            out.append(int(m["hex"], 16))
            continue
        if bare_hex:
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", item):
                return None
            out.append(int(item, 16))
            continue
        if m["dec"] is None:
            return None
        value = int(m["dec"])
        if not -128 <= value <= 255:
            at = start + pos
            line = src.count("\n", 0, at) + 1
            col = at - (src.rfind("\n", 0, at) + 1) + 1
            raise InputError(f"{item} at line {line}, column {col} is not a byte (-128..255)")
        out.append(value & 0xFF)
    return bytes(out)
