"""The value-tree forms of a record's bytes: keys, values and header values.

``show_bytes``: ``{"text": s}`` for valid, printable UTF-8 (tab, CR and LF allowed), else
``{"hex": "..."}``; either gives back the exact bytes (``raw_bytes``). Header keys are plain
strings, or ``{"hex": ...}`` when not valid UTF-8 (``header_key``). ``PLAIN`` is the translate
table the record decoders detect text with (see ``v2._v2_records_fast``).
"""

from __future__ import annotations

# \t \n \r count as printable for the text form (str.isprintable() says they are not)
_WS_STRIP = str.maketrans("", "", "\t\n\r")
# the ASCII bytes str.isprintable() rejects, less \t \n \r: an ASCII key/value is text iff it has none
_ASCII_CONTROL = bytes([c for c in range(32) if c not in (9, 10, 13)] + [127])
# bytes.translate table: printable ASCII (and tab, CR, LF) kept, every other byte made 0xff
PLAIN = bytes(c if 32 <= c < 127 or c in (9, 10, 13) else 0xFF for c in range(256))


def show_bytes(b: bytes) -> dict[str, str]:
    """Key/value form: {"text": s} for valid, printable UTF-8; {"hex": ...} otherwise."""
    if b.isascii():
        # ASCII: printable iff no control byte (tab, CR, LF allowed); bytes.translate is far
        # cheaper than str.isprintable() per character
        if len(b.translate(None, _ASCII_CONTROL)) == len(b):
            return {"text": b.decode()}
        return {"hex": b.hex()}
    try:
        s = b.decode()
    except UnicodeDecodeError:
        return {"hex": b.hex()}
    if s.isprintable() or s.translate(_WS_STRIP).isprintable():
        return {"text": s}
    return {"hex": b.hex()}


def raw_bytes(form: dict[str, str] | None) -> bytes | None:
    """The bytes behind a decoded key/value form (None, {"text": s} or {"hex": h})."""
    if form is None:
        return None
    if "text" in form:
        return form["text"].encode()
    return bytes.fromhex(form["hex"])


def header_key(b: bytes) -> str | dict[str, str]:
    """A header key that is not plain ASCII: its UTF-8 text, or {"hex": ...}."""
    try:
        return b.decode()
    except UnicodeDecodeError:
        return {"hex": b.hex()}
