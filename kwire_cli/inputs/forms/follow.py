"""Wireshark's "Follow TCP Stream" as hex (``tshark -q -z follow,tcp,hex,N``): a banner of ``=``,
``Follow: tcp,hex``, ``Filter: ...``, ``Node 0: host:port``, ``Node 1: host:port``, then the
conversation in chunks: ``00000000  00 00 00 17 00 12 00 02  00 00 ...  ........ ......kw``
(eight hex digits of offset, sixteen bytes in two groups of eight, the ASCII column); node 1's
chunks are indented by a tab. Each node's offsets count that node's bytes.

One block per chunk; ``Block.direction`` is ``"node 0's address > node 1's"`` for node 0's
chunks and the reverse for node 1's, so that the frames reader joins each side's chunks into
its byte stream. Without the banner, text in this line format with tab-indented chunks (both
directions) is read the same way, the nodes named ``node 0`` and ``node 1``.
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Text

FORM = "follow-tcp-hex"

_DATA = re.compile(r"^(\t?)([0-9A-Fa-f]{8})  [0-9A-Fa-f]{2}[ \S]*$")
_NODE = re.compile(r"^Node ([01]): (\S+)\s*$")
_HEADER = re.compile(r"^(?:={10,}|Follow: \S+|Filter: .*|Node [01]: .*)\s*$")


def _bytes_of(line: str) -> bytes:
    """The bytes of one data line (without its tab): up to sixteen two-digit slots at fixed
    columns, a double space after the eighth; the first empty slot ends them."""
    out = bytearray()
    for i in range(16):
        pos = 10 + 3 * i + (1 if i >= 8 else 0)
        tok = line[pos:pos + 2]
        if len(tok) < 2 or tok[0] not in _HEXCH or tok[1] not in _HEXCH or line[pos + 2:pos + 3] not in (" ", ""):
            break
        out.append(int(tok, 16))
    return bytes(out)


_HEXCH = frozenset("0123456789abcdefABCDEF")


def recognise(text: Text) -> list[Block] | None:
    lines = text.lines
    banner = any(ln.text.startswith("Follow: ") and ln.text.rstrip().endswith(",hex") for ln in lines)
    nodes = ["node 0", "node 1"]
    chunks: list[tuple[int, list[tuple[int, int, bytes]]]] = []   # node, rows (line, offset, bytes)
    for number, line in lines:
        m = _DATA.match(line)
        if m is None:
            if not banner or not _HEADER.match(line):
                return None
            n = _NODE.match(line)
            if n:
                nodes[int(n.group(1))] = n.group(2)
            continue
        node = 1 if m.group(1) else 0
        if not chunks or chunks[-1][0] != node:
            chunks.append((node, []))
        chunks[-1][1].append((number, int(m.group(2), 16), _bytes_of(line[len(m.group(1)):])))
    if not chunks or (not banner and len({node for node, _ in chunks}) < 2):
        return None
    seen = [0, 0]
    blocks = []
    for node, rows in chunks:
        data = bytearray()
        for number, offset, chunk in rows:
            if offset != seen[node] + len(data):
                raise InputError(f"Follow TCP Stream offsets skip at line {number} (node {node} offset "
                                 f"{offset:#010x}, expected {seen[node] + len(data):#010x})")
            if not chunk:
                raise InputError(f"no bytes at line {number} of the Follow TCP Stream dump")
            data += chunk
        seen[node] += len(data)
        a, b = (nodes[0], nodes[1]) if node == 0 else (nodes[1], nodes[0])
        blocks.append(Block(bytes(data), rows[0][0], rows[-1][0], FORM, f"node {node}", None, f"{a} > {b}"))
    return blocks
