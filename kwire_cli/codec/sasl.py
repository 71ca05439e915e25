"""SASL mechanism messages: what a SaslAuthenticate ``AuthBytes`` (or a KIP-43 legacy raw token) says.

Sans-io: ``decode_token(data, mechanism, side)`` takes the bytes of one SASL message, the
mechanism the connection's SaslHandshake named (``None`` when it is not known, as for a single
``kwire decode``: the message is then recognised from its bytes) and who sent it (``"client"``:
a request's AuthBytes or a client token; ``"server"``: a response's), and gives a ``SaslMessage``:
the fields of the message as a plain dict, with every secret value a ``Secret`` (its reason, the
value, its length), and ``secret``, the reason of the first secret (the caller hides the raw bytes
for it). ``kwire_cli.codec.secrets`` turns the ``Secret``s into ``{"redacted": reason, "bytes": n}``
or, with --show-secrets, into their values. The legacy raw-token framing calls ``decode_token`` on
a token with the mechanism its SaslHandshake v0 named.

Mechanisms (the fields of each are the keys of the dict):

* PLAIN (RFC 4616), client: ``authzid NUL authcid NUL passwd``: AuthorizationId, User, Password (secret).
* SCRAM-SHA-256/512 (RFC 5802, RFC 7677; Kafka's extensions such as ``tokenauth=true``):
  client-first ``gs2-header n=user,r=nonce[,ext]``: Gs2Header, ChannelBindingFlag,
  ChannelBindingName, AuthorizationId, User, Nonce, Extensions; server-first ``r=,s=,i=``: Nonce,
  Salt (base64, as sent: not a secret), Iterations; client-final ``c=,r=,p=``: ChannelBinding,
  Gs2Header (the decoded ``c=``), Nonce, Proof (secret); server-final ``v=`` ServerSignature
  (secret) or ``e=`` Error.
* OAUTHBEARER (RFC 7628), client: ``gs2-header \\x01 key=value \\x01 ... \\x01``: Gs2Header,
  AuthorizationId, Scheme and Token (secret) of ``auth=``, the token's non-secret JWT claims
  (TokenClaims: sub, iss, aud, exp, nbf, iat, scope), Extensions (the other key/values); the
  client's lone ``\\x01`` after an error; server: the error JSON (Error) or nothing.
* GSSAPI and any other mechanism: an opaque Token (secret), its length shown.

``Message`` names the message (plain, client-first, server-first, client-final, server-final,
client-initial, client-error-ack, server-error, empty, token); ``MechanismSource`` says whether
the mechanism came from the handshake or was recognised from the bytes. A message that does not
parse as its mechanism says so in ``Error`` and is kept whole as an opaque (secret) Token.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Literal

Side = Literal["client", "server"]

PLAIN = "PLAIN"
SCRAM = "SCRAM"  # the family, when the bytes say SCRAM but not which hash
OAUTHBEARER = "OAUTHBEARER"
GSSAPI = "GSSAPI"
SCRAM_MECHANISMS = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512"})

# reasons (kwire_cli.codec.secrets lists and documents them): the decoder names them, the table
# decides
SASL_PASSWORD = "sasl-password"
SCRAM_CLIENT_PROOF = "scram-client-proof"
SCRAM_SERVER_SIGNATURE = "scram-server-signature"
OAUTH_BEARER_TOKEN = "oauth-bearer-token"
SASL_TOKEN = "sasl-token"
REASONS = (SASL_PASSWORD, SCRAM_CLIENT_PROOF, SCRAM_SERVER_SIGNATURE, OAUTH_BEARER_TOKEN, SASL_TOKEN)

# JWT claims shown from a bearer token (registered claims of RFC 7519 and scope; never the whole
# payload: for an unsecured JWS, header + payload is the whole token)
SHOWN_CLAIMS = ("sub", "iss", "aud", "exp", "nbf", "iat", "scope")


@dataclass(frozen=True)
class Secret:
    """A secret value inside a decoded SASL message: ``reason`` (a reason of the redaction table),
    ``value`` (text as sent, or hex for binary tokens) and ``nbytes`` (its length on the wire)."""

    reason: str
    value: str
    nbytes: int


@dataclass
class SaslMessage:
    """One decoded SASL message: ``fields`` (Secret leaves where secrets are) and ``secret`` (the
    reason of the first secret it carries; None: none)."""

    fields: dict[str, Any]
    secret: str | None


def mechanism_family(mechanism: str | None) -> str | None:
    """PLAIN, SCRAM, OAUTHBEARER, GSSAPI or None (another or unknown mechanism); case-insensitive."""
    if mechanism is None:
        return None
    m = mechanism.upper()
    if m in (PLAIN, OAUTHBEARER, GSSAPI):
        return m
    if m.startswith("SCRAM-"):
        return SCRAM
    return None


class _NotThis(ValueError):
    """The bytes are not a message of the mechanism tried (the text says why)."""


def _text(b: bytes, what: str, problems: list[str]) -> str:
    """UTF-8 text; bytes that are not are shown escaped and the violation named in ``problems``."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        problems.append(f"{what} is not valid UTF-8")
        return b.decode("utf-8", "backslashreplace")


# ------------------------------------------------------------------------------------------ PLAIN
def _plain(data: bytes) -> SaslMessage:
    parts = data.split(b"\0")
    if len(parts) != 3:
        raise _NotThis(f"a PLAIN message has 3 parts separated by NUL, this one has {len(parts)}")
    problems: list[str] = []
    authzid, user, password = parts
    fields: dict[str, Any] = {
        "Message": "plain",
        "AuthorizationId": _text(authzid, "the authorization id", problems),
        "User": _text(user, "the user", problems),
        "Password": Secret(SASL_PASSWORD, password.decode("utf-8", "backslashreplace"), len(password)),
    }
    if not user:
        problems.append("the user (authcid) is empty")
    if problems:
        fields["Violations"] = problems
    return SaslMessage(fields, SASL_PASSWORD)


# ------------------------------------------------------------------------------------------ SCRAM
def _unescape_saslname(s: str) -> str:
    return s.replace("=2C", ",").replace("=3D", "=")


def _gs2(text: str) -> tuple[dict[str, Any], str]:
    """The GS2 header (RFC 5801: cbind-flag "," [a=authzid] ",") and the rest of the message."""
    first, sep, rest = text.partition(",")
    authz, sep2, rest = rest.partition(",")
    if not sep or not sep2:
        raise _NotThis("no GS2 header (cbind-flag , [a=authzid] ,)")
    if first in ("n", "y"):
        flag, cb_name = first, None
    elif first.startswith("p="):
        flag, cb_name = "p", first[2:]
    else:
        raise _NotThis(f"GS2 channel binding flag {first[:16]!r} is not n, y or p=name")
    if authz and not authz.startswith("a="):
        raise _NotThis(f"GS2 authorization id {authz[:16]!r} does not start with a=")
    out: dict[str, Any] = {"Gs2Header": f"{first},{authz},", "ChannelBindingFlag": flag,
                           "ChannelBindingName": cb_name,
                           "AuthorizationId": _unescape_saslname(authz[2:]) if authz else None}
    return out, rest


def _attrs(text: str) -> list[tuple[str, str]]:
    """``k=v,k=v`` attributes (SCRAM values never hold a comma: saslnames escape it as =2C)."""
    out = []
    for part in text.split(","):
        k, sep, v = part.partition("=")
        if not sep or not k:
            raise _NotThis(f"attribute {part[:24]!r} is not key=value")
        out.append((k, v))
    return out


def _b64len(v: str) -> int:
    return len(v.encode())


def _scram(data: bytes, side: Side) -> SaslMessage:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _NotThis("a SCRAM message is UTF-8 text") from None
    fields: dict[str, Any]
    extensions: dict[str, str] = {}
    if side == "client" and text.startswith("c="):  # client-final
        attrs = _attrs(text)
        keys = [k for k, _ in attrs]
        if keys[:2] != ["c", "r"] or keys[-1] != "p":
            raise _NotThis("a SCRAM client-final message is c=...,r=...,[ext,]p=...")
        c, nonce, proof = attrs[0][1], attrs[1][1], attrs[-1][1]
        extensions = dict(attrs[2:-1])
        fields = {"Message": "client-final", "ChannelBinding": c}
        try:
            cb = base64.b64decode(c, validate=True)
            head, _ = _gs2(cb.decode("utf-8", "strict"))
            fields["Gs2Header"] = head["Gs2Header"]
            cb_data = cb[len(head["Gs2Header"].encode()):]
            if cb_data:
                fields["ChannelBindingData"] = cb_data.hex()
        except (binascii.Error, UnicodeDecodeError, _NotThis):
            fields["Violations"] = ["c= is not base64 of a GS2 header"]
        fields["Nonce"] = nonce
        fields["Proof"] = Secret(SCRAM_CLIENT_PROOF, proof, _b64len(proof))
        if extensions:
            fields["Extensions"] = extensions
        return SaslMessage(fields, SCRAM_CLIENT_PROOF)
    if side == "client":  # client-first
        head, rest = _gs2(text)
        attrs = _attrs(rest)
        i = 0
        reserved = None
        if attrs and attrs[0][0] == "m":
            reserved = attrs[0][1]
            i = 1
        if [k for k, _ in attrs[i:i + 2]] != ["n", "r"]:
            raise _NotThis("a SCRAM client-first message is gs2-header n=user,r=nonce[,ext]")
        fields = {"Message": "client-first", **head, "User": _unescape_saslname(attrs[i][1]),
                  "Nonce": attrs[i + 1][1]}
        if reserved is not None:
            fields["ReservedMext"] = reserved
        extensions = dict(attrs[i + 2:])
        if extensions:
            fields["Extensions"] = extensions
        return SaslMessage(fields, None)
    attrs = _attrs(text)
    keys = [k for k, _ in attrs]
    if keys and keys[0] in ("v", "e"):  # server-final
        k, v = attrs[0]
        extensions = dict(attrs[1:])
        if k == "e":
            fields = {"Message": "server-final", "Error": v}
            secret = None
        else:
            fields = {"Message": "server-final", "ServerSignature": Secret(SCRAM_SERVER_SIGNATURE, v, _b64len(v))}
            secret = SCRAM_SERVER_SIGNATURE
        if extensions:
            fields["Extensions"] = extensions
        return SaslMessage(fields, secret)
    i = 1 if keys[:1] == ["m"] else 0
    if keys[i:i + 3] != ["r", "s", "i"]:
        raise _NotThis("a SCRAM server message is r=...,s=...,i=... (server-first) or v=... / e=... (server-final)")
    (_, nonce), (_, salt), (_, iters) = attrs[i:i + 3]
    fields = {"Message": "server-first", "Nonce": nonce, "Salt": salt}
    try:
        fields["SaltBytes"] = len(base64.b64decode(salt, validate=True))
    except binascii.Error:
        fields["Violations"] = ["s= is not base64"]
    fields["Iterations"] = int(iters) if iters.isdigit() else iters
    if not iters.isdigit():
        fields.setdefault("Violations", []).append("i= is not a number")
    extensions = dict(attrs[i + 3:])
    if extensions:
        fields["Extensions"] = extensions
    return SaslMessage(fields, None)


# ------------------------------------------------------------------------------------ OAUTHBEARER
def _jwt_claims(token: str) -> dict[str, Any] | None:
    """The shown claims of a JWT (``header.payload.signature``, base64url), or None if it is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(payload))
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(claims, dict):
        return None
    out = {k: claims[k] for k in SHOWN_CLAIMS if k in claims}
    if isinstance(header, dict) and isinstance(header.get("alg"), str):
        out["alg"] = header["alg"]
    return out


def _oauth_client(data: bytes) -> SaslMessage:
    if data == b"\x01":
        return SaslMessage({"Message": "client-error-ack"}, None)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _NotThis("an OAUTHBEARER message is UTF-8 text") from None
    head, rest = _gs2(text)
    if not rest.startswith("\x01") or not rest.endswith("\x01\x01"):
        raise _NotThis("an OAUTHBEARER client response is gs2-header \\x01 key=value \\x01 ... \\x01\\x01")
    fields: dict[str, Any] = {"Message": "client-initial", **head}
    extensions: dict[str, str] = {}
    secret = None
    for kv in rest[1:-2].split("\x01"):
        k, sep, v = kv.partition("=")
        if not sep:
            raise _NotThis(f"OAUTHBEARER key/value {kv[:24]!r} has no =")
        if k == "auth":
            scheme, _, token = v.partition(" ")
            fields["Scheme"] = scheme
            fields["Token"] = Secret(OAUTH_BEARER_TOKEN, token, len(token.encode()))
            claims = _jwt_claims(token)
            if claims is not None:
                fields["TokenClaims"] = claims
            secret = OAUTH_BEARER_TOKEN
        else:
            extensions[k] = v
    if secret is None:
        fields["Violations"] = ["no auth= key/value"]
    if extensions:
        fields["Extensions"] = extensions
    return SaslMessage(fields, secret)


def _oauth_server(data: bytes) -> SaslMessage:
    try:
        err = json.loads(data)
    except ValueError:
        raise _NotThis("an OAUTHBEARER server message is an error as JSON") from None
    if not isinstance(err, dict):
        raise _NotThis("an OAUTHBEARER server error is a JSON object")
    return SaslMessage({"Message": "server-error", "Error": err}, None)


# ----------------------------------------------------------------------------------------- decode
def _opaque(data: bytes, note: str | None = None) -> SaslMessage:
    fields: dict[str, Any] = {"Message": "token", "Token": Secret(SASL_TOKEN, data.hex(), len(data))}
    if note:
        fields["Error"] = note
    return SaslMessage(fields, SASL_TOKEN)


def _recognise(data: bytes, side: Side) -> str | None:
    """The mechanism family these bytes look like (no handshake known), or None."""
    if side == "client":
        if data == b"\x01":
            return OAUTHBEARER
        if data.count(b"\0") == 2:
            return PLAIN
        if data.startswith(b"c="):
            return SCRAM
        if data[:2] in (b"n,", b"y,", b"p="):
            rest = data.split(b",", 2)
            if len(rest) == 3:
                return OAUTHBEARER if rest[2].startswith(b"\x01") else SCRAM
        return None
    if data.startswith((b"r=", b"v=", b"e=", b"m=")):
        return SCRAM
    if data.startswith(b"{"):
        return OAUTHBEARER
    return None


def decode_token(data: bytes, mechanism: str | None, side: Side) -> SaslMessage:
    """Decode one SASL message (see the module doc). Never raises on bad bytes: a message that does
    not parse as its mechanism is an opaque Token with ``Error`` saying why."""
    source = "handshake"
    family = mechanism_family(mechanism)
    name: str | None = mechanism
    if mechanism is None:
        family = _recognise(data, side) if data else None
        name, source = family, "bytes"
    head: dict[str, Any] = {"Mechanism": name, "MechanismSource": source if name is not None else None}
    if not data:
        msg = SaslMessage({"Message": "empty"}, None)
    else:
        try:
            if family == PLAIN:
                if side == "server":
                    raise _NotThis("a PLAIN server sends no data")
                msg = _plain(data)
            elif family == SCRAM:
                msg = _scram(data, side)
            elif family == OAUTHBEARER:
                msg = _oauth_client(data) if side == "client" else _oauth_server(data)
            else:
                msg = _opaque(data)
        except _NotThis as e:
            msg = _opaque(data, f"not a {name or 'known'} {side} message: {e}")
    head.update(msg.fields)
    msg.fields = head
    return msg


def principal(fields: dict[str, Any]) -> str | None:
    """The principal a client message names: its authorization id when given, else the user (PLAIN,
    SCRAM) or the token's ``sub`` claim (OAUTHBEARER); None when it names none."""
    authz = fields.get("AuthorizationId")
    if authz:
        return str(authz)
    user = fields.get("User")
    if user:
        return str(user)
    claims = fields.get("TokenClaims")
    if isinstance(claims, dict) and isinstance(claims.get("sub"), str):
        return str(claims["sub"])
    return None
