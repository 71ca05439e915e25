"""One key or value decoded: its schema found by id or GUID, the bytes read with that schema.

:class:`ValueDecoder` is what the outputs use: ``decode(field, data, headers)`` gives a
:class:`Decoded` (the object, what schema says so, or a note why not) or None when the bytes
carry no schema framing and no format was forced (the output then shows them as it always did).
Schemas and compiled parsers are cached for the run.  A value that cannot be decoded is never a
stop: it keeps its bytes and gets one note.
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kwire_cli.values.framing import FramingError, SchemaRef, header_name, message_indexes, read_header, read_prefix
from kwire_cli.values.jsonvalues import compile_validator, decode_json, jsonable, validation_note
from kwire_cli.values.schemas import Schema, SchemaLookupError, Schemas

FORMATS = ("auto", "avro", "protobuf", "json", "string", "hex")
SCHEMA_FORMATS = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}
# the libraries of the `values` extra each reader needs (imported on first use)
READERS = {"avro": ("kwire_cli.values.avro", "fastavro"),
           "protobuf": ("kwire_cli.values.protobuf", "protobuf and grpcio-tools")}


def reader(fmt: str) -> ModuleType:
    """The module that reads ``fmt`` values; ValueError naming the extra when its library is missing."""
    module, libraries = READERS[fmt]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"decoding {fmt} values needs {libraries}: pip install 'kwire[values]'") from None
Headers = Sequence[tuple[str, "bytes | None"]]
MAX_NOTES = 100  # distinct notes counted for the run's summary on stderr


@dataclass(frozen=True)
class Decoded:
    """A decoded key or value.

    ``value`` is the object (JSON-able: see :func:`jsonable`) when it decoded, else None with
    ``note`` saying why; ``schema`` is what names it (type, id or GUID, subject, and for
    Protobuf the message), None when no schema was used; ``format`` is how it was read.
    ``note`` may also accompany a decoded value (a JSON value that does not validate).
    """

    format: str
    value: Any = None
    schema: dict[str, Any] | None = None
    note: str | None = None
    decoded: bool = True

    def as_json(self) -> dict[str, Any]:
        """The JSON object the outputs write for it."""
        out: dict[str, Any] = {"format": self.format}
        if self.schema is not None:
            out["schema"] = self.schema
        if self.decoded:
            out["value"] = self.value
        if self.note:
            out["note"] = self.note
        return out


def failed(fmt: str, note: str, schema: dict[str, Any] | None = None) -> Decoded:
    return Decoded(fmt, None, schema, note, decoded=False)


class ValueDecoder:
    """Decodes keys and values by Confluent's framing with schemas from ``schemas`` (None: none)."""

    def __init__(self, schemas: Schemas | None, key_format: str = "auto", value_format: str = "auto",
                 validate: bool = False) -> None:
        for fmt in (key_format, value_format):
            if fmt not in FORMATS:
                raise ValueError(f"format {fmt!r}: one of {', '.join(FORMATS)}")
        self.schemas = schemas
        self.formats = {"key": key_format, "value": value_format}
        self.validate = validate
        self._compiled: dict[tuple[str, str], Any] = {}
        self.notes: dict[str, int] = {}  # each note given, and how many keys/values got it

    def _noted(self, decoded: Decoded | None) -> Decoded | None:
        if decoded is not None and decoded.note is not None and (decoded.note in self.notes
                                                                 or len(self.notes) < MAX_NOTES):
            self.notes[decoded.note] = self.notes.get(decoded.note, 0) + 1
        return decoded

    def active(self) -> bool:
        """Whether it can change any output (a registry or a forced format)."""
        return self.schemas is not None or any(f != "auto" for f in self.formats.values())

    def decode(self, field: str, data: bytes | None, headers: Headers = ()) -> Decoded | None:
        """The key (``field == "key"``) or value ``data`` decoded, or None: nothing to decode."""
        return self._noted(self._decode(field, data, headers))

    def _decode(self, field: str, data: bytes | None, headers: Headers) -> Decoded | None:
        fmt = self.formats[field]
        if data is None or fmt == "hex":
            return Decoded("hex", data.hex()) if data is not None and fmt == "hex" else None
        if fmt == "string":
            return Decoded("string", bytes(data).decode("utf-8", "replace"))
        data = bytes(data)
        try:
            ref = self._reference(field, data, headers)
        except FramingError as exc:
            return failed(fmt, str(exc))
        if ref is None:
            if fmt == "json":
                return self._plain_json(data)
            if fmt in ("avro", "protobuf"):
                return failed(fmt, f"no schema id: the {field} has no magic byte 0 or 1 prefix and no "
                                   f"{header_name(field)} header")
            return None
        if self.schemas is None:
            if fmt == "auto":
                return None
            return failed(fmt, f"{field} names schema {ref.name()}: no --schema-registry or --schemas to find it")
        try:
            schema = self.schemas.find(ref)
        except SchemaLookupError as exc:
            return failed(fmt, str(exc))
        want = SCHEMA_FORMATS[schema.schema_type]
        if fmt not in ("auto", want):
            return failed(fmt, f"schema {ref.name()} is {schema.schema_type}, not {fmt}", schema.label())
        payload = data if ref.in_header else ref.rest
        return self._with_schema(schema, ref, payload)

    def _reference(self, field: str, data: bytes, headers: Headers) -> SchemaRef | None:
        name = header_name(field)
        for key, value in headers:
            if key == name:
                return read_header(value)
        return read_prefix(data)

    def _plain_json(self, data: bytes) -> Decoded:
        try:
            return Decoded("json", decode_json(data))
        except ValueError as exc:
            return failed("json", str(exc))

    def _compile(self, schema: Schema, what: str) -> Any:
        key = (what, schema.key())
        if key not in self._compiled:
            try:
                if what == "avro":
                    self._compiled[key] = reader(what).compile_avro(schema)
                elif what == "protobuf":
                    self._compiled[key] = reader(what).compile_protobuf(schema)
                else:
                    self._compiled[key] = compile_validator(schema)
            except ValueError as exc:
                self._compiled[key] = ValueError(str(exc))
        found = self._compiled[key]
        if isinstance(found, ValueError):
            raise found
        return found

    def _with_schema(self, schema: Schema, ref: SchemaRef, payload: bytes) -> Decoded:
        fmt = SCHEMA_FORMATS[schema.schema_type]
        label = schema.label()
        try:
            if fmt == "avro":
                value = reader(fmt).decode_avro(self._compile(schema, fmt), payload)
                return Decoded(fmt, jsonable(value), label)
            if fmt == "protobuf":
                source = ref.rest if ref.in_header else payload
                indexes, used = message_indexes(source)
                if not ref.in_header:
                    payload = payload[used:]
                name, value = reader(fmt).decode_protobuf(self._compile(schema, fmt), indexes, payload)
                return Decoded(fmt, value, {**label, "message": name})
            value = decode_json(payload)
            note = validation_note(self._compile(schema, fmt), value) if self.validate else None
            return Decoded(fmt, value, label, note)
        except (ValueError, RecursionError) as exc:
            return failed(fmt, f"schema {ref.name()}: {exc}", label)

    def native(self, field: str, data: bytes, headers: Headers = ()) -> Any:
        """The value as the library reads it (Avro's datetimes, Decimals and UUIDs kept): for
        comparing with what a producer sent.  Raises ValueError when it does not decode."""
        ref = self._reference(field, data, headers)
        if ref is None or self.schemas is None:
            raise ValueError("no schema framing")
        schema = self.schemas.find(ref)
        if schema.schema_type != "AVRO":
            raise ValueError("native form is Avro's")
        return reader("avro").decode_avro(self._compile(schema, "avro"), data if ref.in_header else ref.rest)
