"""Schemas by id or GUID, from the Schema Registry's answers: one lookup per schema for the run.

The answers are the registry's REST answers (``GET /schemas/ids/{id}``, ``/schemas/guids/{guid}``,
``/subjects/{subject}/versions/{version}`` for references, ``/schemas/ids/{id}/versions`` for the
subject), wherever they come from: a registry over HTTP (:mod:`.registry`) or files saved from one
(:class:`DirectoryAnswers`).  The store is injected, so nothing here does network I/O itself.
"""
from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kwire_cli.values.framing import SchemaRef

SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
MAX_REFERENCE_DEPTH = 16
MAX_REFERENCES = 256
MAX_ANSWER_BYTES = 32 << 20
# distinct ids/GUIDs that were not found, past which no new one is looked up: binary values that
# happen to start with byte 0 would otherwise cost a registry request per distinct "id"
MAX_MISSES = 256


class SchemaLookupError(Exception):
    """A schema that cannot be had: not found, registry unreachable, an answer that does not parse."""


class AnswerStore(Protocol):
    """Where registry answers come from.  ``get`` returns the JSON answer to a registry path,
    None when there is none (the registry's 404), and raises SchemaLookupError when it cannot tell."""

    def get(self, path: str) -> Any: ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class Reference:
    """A schema another one imports: its name there (a .proto file name, an Avro full name, a
    JSON Schema $ref), the subject and version it is registered under, and the schema."""

    name: str
    subject: str
    version: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """One registered schema: its type (AVRO, PROTOBUF or JSON), text and references, and what
    names it (id, GUID, subject)."""

    schema_type: str
    text: str
    references: tuple[Reference, ...] = ()
    schema_id: int | None = None
    guid: str | None = None
    subject: str | None = None

    def label(self) -> dict[str, Any]:
        """What is shown beside a decoded key/value: type, id, GUID and subject where known."""
        out: dict[str, Any] = {"type": self.schema_type}
        if self.schema_id is not None:
            out["id"] = self.schema_id
        if self.guid is not None:
            out["guid"] = self.guid
        if self.subject is not None:
            out["subject"] = self.subject
        return out

    def key(self) -> str:
        """A key unique to this schema's content and references (the decoders' caches use it)."""
        refs = ",".join(f"{r.name}={r.schema.key()}" for r in self.references)
        return f"{self.schema_type}:{hash(self.text)}:{len(self.text)}[{refs}]"


def schema_from_answer(answer: Any, where: str, **names: Any) -> tuple[Schema, list[dict[str, Any]]]:
    """A Schema (references not yet resolved) and the answer's raw reference list."""
    if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
        raise SchemaLookupError(f"{where}: the answer has no \"schema\" string")
    schema_type = answer.get("schemaType") or "AVRO"
    if schema_type not in SCHEMA_TYPES:
        raise SchemaLookupError(f"{where}: schema type {schema_type!r} (kwire reads {', '.join(SCHEMA_TYPES)})")
    refs = answer.get("references") or []
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise SchemaLookupError(f"{where}: \"references\" is not a list of objects")
    guid = answer.get("guid") if isinstance(answer.get("guid"), str) else names.pop("guid", None)
    names.pop("guid", None)
    return Schema(schema_type, answer["schema"], guid=guid, **names), refs


@dataclass
class Schemas:
    """Schemas by id or GUID from one answer store, each looked up once per run (failures too,
    so a registry that is down costs one timeout per schema, not one per record)."""

    store: AnswerStore
    _found: dict[tuple[str, str], Schema | SchemaLookupError] = field(default_factory=dict)
    _subjects: dict[tuple[str, int], Schema] = field(default_factory=dict)
    _misses: int = 0

    def describe(self) -> str:
        return self.store.describe()

    def find(self, ref: SchemaRef) -> Schema:
        """The schema ``ref`` names; raises SchemaLookupError with the reason it cannot be had."""
        key = ("id", str(ref.schema_id)) if ref.schema_id is not None else ("guid", str(ref.guid))
        if key not in self._found:
            if self._misses >= MAX_MISSES:
                raise SchemaLookupError(f"schema {ref.name()} not looked up: {MAX_MISSES} schemas already were "
                                        f"not found in {self.store.describe()}")
            try:
                self._found[key] = self._lookup(ref)
            except SchemaLookupError as exc:
                self._found[key] = exc
                self._misses += 1
        found = self._found[key]
        if isinstance(found, SchemaLookupError):
            raise found
        return found

    def _lookup(self, ref: SchemaRef) -> Schema:
        if ref.schema_id is not None:
            path = f"/schemas/ids/{ref.schema_id}"
        else:
            path = f"/schemas/guids/{ref.guid}"
        answer = self.store.get(path)
        if answer is None:
            raise SchemaLookupError(f"schema {ref.name()} not found in {self.store.describe()}")
        subject = self._subject(ref.schema_id) if ref.schema_id is not None else None
        schema, refs = schema_from_answer(answer, path, schema_id=ref.schema_id, guid=ref.guid,
                                          subject=subject)
        return self._with_references(schema, refs, path, depth=0, seen=[0])

    def _subject(self, schema_id: int) -> str | None:
        """The first subject that registered the id (None when the store cannot tell)."""
        try:
            answer = self.store.get(f"/schemas/ids/{schema_id}/versions")
        except SchemaLookupError:
            return None
        if isinstance(answer, list) and answer and isinstance(answer[0], dict):
            subject = answer[0].get("subject")
            return subject if isinstance(subject, str) else None
        return None

    def _with_references(self, schema: Schema, refs: list[dict[str, Any]], where: str,
                         depth: int, seen: list[int]) -> Schema:
        if not refs:
            return schema
        if depth >= MAX_REFERENCE_DEPTH:
            raise SchemaLookupError(f"{where}: references nest deeper than {MAX_REFERENCE_DEPTH}")
        resolved = []
        for raw in refs:
            name, subject, version = raw.get("name"), raw.get("subject"), raw.get("version")
            if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int):
                raise SchemaLookupError(f"{where}: a reference without name, subject and version")
            seen[0] += 1
            if seen[0] > MAX_REFERENCES:
                raise SchemaLookupError(f"{where}: more than {MAX_REFERENCES} references")
            resolved.append(Reference(name, subject, version, self._referenced(subject, version, depth, seen)))
        return Schema(schema.schema_type, schema.text, tuple(resolved), schema.schema_id, schema.guid,
                      schema.subject)

    def _referenced(self, subject: str, version: int, depth: int, seen: list[int]) -> Schema:
        key = (subject, version)
        if key not in self._subjects:
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
            answer = self.store.get(path)
            if answer is None:
                raise SchemaLookupError(f"referenced subject {subject!r} version {version} not found "
                                        f"in {self.store.describe()}")
            sid = answer.get("id") if isinstance(answer, dict) else None
            schema, refs = schema_from_answer(answer, path, subject=subject,
                                              schema_id=sid if isinstance(sid, int) else None)
            self._subjects[key] = self._with_references(schema, refs, path, depth + 1, seen)
        return self._subjects[key]


_SAFE_NAME = re.compile(r"^[A-Za-z0-9._%-]+$")


class DirectoryAnswers:
    """Registry answers saved as files, for offline captures.

    ``/schemas/ids/7`` is ``DIR/7.json`` (as ``curl URL/schemas/ids/7 > 7.json`` saves it), a GUID's
    ``DIR/GUID.json``, ``/schemas/ids/7/versions`` ``DIR/7.versions.json`` (optional: gives the
    subject) and a reference's ``/subjects/S/versions/V`` ``DIR/subjects/S/versions/V.json`` (S
    percent-encoded as in the URL: ``kwire%2Fcommon.proto``).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self) -> str:
        return f"schema directory {self.root}"

    def _file(self, path: str) -> Path | None:
        parts = path.strip("/").split("/")
        if any(not _SAFE_NAME.match(p) or p in (".", "..") for p in parts):
            return None
        if len(parts) == 3 and parts[0] == "schemas" and parts[1] in ("ids", "guids"):
            return self.root / f"{parts[2]}.json"
        if len(parts) == 4 and parts[:2] == ["schemas", "ids"] and parts[3] == "versions":
            return self.root / f"{parts[2]}.versions.json"
        return self.root.joinpath(*parts[:-1], parts[-1] + ".json")

    def get(self, path: str) -> Any:
        file = self._file(path)
        if file is None or not file.is_file():
            return None
        try:
            if file.stat().st_size > MAX_ANSWER_BYTES:
                raise SchemaLookupError(f"{file}: larger than {MAX_ANSWER_BYTES >> 20} MiB")
            return json.loads(file.read_bytes())
        except (OSError, ValueError) as exc:
            raise SchemaLookupError(f"{file}: {exc}") from None


class SavedAnswers:
    """Answers already fetched (e.g. by a driver, shipped to the tasks that decode)."""

    def __init__(self, answers: Mapping[str, Any], where: str = "the schemas looked up before the run") -> None:
        self.answers = dict(answers)
        self.where = where

    def describe(self) -> str:
        return self.where

    def get(self, path: str) -> Any:
        return self.answers.get(path)


class RecordingAnswers:
    """An answer store that keeps every answer it passed on (to ship them as SavedAnswers)."""

    def __init__(self, inner: AnswerStore) -> None:
        self.inner = inner
        self.answers: dict[str, Any] = {}

    def describe(self) -> str:
        return self.inner.describe()

    def get(self, path: str) -> Any:
        answer = self.inner.get(path)
        if answer is not None:
            self.answers[path] = answer
        return answer
