"""Bytes written as escaped string literals: Python's ``b'\\x00\\x00\\x00\\xa0...'`` (``print(data)``,
``repr``), ``bytearray(b'...')``, the ``'\\x00...'`` form of a byte string decoded as Latin-1
(Python 2's ``repr``; characters up to U+00FF are the bytes of the same value), and C, Go,
JavaScript or Rust strings ``"\\x00\\x1d..."`` (``\\NNN`` octal, ``\\u00NN``).

Escapes: ``\\xNN``, ``\\NNN`` (octal), ``\\uNNNN`` (up to 00FF), ``\\n \\r \\t \\a \\b \\f \\v \\0 \\\\ \\'
\\"`` and a backslash at the end of a line (continuation). Literals next to each other, or joined
by ``+``, make one value (as in the languages); a value ends at the end of a line outside
parentheses, or at ``;``. One block per value. The text is this form only when every token is a
literal (or ``name =``, ``bytes(``, ``bytearray(``, ``+``, ``(``, ``)``, ``,``, ``;``) and a literal has a
``b`` prefix or an escape: ``"0000001d..."`` (hex in quotes) is plain hex. A literal's content
pasted without its quotes (one line, ``\\x00\\x00\\x00\\x1d...kwire\\x00``) is read too when it
holds an escape and a character plain hex would not read (escapes alone are plain hex, read alike).
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Text

FORM = "escaped-string"

_LITERAL_START = re.compile(r"([bB][rR]?|[rR][bB]|[uU])?(['\"])")
_NAME = re.compile(r"[A-Za-z_]\w*")
_SIMPLE = {"n": 0x0A, "r": 0x0D, "t": 0x09, "a": 0x07, "b": 0x08, "f": 0x0C, "v": 0x0B,
           "\\": 0x5C, "'": 0x27, '"': 0x22, "?": 0x3F}


class _Value:
    def __init__(self, first_line: int):
        self.data = bytearray()
        self.first_line = self.last_line = first_line
        self.marked = False     # a b prefix or an escape: this is a byte literal, not quoted text


#: escapes only (``\x00\x1d...``): plain hex reads these the same, and reads spaces between them
_ESCAPES_ONLY = re.compile(r"(?:\s*\\[xX][0-9A-Fa-f]{2})+\s*")


def recognise(text: Text) -> list[Block] | None:
    src = text.text
    if "'" not in src and '"' not in src:
        return _bare(text)
    values: list[_Value] = []
    current: _Value | None = None
    depth = 0
    joiner = False  # the last token asks for another literal (+, =, \\, an open parenthesis)
    pos, n, line = 0, len(src), 1
    while pos < n:
        c = src[pos]
        if c == "\n":
            line += 1
            if depth == 0 and not joiner:
                current = None
            pos += 1
            continue
        if c.isspace():
            pos += 1
            continue
        if c in "(),;+=\\":
            if c == "(":
                depth += 1
            elif c == ")":
                depth = max(0, depth - 1)
            elif c == ";":
                current = None
            joiner = c in "+=\\(" or (c == "," and depth > 0)
            pos += 1
            continue
        m = _LITERAL_START.match(src, pos)
        if m:
            if current is None:
                current = _Value(line)
                values.append(current)
            end = _literal(src, m.end(), m.group(2), bool(m.group(1) and m.group(1).lower().startswith("b")),
                           "r" in (m.group(1) or "").lower(), current, line)
            if end is None:
                return None
            line = current.last_line
            pos = end
            joiner = False
            continue
        m = _NAME.match(src, pos)
        if m:  # a name: `data =`, `bytes(`, `bytearray(`, `const char x[] =` is not this form
            pos = m.end()
            joiner = True
            continue
        return None
    if not values or not any(v.marked for v in values):
        return None
    return [Block(bytes(v.data), v.first_line, v.last_line, FORM) for v in values if v.data or v.marked]


def _literal(src: str, pos: int, quote: str, is_bytes: bool, raw: bool, value: _Value, line: int) -> int | None:
    """Read one literal's content from ``pos`` (after the opening quote) into ``value``; the
    position after the closing quote, or None when the literal is not closed on its line."""
    out = value.data
    if is_bytes:
        value.marked = True
    n = len(src)
    while pos < n:
        c = src[pos]
        if c == quote:
            value.last_line = line
            return pos + 1
        if c == "\n":
            return None
        if c != "\\" or raw:
            code = ord(c)
            if code > 0xFF or (is_bytes and code > 0x7F):
                col = pos - (src.rfind("\n", 0, pos) + 1) + 1
                raise InputError(f"character {c!r} (U+{code:04X}) at line {line}, column {col} is not a byte")
            out.append(code)
            pos += 1
            continue
        value.marked = True
        e = src[pos + 1:pos + 2]
        if e == "\n":  # a continued line
            line += 1
            pos += 2
        elif e in _SIMPLE:
            out.append(_SIMPLE[e])
            pos += 2
        elif e in ("x", "X"):
            digits = src[pos + 2:pos + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", digits):
                digits = src[pos + 2:pos + 3]
                if not re.fullmatch(r"[0-9A-Fa-f]", digits):
                    return None
            out.append(int(digits, 16))
            pos += 2 + len(digits)
        elif e == "u":
            digits = src[pos + 2:pos + 6]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits) or int(digits, 16) > 0xFF:
                return None
            out.append(int(digits, 16))
            pos += 6
        elif e and e in "01234567":
            m = re.match(r"[0-7]{1,3}", src[pos + 1:pos + 4])
            assert m is not None
            v = int(m.group(0), 8)
            if v > 0xFF:
                return None
            out.append(v)
            pos += 1 + len(m.group(0))
        else:
            return None
    return None


def _bare(text: Text) -> list[Block] | None:
    """A byte string's content pasted without its quotes (``\\x00\\x00\\x1d\\x00\\x12...kwire``,
    copied from inside ``b'...'``): one line holding an escape and a character that is neither
    hex nor an escape (text made of escapes only is plain hex, read alike)."""
    if len(text.lines) != 1:
        return None
    number, line = text.lines[0]
    body = line.strip()
    if "\\" not in body or _ESCAPES_ONLY.fullmatch(body):
        return None
    value = _Value(number)
    end = _literal(body + "\n", 0, "\n", False, False, value, number)
    if end is None or not value.marked:
        return None
    return [Block(bytes(value.data), number, number, FORM)]
