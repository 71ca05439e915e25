"""The redaction table: every place a secret lives in Kafka messages and KRaft records, and the one
function each output path calls to hide them.

No secret is printed by default. ``redact_message(api_key, kind, body, show=...)`` is called once
where a decoded value tree is made for output (``kwire decode`` on its message, ``Conversation.row``
for ``kwire pcap`` and ``spark-decode``; ``redact_record`` for the KRaft records of a metadata log).
It changes the body in place: a secret value becomes ``{"redacted": REASON, "bytes": N}`` (N: its
length on the wire, UTF-8 bytes for text), so a reader sees that something was there. With
``show=True`` (--show-secrets) values stay as they are. Either way it adds what kwire decodes out
of opaque bytes: ``Sasl`` beside a SaslAuthenticate ``AuthBytes`` (``kwire_cli.codec.sasl``), and
``Request`` / ``Response`` beside an Envelope's ``RequestData`` / ``ResponseData`` (the forwarded
message, decoded and redacted in turn).

Cost: a body is walked only when its API key is in ``APIS`` (a set lookup per message otherwise),
and then only along the table's paths.

``TABLE`` is the one list (``python -m kwire_cli.codec.secrets`` prints it as Markdown; docs/cli.md
shows it). Config values are hidden by name (``sensitive_config``): Kafka's broker hides, in its
request log, the values of AlterConfigs and IncrementalAlterConfigs configs whose type is PASSWORD
or unknown to it (KAFKA-9718, Kafka 2.5.1 and 2.6: ``RequestChannel.loggableRequest``); kwire
cannot know types, so it hides the values of Kafka's PASSWORD configs (``PASSWORD_CONFIGS``, also
behind a prefix such as ``listener.name.NAME.``) and of every config whose name contains one of
``SENSITIVE_PARTS``; and a DescribeConfigs / CreateTopics answer's values the broker marks
``IsSensitive`` or of ``ConfigType`` PASSWORD.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwire_cli.codec import sasl
from kwire_cli.codec.message import decode_request, decode_response
from kwire_cli.errors import EncodeError, KwireError
from kwire_cli.spec.registry import registry

# ------------------------------------------------------------------------------------------ reasons
REASONS: dict[str, str] = {
    sasl.SASL_PASSWORD: "a SASL/PLAIN password",
    sasl.SCRAM_CLIENT_PROOF: "a SCRAM ClientProof (p=), which with the exchange gives the ClientKey",
    sasl.SCRAM_SERVER_SIGNATURE: "a SCRAM ServerSignature (v=)",
    sasl.OAUTH_BEARER_TOKEN: "an OAUTHBEARER bearer token (auth=Bearer ...)",
    sasl.SASL_TOKEN: "an opaque SASL token (GSSAPI, another mechanism, or a message that does not parse)",
    "scram-salt": "a SCRAM salt as a credential store keeps it (AlterUserScramCredentials, "
                  "UserScramCredentialRecord); a salt in a SCRAM server-first message is shown",
    "scram-salted-password": "a SCRAM SaltedPassword: password-equivalent for SCRAM",
    "scram-stored-key": "a SCRAM StoredKey (UserScramCredentialRecord)",
    "scram-server-key": "a SCRAM ServerKey (UserScramCredentialRecord)",
    "delegation-token-hmac": "a delegation token's HMAC: the token's password",
    "sensitive-config": "the value of a sensitive config (see sensitive_config)",
    "record-value": "the raw value of a KRaft metadata record that holds a secret (its decoded form, redacted, "
                    "is in Internal)",
    "envelope-request": "an Envelope's forwarded request, which carries a secret or could not be checked "
                        "(its decoded form is in Request)",
    "envelope-response": "an Envelope's forwarded response, which carries a secret or could not be checked "
                         "(its decoded form is in Response)",
}

# ------------------------------------------------------------------------------- sensitive configs
# Kafka's configs of type PASSWORD (clients' SslConfigs and SaslConfigs, the broker's own, the
# ZooKeeper client's TLS); any prefix before them (listener.name.NAME., NAME.MECHANISM., a client
# prefix) is allowed
PASSWORD_CONFIGS: frozenset[str] = frozenset({
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
    "sasl.jaas.config",
    "password.encoder.secret", "password.encoder.old.secret",
    "delegation.token.secret.key", "delegation.token.master.key",
    "zookeeper.ssl.keystore.password", "zookeeper.ssl.truststore.password",
})
# a config whose name contains one of these (case-insensitive) is hidden too
SENSITIVE_PARTS: tuple[str, ...] = ("password", "secret", "jaas", "credentials", "token", "passphrase")
PASSWORD_CONFIG_TYPE = 9  # DescribeConfigs' ConfigType for PASSWORD


def sensitive_config(name: Any) -> bool:
    """Is a config of this name hidden? (not a string: yes, to be safe)"""
    if not isinstance(name, str):
        return True
    n = name.lower()
    if n in PASSWORD_CONFIGS:
        return True
    for part in SENSITIVE_PARTS:
        if part in n:
            return True
    dot = n.find(".")
    while dot != -1:
        if n[dot + 1:] in PASSWORD_CONFIGS:
            return True
        dot = n.find(".", dot + 1)
    return False


# ----------------------------------------------------------------------------------------- table
@dataclass(frozen=True)
class Entry:
    """One place secrets live. ``where``: "request", "response" (of API ``name``, key ``key``) or
    "record" (a KRaft metadata record ``name``, type ``key``). ``path``: the field names from the
    body down ("[]": each element of an array). ``action``: ``hide`` the value; ``config``: the
    path leads to config entries ({Name, Value, ...}) whose sensitive values are hidden; ``sasl``:
    decode AuthBytes as a SASL message, hide its secrets and itself when it carries one;
    ``envelope``: decode the forwarded message, redact it, hide the bytes if it carried a secret."""

    where: str
    name: str
    key: int
    path: tuple[str, ...]
    action: str
    reason: str


TABLE: tuple[Entry, ...] = (
    Entry("request", "SaslAuthenticate", 36, ("AuthBytes",), "sasl", "sasl-*"),
    Entry("response", "SaslAuthenticate", 36, ("AuthBytes",), "sasl", "sasl-*"),
    Entry("request", "AlterUserScramCredentials", 51, ("Upsertions", "[]", "Salt"), "hide", "scram-salt"),
    Entry("request", "AlterUserScramCredentials", 51, ("Upsertions", "[]", "SaltedPassword"), "hide",
          "scram-salted-password"),
    Entry("response", "CreateDelegationToken", 38, ("Hmac",), "hide", "delegation-token-hmac"),
    Entry("request", "RenewDelegationToken", 39, ("Hmac",), "hide", "delegation-token-hmac"),
    Entry("request", "ExpireDelegationToken", 40, ("Hmac",), "hide", "delegation-token-hmac"),
    Entry("response", "DescribeDelegationToken", 41, ("Tokens", "[]", "Hmac"), "hide", "delegation-token-hmac"),
    Entry("request", "CreateTopics", 19, ("Topics", "[]", "Configs"), "config", "sensitive-config"),
    Entry("response", "CreateTopics", 19, ("Topics", "[]", "Configs"), "config", "sensitive-config"),
    Entry("response", "DescribeConfigs", 32, ("Results", "[]", "Configs"), "config", "sensitive-config"),
    Entry("request", "AlterConfigs", 33, ("Resources", "[]", "Configs"), "config", "sensitive-config"),
    Entry("request", "IncrementalAlterConfigs", 44, ("Resources", "[]", "Configs"), "config", "sensitive-config"),
    Entry("request", "Envelope", 58, ("RequestData",), "envelope", "envelope-request"),
    Entry("response", "Envelope", 58, ("ResponseData",), "envelope", "envelope-response"),
    # KRaft metadata records (kwire dump-log calls redact_record by record name).
    # DelegationTokenRecord has no entry: it holds no HMAC (Kafka derives it from the token id and
    # delegation.token.secret.key, a config hidden above), and token ids are shown in answers too.
    Entry("record", "UserScramCredentialRecord", 11, ("Salt",), "hide", "scram-salt"),
    Entry("record", "UserScramCredentialRecord", 11, ("StoredKey",), "hide", "scram-stored-key"),
    Entry("record", "UserScramCredentialRecord", 11, ("ServerKey",), "hide", "scram-server-key"),
    Entry("record", "ConfigRecord", 4, (), "config", "sensitive-config"),
)

RECORD_VALUE = "record-value"  # the reason a metadata record's raw value is hidden with (kwire_cli.logs)
ENVELOPE = 58
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
MAX_ENVELOPE_DEPTH = 4

_BY_MESSAGE: dict[tuple[int, str], tuple[Entry, ...]] = {}
_BY_RECORD: dict[str, tuple[Entry, ...]] = {}
for _e in TABLE:
    if _e.where == "record":
        _BY_RECORD[_e.name] = _BY_RECORD.get(_e.name, ()) + (_e,)
    else:
        _BY_MESSAGE[(_e.key, _e.where)] = _BY_MESSAGE.get((_e.key, _e.where), ()) + (_e,)
# the API keys whose bodies are walked (any other body is not touched)
APIS: frozenset[int] = frozenset(k for k, _ in _BY_MESSAGE)
# ... and those a capture's conversation hands to redact_message's context: SaslHandshake names the
# mechanism of the SaslAuthenticate messages after it, an Envelope request the API of its response
CONTEXT_APIS: frozenset[int] = APIS | {SASL_HANDSHAKE}


def redacted(reason: str, nbytes: int) -> dict[str, Any]:
    """The value that stands for a hidden one."""
    return {"redacted": reason, "bytes": nbytes}


def is_redacted(v: Any) -> bool:
    return v.__class__ is dict and "redacted" in v and set(v) == {"redacted", "bytes"}


def _hex_size(v: Any) -> int:
    """Wire length of a bytes field (the value tree holds it as hex)."""
    return len(v) // 2 if isinstance(v, str) else 0


def _text_size(v: Any) -> int:
    """Wire length of a string field (UTF-8)."""
    return len(v.encode()) if isinstance(v, str) else 0


def _hex_bytes(v: Any) -> bytes | None:
    if v.__class__ is not str:
        return None
    try:
        return bytes.fromhex(v)
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------- walking
class _Ctx:
    """What a redaction pass needs besides the body: show, the SASL mechanism, the Envelope's
    forwarded request (api key, version), the records mode, and the count of values hidden."""

    __slots__ = ("show", "mechanism", "inner", "records", "hidden", "depth")

    def __init__(self, show: bool, mechanism: str | None, inner: tuple[int, int] | None,
                 records: str | None, depth: int = 0) -> None:
        self.show, self.mechanism, self.inner, self.records, self.depth = show, mechanism, inner, records, depth
        self.hidden = 0


def _walk(node: Any, path: tuple[str, ...], i: int, fn: Callable[[dict[str, Any], str], None]) -> None:
    """Call ``fn(parent, field)`` at the end of ``path`` (``[]`` steps into each list element);
    missing keys and unexpected types are skipped (a --partial tree, a hand-written one)."""
    if i == len(path) - 1:
        if node.__class__ is dict and path[i] in node:
            fn(node, path[i])
        return
    step = path[i]
    if step == "[]":
        if node.__class__ is list:
            for x in node:
                _walk(x, path, i + 1, fn)
    elif node.__class__ is dict:
        child = node.get(step)
        if child is not None:
            _walk(child, path, i + 1, fn)


def _hide(reason: str, ctx: _Ctx) -> Callable[[dict[str, Any], str], None]:
    def fn(parent: dict[str, Any], field: str) -> None:
        v = parent[field]
        if v is not None and not is_redacted(v):
            parent[field] = redacted(reason, _hex_size(v))
            ctx.hidden += 1
    return fn


def _config_entry(c: Any, ctx: _Ctx, force: bool = False) -> None:
    if c.__class__ is not dict:
        return
    hide = (force or sensitive_config(c.get("Name")) or c.get("IsSensitive") is True
            or c.get("ConfigType") == PASSWORD_CONFIG_TYPE)
    v = c.get("Value")
    if hide and v is not None and not is_redacted(v):
        c["Value"] = redacted("sensitive-config", _text_size(v))
        ctx.hidden += 1
    for s in c.get("Synonyms") or ():
        _config_entry(s, ctx, hide)


def _configs(ctx: _Ctx) -> Callable[[dict[str, Any], str], None]:
    def fn(parent: dict[str, Any], field: str) -> None:
        v = parent[field]
        for c in v if v.__class__ is list else ():
            _config_entry(c, ctx)
    return fn


def _insert_after(parent: dict[str, Any], field: str, key: str, value: Any) -> None:
    """Put ``key`` right after ``field`` (the tree and JSON show it beside the bytes it decodes)."""
    items = list(parent.items())
    parent.clear()
    for k, v in items:
        if k != key:
            parent[k] = v
        if k == field:
            parent[key] = value
    if key not in parent:
        parent[key] = value


def resolve(fields: dict[str, Any], show: bool) -> int:
    """Turn the ``sasl.Secret`` leaves of a decoded SASL message into values (show) or redactions,
    in place; the number hidden."""
    n = 0
    for k, v in fields.items():
        if v.__class__ is sasl.Secret:
            if show:
                fields[k] = v.value
            else:
                fields[k] = redacted(v.reason, v.nbytes)
                n += 1
    return n


def decode_sasl(data: bytes, mechanism: str | None, side: sasl.Side,
                show: bool = False) -> tuple[dict[str, Any], str | None]:
    """A SASL message (AuthBytes or a legacy raw token) as shown: its fields with secrets resolved,
    and the reason to hide the raw bytes for (None: they carry no secret, or ``show``)."""
    msg = sasl.decode_token(data, mechanism, side)
    resolve(msg.fields, show)
    return msg.fields, None if show else msg.secret


def _sasl(kind: str, ctx: _Ctx) -> Callable[[dict[str, Any], str], None]:
    side: sasl.Side = "client" if kind == "request" else "server"

    def fn(parent: dict[str, Any], field: str) -> None:
        data = _hex_bytes(parent[field])
        if data is None:
            return
        fields, secret = decode_sasl(data, ctx.mechanism, side, ctx.show)
        if secret is not None:
            parent[field] = redacted(secret, len(data))
            ctx.hidden += 1
        _insert_after(parent, field, "Sasl", fields)
    return fn


def _peek_api(data: bytes) -> int | None:
    return int.from_bytes(data[0:2], "big", signed=True) if len(data) >= 2 else None


def _envelope(kind: str, reason: str, ctx: _Ctx) -> Callable[[dict[str, Any], str], None]:
    def fn(parent: dict[str, Any], field: str) -> None:
        data = _hex_bytes(parent[field])
        if data is None:
            return
        sib = "Request" if kind == "request" else "Response"
        inner: dict[str, Any]
        hide = False
        try:
            if ctx.depth >= MAX_ENVELOPE_DEPTH:
                raise KwireError(f"Envelopes nested deeper than {MAX_ENVELOPE_DEPTH}")
            if kind == "request":
                m = decode_request(data, size_prefixed=False, records=ctx.records)
            elif ctx.inner is None:
                raise KwireError("the forwarded request is not known, so its response is not decoded")
            else:
                m = decode_response(data, ctx.inner[0], ctx.inner[1], size_prefixed=False, records=ctx.records)
            sub = _Ctx(ctx.show, None, None, ctx.records, ctx.depth + 1)
            _redact(m.api_key, kind, m.body, sub)
            hide = sub.hidden > 0
            ctx.hidden += sub.hidden
            inner = {"api_key": m.api_key, "api_name": m.api_name, "api_version": m.api_version,
                     "header": m.header, "body": m.body, "size": m.size}
        except KwireError as e:
            inner = {"error": str(e)}
            key = _peek_api(data) if kind == "request" else (ctx.inner[0] if ctx.inner else None)
            hide = key is None or key in APIS or key not in _known_apis()
        if hide and not ctx.show:
            parent[field] = redacted(reason, len(data))
            ctx.hidden += 1
        _insert_after(parent, field, sib, inner)
    return fn


def _known_apis() -> frozenset[int]:
    return frozenset(registry().apis)


def _redact(api_key: int, kind: str, body: Any, ctx: _Ctx) -> None:
    entries = _BY_MESSAGE.get((api_key, kind))
    if entries is None or body.__class__ is not dict:
        return
    for e in entries:
        if e.action == "hide":
            if not ctx.show:
                _walk(body, e.path, 0, _hide(e.reason, ctx))
        elif e.action == "config":
            if not ctx.show:
                _walk(body, e.path, 0, _configs(ctx))
        elif e.action == "sasl":
            _walk(body, e.path, 0, _sasl(kind, ctx))
        else:
            _walk(body, e.path, 0, _envelope(kind, e.reason, ctx))


def redact_message(api_key: int, kind: str, body: Any, *, show: bool = False, mechanism: str | None = None,
                   inner: tuple[int, int] | None = None, records: str | None = None) -> int:
    """Redact a decoded message body in place (see the module doc); the number of values hidden.

    ``mechanism``: the SASL mechanism the connection's SaslHandshake named (for SaslAuthenticate);
    ``inner``: (api key, version) of the request an Envelope response answers (the Envelope
    request's RequestData); ``records``: the records mode to decode a forwarded message with."""
    if api_key not in APIS:
        return 0
    ctx = _Ctx(show, mechanism, inner, records)
    _redact(api_key, kind, body, ctx)
    return ctx.hidden


def redact_record(name: str, value: Any, *, show: bool = False) -> int:
    """Redact a decoded KRaft metadata record (``name``: UserScramCredentialRecord, ConfigRecord,
    ...) in place; the number of values hidden."""
    entries = _BY_RECORD.get(name)
    if entries is None or show or value.__class__ is not dict:
        return 0
    ctx = _Ctx(show, None, None, None)
    for e in entries:
        if e.action == "config":
            _config_entry(value, ctx)
        else:
            _walk(value, e.path, 0, _hide(e.reason, ctx))
    return ctx.hidden


def envelope_inner(body: Any) -> tuple[int, int] | None:
    """(api key, version) of the request an Envelope request forwards, from its decoded ``Request``
    (what ``redact_message`` added), for the response's ``inner``."""
    req = body.get("Request") if body.__class__ is dict else None
    if req.__class__ is dict and "api_key" in req:
        return int(req["api_key"]), int(req["api_version"])
    return None


# ------------------------------------------------------------------------------------- encoding
DERIVED = {"Sasl": SASL_AUTHENTICATE, "Request": ENVELOPE, "Response": ENVELOPE}


def for_encode(api_key: int, body: Any, where: str = "body") -> None:
    """Make a decoded body (kwire decode's JSON) encodable again, in place: the keys kwire added
    (Sasl, Request, Response) go; a redacted value is an EncodeError naming the field (decode with
    --show-secrets to re-encode it). Bodies of APIs outside the table are not walked."""
    if api_key not in APIS or body.__class__ is not dict:
        return
    for k, key in DERIVED.items():
        if key == api_key:
            body.pop(k, None)
    _no_redacted(body, where)


def _no_redacted(node: Any, where: str) -> None:
    if node.__class__ is dict:
        if is_redacted(node):
            raise EncodeError(f"{where} is redacted ({node['redacted']}, {node['bytes']} bytes): its value is "
                              f"not in the input; decode with --show-secrets to re-encode it")
        for k, v in node.items():
            _no_redacted(v, f"{where}.{k}")
    elif node.__class__ is list:
        for i, v in enumerate(node):
            _no_redacted(v, f"{where}[{i}]")


# ------------------------------------------------------------------------------------------- docs
def markdown() -> str:
    """The table as Markdown (docs/cli.md holds it; ``python -m kwire_cli.codec.secrets`` prints it)."""
    out = ["| where | field | hidden as |", "|---|---|---|"]
    for e in TABLE:
        where = f"{e.name} ({e.key}) {e.where}" if e.where != "record" else f"{e.name} (KRaft record {e.key})"
        path = "`" + ".".join(e.path).replace(".[]", "[]") + "`" if e.path else "the record"
        if e.action == "config":
            path += ": sensitive `Value`s" if e.path else ": its `Value` when sensitive"
        if e.action == "sasl":
            reason = ", ".join(f"`{r}`" for r in sasl.REASONS) + " (by mechanism; decoded into `Sasl`)"
        elif e.action == "envelope":
            reason = f"`{e.reason}` when the forwarded message carries a secret (decoded into " \
                     f"`{'Request' if e.where == 'request' else 'Response'}`, redacted in turn)"
        else:
            reason = f"`{e.reason}`"
        out.append(f"| {where} | {path} | {reason} |")
    out.append("")
    out.append("| reason | what |")
    out.append("|---|---|")
    for r, what in REASONS.items():
        out.append(f"| `{r}` | {what} |")
    return "\n".join(out) + "\n"


def _check() -> None:
    for e in TABLE:
        if e.action not in ("hide", "config", "sasl", "envelope"):
            raise RuntimeError(f"redaction table: unknown action {e.action}")
        if e.action in ("hide", "config", "envelope") and e.reason not in REASONS:
            raise RuntimeError(f"redaction table: reason {e.reason} is not listed")
    for r in sasl.REASONS:
        if r not in REASONS:
            raise RuntimeError(f"redaction table: SASL reason {r} is not listed")


_check()

if __name__ == "__main__":
    print(markdown(), end="")
