"""The decoder's schemas looked up once, before a distributed run, and shipped to its tasks.

The tasks of a Spark job decode on executors that may not reach the registry, and thousands of
tasks asking it for the same schemas would be thousands of lookups.  So the driver reads every
answer a task could need once: all the files of ``--schemas DIR``, or the registry's list of its
schemas (``GET /schemas?deleted=true``, paged), turned into the answers of the paths the decoder
asks (``/schemas/ids/ID``, ``/schemas/ids/ID/versions``, ``/schemas/guids/GUID``,
``/subjects/S/versions/V``).  ``Shipped`` is plain data (picklable); ``land`` puts the same decoder
in force on a task, reading only those answers.
"""
from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwire_cli.values.decoder import ValueDecoder
from kwire_cli.values.schemas import (
    MAX_ANSWER_BYTES,
    AnswerStore,
    DirectoryAnswers,
    SavedAnswers,
    SchemaLookupError,
    Schemas,
)

PAGE = 1000
MAX_SCHEMAS = 100_000
MAX_FILES = 100_000


@dataclass(frozen=True)
class Shipped:
    """What a task needs to decode as the driver would: formats, validation, and every answer."""

    key_format: str
    value_format: str
    validate: bool
    answers: dict[str, Any] | None = None
    where: str = ""
    problem: str | None = None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)  # names this job's decoder on a worker

    def decoder(self) -> ValueDecoder:
        schemas = None
        if self.answers is not None:
            schemas = Schemas(FailingAnswers(self.problem, self.where) if self.problem else
                              SavedAnswers(self.answers, self.where))
        return ValueDecoder(schemas, self.key_format, self.value_format, self.validate)


class FailingAnswers:
    """The answers of a registry the driver could not list: every lookup says why."""

    def __init__(self, problem: str | None, where: str) -> None:
        self.problem = problem or "no answers"
        self.where = where

    def describe(self) -> str:
        return self.where

    def get(self, path: str) -> Any:  # noqa: ARG002 (every path fails alike)
        raise SchemaLookupError(self.problem)


def directory_answers(root: Path) -> dict[str, Any]:
    """Every answer file under ``root``, by the registry path it answers (DirectoryAnswers' names)."""
    answers: dict[str, Any] = {}
    total = 0
    for n, file in enumerate(sorted(root.rglob("*.json"))):
        if n >= MAX_FILES:
            break
        rel = file.relative_to(root).as_posix()[:-len(".json")]
        parts = rel.split("/")
        if len(parts) == 1 and rel.endswith(".versions"):
            path = f"/schemas/ids/{rel[:-len('.versions')]}/versions"
        elif len(parts) == 1:
            path = f"/schemas/ids/{rel}" if rel.isdigit() else f"/schemas/guids/{rel}"
        else:
            path = "/" + rel
        total += file.stat().st_size
        if total > MAX_ANSWER_BYTES * 4:
            raise SchemaLookupError(f"schema directory {root}: more than {MAX_ANSWER_BYTES * 4 >> 20} MiB of answers")
        try:
            answers[path] = json.loads(file.read_bytes())
        except (OSError, ValueError) as exc:
            raise SchemaLookupError(f"{file}: {exc}") from None
    return answers


def registry_answers(store: AnswerStore) -> dict[str, Any]:
    """The answers of every schema a registry lists (``GET /schemas``, all versions, deleted too)."""
    answers: dict[str, Any] = {}
    offset = 0
    while offset < MAX_SCHEMAS:
        page = store.get(f"/schemas?deleted=true&latestOnly=false&offset={offset}&limit={PAGE}")
        if page is None:
            raise SchemaLookupError(f"{store.describe()} has no list of schemas (GET /schemas: 404)")
        if not isinstance(page, list):
            raise SchemaLookupError(f"{store.describe()}: GET /schemas did not answer a list")
        for entry in page:
            _add(answers, entry)
        if len(page) < PAGE:
            break
        offset += PAGE
    return answers


def _add(answers: dict[str, Any], entry: Any) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), int) or not isinstance(entry.get("schema"), str):
        return
    sid, subject, version = entry["id"], entry.get("subject"), entry.get("version")
    answer = {k: entry[k] for k in ("schema", "schemaType", "references", "guid") if k in entry}
    answers.setdefault(f"/schemas/ids/{sid}", answer)
    if isinstance(entry.get("guid"), str):
        answers.setdefault(f"/schemas/guids/{entry['guid']}", answer)
    if isinstance(subject, str) and isinstance(version, int):
        answers.setdefault(f"/schemas/ids/{sid}/versions", []).append({"subject": subject, "version": version})
        answers[f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"] = {
            "subject": subject, "version": version, "id": sid, **answer}


def ship(decoder: ValueDecoder | None) -> Shipped | None:
    """On the driver: the decoder in force and every answer its tasks may need (None: none in force)."""
    if decoder is None:
        return None
    fmts = decoder.formats
    if decoder.schemas is None:
        return Shipped(fmts["key"], fmts["value"], decoder.validate)
    where = decoder.schemas.describe()
    try:
        store = decoder.schemas.store
        answers = directory_answers(store.root) if isinstance(store, DirectoryAnswers) else registry_answers(store)
    except SchemaLookupError as exc:
        return Shipped(fmts["key"], fmts["value"], decoder.validate, {}, where, str(exc))
    return Shipped(fmts["key"], fmts["value"], decoder.validate, answers, where)


_landed: dict[str, ValueDecoder] = {}


def within(shipped: Shipped | None, rows: Iterator[Any]) -> Iterator[Any]:
    """A task's rows made with the shipped decoder in force (one decoder per job and worker
    process, so each schema is compiled once per process, not once per task)."""
    from kwire_cli.values.records import use

    decoder = None
    if shipped is not None:
        decoder = _landed.get(shipped.token)
        if decoder is None:
            _landed.clear()
            decoder = _landed[shipped.token] = shipped.decoder()
    use(decoder)  # None too: a worker process reused by a later job keeps nothing of this one
    yield from rows
