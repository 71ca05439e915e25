"""Bytes from text in any dump form kwire knows: the one reader of pasted bytes.

``kwire decode``, ``kwire diff`` and ``kwire negotiate`` read hex and byte dumps through here.
The text goes through a sequence of recognisers (``kwire_cli.inputs.forms.RECOGNISERS``), each
small and single-purpose: the first that claims the text reads it into ``Block``s of bytes with
their provenance (lines, label, form); a recogniser that claims the text but finds it broken
raises an ``InputError`` naming the line (and column). When none claims it, the text is not a
dump: ``NotADump`` names the first character that is not hex.

* ``read_blocks(text)``: every block of bytes in the text.
* ``message_bytes(blocks)``: the one Kafka message they hold (one block, cut to its TCP payload
  when it is a whole captured packet; or the "Reassembled TCP" block of a tshark dump).
* ``parse_hex(text)``: both at once; ``bytes_from_source(raw, binary=None)``: raw bytes or text.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from kwire_cli.errors import InputError


class NotADump(InputError):
    """Text that no recogniser claims (the message names the first character that is not hex)."""


@dataclass(frozen=True)
class Block:
    """Bytes read from a dump, and where they came from."""

    data: bytes
    first_line: int                 # 1-based line numbers in the text
    last_line: int
    form: str                       # the recogniser that read it: "hex", "offset-dump", ...
    label: str | None = None        # the dump's own name for it ("Reassembled TCP (74 bytes)")
    #: the bytes may be a whole captured packet of this link type (pcap LINKTYPE_ value), to be
    #: cut down to its TCP payload; None: they are the message's bytes already
    linktype: int | None = None
    #: which side sent them, when the dump says (a Follow TCP Stream dump: "client" / "server")
    direction: str | None = None


class Line(NamedTuple):
    number: int   # 1-based
    text: str


class Text:
    """A dump's text split into numbered lines (recognisers read ``lines``, the non-blank ones)."""

    def __init__(self, text: str):
        self.text = text
        self.all_lines = [Line(i, ln) for i, ln in enumerate(text.splitlines(), start=1)]
        self.lines = [ln for ln in self.all_lines if ln.text.strip()]


#: a recogniser: the blocks of a text in its form, None when the text is not in its form; it
#: raises ``InputError`` (naming line and column) when the text is in its form but broken
Recogniser = Callable[[Text], "list[Block] | None"]


def read_blocks(text: str) -> list[Block]:
    """Every block of bytes in ``text``, read by the first recogniser that claims it."""
    from kwire_cli.inputs.forms import RECOGNISERS, not_hex

    t = Text(text)
    if not t.lines:
        raise InputError("empty input: no hex digits")
    for recognise in RECOGNISERS:
        blocks = recognise(t)
        if blocks is not None:
            return blocks
    raise NotADump(not_hex(t))


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
    return parse_hex(raw.decode("ascii", errors="replace"))


_BINARY = re.compile(r"[^\t\n\v\f\r\x20-\x7e]")


def is_text(raw: bytes) -> bool:
    """True when ``raw`` is UTF-8 text of printable characters and white space."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not _BINARY.search(text):
        return True  # plain ASCII: the common case, without a per-character loop
    return all(c.isprintable() or c in "\t\r\n\f\v" for c in text)
