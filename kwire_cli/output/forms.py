"""How a record's key, value and headers are shown: the one formatter every output passes them through.

A record's key and value, and a header's value, come out of the records decoder as *forms*
(``kwire_cli.records``): ``{"text": STR}`` when the bytes are printable UTF-8, ``{"hex": DIGITS}``
otherwise, ``{"redacted": REASON, "bytes": N}`` for a secret (``kwire_cli.codec.secrets``), or null.
A header's key is a string (or null). With a Schema Registry decoder in force
(``kwire_cli.values``) a key or value may be a decoded form instead, ``{"avro": OBJECT, "schema":
{...}, "bytes": N}`` (``protobuf``, ``json``, ``string`` likewise): its object is shown, as compact
JSON (a string as it is), and its size is its ``bytes``. ``RecordForms`` turns each into text for a line of output
(``text``, ``header``, ``headers``), into its size in bytes (``size``) and into the value a JSON
output holds (``json``); every output that shows records (``kwire pcap --format records``,
``kwire dump-log``, and what builds on them) goes through it, so a new kind of form is taught here once.

Two styles (``FormStyle``) differ only in how they write what they write:

* ``KCAT`` (``kwire pcap --format records``, as kcat prints records): text as it is, null empty,
  nothing cut;
* ``LOG`` (``kwire dump-log``'s table): text in JSON quotes, null ``null``, text and hex past
  ``SHOWN`` characters cut short, saying how long they are.

The text is *not* escaped for a terminal: the caller escapes the line it makes of it
(``kwire_cli.render.safe.escape``), once.
"""
from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kwire_cli.values.records import decoded_form

_compact: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_quote: Callable[[str], str] = json.encoder.encode_basestring  # the C quoting of json.dumps

#: a key or value longer than this (characters of text, digits of hex) is cut short in the LOG style
#: (a 256 MiB value would be a line of 512 MiB); the JSON outputs show it whole
SHOWN = 4096


@dataclass(frozen=True)
class FormStyle:
    """How forms are written: ``null`` (what a null shows as), ``quote`` (text in JSON quotes),
    ``cut`` (characters of text or digits of hex shown at most; None: all) and ``more`` (what the
    note of a cut value names as showing it whole)."""

    null: str = ""
    quote: bool = False
    cut: int | None = None
    more: str = "--format jsonl shows all"


KCAT = FormStyle()
LOG = FormStyle(null="null", quote=True, cut=SHOWN)


def is_redacted(form: Any) -> bool:
    return isinstance(form, dict) and "redacted" in form


class RecordForms:
    """Keys, values and headers of records in one ``FormStyle``."""

    def __init__(self, style: FormStyle = KCAT) -> None:
        self.style = style

    def text(self, form: Any) -> str:
        """A key or value form as text (not escaped)."""
        st = self.style
        if form is None:
            return st.null
        if isinstance(form, dict):
            if "text" in form:
                text = form["text"]
                if not isinstance(text, str):
                    return _compact(text)
                if st.cut is not None and len(text) > st.cut:
                    shown = _quote(text[:st.cut]) if st.quote else text[:st.cut]
                    return f"{shown}… ({len(text)} characters; {st.more})"
                return _quote(text) if st.quote else text
            if "hex" in form:
                digits = str(form["hex"])
                if st.cut is not None and len(digits) > st.cut:
                    return f"0x{digits[:st.cut]}… ({len(digits) // 2} bytes; {st.more})"
                return "0x" + digits
            if is_redacted(form):
                return f"<redacted: {form['redacted']}>"
            decoded = decoded_form(form)
            if decoded is not None:  # a key/value read with its schema (kwire_cli.values): its object
                return decoded if isinstance(decoded, str) else _compact(decoded)
            return _compact(form)
        if isinstance(form, str):
            return form
        return _compact(form)

    def header_key(self, key: Any) -> str:
        """A header's key (a string, or a form where the records decoder gave one)."""
        return self.text({"text": key} if isinstance(key, str) else key)

    def header(self, header: dict[str, Any]) -> str:
        """One header as ``KEY=VALUE``."""
        return f"{self.header_key(header.get('Key'))}={self.text(header.get('Value'))}"

    def headers(self, headers: Iterable[dict[str, Any]] | None, sep: str = ",") -> str:
        return sep.join(self.header(h) for h in headers or ())

    @staticmethod
    def size(form: Any) -> int:
        """The size in bytes of a key or value form (null: -1, as kcat's %K and %S)."""
        if isinstance(form, dict):
            if "text" in form:
                text = form["text"]
                return len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else len(_compact(text))
            if "hex" in form:
                return len(form["hex"]) // 2
            if is_redacted(form) or "bytes" in form:  # (a decoded form: the bytes it was read from)
                return int(form.get("bytes") or 0)
        return -1

    @staticmethod
    def json(form: Any) -> Any:
        """A key or value form as a JSON output holds it (the rows' own form)."""
        return form

    def json_headers(self, headers: Iterable[dict[str, Any]] | None) -> list[dict[str, Any]]:
        return [{"key": h.get("Key"), "value": self.json(h.get("Value"))} for h in headers or ()]
