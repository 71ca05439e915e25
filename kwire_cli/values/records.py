"""Keys and values of decoded records replaced by what their schemas say they hold.

A decoded message body (Produce, Fetch, ...) or a decoded records field holds each record's key
and value as a form, ``{"text": ...}`` or ``{"hex": ...}`` (kwire_cli.records.forms).  With a
decoder in force (``use``: set once by the command from --schema-registry, --schemas,
--key-format, --value-format) those forms become:

    {"avro": OBJECT, "schema": {"type": "AVRO", "id": 3, "subject": "orders-value"}, "bytes": 57}
    {"protobuf": OBJECT, "schema": {..., "message": "pkg.Order"}, "bytes": N}
    {"json": OBJECT, "schema": {...}, "bytes": N}   (no "schema" for --value-format json on plain JSON)
    {"string": TEXT, "bytes": N} / {"hex": HEX, "bytes": N}   (forced by --key-format / --value-format)

and a key or value that names a schema but does not decode keeps its form with a ``note``
naming why (``{"hex": ..., "note": "schema id 7 not found in schema registry URL"}``).  Records of
Kafka's internal topics and control batches are left alone.
"""
from __future__ import annotations

from typing import Any

from kwire_cli.codec.internal import is_internal, records_by_topic
from kwire_cli.records.forms import raw_bytes
from kwire_cli.values.decoder import Decoded, ValueDecoder

MAX_DEPTH = 32

_current: ValueDecoder | None = None


def use(decoder: ValueDecoder | None) -> None:
    """Set the decoder every output applies (None, or one that changes nothing: off)."""
    global _current
    _current = decoder if decoder is not None and decoder.active() else None


def current() -> ValueDecoder | None:
    """The decoder in force, None when keys and values are shown as bytes."""
    return _current


def form_of(decoded: Decoded, original: Any, size: int) -> Any:
    """The form a decoded key/value takes in a value tree (``size``: its bytes on the wire)."""
    if not decoded.decoded:
        if isinstance(original, dict):
            return {**original, "note": decoded.note}
        return original
    out: dict[str, Any] = {decoded.format: decoded.value}
    if decoded.schema is not None:
        out["schema"] = decoded.schema
    out["bytes"] = size
    if decoded.note:
        out["note"] = decoded.note
    return out


DECODED_KEYS = ("avro", "protobuf", "json", "string")


def decoded_form(form: dict[str, Any]) -> Any:
    """The object of a decoded key/value form (``{"avro": OBJECT, ...}``), None for any other form.
    (A forced ``{"hex": ...}`` form is a bytes form like any other.)"""
    for key in DECODED_KEYS:
        if key in form:
            return form[key]
    return None


def _bytes_of(form: Any) -> bytes | None:
    if isinstance(form, dict) and ("text" in form or "hex" in form):
        return raw_bytes(form)
    return None


def _header_list(rec: dict[str, Any]) -> list[tuple[str, bytes | None]]:
    out = []
    for h in rec.get("Headers") or ():
        if isinstance(h, dict) and isinstance(h.get("Key"), str):
            out.append((h["Key"], _bytes_of(h.get("Value"))))
    return out


def decode_record(rec: dict[str, Any], decoder: ValueDecoder) -> int:
    """One record's key and value decoded in place; returns how many were changed."""
    headers = _header_list(rec)
    changed = 0
    for field, name in (("key", "Key"), ("value", "Value")):
        form = rec.get(name)
        data = _bytes_of(form)
        if data is None:
            continue
        decoded = decoder.decode(field, data, headers)
        if decoded is not None:
            rec[name] = form_of(decoded, form, len(data))
            changed += 1
    return changed


def decode_batches(records: Any, decoder: ValueDecoder | None = None) -> int:
    """The records of a decoded records field (``{"batches": [...]}``), in place (``decoder``:
    the one in force by default)."""
    changed = 0
    decoder = decoder or _current
    if decoder is None or not isinstance(records, dict):
        return 0
    for batch in records.get("batches") or ():
        if not isinstance(batch, dict) or batch.get("IsControlBatch"):
            continue
        recs = batch.get("Records")
        if recs is None:
            recs = batch.get("Messages") if batch.get("Messages") is not None else (
                [batch] if "Key" in batch or "Value" in batch else [])
        for rec in recs or ():
            if isinstance(rec, dict):
                changed += decode_record(rec, decoder)
    return changed


def decode_body(body: Any, decoder: ValueDecoder | None = None) -> int:
    """Every records field of a decoded message body, in place (Kafka's internal topics left alone)."""
    decoder = decoder or _current
    if decoder is None:
        return 0
    changed = 0
    for topic, records in records_by_topic(body, max_depth=MAX_DEPTH):
        if not is_internal(topic):
            changed += decode_batches(records, decoder)
    return changed
