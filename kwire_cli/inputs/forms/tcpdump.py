"""tcpdump's hex output, ``-x``, ``-xx`` and ``-X`` / ``-XX``: for each packet a header line
(``05:13:54.902236 IP 127.0.0.1.52206 > 127.0.0.1.9092: Flags [P.], ... length 27``) and its
bytes in lines ``<tab>0x0000:  4500 004f d7e6 ...`` (two-byte groups; ``-X`` adds an ASCII
column after two or more spaces).

``-x`` and ``-X`` print the packet from its IP header, ``-xx`` and ``-XX`` with the link-layer
header: each packet is read through ``kwire_cli.capture``'s link-layer walk (raw IP first, then
the link types of a capture), so a block carries its link type, its TCP direction and the header
line as its label; the frames reader cuts it to the TCP payload.
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import PACKET_LINKTYPES, Block, Text, find_packet, segment_direction

FORM = "tcpdump"
#: raw IP first: -x and -X print the packet without its link-layer header
LINKTYPES = (101, *[lt for lt in PACKET_LINKTYPES if lt != 101])

_HEX_LINE = re.compile(r"^\s*0x([0-9A-Fa-f]{4,8}):\s+(.*)$")
_GROUP = re.compile(r"^(?:[0-9A-Fa-f]{2}){1,2}$")


def recognise(text: Text) -> list[Block] | None:
    packets: list[tuple[str | None, int, list[tuple[int, int, bytes]]]] = []   # header, line, hex lines
    header: tuple[str, int] | None = None
    for number, line in text.lines:
        m = _HEX_LINE.match(line)
        if not m:
            if line[:1].isspace():
                return None  # an indented line that is not a hex line: not tcpdump's
            header = (line.strip(), number)
            continue
        if header is not None or not packets:
            label, first = header if header is not None else (None, number)
            packets.append((label, first, []))
            header = None
        hex_area = re.split(r"\s{2,}", m.group(2).strip(), maxsplit=1)[0]
        groups = hex_area.split(" ")
        if not all(_GROUP.match(g) for g in groups):
            return None
        packets[-1][2].append((number, int(m.group(1), 16), bytes.fromhex("".join(groups))))
    if not packets:
        return None
    return [_block(label, first, rows) for label, first, rows in packets]


def _block(label: str | None, first: int, rows: list[tuple[int, int, bytes]]) -> Block:
    data = bytearray()
    for number, offset, chunk in rows:
        if offset != len(data):
            raise InputError(f"tcpdump hex offsets skip at line {number} (offset {offset:#06x}, "
                             f"expected {len(data):#06x})")
        data += chunk
    found = find_packet(bytes(data), LINKTYPES)
    if found is None:
        raise InputError(f"the tcpdump packet of lines {first}-{rows[-1][0]} is no TCP packet kwire can "
                         "read (IPv4/IPv6 over Ethernet, Linux cooked, BSD loopback or raw IP)")
    lt, seg = found
    return Block(bytes(data), first, rows[-1][0], FORM, label, lt, segment_direction(seg))
