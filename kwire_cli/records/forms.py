"""The value-tree forms of a record's bytes: keys, values and header values.

``show_bytes``: ``{"text": s}`` for valid, printable UTF-8 (tab, CR and LF allowed), else
``{"hex": "..."}``; either gives back the exact bytes (``raw_bytes``). Header keys are plain
strings, or ``{"hex": ...}`` when not valid UTF-8 (``header_key``). ``PLAIN`` is the translate
table the record decoders detect text with (see ``v2fast.v2_records_fast``).

Inside a frame budget (``limits.frame_budget``) the forms these two make are charged to the
frame's byte allowance (--max-decompressed), by what they hold: a hex form twice the bytes, a
text form its characters at the width CPython stores them (1, 2 or 4 bytes: a value of ASCII
with one emoji is a str four times its size). A form that would take more than is left is not
made: DecompressedTooLarge names the cap and the option (the record decoders show the batch
undecoded with that error). So a frame's value tree holds at most its cap of such text, however
small the input; plain ASCII keys and values under ``LONG``, which the record decoders make
themselves without these (a str the size of the bytes), are bounded by the bytes they come from.
"""

from __future__ import annotations

from codecs import getincrementaldecoder
from sys import getsizeof as _getsizeof

from kwire_cli.errors import DecompressedTooLarge
from kwire_cli.wire import Buffer

from .limits import DECOMPRESSED_OPTION, current_budget

# \t \n \r count as printable for the text form (str.isprintable() says they are not)
_WS_STRIP = str.maketrans("", "", "\t\n\r")
# the ASCII bytes str.isprintable() rejects, less \t \n \r: an ASCII key/value is text iff it has none
_ASCII_CONTROL = bytes([c for c in range(32) if c not in (9, 10, 13)] + [127])
# bytes.translate table: printable ASCII (and tab, CR, LF) kept, every other byte made 0xff
PLAIN = bytes(c if 32 <= c < 127 or c in (9, 10, 13) else 0xFF for c in range(256))


# a key or value at least this long is handed to show_bytes by the record decoders whatever it
# holds, as a memoryview of the records (no copy); it is looked at a megabyte at a time and its
# form is costed before it is made (records/_native.c's RB_BIG is the same)
LONG = 1 << 20
_STEP = 1 << 20
# bytes.translate table for costing UTF-8 text: a continuation byte (not a character of its
# own) 1, a lead byte of a character past U+00FF 2, of one past U+FFFF 4, everything else 0
_UTF8_CLASS = bytes(1 if 0x80 <= c < 0xC0 else 4 if c >= 0xF0 else 2 if c >= 0xC4 else 0 for c in range(256))


_long_forms = 0


def long_forms() -> int:
    """How many forms of a ``LONG`` key or value, or RawHex of a megabyte or more, this process
    has made so far: a writer that sees it unchanged since the last row knows the row holds no
    long string, without looking (kwire_cli.render.jsonlines.line_writer)."""
    return _long_forms


def note_long_form() -> None:
    """Count one more long form (``long_forms``)."""
    global _long_forms
    _long_forms += 1


def _text_cost(b: Buffer) -> int:
    """The bytes of the str ``b.decode()`` makes (``b`` valid UTF-8), counted a megabyte at a
    time: its characters times the width CPython stores them at."""
    chars = len(b)
    width = 1
    mv = memoryview(b)
    for i in range(0, len(b), _STEP):
        t = bytes(mv[i:i + _STEP]).translate(_UTF8_CLASS)
        chars -= t.count(1)
        if width < 4 and 4 in t:
            width = 4
        elif width < 2 and 2 in t:
            width = 2
    return chars * width


def _charge(cost: int, n: int, what: str) -> None:
    """Take ``cost`` bytes (the form of an ``n``-byte key or value) from the frame budget in
    force, or raise DecompressedTooLarge naming the cap when less than that is left."""
    budget = current_budget()
    if budget is None:
        return
    if cost > budget.left:
        left = budget.left
        budget.left = 0
        raise DecompressedTooLarge(
            f"a {n}-byte key or value would take {cost} bytes as {what}, more than the {left} bytes left "
            f"of the frame's cap of {budget.limit} bytes (decompressed bytes and the text of keys and "
            f"values together; {DECOMPRESSED_OPTION} raises it)")
    budget.left -= cost


def _ascii_printable(b: Buffer) -> bool:
    """Whether long ASCII ``b`` has no control byte (tab, CR, LF allowed)."""
    mv = memoryview(b)
    for i in range(0, len(b), _STEP):
        chunk = bytes(mv[i:i + _STEP])
        if len(chunk.translate(None, _ASCII_CONTROL)) != len(chunk):
            return False
    return True


def show_bytes(b: Buffer) -> dict[str, str]:
    """Key/value form: {"text": s} for valid, printable UTF-8; {"hex": ...} otherwise. Charged
    to the frame budget in force (see the module docstring)."""
    n = len(b)
    if n >= LONG:  # (a memoryview is never shorter)
        return _show_big(b)
    # the form and its cost in one go: this runs for every binary key and value
    if b.isascii():  # type: ignore[union-attr]  # a view only when >= LONG: _show_big took it
        # ASCII: printable iff no control byte (tab, CR, LF allowed); bytes.translate is far
        # cheaper than str.isprintable() per character
        if len(b.translate(None, _ASCII_CONTROL)) == n:  # type: ignore[union-attr]
            form = {"text": b.decode()}  # type: ignore[union-attr]
            cost = n
        else:
            form = {"hex": b.hex()}
            cost = 2 * n
    else:
        try:
            s = str(b, "utf-8")
        except UnicodeDecodeError:
            form = {"hex": b.hex()}
            cost = 2 * n
        else:
            if s.isprintable() or s.translate(_WS_STRIP).isprintable():
                form = {"text": s}
                cost = _getsizeof(s)
            else:
                form = {"hex": b.hex()}
                cost = 2 * n
    budget = current_budget()
    if budget is not None:
        left = budget.left - cost
        if left < 0:
            _charge(cost, n, "hex" if "hex" in form else "text")
        budget.left = left
    return form


def _is_ascii(b: Buffer) -> bool:
    mv = memoryview(b)
    return all(bytes(mv[i:i + _STEP]).isascii() for i in range(0, len(mv), _STEP))


def _utf8_text(b: Buffer, printable: bool) -> bool:
    """Whether ``b`` is valid UTF-8 (and, ``printable``, its text printable: tab, CR and LF
    allowed), decoded a megabyte at a time and let go of."""
    dec = getincrementaldecoder("utf-8")()
    mv = memoryview(b)
    try:
        for i in range(0, len(mv), _STEP):
            s = dec.decode(bytes(mv[i:i + _STEP]))
            if printable and not (s.isprintable() or s.translate(_WS_STRIP).isprintable()):
                return False
        dec.decode(b"", True)
    except UnicodeDecodeError:
        return False
    return True


def _show_big(b: Buffer) -> dict[str, str]:
    """``show_bytes`` of a long ``b`` (bytes, or a memoryview of the records: the record
    decoders hand long keys and values over without copying them): the same form, looked at a
    megabyte at a time, its cost charged before it is made."""
    n = len(b)
    note_long_form()
    if _is_ascii(b):
        if _ascii_printable(b):
            _charge(n, n, "text")
            return {"text": str(b, "ascii")}
    elif _utf8_text(b, True):
        _charge(_text_cost(b), n, "text")
        return {"text": str(b, "utf-8")}
    _charge(2 * n, n, "hex")
    return {"hex": b.hex()}


def raw_bytes(form: dict[str, str] | None) -> bytes | None:
    """The bytes behind a decoded key/value form (None, {"text": s} or {"hex": h})."""
    if form is None:
        return None
    if "text" in form:
        return form["text"].encode()
    return bytes.fromhex(form["hex"])


def header_key(b: Buffer) -> str | dict[str, str]:
    """A header key that is not plain ASCII: its UTF-8 text, or {"hex": ...}. Charged to the
    frame budget in force, as ``show_bytes`` is."""
    budget = current_budget()
    n = len(b)
    if n >= LONG:
        note_long_form()
    if budget is not None and n >= LONG:
        if _utf8_text(b, False):
            _charge(_text_cost(b), n, "text")
            return str(b, "utf-8")
        _charge(2 * n, n, "hex")
        return {"hex": b.hex()}
    try:
        key: str | dict[str, str] = str(b, "utf-8")
    except UnicodeDecodeError:
        key = {"hex": b.hex()}
    if budget is not None:
        cost = 2 * n if type(key) is dict else _getsizeof(key)
        if cost > budget.left:
            _charge(cost, n, "hex" if type(key) is dict else "text")
        budget.left -= cost
    return key
