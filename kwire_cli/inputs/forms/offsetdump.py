"""Dumps with an offset column: ``xxd`` (``00000000: 0000 001d ...  ascii``), ``hexdump -C``
(``|ascii|`` column, ``*`` for repeated lines, a last line with the end offset), tshark's ``-x``
and Wireshark's "Copy as Hex Dump" (blocks labelled ``Frame (74 bytes):``, ``Reassembled TCP (74
bytes):``; a frame is a whole captured packet: its link type, Ethernet, Linux cooked v1/v2, BSD
loopback or raw IP, is the one whose headers read (``dump.find_packet``), Ethernet when none
does).

The offsets must follow each other: a gap is an error naming the line, unless a ``*`` line stands
for repeats of the line before it (at most a Kafka frame's worth: ``MAX_REPEAT``).
"""
from __future__ import annotations

import re
from typing import NamedTuple

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Line, Text, find_packet, segment_direction

FORM = "offset-dump"
#: the link type a dumped frame is taken to be (tshark -x prints the whole Ethernet frame)
LINKTYPE_ETHERNET = 1
#: a '*' line of hexdump -C never stands for more than this (a broker's largest frame)
MAX_REPEAT = 100 << 20

_XXD = re.compile(r"^([0-9A-Fa-f]{4,16}):\s(.*)$")              # 00000000: 0000 001d ...  ascii
_OFFSET = re.compile(r"^([0-9A-Fa-f]{4,16})(\s{2,}|\t)(\S.*)$")  # hexdump -C, tshark, Wireshark
_LONE_OFFSET = re.compile(r"^[0-9A-Fa-f]{4,16}$")                # hexdump -C's last line
_LABEL = re.compile(r"^(.*\S)\s*\((\d+) bytes?\):$")               # tshark: "Reassembled TCP (74 bytes):"
_HEXDUMP_ASCII = re.compile(r"\s\|.*\|\s*$")
_HEX_TOKEN = re.compile(r"^(?:[0-9A-Fa-f]{2})+$")


class _DumpLine(NamedTuple):
    number: int
    offset: int
    data: bytes


def _tokens(rest: str) -> list[str]:
    """The hex tokens of a dump line after its offset."""
    if _HEXDUMP_ASCII.search(rest):
        return _HEXDUMP_ASCII.sub("", rest).split()
    # xxd and tshark: the hex area ends at the first run of two or more spaces
    # (hexdump -C's middle double space is only seen together with |ascii|)
    return re.split(r"\s{2,}", rest.strip(), maxsplit=1)[0].split()


def looks_like_dump_line(line: str) -> bool:
    """A single line that is clearly an offset dump line (not plain hex that starts with digits)."""
    s = line.strip()
    return bool(_XXD.match(s) or (_OFFSET.match(s) and re.search(r"\s{2,}\S", s)))


def recognise(text: Text) -> list[Block] | None:
    """The labelled blocks of an offset dump, or None when a line does not fit the form."""
    lines = text.lines
    if len(lines) == 1 and not looks_like_dump_line(lines[0].text):
        return None
    parsed = _parse(lines)
    if parsed is None:
        return None
    return [_assemble(label, dl, repeats) for label, dl, repeats in parsed]


def _parse(lines: list[Line]) -> list[tuple[str | None, list[_DumpLine], set[int]]] | None:
    blocks: list[tuple[str | None, list[_DumpLine], set[int]]] = []
    label: str | None = None
    current: list[_DumpLine] | None = None
    repeats: set[int] = set()
    kinds = set()
    for number, line in lines:
        st = line.strip()
        m_label = _LABEL.match(st)
        if m_label and not _XXD.match(st):
            label = m_label.group(1)
            current = None
            continue
        if st == "*":
            if current is None:
                return None
            repeats.add(len(current))
            continue
        if _LONE_OFFSET.match(st) and current:
            current.append(_DumpLine(number, int(st, 16), b""))  # hexdump -C's end offset
            continue
        m = _XXD.match(st)
        if m:
            kinds.add("xxd")
            tokens = _tokens(m.group(2))
        else:
            m = _OFFSET.match(st)
            if not m:
                return None
            kinds.add("offset")
            tokens = _tokens(m.group(3))
        if not tokens or not all(_HEX_TOKEN.match(t) for t in tokens):
            return None
        offset = int(m.group(1), 16)
        if current is None or (offset == 0 and current and current[-1].offset >= 0 and offset < current[-1].offset):
            current = []
            repeats = set()
            blocks.append((label, current, repeats))
            label = None
        current.append(_DumpLine(number, offset, bytes.fromhex("".join(tokens))))
    if not blocks or len(kinds) > 1:
        return None
    return blocks


def _assemble(label: str | None, dl: list[_DumpLine], repeats: set[int]) -> Block:
    data = bytearray()
    base = dl[0].offset
    for i, d in enumerate(dl):
        pos = d.offset - base
        if pos < len(data):
            raise InputError(f"hex dump offsets go backwards at line {d.number} "
                             f"(offset {d.offset:#x} after {base + len(data):#x})")
        if pos > len(data):
            if i not in repeats or i == 0:
                raise InputError(f"hex dump skips bytes at line {d.number} "
                                 f"(offset {d.offset:#x}, expected {base + len(data):#x})")
            prev = dl[i - 1].data
            if not prev or (pos - len(data)) % len(prev):
                raise InputError(f"cannot expand the '*' before line {d.number}")
            if pos - len(data) > MAX_REPEAT:
                raise InputError(f"the '*' before line {d.number} stands for {pos - len(data)} bytes, "
                                 f"more than a Kafka frame ({MAX_REPEAT} bytes)")
            data += prev * ((pos - len(data)) // len(prev))
        data += d.data
    found = find_packet(bytes(data))
    if found is None:
        return Block(bytes(data), dl[0].number, dl[-1].number, FORM, label, LINKTYPE_ETHERNET)
    lt, seg = found
    return Block(bytes(data), dl[0].number, dl[-1].number, FORM, label, lt, segment_direction(seg))
