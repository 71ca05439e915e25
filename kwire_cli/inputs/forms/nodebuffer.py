"""Node's ``console.log(buffer)`` / ``util.inspect``: ``<Buffer 00 00 00 a0 ...>``, one block per
buffer. Node shows the first 50 bytes only (``... 114 more bytes>``): such a buffer is refused,
naming how much is missing, instead of read short."""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.text import Block, Text

FORM = "node-buffer"

_BUFFER = re.compile(r"<Buffer((?:\s+[0-9a-fA-F]{2})*)(\s+\.\.\.\s+(\d+)\s+more\s+bytes?)?\s*>")


def recognise(text: Text) -> list[Block] | None:
    src = text.text
    if "<Buffer" not in src:
        return None
    found = list(_BUFFER.finditer(src))
    if not found or _BUFFER.sub("", src).strip(" \t\r\n,[]"):
        return None  # something besides buffers (a list of them is fine)
    blocks = []
    for m in found:
        first = src.count("\n", 0, m.start()) + 1
        data = bytes.fromhex(m.group(1).replace(" ", "").replace("\n", "").replace("\t", ""))
        if m.group(2):
            raise InputError(f"the <Buffer> at line {first} shows {len(data)} bytes and leaves out "
                             f"{m.group(3)} more: Node prints only the first 50 bytes; print "
                             "buffer.toString('hex') instead")
        blocks.append(Block(data, first, src.count("\n", 0, m.end()) + 1, FORM))
    return blocks
