"""Real TLS sessions made in memory by the system OpenSSL (Python's ``ssl`` with memory BIOs), to
test kwire_cli.tls on suites and sizes the recorded fixtures do not have: both peers are OpenSSL,
the key log is OpenSSL's (``keylog_filename``), and the plaintext sent is known.

``session(...)`` returns the bytes written each way, in the order written, the key log, and the
application data sent each way. TLS 1.3 suites outside OpenSSL's default list (the CCM ones) need
``Ciphersuites`` in an OpenSSL configuration read at start-up: ``session_in_subprocess`` runs
this file with ``OPENSSL_CONF`` set (as scripts/record/tls_terminator.py does).

Run as a script: ``python tests/tls_gen.py '<json of session() arguments>'`` prints the session as JSON.
"""
from __future__ import annotations

import json
import os
import random
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

PKI = Path(__file__).resolve().parents[1] / "fixtures" / "secure" / "pki"
SSL_OP_NO_EXTENDED_MASTER_SECRET = 1 << 0   # OpenSSL 3.0 ssl.h
SSL_OP_NO_ENCRYPT_THEN_MAC = 1 << 19


def _pump(src: ssl.MemoryBIO, dst: ssl.MemoryBIO, d: int, segments: list, rng: random.Random,
          mss: int | None) -> bool:
    data = src.read()
    if not data:
        return False
    # cut what one peer wrote into TCP segments: of varying size (1 byte to 64 KiB), or of at
    # most ``mss`` bytes
    p = 0
    while p < len(data):
        n = mss or rng.choice((1, 5, 100, 1448, 1448, 1448, 16384, 65483))
        segments.append((d, data[p:p + n]))
        p += n
    dst.write(data)
    return True


def session(version: str = "1.3", ciphers: str | None = None, sizes: tuple[int, ...] = (100, 50000),
            resume: bool = False, no_etm: bool = False, no_ems: bool = False, seed: int = 1,
            tickets: bool = True, mss: int | None = None) -> dict:
    """One or two (``resume``) connections; per connection: segments [(direction, bytes)], the
    application data sent c2s and s2c, and whether it was resumed. ``sizes``: the client sends
    messages of these sizes, the server answers each with one of the same size. ``mss``: cut
    what a peer writes into segments of at most this size (default: sizes from 1 byte to 64 KiB)."""
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="kwire-tlsgen-")
    keylog = os.path.join(tmp, "keylog")
    vers = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[version]
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(str(PKI / "ca.pem"))
    cctx.keylog_filename = keylog
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(str(PKI / "server.pem"), str(PKI / "server.key"))
    for ctx in (cctx, sctx):
        ctx.minimum_version = ctx.maximum_version = vers
        if ciphers:
            ctx.set_ciphers(ciphers)
        if no_etm:
            ctx.options |= SSL_OP_NO_ENCRYPT_THEN_MAC
        if no_ems:
            ctx.options |= SSL_OP_NO_EXTENDED_MASTER_SECRET
        if not tickets:
            ctx.options |= ssl.OP_NO_TICKET
    conns = []
    sess = None
    for _ in range(2 if resume else 1):
        segments: list = []
        cin, cout, sin, sout = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        c = cctx.wrap_bio(cin, cout, server_hostname="localhost", session=sess)
        s = sctx.wrap_bio(sin, sout, server_side=True)

        def pump(cout=cout, sin=sin, sout=sout, cin=cin, segments=segments) -> None:
            while _pump(cout, sin, 0, segments, rng, mss) | _pump(sout, cin, 1, segments, rng, mss):
                pass

        done = [False, False]
        while not all(done):
            for i, obj in enumerate((c, s)):
                if not done[i]:
                    try:
                        obj.do_handshake()
                        done[i] = True
                    except ssl.SSLWantReadError:
                        pass
            pump()
        sent = [bytearray(), bytearray()]
        for n in sizes:
            msg = rng.randbytes(n)
            c.write(msg)
            sent[0] += msg
            pump()
            got = bytearray()
            while len(got) < n:
                got += s.read(n - len(got))
                pump()
            reply = rng.randbytes(n)
            s.write(reply)
            sent[1] += reply
            pump()
            got = bytearray()
            while len(got) < n:
                got += c.read(n - len(got))
                pump()
        resumed = c.session_reused
        sess = c.session
        try:
            c.unwrap()
        except ssl.SSLWantReadError:
            pass
        pump()
        try:
            s.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        pump()
        conns.append({"segments": [[d, b.hex()] for d, b in segments], "sent": [sent[0].hex(), sent[1].hex()],
                      "resumed": resumed, "cipher": c.cipher()[0], "version": c.version()})
    with open(keylog, "rb") as f:
        log = f.read().decode()
    os.unlink(keylog)
    os.rmdir(tmp)
    return {"connections": conns, "keylog": log}


def session_in_subprocess(tls13_suites: str, **kwargs: object) -> dict:
    """``session()`` in a fresh interpreter whose OpenSSL pins the TLS 1.3 suites."""
    with tempfile.NamedTemporaryFile("w", suffix=".cnf", delete=False) as f:
        f.write("openssl_conf = kwire_conf\n[kwire_conf]\nssl_conf = kwire_ssl\n"
                "[kwire_ssl]\nsystem_default = kwire_sys\n"
                f"[kwire_sys]\nCiphersuites = {tls13_suites}\n")
    try:
        env = dict(os.environ, OPENSSL_CONF=f.name)
        out = subprocess.run([sys.executable, __file__, json.dumps(kwargs)], env=env, check=True,
                             capture_output=True, timeout=120)
    finally:
        os.unlink(f.name)
    return json.loads(out.stdout)


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    if "sizes" in args:
        args["sizes"] = tuple(args["sizes"])
    print(json.dumps(session(**args)))
