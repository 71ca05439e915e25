#!/usr/bin/env python3
"""A SASL gateway for recording: it authenticates Kafka clients itself and relays the rest to tansu.

    python scripts/record/sasl_gateway.py --listen 127.0.0.1:9094 --upstream 127.0.0.1:29094 \\
        --plain-user alice=PASSWORD [--session-lifetime-ms 2000] --report gateway.json

tansu 0.6.0 cannot authenticate anyone (its memory storage keeps no SCRAM credentials, and it has
no PLAIN), so this gateway stands in front of it and plays the broker's SASL part, as a Kafka
broker's SASL listener does:

* **SaslHandshake v0 and v1** (api key 17) are answered by the gateway: error 0 for an enabled
  mechanism, UNSUPPORTED_SASL_MECHANISM (33) and the enabled list otherwise.  After a **v0**
  handshake the connection switches to KIP-43's legacy exchange: the client sends raw SASL tokens
  with a 4-byte length prefix (not Kafka frames) and the gateway answers with raw tokens the same
  way, until the mechanism completes; then Kafka frames resume.  A legacy failure closes the
  connection, as Kafka does.
* **SaslAuthenticate v0-v2** (api key 36) are answered by the gateway.  With v1+ the response
  carries ``SessionLifetimeMs`` (``--session-lifetime-ms``, 0 = none), which makes KIP-368 clients
  re-authenticate on the live connection; re-authentication (a new handshake + authenticate after
  the first) is answered the same way and reported.
* Mechanisms: **PLAIN** (users from ``--plain-user NAME=PASSWORD``, as in a broker's JAAS file),
  **SCRAM-SHA-256 and SCRAM-SHA-512** (RFC 5802/7677 server side from ``scramp``, a maintained
  implementation; users are learnt from the **AlterUserScramCredentials** requests (api key 51)
  that pass through the gateway, as a broker would: name, mechanism, iterations, salt and salted
  password give SCRAM's StoredKey and ServerKey), and **OAUTHBEARER** (any unsecured JWS is
  accepted; the principal is its ``sub`` claim).
* Failed logins get SASL_AUTHENTICATION_FAILED (58) with Kafka's wording, then the gateway closes
  the connection, as Kafka does.
* Every other frame is relayed to tansu unchanged, both ways, over **one** upstream connection per
  client connection.  tansu already advertises SaslHandshake 0-1, SaslAuthenticate 0-2 and
  AlterUserScramCredentials 0 in its ApiVersions answer, so that answer is relayed unchanged too.
  Responses go back to the client in request order: a gateway answer waits behind tansu's answers
  to earlier requests on the connection.
* Unlike a Kafka SASL listener, a connection that never starts SASL is relayed too
  (``--no-anonymous`` turns that off): ``tansu user create`` cannot authenticate, and it is how
  SCRAM users get registered.

``--report`` (JSON, rewritten after every connection closes) lists per connection the client and
upstream ports, every frame or raw token in each direction **in wire order with who produced it**
(``client``, ``gateway`` or ``tansu``), and each authentication (mechanism, versions, principal,
outcome, re-authentication, session lifetime, and the secrets that crossed the wire: passwords,
SCRAM proofs and server signatures, bearer tokens, AlterUserScramCredentials salts and salted
passwords).  The recording script turns this into the fixture manifest.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import struct
import sys
import time

from scramp import ScramException, ScramMechanism

SASL_HANDSHAKE, SASL_AUTHENTICATE, PRODUCE, ALTER_USER_SCRAM = 17, 36, 0, 51
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
SCRAM_BY_CODE = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
HASH = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


# --------------------------------------------------------------------------- wire helpers
class Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def bytes32(self) -> bytes:
        return self.take(self.i32())

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def compact_string(self) -> str | None:
        b = self.compact_bytes()
        return None if b is None else b.decode()

    def tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def compact_string(s: str | None) -> bytes:
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_bytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request_body_offset(payload: bytes, flexible_header: bool) -> int:
    """Offset of the request body in PAYLOAD (after api key, version, correlation id, client id)."""
    r = Reader(payload, 8)
    r.string()
    if flexible_header:
        r.tagged()
    return r.pos


# --------------------------------------------------------------------------- mechanisms
class AuthFailed(Exception):
    pass


def scram_keys(mechanism: str, salted_password: bytes) -> tuple[bytes, bytes]:
    h = HASH[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    stored_key = h(client_key).digest()
    server_key = hmac.new(salted_password, b"Server Key", h).digest()
    return stored_key, server_key


class Gateway:
    def __init__(self, args) -> None:
        self.args = args
        self.plain_users: dict[str, str] = dict(u.split("=", 1) for u in args.plain_user)
        # (mechanism, user) -> (salt, stored_key, server_key, iterations)
        self.scram_users: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]] = {}
        self.conns: list[dict] = []
        self.next_id = 1

    # -- report ----------------------------------------------------------
    def write_report(self) -> None:
        if not self.args.report:
            return
        tmp = self.args.report + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"listen": f"{self.args.listen[0]}:{self.args.listen[1]}",
                       "upstream": f"{self.args.upstream[0]}:{self.args.upstream[1]}",
                       "mechanisms": MECHANISMS, "session_lifetime_ms": self.args.session_lifetime_ms,
                       "scram_users": sorted(f"{m}:{u}" for m, u in self.scram_users),
                       "connections": self.conns}, f, indent=1)
        os.replace(tmp, self.args.report)

    # -- connection ------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        conn = {"id": self.next_id, "client": f"{peer[0]}:{peer[1]}", "client_port": peer[1],
                "accepted": time.time(), "upstream_port": None, "events": [], "auth": []}
        self.next_id += 1
        self.conns.append(conn)
        self.write_report()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.args.upstream)
        except OSError as exc:
            conn["error"] = f"upstream connect failed: {exc}"
            writer.close()
            self.write_report()
            return
        conn["upstream_port"] = up_writer.get_extra_info("sockname")[1]
        c = _Conn(self, conn, reader, writer, up_reader, up_writer)
        await c.run()
        conn["closed"] = time.time()
        self.write_report()

    async def run(self) -> None:
        server = await asyncio.start_server(self.handle, *self.args.listen)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"sasl-gateway listening on {self.args.listen[0]}:{self.args.listen[1]}", file=sys.stderr, flush=True)
        async with server:
            await stop.wait()
        self.write_report()


class _Conn:
    """One client connection and its one upstream connection."""

    def __init__(self, gw: Gateway, rep: dict, reader, writer, up_reader, up_writer) -> None:
        self.gw, self.rep = gw, rep
        self.reader, self.writer = reader, writer
        self.up_reader, self.up_writer = up_reader, up_writer
        self.slots: asyncio.Queue = asyncio.Queue()  # futures resolving to (bytes, producer, label)
        self.pending: dict[int, tuple[asyncio.Future, int, int]] = {}  # corr -> (slot, api key, version)
        self.legacy = False  # raw SASL tokens follow a SaslHandshake v0
        self.mechanism: str | None = None  # from the last handshake
        self.handshake_version: int | None = None
        self.scram = None  # scramp server in progress
        self.scram_user: str | None = None
        self.auth: dict | None = None  # the authentication in progress
        self.authenticated: str | None = None  # principal
        self.closing = False

    def event(self, direction: str, by: str, kind: str, size: int, **kw) -> None:
        self.rep["events"].append(dict(dir=direction, by=by, kind=kind, bytes=size, t=round(time.time(), 6), **kw))

    async def run(self) -> None:
        writer_task = asyncio.create_task(self._write_loop())
        up_task = asyncio.create_task(self._upstream_loop())
        try:
            await self._client_loop()
        finally:
            await self.slots.put(None)
            await writer_task
            self.up_writer.close()
            try:
                await asyncio.wait_for(up_task, 5)
            except asyncio.TimeoutError:
                up_task.cancel()
            self.writer.close()
            for w in (self.writer, self.up_writer):
                try:
                    await w.wait_closed()
                except (ConnectionError, OSError):
                    pass

    async def _read_frame(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readexactly(4)
            (size,) = struct.unpack(">i", head)
            if size < 0:
                raise ValueError(f"negative frame size {size}")
            return await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None

    # -- client side -------------------------------------------------------
    async def _client_loop(self) -> None:
        while not self.closing:
            payload = await self._read_frame(self.reader)
            if payload is None:
                return
            if self.legacy:
                self.event("c2s", "client", "sasl-token", len(payload) + 4, mechanism=self.mechanism)
                self._legacy_token(payload)
                continue
            if len(payload) < 8:
                self.rep.setdefault("errors", []).append(f"request of {len(payload)} bytes")
                return
            api_key, version, corr = struct.unpack_from(">hhi", payload)
            self.event("c2s", "client", "request", len(payload) + 4, api_key=api_key, api_version=version,
                       correlation_id=corr)
            if api_key == SASL_HANDSHAKE:
                self._handshake(payload, version, corr)
            elif api_key == SASL_AUTHENTICATE:
                self._authenticate(payload, version, corr)
            elif not self.authenticated and not self.gw.args.anonymous and api_key != 18:
                self.rep.setdefault("errors", []).append(f"api key {api_key} before authentication: closed")
                return
            else:
                if api_key == ALTER_USER_SCRAM:
                    self._learn_scram_users(payload, version)
                await self._relay(payload, api_key, corr)

    async def _relay(self, payload: bytes, api_key: int, corr: int) -> None:
        fut = asyncio.get_running_loop().create_future()
        if not (api_key == PRODUCE and _produce_acks(payload) == 0):
            self.pending[corr] = (fut, api_key, struct.unpack_from(">h", payload, 2)[0])
            await self.slots.put(fut)
        self.up_writer.write(frame(payload))
        await self.up_writer.drain()

    def _answer(self, payload: bytes, label: dict) -> None:
        fut = asyncio.get_running_loop().create_future()
        fut.set_result((frame(payload), "gateway", label))
        self.slots.put_nowait(fut)

    def _close_after_answers(self) -> None:
        self.closing = True

    # -- upstream side -----------------------------------------------------
    async def _upstream_loop(self) -> None:
        while True:
            payload = await self._read_frame(self.up_reader)
            if payload is None:
                break
            (corr,) = struct.unpack_from(">i", payload)
            entry = self.pending.pop(corr, None)
            item = (frame(payload), "tansu", {"kind": "response", "correlation_id": corr})
            if entry is None:  # e.g. tansu answering an acks=0 Produce: after what is queued
                fut = asyncio.get_running_loop().create_future()
                self.slots.put_nowait(fut)
                item[2]["unsolicited"] = True
            else:
                fut = entry[0]
                item[2].update(api_key=entry[1], api_version=entry[2])
            fut.set_result(item)
        for fut, _, _ in self.pending.values():  # upstream closed: nothing more will come
            if not fut.done():
                fut.set_result(None)
        self.pending.clear()

    async def _write_loop(self) -> None:
        while True:
            fut = await self.slots.get()
            if fut is None:
                return
            item = await fut
            if item is None:
                continue
            data, by, label = item
            label = dict(label)
            kind = label.pop("kind")
            self.event("s2c", by, kind, len(data), **label)
            try:
                self.writer.write(data)
                await self.writer.drain()
            except (ConnectionError, OSError):
                return

    # -- SASL --------------------------------------------------------------
    def _handshake(self, payload: bytes, version: int, corr: int) -> None:
        r = Reader(payload, request_body_offset(payload, False))
        mechanism = r.string() or ""
        ok = mechanism in MECHANISMS
        body = struct.pack(">hi", 0 if ok else UNSUPPORTED_SASL_MECHANISM, len(MECHANISMS))
        body += b"".join(string(m) for m in MECHANISMS)
        self._answer(struct.pack(">i", corr) + body, {"kind": "response", "correlation_id": corr,
                                                       "api_key": SASL_HANDSHAKE, "api_version": version})
        reauth = self.authenticated is not None
        self.auth = {"mechanism": mechanism, "handshake_version": version, "authenticate_versions": [],
                     "legacy": version == 0, "reauthentication": reauth, "principal": None,
                     "ok": None, "secrets": [], "t": round(time.time(), 6)}
        self.rep["auth"].append(self.auth)
        if not ok:
            self.auth.update(ok=False, error=f"UNSUPPORTED_SASL_MECHANISM: {mechanism}")
            return
        self.mechanism, self.handshake_version, self.scram = mechanism, version, None
        if version == 0:
            self.legacy = True

    def _authenticate(self, payload: bytes, version: int, corr: int) -> None:
        flexible = version >= 2
        r = Reader(payload, request_body_offset(payload, flexible))
        token = (r.compact_bytes() or b"") if flexible else r.bytes32()
        if self.auth is None or self.mechanism is None or self.legacy:
            self._auth_response(version, corr, ILLEGAL_SASL_STATE,
                                "Unexpected SaslAuthenticate request with no preceding SaslHandshake", b"", 0)
            self._close_after_answers()
            return
        self.auth["authenticate_versions"].append(version)
        try:
            reply, done = self._step(token)
        except AuthFailed as exc:
            self.auth.update(ok=False, error=str(exc))
            self._auth_response(version, corr, SASL_AUTHENTICATION_FAILED, str(exc), b"", 0)
            self._close_after_answers()
            return
        lifetime = 0
        if done:
            lifetime = self.gw.args.session_lifetime_ms if version >= 1 else 0
            self.auth["session_lifetime_ms"] = lifetime
        self._auth_response(version, corr, 0, None, reply, lifetime)

    def _auth_response(self, version: int, corr: int, error: int, message: str | None, auth_bytes: bytes,
                       lifetime: int) -> None:
        if version >= 2:
            body = (struct.pack(">h", error) + compact_string(message) + compact_bytes(auth_bytes)
                    + struct.pack(">q", lifetime) + uvarint(0))
            head = struct.pack(">i", corr) + uvarint(0)
        else:
            body = struct.pack(">h", error) + string(message) + struct.pack(">i", len(auth_bytes)) + auth_bytes
            if version >= 1:
                body += struct.pack(">q", lifetime)
            head = struct.pack(">i", corr)
        self._answer(head + body, {"kind": "response", "correlation_id": corr, "api_key": SASL_AUTHENTICATE,
                                   "api_version": version, "error_code": error})

    def _legacy_token(self, token: bytes) -> None:
        try:
            reply, done = self._step(token)
        except AuthFailed as exc:
            self.auth.update(ok=False, error=str(exc))
            self._close_after_answers()  # legacy: no error message, the connection just closes
            return
        if reply is not None:
            fut = asyncio.get_running_loop().create_future()
            fut.set_result((frame(reply), "gateway", {"kind": "sasl-token", "mechanism": self.mechanism}))
            self.slots.put_nowait(fut)
        if done:
            self.legacy = False

    def _step(self, token: bytes) -> tuple[bytes, bool]:
        """One SASL step: the server's reply and whether authentication completed."""
        mech = self.mechanism
        if mech == "PLAIN":
            parts = token.split(b"\x00")
            if len(parts) != 3:
                raise AuthFailed("Invalid SASL/PLAIN response: expected 3 tokens")
            authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
            self.auth["secrets"].append({"kind": "sasl-password", "user": user, "text": password})
            if authzid and authzid != user:
                raise AuthFailed("Authentication failed: Client requested an authorization id that is "
                                 "different from username")
            if self.gw.plain_users.get(user) != password:
                raise AuthFailed("Authentication failed: Invalid username or password")
            self._done(user)
            return b"", True
        if mech in HASH:
            text = token.decode("utf-8", "replace")
            if self.scram is None:
                def lookup(user: str):
                    self.scram_user = user
                    try:
                        return self.gw.scram_users[(mech, user)]
                    except KeyError:
                        raise ScramException("Authentication failed: Invalid user credentials") from None

                self.scram = ScramMechanism(mech).make_server(lookup)
                try:
                    self.scram.set_client_first(text)
                except ScramException as exc:
                    raise AuthFailed(f"Authentication failed during authentication due to invalid credentials "
                                     f"with SASL mechanism {mech}: {exc}") from None
                self.auth["principal_claimed"] = self.scram_user
                return self.scram.get_server_first().encode(), False
            attrs = dict(a.split("=", 1) for a in text.split(",") if "=" in a)
            if "p" in attrs:
                self.auth["secrets"].append({"kind": "scram-client-proof", "user": self.scram_user,
                                             "text": attrs["p"], "hex": base64.b64decode(attrs["p"]).hex()})
            try:
                self.scram.set_client_final(text)
            except ScramException:
                raise AuthFailed(f"Authentication failed during authentication due to invalid credentials "
                                 f"with SASL mechanism {mech}") from None
            final = self.scram.get_server_final()
            sig = final.split("v=", 1)[1]
            self.auth["secrets"].append({"kind": "scram-server-signature", "user": self.scram_user,
                                         "text": sig, "hex": base64.b64decode(sig).hex()})
            self._done(self.scram_user)
            self.scram = None
            return final.encode(), True
        if mech == "OAUTHBEARER":
            text = token.decode("utf-8", "replace")
            fields = dict(kv.split("=", 1) for kv in text.split("\x01")[1:] if "=" in kv)
            bearer = fields.get("auth", "")
            if not bearer.startswith("Bearer "):
                raise AuthFailed("Authentication failed: no bearer token")
            jws = bearer[len("Bearer "):]
            self.auth["secrets"].append({"kind": "oauth-bearer-token", "text": jws})
            try:
                claims = json.loads(base64.urlsafe_b64decode(jws.split(".")[1] + "=="))
                principal = claims["sub"]
            except (ValueError, KeyError, IndexError) as exc:
                raise AuthFailed(f"Authentication failed: unreadable token ({exc})") from None
            self._done(principal)
            return b"", True
        raise AuthFailed(f"Unsupported SASL mechanism {mech}")

    def _done(self, principal: str) -> None:
        self.auth.update(principal=principal, ok=True)
        self.authenticated = principal

    def _learn_scram_users(self, payload: bytes, version: int) -> None:
        try:
            r = Reader(payload, request_body_offset(payload, True))
            learnt = []
            for _ in range(r.uvarint() - 1):  # deletions
                name, mech = r.compact_string(), r.i8()
                r.tagged()
                self.gw.scram_users.pop((SCRAM_BY_CODE.get(mech, "?"), name), None)
                learnt.append({"deleted": name, "mechanism": SCRAM_BY_CODE.get(mech, mech)})
            for _ in range(r.uvarint() - 1):  # upsertions
                name, mech, iterations = r.compact_string(), r.i8(), r.i32()
                salt, salted = r.compact_bytes() or b"", r.compact_bytes() or b""
                r.tagged()
                mname = SCRAM_BY_CODE.get(mech)
                if mname:
                    stored, server = scram_keys(mname, salted)
                    self.gw.scram_users[(mname, name)] = (salt, stored, server, iterations)
                learnt.append({"upserted": name, "mechanism": mname or mech, "iterations": iterations,
                               "salt": salt.hex(), "salted_password": salted.hex()})
            self.rep.setdefault("scram_credentials", []).extend(learnt)
        except ValueError as exc:
            self.rep.setdefault("errors", []).append(f"AlterUserScramCredentials v{version} unreadable: {exc}")


def _produce_acks(payload: bytes) -> int | None:
    """acks of a Produce request payload (no size prefix), or None."""
    api_version = struct.unpack_from(">h", payload, 2)[0]
    try:
        r = Reader(payload, request_body_offset(payload, api_version >= 9))
        if api_version >= 9:
            r.compact_string()
        elif api_version >= 3:
            r.string()
        return r.i16()
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=_hostport, required=True)
    ap.add_argument("--upstream", type=_hostport, required=True)
    ap.add_argument("--plain-user", action="append", default=[], metavar="NAME=PASSWORD")
    ap.add_argument("--session-lifetime-ms", type=int, default=0,
                    help="SessionLifetimeMs in SaslAuthenticate v1+ answers (KIP-368); 0 = none")
    ap.add_argument("--no-anonymous", dest="anonymous", action="store_false",
                    help="close connections that send other requests before authenticating")
    ap.add_argument("--report", help="JSON report of the connections")
    args = ap.parse_args(argv)
    asyncio.run(Gateway(args).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
