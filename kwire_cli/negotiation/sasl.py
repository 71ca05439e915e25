"""The client side of SASL for ``kwire negotiate --bootstrap``: PLAIN and SCRAM-SHA-256/512.

``authenticate(conn, options)`` runs a broker's SASL exchange on a fresh connection before its
first request, as a Kafka client does (KIP-152): SaslHandshake v1 naming the mechanism, then
SaslAuthenticate requests carrying the mechanism's tokens, each answer's ErrorCode checked. PLAIN
is one token (RFC 4616); SCRAM (RFC 5802, RFC 7677) is the client-first message, the proof
computed from the salt and iteration count of the server's first message, and the server's
signature checked. Failures are one ``NegotiationError`` naming the broker and Kafka's error.
Nothing here prints a password or a proof.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any, Protocol

from kwire_cli.errors import NegotiationError

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class Connection(Protocol):
    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any: ...

    def error(self, what: str) -> NegotiationError: ...


def authenticate(conn: Connection, mechanism: str, username: str, password: str) -> None:
    """The SASL exchange of ``mechanism`` with ``username``/``password`` on ``conn``."""
    if mechanism not in MECHANISMS:
        raise NegotiationError(f"SASL mechanism {mechanism} is not one kwire speaks ({', '.join(MECHANISMS)})")
    msg = conn.request(SASL_HANDSHAKE, 1, {"Mechanism": mechanism})
    _check(conn, msg.body, f"SaslHandshake ({mechanism})",
           f"; the broker enables {', '.join(msg.body.get('Mechanisms') or []) or 'none'}")
    if mechanism == "PLAIN":
        _step(conn, b"\0" + username.encode() + b"\0" + password.encode())
        return
    scram = ScramClient(mechanism, username, password)
    server_first = _step(conn, scram.first())
    server_final = _step(conn, scram.final(server_first, conn))
    scram.verify(server_final, conn)


def _step(conn: Connection, token: bytes) -> bytes:
    msg = conn.request(SASL_AUTHENTICATE, 1, {"AuthBytes": token})
    _check(conn, msg.body, "SASL authentication")
    data = msg.body.get("AuthBytes") or ""
    return bytes.fromhex(data) if isinstance(data, str) else bytes(data)  # the codec gives bytes as hex


def _check(conn: Connection, body: dict[str, Any], what: str, more: str = "") -> None:
    code = body.get("ErrorCode") or 0
    if code:
        from kwire_cli.spec.error_codes import error_name
        text = body.get("ErrorMessage")
        raise conn.error(f"{what} failed: {error_name(code)} ({code})" + (f": {text}" if text else "") + more)


class ScramClient:
    """One SCRAM exchange (RFC 5802): client-first, client-final with the proof, the server's
    signature checked."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        self.hash = _HASHES[mechanism]
        self.username = username.replace("=", "=3D").replace(",", "=2C")
        self.password = password.encode()
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(24)).decode()
        self.bare = f"n={self.username},r={self.nonce}"
        self.server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes, conn: Connection) -> bytes:
        attrs = _attrs(server_first)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if "e" in attrs:
            raise conn.error(f"SCRAM: the broker refused: {attrs['e']}")
        if not nonce.startswith(self.nonce) or salt is None or not iterations.isdigit():
            raise conn.error("SCRAM: the broker's first message is not SCRAM's (nonce, salt, iterations)")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, base64.b64decode(salt), int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self.hash)
        stored = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self.bare},{server_first.decode(errors='replace')},{without_proof}".encode()
        signature = hmac.digest(stored, auth, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self.server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self.hash), auth, self.hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes, conn: Connection) -> None:
        attrs = _attrs(server_final)
        if "e" in attrs:
            raise conn.error(f"SCRAM: the broker refused: {attrs['e']}")
        got = base64.b64decode(attrs.get("v", ""))
        if not hmac.compare_digest(got, self.server_signature):
            raise conn.error("SCRAM: the broker's signature is wrong (it does not hold this password)")


def _attrs(data: bytes) -> dict[str, str]:
    out = {}
    for part in data.decode(errors="replace").split(","):
        k, sep, v = part.partition("=")
        if sep and len(k) == 1:
            out[k] = v
    return out
