"""JSON Schema values: JSON text, validated against the registry's schema when asked; and the
JSON form of every decoded value (Avro's logical types as ISO 8601 times and exact strings)."""
from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from typing import Any

import orjson

from kwire_cli.values.schemas import Schema


def decode_json(payload: bytes) -> Any:
    """The JSON value ``payload`` holds; ValueError (one line) when it is not JSON."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {str(exc)[:200]}") from None


def compile_validator(schema: Schema) -> Any:
    """A jsonschema validator of the schema (its references registered by their names)."""
    try:
        import jsonschema
        from referencing import Registry, Resource
    except ImportError:
        raise ValueError("validating JSON values needs jsonschema: pip install 'kwire[values]'") from None
    try:
        document = json.loads(schema.text)
        resources = [(ref.name, Resource.from_contents(json.loads(ref.schema.text)))
                     for ref in _all_references(schema, set())]
        registry: Any = Registry().with_resources(resources)
        cls = jsonschema.validators.validator_for(document)
        cls.check_schema(document)
        return cls(document, registry=registry)
    except (ValueError, TypeError, jsonschema.SchemaError) as exc:
        raise ValueError(f"JSON Schema does not parse: {str(exc).splitlines()[0][:200]}") from None


def _all_references(schema: Schema, seen: set[str]) -> list[Any]:
    out = []
    for ref in schema.references:
        if ref.name in seen:
            continue
        seen.add(ref.name)
        out.append(ref)
        out.extend(_all_references(ref.schema, seen))
    return out


def validation_note(validator: Any, value: Any) -> str | None:
    """None when ``value`` is valid, else the first reason it is not (one line, with its path)."""
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"does not validate at {where}: {error.message[:200]}"


def jsonable(value: Any) -> Any:
    """``value`` with every non-JSON leaf written as JSON: datetimes, dates and times in ISO 8601,
    Decimal and UUID as their exact strings, bytes as base64 (as protobuf's JSON mapping writes them)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value
