"""Plain hex: digits with any separators (spaces, newlines, ``:`` ``,`` ``;`` ``.`` ``-`` ``_``),
``0x`` / ``\\x`` prefixes, and ``#`` comments to the end of a line. The catch-all recogniser:
it claims any text made only of these that holds a hex digit."""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.dump import Block, Text

FORM = "hex"

SEPARATORS = re.compile(r"(?:0[xX]|\\[xX])(?=[0-9A-Fa-f])|[\s:,;.\-_]+")
_NOT_HEX = re.compile(r"[^0-9A-Fa-f]")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _code(line: str) -> str:
    """A line without its ``#`` comment."""
    return line.split("#", 1)[0]


def recognise(text: Text) -> list[Block] | None:
    """One block of the hex digits in the text, when every line is plain hex."""
    digits = []
    for line in text.all_lines:
        d = SEPARATORS.sub("", _code(line.text))
        if _NOT_HEX.search(d):
            return None
        digits.append(d)
    joined = "".join(digits)
    if not joined:
        return None  # separators and comments only: not hex (NO_DIGITS)
    if len(joined) % 2:
        raise InputError(f"odd number of hex digits ({len(joined)}): a byte needs two")
    lines = text.lines
    return [Block(bytes.fromhex(joined), lines[0].number, lines[-1].number, FORM)]


NO_DIGITS = "no hex digits in the input"


def first_bad_character(text: Text) -> str | None:
    """Where plain hex reading stops, ``unexpected character 'x' at line L, column C``; None when
    every character is hex or a separator."""
    for number, line in text.all_lines:
        code = _code(line)
        pos = 0
        while pos < len(code):
            m = SEPARATORS.match(code, pos)
            if m and m.end() > pos:
                pos = m.end()
            elif code[pos] in _HEX_DIGITS:
                pos += 1
            else:
                return f"unexpected character {code[pos]!r} at line {number}, column {pos + 1}"
    return None
