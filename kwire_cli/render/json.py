"""JSON and YAML output of value trees (DESIGN.md: non-finite floats become strings).

Every command that writes JSON or YAML goes through `dumps_json` / `dumps_yaml`, so the same
tree prints the same way everywhere: dicts keep their order, bytes become lowercase hex, and
NaN and infinities become the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (which
`kwire encode` reads back as floats).
"""
from __future__ import annotations

import json
import math
from typing import Any

import yaml

from kwire_cli.render.safe import UNSAFE, json_text

NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def to_jsonable(value: Any) -> Any:
    """A copy of `value` that json.dumps(allow_nan=False) and yaml.safe_dump accept."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "to_json"):
        return to_jsonable(value.to_json())
    return str(value)


def dumps_json(value: Any, *, indent: int | None = 2) -> str:
    """Strict JSON (no NaN literals), one document, no trailing newline; controls and format
    characters are ``\\uXXXX`` escapes (``kwire_cli.render.safe.json_text``: the same value)."""
    return json_text(json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False, allow_nan=False))


class _Dumper(yaml.SafeDumper):
    """Block style, insertion order, multi-line strings as literal blocks; a string holding a
    character a terminal must not see raw (``kwire_cli.render.safe.UNSAFE``: controls, bidi and
    other format characters) is double-quoted with every non-ASCII character escaped (the same
    value: YAML's ``\\e``, ``\\x9B``, ``\\u202E`` escapes)."""

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        if not _has_unsafe(text):
            super().write_double_quoted(text, split)
            return
        unicode = self.allow_unicode
        self.allow_unicode = False  # PyYAML escapes what is not printable ASCII
        try:
            super().write_double_quoted(text, split)
        finally:
            self.allow_unicode = unicode


def _has_unsafe(text: str) -> bool:
    return any(m.group() != "\n" for m in UNSAFE.finditer(text))


def _str_repr(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if _has_unsafe(data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_repr)


def dumps_yaml(value: Any) -> str:
    """YAML with the same tree as `dumps_json` (ends with a newline)."""
    return yaml.dump(to_jsonable(value), Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=100)


def dumps(value: Any, fmt: str) -> str:
    """`fmt` is "json" or "yaml"; the text ends with exactly one newline."""
    if fmt == "json":
        return dumps_json(value) + "\n"
    if fmt == "yaml":
        return dumps_yaml(value)
    raise ValueError(f"unknown output format {fmt!r}")
