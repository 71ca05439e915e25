"""Messages written as YAML or JSON documents: api, version, kind, header, body.

``kwire encode`` turns them into bytes, ``kwire diff`` weighs them; ``kwire decode``'s JSON output
is a message document as it is. YAML is imported only when a document is read.
"""
from __future__ import annotations

from typing import Any, ClassVar

from kwire_cli.errors import InputError, KwireError


class MessageDoc:
    """One message as YAML/JSON describes it: api, version, kind, header, body."""

    KEYS: ClassVar[dict[str, str]] = {"api": "api", "api_key": "api", "api_name": "api", "version": "version",
            "api_version": "version", "kind": "kind", "header": "header", "body": "body"}
    IGNORED: ClassVar[tuple[str, ...]] = ("size", "partial", "error", "input")

    def __init__(self, api: Any, version: int, kind: str, header: dict | None, body: dict, where: str):
        self.api, self.version, self.kind, self.header, self.body, self.where = (
            api, version, kind, header, body, where)

    def encode(self, *, size_prefix: bool = True, header: bool = True) -> bytes:
        from kwire_cli.codec import encode_body, encode_request, encode_response
        if not header:
            return encode_body(self.api.key, self.version, self.kind, self.body)
        enc = encode_request if self.kind == "request" else encode_response
        return enc(self.api.key, self.version, self.header, self.body, size_prefix=size_prefix)


def load_documents(text: str, where: str) -> list[Any]:
    """YAML (JSON is YAML too) documents; a one-line error naming the line on bad syntax."""
    import yaml

    from kwire_cli.inputs.yamlsafe import safe_load_all
    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{where}: not valid YAML or JSON{at}: {problem}") from None
    except RecursionError:
        raise InputError(f"{where}: YAML or JSON nested too deep to read") from None
    if not docs:
        raise InputError(f"{where}: no message in the file")
    return docs


def message_docs(text: str, where: str, *, api: str | None = None, version: int | None = None,
                 kind: str | None = None) -> list[MessageDoc]:
    """Message documents from YAML/JSON text; `api`/`version`/`kind` fill in (or must agree with)
    what the documents say. Accepts kwire decode's JSON output as is."""
    out = []
    docs = load_documents(text, where)
    for i, doc in enumerate(docs):
        w = where if len(docs) == 1 else f"{where} document {i + 1}"
        out.append(message_doc(doc, w, api=api, version=version, kind=kind))
    return out


def message_doc(doc: Any, where: str, *, api: str | None = None, version: int | None = None,
                kind: str | None = None) -> MessageDoc:
    """One message document (a mapping) checked against the specs: api, version, kind, header,
    body; ``api``/``version``/``kind`` as for ``message_docs``."""
    from kwire_cli.spec.registry import registry
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a mapping with api, version, kind and body, "
                         f"got {type(doc).__name__}")
    fields: dict[str, Any] = {}
    for k, v in doc.items():
        if k in MessageDoc.IGNORED:
            continue
        if k not in MessageDoc.KEYS:
            raise InputError(f"{where}: unknown key {k!r} (expected api, version, kind, header, body)")
        canon = MessageDoc.KEYS[k]
        if canon == "api" and canon in fields:
            # api_key and api_name together (kwire decode's JSON): they must name the same API
            a, b = _api(fields["api"], where), _api(v, where)
            if a.key != b.key:
                raise InputError(f"{where}: api_key and api_name name different APIs ({a.name}, {b.name})")
            continue
        fields[canon] = v
    given = {"api": api, "version": version, "kind": kind}
    for k, opt in given.items():
        if opt is None:
            continue
        if k not in fields:
            fields[k] = opt
        elif k == "api":
            if _api(fields[k], where).key != registry().api(opt).key:
                raise InputError(f"{where}: says api {fields[k]!r} but --api says {opt!r}")
        elif fields[k] != opt:
            raise InputError(f"{where}: says {k} {fields[k]!r} but --{k} says {opt!r}")
    for k in ("api", "version"):
        if k not in fields:
            raise InputError(f"{where}: no {k} given (add `{k}:` or use --{k})")
    a = _api(fields["api"], where)
    v = fields["version"]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: version must be a number, got {v!r}")
    k = fields.get("kind", "request")
    if k not in ("request", "response"):
        raise InputError(f"{where}: kind must be request or response, got {k!r}")
    if v not in a.spec(k).valid_versions:
        raise InputError(f"{where}: {a.name} has no version {v} (valid: {a.spec(k).valid_versions})")
    header = fields.get("header")
    if header is not None and not isinstance(header, dict):
        raise InputError(f"{where}: header must be a mapping of header fields")
    body = fields.get("body")
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InputError(f"{where}: body must be a mapping of fields")
    body = canonical_names(body, a.spec(k).struct)
    if header is not None:
        header = canonical_names(header, registry().schema("RequestHeader" if k == "request" else
                                                            "ResponseHeader").struct)
    return MessageDoc(a, v, k, header, body, where)


def canonical_names(value: Any, struct: Any, depth: int = 0) -> Any:
    """``value`` with its field names spelled as the spec spells them, matched without regard to case
    (``timeoutMs``, ``topics`` and ``TimeoutMs`` are one field: specs themselves differ, CreateTopics
    spells ``timeoutMs``); names that match no field are kept as given (the encoder names them, with
    the closest field it has)."""
    if depth > 64 or struct is None:
        return value
    if isinstance(value, list):
        return [canonical_names(x, struct, depth + 1) for x in value]
    if not isinstance(value, dict):
        return value
    by_lower = {f.name.lower(): f for f in struct.fields}
    out: dict[Any, Any] = {}
    for key, v in value.items():
        f = by_lower.get(key.lower()) if isinstance(key, str) else None
        if f is None:
            out[key] = v
            continue
        name = f.name if f.name not in out else key  # two spellings of one field: the encoder says so
        out[name] = canonical_names(v, f.struct, depth + 1) if f.struct is not None else v
    return out


def _api(value: Any, where: str) -> Any:
    """The API a document names (by name or key), or a one-line error naming the document."""
    from kwire_cli.spec.registry import registry
    if isinstance(value, bool):  # YAML's true is not API key 1
        raise InputError(f"{where}: api must be an API name or key, got {value}")
    try:
        return registry().api(value)
    except KwireError as e:
        raise InputError(f"{where}: {e}") from None
