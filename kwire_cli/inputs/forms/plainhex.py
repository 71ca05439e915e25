"""Plain hex: digits with any separators (spaces, newlines, ``:`` ``,`` ``;`` ``.`` ``-`` ``_``, quotes),
``0x`` / ``\\x`` prefixes, and ``#`` or ``//`` comments to the end of a line. The catch-all
recogniser: it claims any text made only of these that holds a hex digit.

Blank lines and comment-only lines between hex lines cut the text into paragraphs, one block
each (a comment line before a paragraph is its label), so that several messages pasted one
after another stay apart; when the paragraphs do not hold whole bytes each, the text is one
block.
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Text

FORM = "hex"

SEPARATORS = re.compile(r"(?:0[xX]|\\[xX])(?=[0-9A-Fa-f])|[\s:,;.\-_'\"]+")
_NOT_HEX = re.compile(r"[^0-9A-Fa-f]")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_COMMENT = re.compile(r"#|//")


def _code(line: str) -> str:
    """A line without its ``#`` or ``//`` comment."""
    if "#" not in line and "/" not in line:
        return line
    return _COMMENT.split(line, 1)[0]


def _comment(line: str) -> str | None:
    m = _COMMENT.search(line)
    return line[m.end():].strip() or None if m else None


def recognise(text: Text) -> list[Block] | None:
    """The paragraphs of hex digits in the text, when every line is plain hex."""
    paragraphs: list[tuple[list[str], int, int, str | None]] = []   # digits, first, last line, label
    current: list[str] | None = None
    label: str | None = None
    for number, line in text.all_lines:
        d = SEPARATORS.sub("", _code(line))
        if _NOT_HEX.search(d):
            return None
        if not d:  # a blank or comment-only line ends a paragraph
            current = None
            if line.strip():
                label = _comment(line)
            continue
        if current is None:
            current = []
            paragraphs.append((current, number, number, label))
            label = None
        current.append(d)
        digits, first, _, lab = paragraphs[-1]
        paragraphs[-1] = (digits, first, number, lab)
    if not paragraphs:
        return None  # separators and comments only: not hex (NO_DIGITS)
    joined = ["".join(p[0]) for p in paragraphs]
    total = sum(len(j) for j in joined)
    if total % 2:
        raise InputError(f"odd number of hex digits ({total}): a byte needs two")
    if len(paragraphs) == 1 or any(len(j) % 2 for j in joined):
        lines = text.lines
        return [Block(bytes.fromhex("".join(joined)), lines[0].number, lines[-1].number, FORM)]
    return [Block(bytes.fromhex(j), first, last, FORM, lab)
            for j, (_, first, last, lab) in zip(joined, paragraphs, strict=True)]


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
