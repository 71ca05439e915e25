"""JSON with `//` and `/* */` comments, as Kafka writes its message specs."""
from __future__ import annotations

import json
from typing import Any

from kwire_cli.errors import SpecError


def strip_comments(text: str) -> str:
    """Remove comments outside strings; a `//` inside a string (a URL, say) stays."""
    out = []
    i, n = 0, len(text)
    start = 0
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] in "/*":
            out.append(text[start:i])
            if text[i + 1] == "/":
                j = text.find("\n", i)
                i = n if j < 0 else j  # keep the newline so line numbers hold
            else:
                j = text.find("*/", i + 2)
                if j < 0:
                    raise SpecError("unterminated /* comment")
                out.append("\n" * text.count("\n", i, j))
                i = j + 2
            start = i
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)


def loads_jsonc(text: str, source: str = "<spec>") -> dict[str, Any]:
    try:
        value = json.loads(strip_comments(text))
    except json.JSONDecodeError as e:
        raise SpecError(f"{source}: line {e.lineno} column {e.colno}: {e.msg}") from None
    except SpecError as e:
        raise SpecError(f"{source}: {e}") from None
    if not isinstance(value, dict):
        raise SpecError(f"{source}: top level is not a JSON object")
    return value
