"""The dump forms kwire reads, one recogniser each, tried in this order.

A recogniser is a function ``recognise(text: Text) -> list[Block] | None`` (see
``kwire_cli.inputs.dump``): None when the text is not in its form, the blocks of bytes when it
is, an ``InputError`` naming the line when it is but is broken. Put the specific forms first and
plain hex, the catch-all, last. A new form is a new module here and one entry below.
"""
from __future__ import annotations

from kwire_cli.inputs.dump import Recogniser, Text
from kwire_cli.inputs.forms import offsetdump, plainhex

RECOGNISERS: tuple[Recogniser, ...] = (
    offsetdump.recognise,   # xxd, hexdump -C, tshark -x, Wireshark "Copy as Hex Dump"
    plainhex.recognise,     # hex digits with separators, 0x / \x prefixes, # comments
)


def not_hex(text: Text) -> str:
    """The error for text that no recogniser claims: where it stops being hex."""
    bad = plainhex.first_bad_character(text)
    return plainhex.NO_DIGITS if bad is None else "not hex: " + bad
