"""kwire_cli.tls on TLS sessions made in memory by the system OpenSSL (tests/tls_gen.py): suites the
recorded fixtures lack (AES-CCM and CCM_8, AES-256-GCM in TLS 1.2, CBC with HMAC-SHA384, TLS 1.3
CCM), full-size records (16 KiB) cut into segments of every size, encrypt-then-MAC on and off,
the extended master secret on and off, and TLS 1.2 resumption by session id and by ticket."""
from __future__ import annotations

from functools import cache

import pytest

from kwire_cli.tls import ALERT, C2S, HANDSHAKE, S2C, KeyLog, Plaintext, TlsConnection
from tls_gen import session, session_in_subprocess


@cache
def _session(version, ciphers, **kw):
    if version == "1.3" and ciphers:
        return session_in_subprocess(ciphers, version=version, **kw)
    return session(version, ciphers, **kw)


def run(conn: dict, keys: KeyLog):
    tc = TlsConnection(keys)
    got = [bytearray(), bytearray()]
    items = []
    for d, h in conn["segments"]:
        for it in tc.feed(d, bytes.fromhex(h)):
            items.append(it)
            if isinstance(it, Plaintext):
                got[it.direction] += it.data
    items += tc.finish()
    return tc, got, [it for it in items if not isinstance(it, Plaintext)], [it for it in items if isinstance(it, Plaintext)]


def keys_of(s: dict, drop: tuple[str, ...] = ()) -> KeyLog:
    keys = KeyLog()
    text = "\n".join(ln for ln in s["keylog"].splitlines() if ln.split(" ", 1)[0] not in drop)
    assert keys.add_text(text) == []
    return keys


CASES = [
    # version, OpenSSL cipher (TLS 1.2) / suite (TLS 1.3), options, IANA name, ETM, EMS
    ("1.2", "ECDHE-RSA-AES256-GCM-SHA384", {}, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", False, True),
    ("1.2", "AES128-GCM-SHA256", {}, "TLS_RSA_WITH_AES_128_GCM_SHA256", False, True),
    ("1.2", "ECDHE-RSA-CHACHA20-POLY1305", {}, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", False, True),
    ("1.2", "AES128-CCM", {}, "TLS_RSA_WITH_AES_128_CCM", False, True),
    ("1.2", "AES256-CCM8", {}, "TLS_RSA_WITH_AES_256_CCM_8", False, True),
    ("1.2", "AES128-SHA", {}, "TLS_RSA_WITH_AES_128_CBC_SHA", True, True),
    ("1.2", "AES128-SHA", {"no_etm": True}, "TLS_RSA_WITH_AES_128_CBC_SHA", False, True),
    ("1.2", "ECDHE-RSA-AES256-SHA384", {}, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", True, True),
    ("1.2", "ECDHE-RSA-AES256-SHA384", {"no_etm": True}, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", False, True),
    ("1.2", "AES256-SHA256", {"no_ems": True}, "TLS_RSA_WITH_AES_256_CBC_SHA256", True, False),
    ("1.2", "AES128-GCM-SHA256", {"no_ems": True}, "TLS_RSA_WITH_AES_128_GCM_SHA256", False, False),
    ("1.3", None, {}, "TLS_AES_256_GCM_SHA384", False, False),
    ("1.3", "TLS_AES_128_CCM_SHA256", {}, "TLS_AES_128_CCM_SHA256", False, False),
    ("1.3", "TLS_AES_128_CCM_8_SHA256", {}, "TLS_AES_128_CCM_8_SHA256", False, False),
]


@pytest.mark.parametrize("version,cipher,opts,iana,etm,ems", CASES, ids=[c[3] + str(c[2] or "") for c in CASES])
def test_generated_sessions_decrypt_exactly(version, cipher, opts, iana, etm, ems):
    s = _session(version, cipher, sizes=(1, 100, 70000, 16384, 16385, 5), **opts)
    (conn,) = s["connections"]
    tc, got, events, pieces = run(conn, keys_of(s))
    assert bytes(got[C2S]) == bytes.fromhex(conn["sent"][C2S])
    assert bytes(got[S2C]) == bytes.fromhex(conn["sent"][S2C])
    hs = tc.handshake
    assert (hs.version, hs.cipher_suite, hs.encrypt_then_mac, hs.extended_master_secret) == (
        "TLSv" + version, iana, etm, ems)
    assert hs.sni == "localhost"
    assert {e.kind for e in events} <= {HANDSHAKE, ALERT}
    assert max(len(p.data) for p in pieces) == 16384     # full-size records were in there
    for side in tc.counters:
        assert side.fed == side.plain + side.decrypted and side.undecrypted == side.skipped == 0


@pytest.mark.parametrize("cipher", ["AES128-SHA", "AES256-SHA256"])
@pytest.mark.parametrize("no_ems", [False, True])
def test_rsa_lines_with_and_without_the_extended_master_secret(cipher, no_ems):
    """The pre-master from the RSA line: master secret from the randoms (RFC 5246 8.1) or from the
    session hash (RFC 7627 4)."""
    s = _session("1.2", cipher, sizes=(100, 3000), no_ems=no_ems)
    keys = keys_of(s, drop=("CLIENT_RANDOM",))
    assert set(keys.counts) == {"RSA"}
    (conn,) = s["connections"]
    tc, got, _, _ = run(conn, keys)
    assert tc.handshake.extended_master_secret == (not no_ems)
    assert [bytes(g) for g in got] == [bytes.fromhex(x) for x in conn["sent"]]


def test_pms_client_random_lines():
    """PMS_CLIENT_RANDOM (pre-master by client random), made here from the RSA line's pre-master."""
    s = _session("1.2", "AES128-SHA", sizes=(100, 3000))
    rsa = [ln.split() for ln in s["keylog"].splitlines() if ln.startswith("RSA ")]
    cr = [ln.split()[1] for ln in s["keylog"].splitlines() if ln.startswith("CLIENT_RANDOM ")]
    keys = KeyLog()
    assert keys.add_text("PMS_CLIENT_RANDOM %s %s" % (cr[0], rsa[0][2])) == []
    (conn,) = s["connections"]
    _, got, _, _ = run(conn, keys)
    assert [bytes(g) for g in got] == [bytes.fromhex(x) for x in conn["sent"]]


@pytest.mark.parametrize("version,cipher,tickets", [("1.2", "ECDHE-RSA-AES128-GCM-SHA256", True),
                                                    ("1.2", "ECDHE-RSA-AES128-SHA", False),
                                                    ("1.3", None, True)])
def test_resumption(version, cipher, tickets):
    s = _session(version, cipher, sizes=(100, 20000), resume=True, tickets=tickets)
    keys = keys_of(s)
    first, second = s["connections"]
    assert not first["resumed"] and second["resumed"]
    for conn in (first, second):
        tc, got, _, _ = run(conn, keys)
        assert tc.handshake.resumed == conn["resumed"]
        assert [bytes(g) for g in got] == [bytes.fromhex(x) for x in conn["sent"]]
    if version == "1.2":
        # the resumed connection's own CLIENT_RANDOM line removed: the session (by id or by
        # ticket) learnt from the first connection gives its master secret
        cr2 = None
        tc2 = TlsConnection(KeyLog())
        for d, h in second["segments"]:
            tc2.feed(d, bytes.fromhex(h))
        cr2 = tc2.handshake.client_random
        keys2 = KeyLog()
        keys2.add_text("\n".join(ln for ln in s["keylog"].splitlines() if cr2 not in ln))
        assert len(keys2) == 1
        for conn in (first, second):
            _, got, _, _ = run(conn, keys2)
            assert [bytes(g) for g in got] == [bytes.fromhex(x) for x in conn["sent"]]
