"""Text taken from input, made safe to print on a terminal.

Client ids, topic names, broker hosts, racks, error messages, spec names and file names come from
strangers' bytes. Printed raw, an ESC or C1 CSI (U+009B) starts a terminal control sequence (set
the window title, clear the screen, recolour, move the cursor) and a bidi override (U+202E) makes
the rest of a line read backwards. ``escape`` is the one function every human-readable output
(trees, tables, summaries, ``kwire: error:`` lines, progress bars) passes input text through:

* ``\\`` becomes ``\\\\`` (so every backslash in the output starts an escape: unambiguous);
* tab, newline and carriage return become ``\\t``, ``\\n``, ``\\r``; the other C0 controls and
  DEL become ``\\x1b`` and the like;
* C1 controls (U+0080-U+009F), the format characters (Unicode category Cf: the bidi embeddings,
  overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E/U+200F/U+061C, zero-width
  characters, soft hyphen, BOM, tag characters...), the line and paragraph separators U+2028/U+2029
  and lone surrogates (a file name that is not UTF-8) become ``\\u009b``, ``\\u202e``,
  ``\\udc9b`` (``\\U000e0041`` past U+FFFF).

Everything else (letters of any script, emoji, combining marks) prints as is. ``escape`` is
injective: different texts give different escaped texts (tests/test_safe.py holds the inverse).

Machine output keeps the exact value: ``json_text`` writes the same characters as JSON ``\\uXXXX``
escapes inside JSON text, which a JSON reader turns back into the very same string, so a terminal
shows no raw control there either (``json_bytes`` does it on UTF-8 JSON lines).
"""
from __future__ import annotations

import re

# Unicode categories Cc, Cf, Cs, Zl, Zp (Unicode 15.1; tests/test_safe.py checks this list covers
# them in the running Python's unicodedata), as regex class ranges
_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD),
           (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
           (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF),
           (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F),
           (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F))


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


UNSAFE = re.compile(f"[{_class(_RANGES)}]")
"""One character a terminal must not see raw."""

_ESCAPE = re.compile(f"[\\\\{_class(_RANGES)}]")
_JSON_UNSAFE = re.compile(f"[{_class(_RANGES[1:])}]")  # C0 is escaped by every JSON writer; JSON
# text has raw newlines and tabs between its tokens
_NAMED = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _one(m: re.Match) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    n = ord(c)
    if n < 0x80:
        return f"\\x{n:02x}"
    if n <= 0xFFFF:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def escape(text: object) -> str:
    """``text`` (made a ``str`` first) with backslashes, controls, format characters, separators and
    lone surrogates written as visible escapes (the module docstring). Text without any is
    returned unchanged."""
    s = text if isinstance(text, str) else str(text)
    if s.isascii() and s.isprintable() and "\\" not in s:  # the common text, at a tenth of the regex's cost
        return s
    return _ESCAPE.sub(_one, s)


def quoted(text: str) -> str:
    """``text`` escaped and between double quotes, a quote inside written ``\\"`` (how the decode
    tree shows string values)."""
    return '"' + escape(text).replace('"', '\\"') + '"'


def _json_one(m: re.Match) -> str:
    n = ord(m.group())
    if n > 0xFFFF:  # JSON has no 6-digit escape: a UTF-16 surrogate pair
        n -= 0x10000
        return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"
    return f"\\u{n:04x}"


def json_text(text: str) -> str:
    """JSON text with every character ``escape`` would escape (but backslash and the C0 controls,
    which JSON writers already escape) written as a ``\\uXXXX`` escape: the same JSON value,
    nothing a terminal acts on. Valid only on JSON text (those characters can only be in
    strings there)."""
    return _JSON_UNSAFE.sub(_json_one, text)


def json_bytes(line: bytes) -> bytes:
    """``json_text`` on UTF-8 JSON (orjson's output); ASCII JSON is returned as is, fast."""
    if line.isascii() and b"\x7f" not in line:  # both run at memory speed
        return line
    return json_text(line.decode("utf-8", "surrogatepass")).encode("utf-8")
