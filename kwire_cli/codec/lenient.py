"""Lenient decoding: show what is on the wire and name what is wrong with it.

A message is decoded by the compiled codec first (the fast, strict path). Only when that fails is
it walked again by the interpreted walker of ``partial.py`` in lenient mode, which reads past the
rules the bytes break where the bytes still allow it and records each as a ``Violation``
(``{path, offset, rule, detail}``):

- a null (length -1) where the field is not nullable: shown as the null it is (``null-not-nullable``);
- a string that is not UTF-8: its bytes as ``{"invalid_utf8": HEX}`` (``invalid-utf8``);
- tagged fields out of order or repeated: read as they come, a repeat's later value kept (``tag-order``);
- a tagged field whose value does not fill its declared size: the rest skipped (``tag-size``); whose
  bytes do not read as its type at all: kept as hex among the unknown tags, never guessed;
- a records field whose framing does not read: kept as hex (``records``);
- bytes after a complete message: the message, and the count of bytes (``trailing-bytes``);
- the bytes end where a tag section must be (an encoder that left it out): read as no tagged fields
  (``missing-tags``).

Where the bytes cannot be read further (cut short, an impossible length), nothing is invented: the
walk stops there and the ``DecodeError`` raised names where; its ``partial`` holds what was read
(a ``Message`` whose violations end with the one that stopped it).

``strict=True`` is the codec as it is: the first violation is the error.
"""
from __future__ import annotations

from kwire_cli.codec.message import Message, decode_body, decode_request, decode_response
from kwire_cli.codec.partial import walk_message
from kwire_cli.errors import DecodeError, TrailingBytes, UnknownApiKey, UnknownVersion, Violation

__all__ = ["decode_lenient", "shown_string"]


def shown_string(v: object) -> str | None:
    """A string field's value as one string for a column (client ids): itself, or the bytes of an
    invalid-UTF-8 value with each bad byte as ``\\xNN`` (``caf\\xe9``)."""
    if isinstance(v, dict) and isinstance(v.get("invalid_utf8"), str):
        return bytes.fromhex(v["invalid_utf8"]).decode("utf-8", "backslashreplace")
    return v if isinstance(v, str) or v is None else str(v)


def _strict(data: bytes, kind: str, api_key: int | str | None, api_version: int | None,
            size_prefixed: bool | None, header: bool, records: str | None) -> Message:
    if not header:
        assert api_key is not None and api_version is not None
        return decode_body(data, api_key, api_version, kind, records=records)
    if kind == "request":
        return decode_request(data, size_prefixed=size_prefixed, records=records)
    assert api_key is not None and api_version is not None
    return decode_response(data, api_key, api_version, size_prefixed=size_prefixed, records=records)


def decode_lenient(data: bytes, kind: str, api_key: int | str | None = None, api_version: int | None = None, *,
                   size_prefixed: bool | None = None, header: bool = True, records: str | None = None,
                   strict: bool = False) -> Message:
    """Decode a request (``api_key`` None: from its header), a response or a bare body
    (``header=False``); violations of the format are listed in ``Message.violations`` unless
    ``strict``, where the first one raises as the codec does."""
    try:
        return _strict(data, kind, api_key, api_version, size_prefixed, header, records)
    except (UnknownApiKey, UnknownVersion):
        raise
    except TrailingBytes as e:
        if strict or e.decoded is None:
            raise
        msg: Message = e.decoded
        msg.violations = [*msg.violations, Violation.of(e)]
        return msg
    except DecodeError as e:
        if strict:
            raise
        first = e
    violations: list[Violation] = []
    pm = walk_message(data, kind, api_key if (kind != "request" or not header) else None, api_version,
                      size_prefixed=size_prefixed, header=header, records=records, violations=violations)
    msg = Message(pm.api.key, pm.api.name, pm.api_version, pm.kind, pm.header, pm.body if pm.body is not None else {},
                  pm.size, violations=violations)
    err = pm.error
    if isinstance(err, TrailingBytes):
        violations.append(Violation.of(err))
        return msg
    if err is not None:
        violations.append(Violation.of(err))
        err.partial = msg
        raise err
    if not violations:  # the walk read whole what the codec refused: the codec's word stands
        raise first
    return msg
