"""The dump forms kwire reads, one recogniser each, tried in this order.

A recogniser is a function ``recognise(text: Text) -> list[Block] | None`` (see
``kwire_cli.inputs.dump``): None when the text is not in its form, the blocks of bytes when it
is, an ``InputError`` naming the line when it is but is broken. Put the specific forms first and
plain hex, the catch-all, last; the forms are told apart by their shape, so that each real sample
(fixtures/hex/dumps) is claimed by its own recogniser only (tests/test_inputs.py checks it). A
new form is a new module here and one entry below. Recognisers import nothing heavy: what a
packet needs (``kwire_cli.capture``'s link layer walk) is imported when a packet is found.
"""
from __future__ import annotations

from kwire_cli.inputs.forms import base64text, bytelist, escaped, follow, nodebuffer, od, offsetdump, plainhex, tcpdump
from kwire_cli.inputs.text import Recogniser, Text

RECOGNISERS: tuple[Recogniser, ...] = (
    tcpdump.recognise,      # tcpdump -x, -xx, -X: header lines and "\t0x0000:  4500 004f ..." lines
    follow.recognise,       # tshark -z follow,tcp,hex / Wireshark Follow TCP Stream, both directions
    od.recognise,           # od -t x1 with octal, hex or decimal offsets, '*' lines, the end offset
    offsetdump.recognise,   # xxd, hexdump -C, tshark -x, Wireshark "Copy as Hex Dump"
    nodebuffer.recognise,   # <Buffer 00 01 ...>
    bytelist.recognise,     # []byte{0x0, ...}, new byte[]{0, -128}, [0, 0, -96], xxd -i, Node's JSON
    escaped.recognise,      # b'\x00...', '\x00...', "\x00..."
    base64text.recognise,   # base64, standard or URL-safe
    plainhex.recognise,     # hex digits with separators, 0x / \x prefixes, # and // comments
)


def not_hex(text: Text) -> str:
    """The error for text that no recogniser claims: where it stops being hex."""
    bad = plainhex.first_bad_character(text)
    return plainhex.NO_DIGITS if bad is None else "not hex: " + bad
