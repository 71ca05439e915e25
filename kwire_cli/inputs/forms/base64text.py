"""Base64 (``base64 FILE``, ``Buffer.toString('base64')``, Java's ``Base64.getEncoder()``, a JSON
field), standard or URL-safe alphabet, wrapped or not; a line ending in ``=`` padding ends a
value, so several values one per line are several blocks.

Hex is base64 too, letter for letter, so this form claims only text plain hex cannot read
(``0X00..``, ``00:01`` are hex). Words are not base64 either (``nonsense-arg``, ``kwire``): the
text needs at least twelve characters, whole groups of four or ``=`` padding, and a digit, a
``+ /`` or ``=``, or letters of both cases.
"""
from __future__ import annotations

import base64
import binascii
import re

from kwire_cli.errors import InputError
from kwire_cli.inputs.forms.plainhex import SEPARATORS
from kwire_cli.inputs.text import Block, Text

FORM = "base64"

_CHARS = re.compile(r"^[A-Za-z0-9+/=_-]+$")
_HEX = re.compile(r"^[0-9A-Fa-f]+$")


def recognise(text: Text) -> list[Block] | None:
    lines = text.lines
    words = [ln.text.strip() for ln in lines]
    if not all(_CHARS.match(w) for w in words):
        return None
    joined = "".join(words)
    if len(joined) < 12 or (len(joined) % 4 and "=" not in joined) or _HEX.match(SEPARATORS.sub("", joined)):
        return None
    upper, lower = re.search(r"[A-Z]", joined), re.search(r"[a-z]", joined)
    if not (re.search(r"[0-9+/=]", joined) or (upper and lower)):
        return None
    if ("+" in joined or "/" in joined) and ("-" in joined or "_" in joined):
        return None  # two alphabets at once
    values: list[tuple[str, int, int]] = []
    start = 0
    for i, w in enumerate(words):
        if w.endswith("=") or i == len(words) - 1:
            values.append(("".join(words[start:i + 1]), lines[start].number, lines[i].number))
            start = i + 1
    blocks = []
    for value, first, last in values:
        if "=" in value.rstrip("="):
            return None
        padded = value + "=" * (-len(value) % 4)
        try:
            if "-" in value or "_" in value:
                data = base64.urlsafe_b64decode(padded)
            else:
                data = base64.b64decode(padded, validate=True)
        except (binascii.Error, ValueError):
            if len(values) == 1 and len(value) % 4 == 1:
                return None
            raise InputError(f"not valid base64 at lines {first}-{last}") from None
        blocks.append(Block(data, first, last, FORM))
    return blocks
