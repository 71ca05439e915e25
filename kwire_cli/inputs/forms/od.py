"""``od`` dumps of single bytes (``od -t x1``, ``od -A x -t x1``, ``od -A d -t x1``, with ``z``
for the ``>ascii<`` column): an offset column in octal (od's default), hexadecimal or decimal,
then the bytes as two hex digits each, single spaces between; a ``*`` line stands for lines
repeating the one before; the last line is the end offset alone.

The offsets' base is not written anywhere: it is the one (of 16, 8, 10) in which every offset
follows from the bytes before it and the last line is the number of bytes. od's word forms
(``-t x2``, ``-t x4``, od's default octal words) are claimed and refused: their bytes come out in
the machine's byte order, so they cannot be read back without knowing it.
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Text, find_packet, segment_direction

FORM = "od"
#: a '*' line never stands for more than this (a broker's largest frame)
MAX_REPEAT = 100 << 20

_BYTES_LINE = re.compile(r"^([0-9A-Fa-f]{6,16})((?: [0-9A-Fa-f]{2})+)(?:\s+>.*<)?\s*$")
_WORDS_LINE = re.compile(r"^([0-7]{7}|[0-9a-f]{6})((?: [0-9a-f]{4}| [0-9a-f]{8}| [0-7]{6}| [0-7]{11})+)\s*$")
_END = re.compile(r"^([0-9A-Fa-f]{6,16})$")


def recognise(text: Text) -> list[Block] | None:
    lines = text.lines
    if len(lines) < 2 or not _END.match(lines[-1].text.strip()):
        return None
    if all(_WORDS_LINE.match(ln.text.strip()) or ln.text.strip() == "*" for ln in lines[:-1]):
        raise InputError("this is od output of 2-, 4-byte or octal words, printed in the byte order of the "
                         "machine that ran od; dump single bytes instead: od -A x -t x1 FILE")
    rows: list[tuple[int, str, bytes | None]] = []   # line number, offset digits, bytes (None: '*')
    for number, line in lines[:-1]:
        st = line.strip()
        if st == "*":
            if not rows or rows[-1][2] is None:
                return None
            rows.append((number, "", None))
            continue
        m = _BYTES_LINE.match(st)
        if not m:
            return None
        rows.append((number, m.group(1), bytes.fromhex(m.group(2).replace(" ", ""))))
    if not rows or rows[0][2] is None:
        return None
    end = lines[-1].text.strip()
    for base in (16, 8, 10):
        data = _assemble(rows, end, base)
        if data is not None:
            found = find_packet(data)
            if found is None:
                return [Block(data, lines[0].number, lines[-1].number, FORM)]
            lt, seg = found
            return [Block(data, lines[0].number, lines[-1].number, FORM, None, lt, segment_direction(seg))]
    raise InputError(f"od dump offsets do not follow from the bytes in any base (octal, hex, decimal); "
                     f"lines {lines[0].number}-{lines[-1].number}")


def _offset(digits: str, base: int) -> int | None:
    try:
        return int(digits, base)
    except ValueError:
        return None


def _assemble(rows: list[tuple[int, str, bytes | None]], end: str, base: int) -> bytes | None:
    """The bytes when every offset (and the end offset) follows from the bytes before it in
    ``base``, else None. A '*' stands for copies of the line before it (at most ``MAX_REPEAT``
    bytes)."""
    first = _offset(rows[0][1], base)
    if first is None:
        return None
    data = bytearray()
    last = b""
    star = False
    for _, digits, chunk in rows:
        if chunk is None:
            star = True
            continue
        off = _offset(digits, base)
        if off is None or not _fill(data, off - first, last, star):
            return None
        star = False
        data += chunk
        last = chunk
    end_off = _offset(end, base)
    if end_off is None or not _fill(data, end_off - first, last, star):
        return None
    return bytes(data)


def _fill(data: bytearray, at: int, last: bytes, star: bool) -> bool:
    """Bring ``data`` up to ``at`` bytes with copies of ``last`` when a '*' came before; False
    when the offset does not fit."""
    gap = at - len(data)
    if gap == 0:
        return True
    if gap < 0 or not star or not last or gap % len(last) or gap > MAX_REPEAT:
        return False
    data += last * (gap // len(last))
    return True
