"""Values made JSON-shaped: non-finite floats as strings (DESIGN.md), bytes as hex, the types plain
JSON has no form for. No YAML and no Rich here: every writer of JSON imports it cheaply."""
from __future__ import annotations

import math
from typing import Any

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


def json_default(value: Any) -> Any:
    """What to_jsonable does for values plain JSON has no type for."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return list(value)
    return str(value)
