"""Keys and values written with a Schema Registry (Avro, Protobuf, JSON Schema), decoded.

Sans-io: the decoders take bytes and schemas; where schemas come from is an injected answer
store (a registry over HTTP, files saved from one, or answers shipped from a Spark driver).

    framing     Confluent's magic byte, schema id / GUID, Protobuf message indexes, id headers
    schemas     Schema, the answer stores' interface, lookups cached per run, saved answers
    registry    the registry's REST API over HTTP (auth from the environment, timeout; imported
                by whoever uses it, so a run without --schema-registry loads no HTTP client)
    avro        fastavro with the registry's schema and references
    protobuf    .proto text compiled by protoc, the message chosen by its indexes, JSON mapping
    jsonvalues  JSON Schema values (validated on request); JSON form of every decoded value
    decoder     ValueDecoder: one key or value decoded, or a note why not
    records     the decoder in force (use/current) applied to decoded records, in place
    fields      fields of decoded keys and values, for filters (value.customer.name=c1)
    shipping    every answer read once on a Spark driver, shipped to its tasks
"""
from __future__ import annotations

from kwire_cli.values.decoder import FORMATS, Decoded, ValueDecoder
from kwire_cli.values.jsonvalues import jsonable
from kwire_cli.values.schemas import (
                                      AnswerStore,
                                      DirectoryAnswers,
                                      RecordingAnswers,
                                      SavedAnswers,
                                      Schema,
                                      SchemaLookupError,
                                      Schemas,
)

__all__ = ["FORMATS", "AnswerStore", "Decoded", "DirectoryAnswers", "RecordingAnswers",
           "SavedAnswers", "Schema", "SchemaLookupError", "Schemas", "ValueDecoder", "jsonable"]
