"""Bytes from text in any dump form kwire knows: the one reader of pasted bytes.

``kwire decode``, ``kwire diff`` and ``kwire negotiate`` read hex and byte dumps through here.
The text is tidied first (``normalize``: a UTF-8 byte-order mark, non-breaking and other Unicode
spaces from web pages, ``> `` reply quoting), then goes through a sequence of recognisers
(``kwire_cli.inputs.forms.RECOGNISERS``), each small and single-purpose: the first that claims
the text reads it into ``Block``s of bytes with their provenance (lines, label, form, the link
type of a dumped packet, the direction it went); a recogniser that claims the text but finds it
broken raises an ``InputError`` naming the line (and column). When none claims it, the text is
not a dump: ``NotADump`` names the first character that is not hex.

* ``read_blocks(text)``: every block of bytes in the text.
* ``message_bytes(blocks)``: the one Kafka message they hold (one block, cut to its TCP payload
  when it is a whole captured packet; or the "Reassembled TCP" block of a tshark dump).
  ``kwire_cli.inputs.frames`` reads several messages (Kafka frames) from the blocks instead.
* ``parse_hex(text)``: both at once; ``bytes_from_source(raw, binary=None)``: raw bytes or text.
* ``find_packet(data, linktypes)``: the link type and TCP segment of bytes that are a whole
  captured packet (through ``kwire_cli.capture.linklayer``, imported only then).
"""
from __future__ import annotations

import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.forms import RECOGNISERS, not_hex
from kwire_cli.inputs.text import Block, Text, find_packet, normalize, segment_direction

__all__ = ["Block", "NotADump", "Text", "bytes_from_source", "is_text", "message_bytes", "normalize",
           "parse_hex", "read_blocks", "recognise", "tcp_payload"]


class NotADump(InputError):
    """Text that no recogniser claims (the message names the first character that is not hex)."""


_PLAIN_HEX = re.compile(r"[0-9A-Fa-f]+")


def read_blocks(text: str) -> list[Block]:
    """Every block of bytes in ``text``, read by the first recogniser that claims it."""
    blocks, _ = recognise(text)
    return blocks


def recognise(text: str) -> tuple[list[Block], str]:
    """(the blocks of bytes in ``text``, the module name of the recogniser that read them)."""
    one = text.strip()
    if _PLAIN_HEX.fullmatch(one) and not len(one) % 2:  # the fast path: one run of hex digits
        first = len(text) - len(text.lstrip())
        line = text.count("\n", 0, first) + 1
        return [as_packet(Block(bytes.fromhex(one), line, line, "hex"))], "plainhex"
    t = Text(text)
    if not t.lines:
        raise InputError("empty input: no hex digits")
    for recogniser in RECOGNISERS:
        blocks = recogniser(t)
        if blocks is not None:
            form = recogniser.__module__.rsplit(".", 1)[-1]
            if form == "plainhex" and len(blocks) == 1:
                blocks = [as_packet(blocks[0])]
            return blocks, form
    raise NotADump(not_hex(t))


def as_packet(block: Block) -> Block:
    """A block of plain hex that is a whole captured packet (Wireshark's "Copy as Hex Stream" of a
    packet: Ethernet, IP and TCP headers, then the Kafka bytes) marked as one (its link type and
    direction), so that it is cut to its TCP payload as a tcpdump -x packet is; else ``block``.
    Only a packet whose IP length is exactly the bytes and that carries a payload counts (a Kafka
    frame whose size prefix fits never does)."""
    if block.linktype is not None or len(block.data) < 40:
        return block
    found = find_packet(block.data)
    if found is None:
        return block
    lt, seg = found
    if not seg.payload or seg.wire_len != len(seg.payload):
        return block
    return Block(block.data, block.first_line, block.last_line, block.form, block.label, lt, segment_direction(seg))


def message_bytes(blocks: list[Block]) -> bytes:
    """The one message that ``blocks`` hold.

    One block: its bytes, cut down to the TCP payload when the block may be a whole captured
    packet (a tshark ``-x`` frame: Ethernet, IP and TCP headers) and is not already a size-
    prefixed Kafka frame. Several blocks: the "Reassembled TCP" one of a tshark dump.
    """
    if len(blocks) == 1:
        b = blocks[0]
        return b.data if b.linktype is None else tcp_payload(b.data, b.linktype)
    reassembled = [b.data for b in blocks if b.label and "reassembled" in b.label.lower()]
    if len(reassembled) == 1:
        return reassembled[0]
    raise InputError(f"the dump holds {len(blocks)} separate blocks of bytes; give one message at a time")


def tcp_payload(data: bytes, linktype: int) -> bytes:
    """The TCP payload of ``data`` when it is a whole packet of ``linktype`` carrying TCP whose IP
    length fits the bytes; else ``data`` as it is (a Kafka frame whose size prefix fits is kept)."""
    from kwire_cli.codec.framing import has_size_prefix

    if has_size_prefix(data):
        return data
    from kwire_cli.capture.linklayer import tcp_segment

    seg = tcp_segment(linktype, data)
    if isinstance(seg, str) or not seg.payload or seg.wire_len > len(seg.payload):
        return data
    return seg.payload


def parse_hex(text: str) -> bytes:
    """The message in hex text of any dump form (``read_blocks`` then ``message_bytes``)."""
    return message_bytes(read_blocks(text))


def bytes_from_source(raw: bytes, *, binary: bool | None = None) -> bytes:
    """Raw bytes when ``binary`` (or, when None, when ``raw`` is not text); else the message in
    the text (``parse_hex``)."""
    if binary is None:
        binary = not is_text(raw)
    if binary:
        if not raw:
            raise InputError("empty input")
        return raw
    return parse_hex(raw.decode("utf-8", errors="replace"))


_BINARY = re.compile(r"[^\t\n\v\f\r\x20-\x7e]")
#: not printable, but text all the same: a byte-order mark and the spaces of web pages
_TEXT_EXTRA = frozenset("\t\r\n\f\v\ufeff\u00a0\u1680\u202f\u205f\u3000"
                        + "".join(chr(c) for c in range(0x2000, 0x200B)))


def is_text(raw: bytes) -> bool:
    """True when ``raw`` is UTF-8 text of printable characters and white space (a byte-order
    mark and Unicode spaces such as the no-break space count as white space)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not _BINARY.search(text):
        return True  # plain ASCII: the common case, without a per-character loop
    return all(c.isprintable() or c in _TEXT_EXTRA for c in text)
