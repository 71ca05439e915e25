#!/usr/bin/env python3
"""A TLS terminator for recording: clients speak TLS to it, it speaks plaintext to the broker.

    python scripts/record/tls_terminator.py --listen 127.0.0.1:9093 --upstream 127.0.0.1:19093 \\
        --cert server.pem --key server.key --tls 1.3 --tls13-ciphersuites TLS_CHACHA20_POLY1305_SHA256 \\
        --keylog server.keylog --report conns.json

This is what a production network in front of a Kafka broker looks like when the broker itself
does not serve TLS (tansu 0.6.0 cannot): a TLS terminator (here Python's ``ssl`` on the system
OpenSSL, through asyncio) accepts each client connection, completes the handshake, then opens
**one** plaintext connection to ``--upstream`` for it and relays the decrypted bytes unchanged in
both directions.  Capturing the listen port gives the TLS side; capturing the upstream port gives
the plaintext twin of every connection, byte for byte (what decrypting the TLS side must give).

* ``--tls 1.2`` / ``--tls 1.3`` pins the protocol version (minimum = maximum).
* ``--ciphers`` is an OpenSSL cipher string for TLS 1.2 (``SSLContext.set_ciphers``).
* ``--tls13-ciphersuites`` pins the TLS 1.3 suites.  Python's ``ssl`` has no API for them
  (``set_ciphers`` covers TLS <= 1.2 only), so the script writes an OpenSSL configuration with
  ``Ciphersuites = ...`` in its ``system_default`` section and re-executes itself with
  ``OPENSSL_CONF`` pointing at it: OpenSSL applies ``system_default`` to every ``SSL_CTX`` it
  creates, including Python's.
* ``--keylog`` writes the server side's NSS key log (``SSLContext.keylog_filename``): the only
  key log there is for clients that cannot write one (librdkafka links OpenSSL statically and has
  no key log option).
* ``--options`` sets extra OpenSSL option bits (``SSL_OP_*``) on the context, e.g. 0x4000 for
  SSL_OP_NO_TICKET.
* ``--report`` is rewritten as JSON after every connection closes: per connection the client's
  address, the upstream connection's local port (the key to its plaintext twin), the TLS version,
  the cipher suite, whether the session was resumed, the byte counts relayed each way, and the
  Kafka frames seen in the plaintext, in order: ``[direction, by, kind, api_key, api_version,
  correlation_id, bytes]`` (a response gets the api key and version of its request).

Runs until SIGTERM or SIGINT.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import ssl
import struct
import sys
import tempfile
import time

_CONF_MARK = "KWIRE_TLS_TERMINATOR_CONF"


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _reexec_with_ciphersuites(suites: str) -> None:
    """Re-run this process with OPENSSL_CONF pinning the TLS 1.3 cipher suites."""
    if os.environ.get(_CONF_MARK):
        return
    fd, path = tempfile.mkstemp(prefix="kwire-tls13-", suffix=".cnf")
    with os.fdopen(fd, "w") as f:
        f.write("openssl_conf = kwire_conf\n[kwire_conf]\nssl_conf = kwire_ssl\n"
                "[kwire_ssl]\nsystem_default = kwire_sys\n"
                f"[kwire_sys]\nCiphersuites = {suites}\n")
    env = dict(os.environ, OPENSSL_CONF=path, **{_CONF_MARK: path})
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


class _Frames:
    """Cuts one direction's plaintext into size-prefixed Kafka frames (for the report only)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.broken = False

    def feed(self, data: bytes) -> list[bytes]:
        if self.broken:
            return []
        self.buf += data
        out = []
        while len(self.buf) >= 4:
            (size,) = struct.unpack_from(">i", self.buf)
            if size < 0 or size > 100 << 20:
                self.broken = True
                return out
            if len(self.buf) < 4 + size:
                break
            out.append(bytes(self.buf[4:4 + size]))
            del self.buf[:4 + size]
        return out


class Terminator:
    def __init__(self, args) -> None:
        self.args = args
        self.conns: list[dict] = []
        self.next_id = 1
        self._asked: dict[int, dict] = {}
        self.ctx = self._context()

    def _context(self) -> ssl.SSLContext:
        a = self.args
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        version = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
        if a.tls:
            ctx.minimum_version = ctx.maximum_version = version[a.tls]
        if a.ciphers:
            ctx.set_ciphers(a.ciphers)
        if a.options:
            ctx.options |= a.options
        if a.keylog:
            ctx.keylog_filename = a.keylog
        return ctx

    def _write_report(self) -> None:
        if not self.args.report:
            return
        tmp = self.args.report + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"listen": f"{self.args.listen[0]}:{self.args.listen[1]}",
                       "upstream": f"{self.args.upstream[0]}:{self.args.upstream[1]}",
                       "openssl": ssl.OPENSSL_VERSION,
                       "tls13_ciphersuites": self.args.tls13_ciphersuites,
                       "connections": self.conns}, f, indent=1)
        os.replace(tmp, self.args.report)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sslobj = writer.get_extra_info("ssl_object")
        peer = writer.get_extra_info("peername")
        conn = {"id": self.next_id, "client": f"{peer[0]}:{peer[1]}", "client_port": peer[1],
                "accepted": time.time(), "tls_version": sslobj.version(), "cipher": sslobj.cipher()[0],
                "session_reused": sslobj.session_reused, "upstream_port": None,
                "bytes": {"client_to_server": 0, "server_to_client": 0},
                "frames": []}
        self._asked[conn["id"]] = {}
        self.next_id += 1
        self.conns.append(conn)
        self._write_report()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.args.upstream)
        except OSError as exc:
            conn["error"] = f"upstream connect failed: {exc}"
            writer.close()
            self._write_report()
            return
        conn["upstream_port"] = up_writer.get_extra_info("sockname")[1]
        await asyncio.gather(self._pump(conn, reader, up_writer, "client_to_server"),
                             self._pump(conn, up_reader, writer, "server_to_client"))
        conn["closed"] = time.time()
        self._write_report()

    async def _pump(self, conn: dict, src: asyncio.StreamReader, dst: asyncio.StreamWriter, direction: str) -> None:
        frames = _Frames()
        asked = self._asked[conn["id"]]  # correlation id -> (api key, version), shared by both pumps
        try:
            while True:
                try:
                    data = await src.read(1 << 16)
                except (ConnectionError, ssl.SSLError) as exc:
                    conn.setdefault("errors", []).append(f"{direction}: {type(exc).__name__}: {exc}")
                    data = b""
                if not data:
                    break
                conn["bytes"][direction] += len(data)
                for f in frames.feed(data):
                    if direction == "client_to_server" and len(f) >= 8:
                        k, v, c = struct.unpack_from(">hhi", f)
                        asked[c] = (k, v)
                        conn["frames"].append(["c2s", "client", "request", k, v, c, len(f) + 4])
                    elif direction == "server_to_client" and len(f) >= 4:
                        (c,) = struct.unpack_from(">i", f)
                        k, v = asked.get(c, (None, None))
                        conn["frames"].append(["s2c", "upstream", "response", k, v, c, len(f) + 4])
                dst.write(data)
                try:
                    await dst.drain()
                except (ConnectionError, ssl.SSLError):
                    break
        finally:
            if frames.broken:
                conn["frames_unparsed"] = True
            try:
                dst.close()
                await dst.wait_closed()
            except (ConnectionError, ssl.SSLError, OSError):
                pass

    async def run(self) -> None:
        server = await asyncio.start_server(self.handle, *self.args.listen, ssl=self.ctx,
                                            ssl_handshake_timeout=15)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(f"tls-terminator listening on {self.args.listen[0]}:{self.args.listen[1]}", file=sys.stderr,
              flush=True)
        async with server:
            await stop.wait()
        self._write_report()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=_hostport, required=True)
    ap.add_argument("--upstream", type=_hostport, required=True)
    ap.add_argument("--cert", required=True, help="server certificate chain (PEM)")
    ap.add_argument("--key", required=True, help="server private key (PEM)")
    ap.add_argument("--tls", choices=["1.2", "1.3"], help="pin the TLS version")
    ap.add_argument("--ciphers", help="OpenSSL cipher string for TLS 1.2")
    ap.add_argument("--tls13-ciphersuites", help="TLS 1.3 suites, colon-separated (via OPENSSL_CONF)")
    ap.add_argument("--options", type=lambda s: int(s, 0), default=0, help="extra SSL_OP_* bits")
    ap.add_argument("--keylog", help="write the server side's NSS key log here")
    ap.add_argument("--report", help="JSON report of the connections")
    args = ap.parse_args(argv)
    if args.tls13_ciphersuites:
        _reexec_with_ciphersuites(args.tls13_ciphersuites)
    try:
        asyncio.run(Terminator(args).run())
    finally:
        conf = os.environ.get(_CONF_MARK)
        if conf and os.path.exists(conf):
            os.unlink(conf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
