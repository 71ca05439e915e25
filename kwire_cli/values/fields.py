"""Fields of decoded keys and values, for filters: ``value.customer.name=c1``, ``key.id~A-``.

A path is ``key`` or ``value``, then names (object members) and numbers (list items) joined by
dots.  ``values_at(body, "value", ["customer", "name"])`` gives the leaves found at that path in
every decoded record of a decoded message body (records of Kafka's internal topics and keys or
values that did not decode have none).  A leaf that is a list gives each of its items.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kwire_cli.values.records import decoded_form

MAX_DEPTH = 32
MAX_PATH = 32


def parse_path(name: str) -> tuple[str, list[str]] | None:
    """``("value", ["customer", "name"])`` for ``value.customer.name``; None when ``name`` is not
    a path into a key or value."""
    head, _, rest = name.partition(".")
    if head.lower() not in ("key", "value") or not rest:
        return None
    parts = rest.split(".")
    if len(parts) > MAX_PATH or any(not p for p in parts):
        return None
    return head.lower(), parts


def _records(node: Any, depth: int) -> Iterator[dict[str, Any]]:
    if depth > MAX_DEPTH:
        return
    if isinstance(node, list):
        for x in node:
            yield from _records(x, depth + 1)
    elif isinstance(node, dict):
        batches = node.get("batches")
        if isinstance(batches, list):
            for batch in batches:
                if isinstance(batch, dict):
                    recs = batch.get("Records") if batch.get("Records") is not None else batch.get("Messages")
                    for rec in recs if isinstance(recs, list) else [batch]:
                        if isinstance(rec, dict):
                            yield rec
            return
        for v in node.values():
            if isinstance(v, (dict, list)):
                yield from _records(v, depth + 1)


def _follow(obj: Any, path: list[str]) -> Iterator[Any]:
    for i, part in enumerate(path):
        if isinstance(obj, dict):
            if part not in obj:
                return
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, list):  # a name across a list: each item's member
            for item in obj:
                yield from _follow(item, path[i:])
            return
        else:
            return
    if isinstance(obj, list):
        yield from (x for x in obj if not isinstance(x, (dict, list)))
    elif not isinstance(obj, dict):
        yield obj


def values_at(body: Any, field: str, path: list[str]) -> Iterator[Any]:
    """The leaves at ``path`` in the decoded key (``field == "key"``) or value of every record."""
    name = "Key" if field == "key" else "Value"
    for rec in _records(body, 0):
        form = rec.get(name)
        if isinstance(form, dict):
            obj = decoded_form(form)
            if obj is not None:
                yield from _follow(obj, path)
