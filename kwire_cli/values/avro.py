"""Avro values: the registry's schema (and its references) through fastavro.

Logical types come out as fastavro reads them (datetime for timestamps, Decimal for decimals,
UUID for uuids); :func:`kwire_cli.values.jsonable.jsonable` writes them as ISO 8601 times and
exact decimal and uuid strings.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro import _read_py

from kwire_cli.values.schemas import Schema

PRIMITIVE_ZERO_WIDTH = {"null"}


class AvroSchemaError(ValueError):
    """A schema fastavro cannot use, or one whose values could not be read in bounded memory."""


@dataclass(frozen=True)
class CompiledAvro:
    """fastavro's parsed schema, and whether a record of it contains itself.

    fastavro's compiled reader recurses in C without a depth limit, so a value of a recursive
    schema nested a few hundred thousand deep would overflow the C stack; such schemas are read by
    fastavro's pure-Python reader, which stops at Python's recursion limit (RecursionError)."""

    parsed: Any
    recursive: bool


def compile_avro(schema: Schema) -> CompiledAvro:
    """fastavro's parsed schema of ``schema``, its references' named types known to it."""
    named: dict[str, Any] = {}
    try:
        _add_references(schema, named, seen=set())
        parsed = fastavro.parse_schema(json.loads(schema.text), named_schemas=named)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise AvroSchemaError(f"Avro schema does not parse: {one_line(exc)}") from None
    if _has_zero_width_array(parsed, {}):
        raise AvroSchemaError("Avro schema has an array of zero-byte items (null): the item count a "
                              "value claims is not bounded by its size, so kwire does not read it")
    return CompiledAvro(parsed, _recursive(parsed, named, []))


def _add_references(schema: Schema, named: dict[str, Any], seen: set[str]) -> None:
    for ref in schema.references:
        if ref.subject in seen:
            continue
        seen.add(ref.subject)
        _add_references(ref.schema, named, seen)
        fastavro.parse_schema(json.loads(ref.schema.text), named_schemas=named)


def _recursive(node: Any, named: dict[str, Any], stack: list[str]) -> bool:
    """Whether a named type is reached again inside itself."""
    if isinstance(node, str):
        if node in stack:
            return True
        return node in named and _recursive(named[node], named, stack)
    if isinstance(node, list):
        return any(_recursive(b, named, stack) for b in node)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind in ("record", "error"):
        name = node.get("name", "")
        if name in stack:
            return True
        stack.append(name)
        found = any(_recursive(f.get("type"), named, stack) for f in node.get("fields", []))
        stack.pop()
        return found
    if kind == "array":
        return _recursive(node.get("items"), named, stack)
    if kind == "map":
        return _recursive(node.get("values"), named, stack)
    return isinstance(kind, (dict, list)) and _recursive(kind, named, stack)


def _has_zero_width_array(node: Any, widths: dict[str, bool]) -> bool:
    """Whether any array in the schema has items that can take zero bytes."""
    if isinstance(node, list):
        return any(_has_zero_width_array(b, widths) for b in node)
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "array":
        items = node.get("items")
        return _zero_width(items, widths, set()) or _has_zero_width_array(items, widths)
    if kind == "map":
        return _has_zero_width_array(node.get("values"), widths)
    if kind in ("record", "error"):
        name = node.get("name", "")
        if name in widths:
            return False
        widths[name] = False  # in progress: a recursive record is reached through a union (>= 1 byte)
        return any(_has_zero_width_array(f.get("type"), widths) for f in node.get("fields", []))
    return _has_zero_width_array(kind, widths) if isinstance(kind, (dict, list)) else False


def _zero_width(node: Any, widths: dict[str, bool], stack: set[str]) -> bool:
    """Whether a value of this type can be encoded in zero bytes."""
    if isinstance(node, str):
        return node in PRIMITIVE_ZERO_WIDTH
    if isinstance(node, list):  # a union writes its branch index: at least one byte
        return False
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "fixed":
        return node.get("size") == 0
    if kind in ("record", "error"):
        name = node.get("name", "")
        if name in stack:
            return False
        stack.add(name)
        zero = all(_zero_width(f.get("type"), widths, stack) for f in node.get("fields", []))
        stack.discard(name)
        return zero
    if isinstance(kind, (str, dict)) and kind not in ("array", "map", "enum"):
        return _zero_width(kind, widths, stack)
    return False


def decode_avro(compiled: CompiledAvro, payload: bytes) -> Any:
    """The value ``payload`` holds; raises ValueError (one line) when it does not decode whole."""
    buf = io.BytesIO(payload)
    read = _read_py.schemaless_reader if compiled.recursive else fastavro.schemaless_reader
    try:
        value = read(buf, compiled.parsed, None)
    except EOFError as exc:
        raise ValueError(f"Avro value ends early ({one_line(exc) or 'no more bytes'})") from None
    except RecursionError:
        raise ValueError("Avro value nests deeper than Python's recursion limit") from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, UnicodeDecodeError) as exc:
        raise ValueError(f"Avro value does not decode: {one_line(exc)}") from None
    left = len(payload) - buf.tell()
    if left:
        raise ValueError(f"{left} bytes left after the Avro value")
    return value


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
