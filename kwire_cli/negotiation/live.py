"""Ask live brokers what they speak, as ``kafka-broker-api-versions.sh`` does.

``ask_brokers(bootstraps, options)``: ApiVersions to a bootstrap broker (at the highest version
kwire knows; on UNSUPPORTED_VERSION again at the version the broker's KIP-511 answer lists),
Metadata for the brokers of the cluster, then ApiVersions to each of them: one ``BrokerAnswer``
per broker (``form`` "live"), a broker that cannot be asked as an answer with an ``ERROR: ...``
(as the tool prints it), so the table still shows the others.

``BrokerConnection`` is the small client: one TCP connection speaking Kafka frames (a 4-byte size,
then the message), messages encoded and decoded by kwire's codec. With ``ConnectOptions.tls`` (an
``ssl.SSLContext``) ``_connect`` wraps the socket in TLS (the certificate checked against the
broker's host name unless the context says not to); with ``sasl`` (mechanism, user, password)
``open`` runs the SASL exchange (``negotiation.sasl``: PLAIN, SCRAM-SHA-256/512) before the first
request. Every failure is one
``NegotiationError`` line naming the broker: unknown host, connection refused, no connection or
no answer within the timeout, the broker closed the connection, the answer is not Kafka (TLS,
HTTP, a size no Kafka frame has, another correlation id).
"""
from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kwire_cli.errors import KwireError, NegotiationError
from kwire_cli.negotiation.model import API_VERSIONS_KEY, BrokerAnswer

METADATA_KEY = 3
#: the largest answer read: ApiVersions and a Metadata without topics are a few KiB
MAX_ANSWER = 64 << 20
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class ConnectOptions:
    """How to reach brokers: the timeout, TLS (a client context) and SASL (mechanism, user, password)."""

    timeout: float = 10.0
    client_id: str = "kwire"
    tls: ssl.SSLContext | None = None
    sasl: tuple[str, str, str] | None = None


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, port); ValueError naming what is wrong."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class BrokerConnection:
    """One connection to one broker: requests out, their answers in, in order."""

    def __init__(self, address: str, options: ConnectOptions):
        self.address = address
        self.host, self.port = parse_address(address)
        self.options = options
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def __enter__(self) -> BrokerConnection:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        self.sock = self._connect()
        if self.options.sasl is not None:
            from kwire_cli.negotiation.sasl import authenticate
            authenticate(self, *self.options.sasl)

    def _connect(self) -> socket.socket:
        t = self.options.timeout
        try:
            sock = socket.create_connection((self.host, self.port), timeout=t)
        except socket.gaierror:
            raise self.error(f"unknown host {self.host}") from None
        except ConnectionRefusedError:
            raise self.error("connection refused") from None
        except TimeoutError:
            raise self.error(f"no connection within {t:g} s") from None
        except OSError as e:
            raise self.error(f"cannot connect: {e.strerror or e}") from None
        sock.settimeout(t)
        if self.options.tls is not None:
            try:
                sock = self.options.tls.wrap_socket(sock, server_hostname=self.host)
            except ssl.SSLCertVerificationError as e:
                sock.close()
                raise self.error(f"TLS: the broker's certificate is not trusted: {e.verify_message} "
                                 "(--ca FILE names the CA that signed it)") from None
            except (ssl.SSLError, OSError) as e:
                sock.close()
                raise self.error(f"TLS handshake failed: {getattr(e, 'reason', None) or e} (is this a TLS "
                                 "listener?)") from None
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def error(self, what: str) -> NegotiationError:
        return NegotiationError(f"{self.address}: {what}")

    def exchange(self, api_key: int, version: int, body: dict[str, Any]) -> bytes:
        """Send one request; the answer's bytes after the size prefix (its header included)."""
        from kwire_cli.codec import encode_request

        assert self.sock is not None, "open() first"
        self.correlation_id += 1
        frame = encode_request(api_key, version, {"CorrelationId": self.correlation_id,
                                                  "ClientId": self.options.client_id}, body)
        try:
            self.sock.sendall(frame)
        except OSError as e:
            raise self.error(f"the broker closed the connection ({e.strerror or e})") from None
        head = self._read(4, "")
        size = _SIZE.unpack(head)[0]
        if not 4 <= size <= MAX_ANSWER:
            raise self.error(f"the answer is not Kafka: {_what_it_is(head + self._peek())}")
        data = self._read(size, f" after {size} bytes were announced")
        cid = _SIZE.unpack_from(data, 0)[0]
        if cid != self.correlation_id:
            raise self.error(f"the answer is not Kafka: its correlation id {cid} is not the request's "
                             f"{self.correlation_id}")
        return data

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request and decode its answer at the same version (a codec ``Message``)."""
        from kwire_cli.codec import decode_response

        data = self.exchange(api_key, version, body)
        try:
            return decode_response(data, api_key, version, size_prefixed=False)
        except KwireError as e:
            raise self.error(f"the answer does not decode: {e}") from None

    def _read(self, n: int, context: str) -> bytes:
        assert self.sock is not None
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except TimeoutError:
                raise self.error(f"no answer within {self.options.timeout:g} s") from None
            except OSError as e:
                raise self.error(f"the broker closed the connection ({e.strerror or e})") from None
            if not chunk:
                got = f" ({len(buf)} of {n} bytes{context})" if buf or context else " before answering"
                raise self.error(f"the broker closed the connection{got}")
            buf += chunk
        return bytes(buf)

    def _peek(self) -> bytes:
        """A few more bytes of an answer that is not Kafka, to say what it is (no waiting)."""
        assert self.sock is not None
        try:
            self.sock.settimeout(0.2)
            return self.sock.recv(60)
        except OSError:
            return b""


def _what_it_is(head: bytes) -> str:
    if len(head) >= 3 and head[0] in (0x15, 0x16) and head[1] == 3 and head[2] <= 4:
        return "a TLS record: this listener speaks TLS (give --tls)"
    if head[:5] in (b"HTTP/", b"<!DOC", b"<html"):
        return "an HTTP server answered"
    if head[:4] == b"SSH-":
        return "an SSH server answered"
    size = _SIZE.unpack_from(head, 0)[0]
    text = head[:24].decode("ascii", errors="replace")
    shown = repr(text) if text.isprintable() else head[:16].hex()
    return f"its first 4 bytes give a size of {size}, which no Kafka frame has (it starts {shown})"


def api_versions(conn: BrokerConnection, source: str) -> BrokerAnswer:
    """ApiVersions at the highest version kwire knows; on UNSUPPORTED_VERSION once more at the
    highest version of ApiVersions the broker's answer lists (KIP-511), or v0 when it lists none."""
    from kwire_cli import __version__
    from kwire_cli.codec import decode_response
    from kwire_cli.negotiation.apiversions import answer_from_body, decode_api_versions_bytes
    from kwire_cli.spec import registry
    from kwire_cli.spec.error_codes import UNSUPPORTED_VERSION

    ours = registry().api(API_VERSIONS_KEY).valid_versions
    version = ours.hi
    notes: list[str] = []
    for _ in range(2):
        body = {"ClientSoftwareName": "kwire", "ClientSoftwareVersion": __version__} if version >= 3 else {}
        data = conn.exchange(API_VERSIONS_KEY, version, body)
        try:
            msg = decode_response(data, API_VERSIONS_KEY, version, size_prefixed=False)
        except KwireError:
            msg = None
        if msg is not None and msg.body.get("ErrorCode") != UNSUPPORTED_VERSION:
            ans = answer_from_body(msg.body, address=conn.address, source=source, form="live")
            ans.api_version = version
            ans.notes[:0] = notes + [f"asked live: ApiVersions v{version}"]
            return ans
        try:  # a KIP-511 answer: the v0 layout, whatever the request's version
            answer = decode_api_versions_bytes(data, address=conn.address, source=source, form="live")
        except NegotiationError as e:
            raise conn.error(f"the ApiVersions v{version} answer does not decode ({e})") from None
        if answer.error_code != UNSUPPORTED_VERSION:
            answer.notes.insert(0, f"asked live: ApiVersions v{version}")
            return answer
        listed = answer.ranges.get(API_VERSIONS_KEY)
        retry = min(listed[1], ours.hi) if listed else 0
        if retry >= version:
            break
        notes.append(f"ApiVersions v{version} was answered UNSUPPORTED_VERSION, listing "
                     f"{'v%d-v%d' % listed if listed else 'no ApiVersions version'}: asked again at v{retry}")
        version = retry
    raise conn.error(f"the broker answers UNSUPPORTED_VERSION to ApiVersions v{version} too")


def cluster_brokers(conn: BrokerConnection, answer: BrokerAnswer) -> list[tuple[int, str, str | None]]:
    """(node id, host:port, rack) of every broker the cluster's Metadata lists, asked at the
    highest version both sides speak (v1 or later: v0 would list every topic too)."""
    from kwire_cli.spec import registry

    ours = registry().api(METADATA_KEY).valid_versions
    theirs = answer.ranges.get(METADATA_KEY)
    if theirs is None:
        raise conn.error("the broker does not list Metadata: its cluster's brokers cannot be asked")
    lo, hi = max(ours.lo, theirs[0], 1), min(ours.hi, theirs[1])
    if lo > hi:
        raise conn.error(f"no Metadata version in common (kwire {ours.lo}-{ours.hi}, broker {theirs[0]}-{theirs[1]})")
    body: dict[str, Any] = {"Topics": []}
    if hi >= 4:
        body["AllowAutoTopicCreation"] = False
    msg = conn.request(METADATA_KEY, hi, body)
    out = []
    for b in msg.body.get("Brokers") or []:
        out.append((int(b["NodeId"]), format_address(str(b["Host"]), int(b["Port"])), b.get("Rack")))
    return sorted(out)


def ask_broker(address: str, options: ConnectOptions) -> BrokerAnswer:
    """One broker's ApiVersions answer, or (``error`` set, ``ERROR: ...``) why it cannot be had."""
    try:
        with BrokerConnection(address, options) as conn:
            return api_versions(conn, address)
    except NegotiationError as e:
        failed = BrokerAnswer(address=address, form="live", source=address)
        failed.error = f"ERROR: {str(e).removeprefix(address + ': ')}"
        return failed


def ask_brokers(bootstraps: list[str], options: ConnectOptions) -> list[BrokerAnswer]:
    """The answers of every broker of the clusters behind ``bootstraps`` (see the module)."""
    answers: dict[str, BrokerAnswer] = {}
    first_error: NegotiationError | None = None
    reached = False
    for boot in bootstraps:
        try:
            with BrokerConnection(boot, options) as conn:
                answer = api_versions(conn, boot)
                try:
                    brokers = cluster_brokers(conn, answer)
                except NegotiationError as e:
                    answer.notes.append(f"the cluster's other brokers are not asked: {e}")
                    brokers = []
        except NegotiationError as e:
            first_error = first_error or e
            continue
        reached = True
        if not brokers:
            answers.setdefault(boot, answer)
            continue
        for node, addr, rack in brokers:
            if addr in answers:
                continue
            ans = answer if addr == boot else ask_broker(addr, options)
            ans.node_id, ans.rack = node, rack
            if addr == boot:
                ans.notes.append("the bootstrap broker")
            answers[addr] = ans
    if not reached:
        assert first_error is not None
        raise first_error
    return list(answers.values())
