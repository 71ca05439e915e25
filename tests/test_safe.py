"""kwire_cli.render.safe: the one escaping function of every human-readable output, and the JSON /
YAML writers that keep the exact value with no raw control in their text."""
from __future__ import annotations

import json
import re
import sys
import unicodedata

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire_cli.render.json import dumps_json, dumps_yaml
from kwire_cli.render.safe import UNSAFE, escape, json_bytes, json_text, quoted

DANGEROUS_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]

# text that leans on the characters that matter: controls, C1, bidi, separators, surrogates,
# backslashes and the letters escapes are made of, plus any other character
_pieces = st.one_of(
    st.sampled_from(["\\", "x", "u", "U", "t", "n", "r", "0", "1b", "9b", "202e", "\x1b", "\x9b", "\x7f", "\t",
                     "\n", "\r", "\x00", "\u2028", "\u2029", "\ufeff", "\u00ad", "\U000e0041", "\udc9b", "é",
                     "[bold]", "😀", *BIDI]),
    st.characters(),
)
texts = st.lists(_pieces, max_size=40).map("".join)


def unescape(s: str) -> str:
    """The inverse of ``escape`` (the proof that it is injective)."""
    named = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        k = s[i + 1]
        if k in named:
            out.append(named[k])
            i += 2
        else:
            width = {"x": 2, "u": 4, "U": 8}[k]
            out.append(chr(int(s[i + 2:i + 2 + width], 16)))
            i += 2 + width
    return "".join(out)


def is_dangerous(c: str) -> bool:
    return unicodedata.category(c) in DANGEROUS_CATEGORIES


@settings(max_examples=1000, derandomize=True, deadline=None, database=None)
@given(texts)
def test_escape_leaves_nothing_dangerous_and_is_injective(s):
    e = escape(s)
    assert not any(is_dangerous(c) for c in e), ascii(e)
    assert unescape(e) == s
    e.encode("utf-8")  # no lone surrogate left to break writing to stdout


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(texts, texts)
def test_escape_of_different_texts_differs(a, b):
    if a != b:
        assert escape(a) != escape(b)


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(texts)
def test_quoted_is_a_safe_json_string_literal(s):
    q = quoted(s)
    assert not any(is_dangerous(c) for c in q)
    assert q[0] == q[-1] == '"' and '"' not in re.sub(r'\\.', "", q[1:-1])  # a quote inside is escaped


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(st.recursive(st.none() | st.integers() | texts,
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(texts, kids, max_size=4),
                    max_leaves=12))
def test_json_and_yaml_keep_the_exact_value_with_nothing_dangerous_raw(value):
    j = dumps_json(value)
    assert json.loads(j) == value
    assert not any(is_dangerous(c) for c in j if c not in "\n")
    line = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    jb = json_bytes(line).decode("utf-8")
    assert json.loads(jb) == value and not any(is_dangerous(c) for c in jb)
    y = dumps_yaml(value)
    assert yaml.safe_load(y) == value
    assert not any(is_dangerous(c) for c in y if c not in "\n"), ascii(y)


def test_the_range_table_covers_the_running_pythons_unicode_data():
    missing = [hex(cp) for cp in range(sys.maxunicode + 1)
               if is_dangerous(chr(cp)) and not UNSAFE.match(chr(cp))]
    assert missing == []


@pytest.mark.parametrize("raw, shown", [
    ("\x1b]0;pwn\x07", "\\x1b]0;pwn\\x07"),        # set-title
    ("\x1b[2J\x1b[31m", "\\x1b[2J\\x1b[31m"),      # clear screen, colour
    ("\x9b2J", "\\u009b2J"),                        # C1 CSI
    ("abc\u202edcb", "abc\\u202edcb"),              # right-to-left override
    ("\u2066x\u2069\u200f\u061c", "\\u2066x\\u2069\\u200f\\u061c"),
    ("C:\\x1b", "C:\\\\x1b"),                       # a real backslash stays distinguishable
    ("a\tb\nc\rd\x00\x7f", "a\\tb\\nc\\rd\\x00\\x7f"),
    ("\udcff.pcap", "\\udcff.pcap"),                # a file name that is not UTF-8
    ("\U000e0041", "\\U000e0041"),                  # a tag character
    ("[bold]kafka-é-😀", "[bold]kafka-é-😀"),       # ordinary text is left alone
])
def test_escape_examples(raw, shown):
    assert escape(raw) == shown


def test_json_text_only_touches_what_json_leaves_raw():
    text = json.dumps({"k\u202e": "\x1b\x9b\u2028\U000e0041"}, ensure_ascii=False, indent=2)
    safe = json_text(text)
    assert safe == '{\n  "k\\u202e": "\\u001b\\u009b\\u2028\\udb40\\udc41"\n}'
    assert json.loads(safe) == json.loads(text)
