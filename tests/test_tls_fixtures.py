"""kwire_cli.tls on the recorded TLS captures (fixtures/secure, issue 16): every connection of every
capture with a key log decrypts to exactly the bytes of its plaintext twin (the same connection
recorded behind the TLS terminator), and the handshake summary is the manifest's."""
from __future__ import annotations

import pytest

from kwire_cli.tls import ALERT, C2S, HANDSHAKE, KEY_UPDATE, NO_KEY, S2C, KeyLog, next_traffic_secret
from tls_util import SECURE, connections, decrypt, dsb_bodies, keylog_of, manifest, tls_fixtures

WITH_KEYS = tls_fixtures(with_keylog=True)
WITHOUT_KEYS = tls_fixtures(with_keylog=False)
ORDINARY = {HANDSHAKE, ALERT, KEY_UPDATE}


def test_the_fixture_set_is_the_one_documented():
    assert len(WITH_KEYS) == 18   # 14 in tls/ with a key log + 4 sasl-ssl
    assert WITHOUT_KEYS == ["tls13-nokey-kafka-python"]
    kinds = {manifest()["fixtures"][n]["kind"] for n in WITH_KEYS}
    assert kinds == {"tls", "keyupdate", "sasl-ssl"}


def _streams(name: str, capture_key: str = "capture"):
    fx = manifest()["fixtures"][name]
    conns = connections(SECURE / fx["files"][capture_key], fx["port"])
    twins = connections(SECURE / fx["files"]["plaintext_twin"], fx["twin_port"])
    return fx, conns, twins


def _check_connection(name, c, conn, twin, tc, res):
    where = "%s port %d" % (name, c["client_port"])
    assert conn.holes == 0 and twin.holes == 0, where
    expect_c2s = twin.stream(C2S)
    expect_s2c = twin.stream(S2C)
    tail = c.get("twin_tail_bytes", {}).get("server_to_client", 0)
    if tail:
        expect_s2c = expect_s2c[:-tail]
    assert bytes(res.plain[C2S]) == expect_c2s, where
    assert bytes(res.plain[S2C]) == expect_s2c, where
    assert len(expect_c2s) == c["decrypted_bytes"]["client_to_server"], where
    assert len(expect_s2c) == c["decrypted_bytes"]["server_to_client"], where
    hs = tc.handshake
    assert hs is not None, where
    assert (hs.version, hs.cipher_suite, hs.resumed) == (c["tls_version"], c["cipher_suite"],
                                                         c["session_resumed"]), where
    assert hs.cipher_suite_id == int(c["cipher_suite_id"], 16)
    assert hs.client_random == c["client_random"], where
    if c["tls_version"] == "TLSv1.2":
        assert hs.extended_master_secret == c["extended_master_secret"], where
        assert hs.encrypt_then_mac == c["encrypt_then_mac"], where
    assert tc.client_direction == C2S
    assert [e.kind for e in res.events if e.kind not in ORDINARY] == [], (where, [str(e) for e in res.events])
    assert len(res.kinds(HANDSHAKE)) == 1
    for side in tc.counters:
        assert side.fed == side.plain + side.decrypted + side.undecrypted + side.skipped + side.truncated
        assert side.undecrypted == side.skipped == side.truncated == side.lost == 0
    assert tc.counters[C2S].plaintext == len(expect_c2s)
    assert tc.buffered() == (0, 0)


@pytest.mark.parametrize("name", WITH_KEYS)
def test_every_connection_decrypts_to_its_plaintext_twin(name):
    fx, conns, twins = _streams(name)
    keys = keylog_of(name)
    assert len(conns) == len(fx["connections"])
    for c in fx["connections"]:
        tc, res = decrypt(conns[c["client_port"]], keys)
        _check_connection(name, c, conns[c["client_port"]], twins[c["twin_client_port"]], tc, res)


@pytest.mark.parametrize("name", ["tls13-chacha20-kafkajs", "tls12-rsa-aes256-cbc-sha256-kafkajs",
                                  "tls12-ecdhe-rsa-aes128-gcm-kafka-python", "tls13-keyupdate-openssl"])
@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
def test_any_segmentation_gives_the_same_plaintext(name, chunk):
    """Records and handshake messages cut anywhere: byte by byte, odd sizes."""
    fx, conns, twins = _streams(name)
    keys = keylog_of(name, drop_labels=("CLIENT_TRAFFIC_SECRET_N", "SERVER_TRAFFIC_SECRET_N"))
    for c in fx["connections"]:
        tc, res = decrypt(conns[c["client_port"]], keys, chunk=chunk)
        _check_connection(name, c, conns[c["client_port"]], twins[c["twin_client_port"]], tc, res)


def test_no_key_one_event_per_connection_and_no_plaintext():
    name = "tls13-nokey-kafka-python"
    fx, conns, _ = _streams(name)
    assert "keylog" not in fx["files"] and fx["keylog"]["withheld"]
    keys = KeyLog()
    assert len(conns) == len(fx["connections"]) == 6
    for c in fx["connections"]:
        conn = conns[c["client_port"]]
        tc, res = decrypt(conn, keys)
        assert res.plain == [bytearray(), bytearray()]
        nokey = res.kinds(NO_KEY)
        assert len(nokey) == 1
        ev = nokey[0]
        fed = sum(len(b) for _, b in conn.segments)
        plain = sum(s.plain for s in tc.counters)
        # every byte that is not a hello or change_cipher_spec record in the clear is counted
        assert ev.nbytes == fed - plain == sum(s.undecrypted for s in tc.counters) > 0
        assert ev.message.endswith("TLS 1.3, no key for client random %s...; %d bytes not decrypted"
                                   % (c["client_random"][:16], ev.nbytes))
        assert c["client_random"] not in ev.message   # a short prefix, not the whole random
        assert tc.no_key
        assert tc.handshake is not None and tc.handshake.cipher_suite == c["cipher_suite"]
        assert [e.kind for e in res.events] == [HANDSHAKE, NO_KEY]


def test_no_key_when_the_key_log_is_for_other_connections():
    """A key log that has other client randoms only: each TLS 1.2 connection says so once."""
    name = "tls12-ecdhe-rsa-aes128-gcm-kafka-python"
    fx, conns, _ = _streams(name)
    keys = keylog_of("tls12-ecdhe-rsa-chacha20-kafkajs")
    for c in fx["connections"]:
        _, res = decrypt(conns[c["client_port"]], keys)
        assert res.plain == [bytearray(), bytearray()]
        assert [e.kind for e in res.events] == [HANDSHAKE, NO_KEY]
        assert "TLS 1.2, no key for client random %s..." % c["client_random"][:16] in res.events[1].message


def test_keyupdate_decrypts_with_the_openssl_n_lines_removed():
    name = "tls13-keyupdate-openssl"
    fx, conns, twins = _streams(name)
    assert fx["keylog"]["labels"]["CLIENT_TRAFFIC_SECRET_N"] == 3
    keys = keylog_of(name, drop_labels=("CLIENT_TRAFFIC_SECRET_N", "SERVER_TRAFFIC_SECRET_N"))
    assert keys.ignored == {}
    (c,) = fx["connections"]
    tc, res = decrypt(conns[c["client_port"]], keys)
    _check_connection(name, c, conns[c["client_port"]], twins[c["twin_client_port"]], tc, res)
    ups = res.kinds(KEY_UPDATE)
    by_dir = [sum(1 for e in ups if e.direction == d) for d in (C2S, S2C)]
    assert by_dir == [fx["key_updates"]["client_to_server"], fx["key_updates"]["server_to_client"]] == [3, 2]
    assert [tc.counters[C2S].key_updates, tc.counters[S2C].key_updates] == [3, 2]
    # requested updates are answered by the server (RFC 8446 4.6.3): 2 requests from the client
    assert sum("update_requested" in e.message for e in ups if e.direction == C2S) == 2
    # the full key log (with the _N lines, which are not NSS labels) gives the same result
    full = keylog_of(name)
    assert full.ignored == {"CLIENT_TRAFFIC_SECRET_N": 3, "SERVER_TRAFFIC_SECRET_N": 2}
    _, res2 = decrypt(conns[c["client_port"]], full)
    assert res2.plain == res.plain


def test_keyupdate_derivation_matches_openssls_n_lines():
    """RFC 8446 7.2 derived here equals what OpenSSL logged for each update, in order."""
    path = SECURE / manifest()["fixtures"]["tls13-keyupdate-openssl"]["files"]["keylog"]
    lines = [ln.split() for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    for who in ("CLIENT", "SERVER"):
        (secret,) = [bytes.fromhex(s) for label, _, s in lines if label == who + "_TRAFFIC_SECRET_0"]
        logged = [bytes.fromhex(s) for label, _, s in lines if label == who + "_TRAFFIC_SECRET_N"]
        assert logged
        for nxt in logged:
            secret = next_traffic_secret("sha256", secret)
            assert secret == nxt


def test_hkdf_expand_label_is_cryptographys_hkdf_expand():
    """HKDF-Expand-Label taken as one HMAC up to a hash length, and HKDFExpand beyond, gives
    ``cryptography``'s HKDFExpand output for every length, label and context, from the secrets of
    a real key log (and the traffic keys are those two labels)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    from kwire_cli.tls import hkdf_expand_label
    from kwire_cli.tls.keys import traffic_keys13
    from kwire_cli.tls.suites import SUITES

    path = SECURE / manifest()["fixtures"]["tls13-keyupdate-openssl"]["files"]["keylog"]
    secrets = [bytes.fromhex(ln.split()[2]) for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    algs = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}
    for secret in secrets:
        for name, alg in algs.items():
            for length in (1, 12, 16, 31, 32, 33, 48, 49, 64, 100):
                for label, context in ((b"key", b""), (b"iv", b""), (b"traffic upd", b""), (b"c hs traffic", secret)):
                    full = b"tls13 " + label
                    info = length.to_bytes(2, "big") + bytes((len(full),)) + full + bytes((len(context),)) + context
                    assert hkdf_expand_label(name, secret, label, context, length) == \
                        HKDFExpand(alg(), length, info).derive(secret)
    for suite in (s for s in SUITES.values() if s.tls13):
        for secret in secrets:
            assert traffic_keys13(suite, secret) == (hkdf_expand_label(suite.prf, secret, b"key", b"", suite.key_len),
                                                     hkdf_expand_label(suite.prf, secret, b"iv", b"", 12))


@pytest.mark.parametrize("name", [n for n in WITH_KEYS if "dsb_pcapng" in manifest()["fixtures"][n]["files"]])
def test_keys_from_the_decryption_secrets_block_alone(name):
    fx, conns, twins = _streams(name, "dsb_pcapng")
    bodies = dsb_bodies(SECURE / fx["files"]["dsb_pcapng"])
    assert len(bodies) == 1
    keys = KeyLog()
    for body, little in bodies:
        assert keys.add_dsb_block(body, little, "dsb") == []
    assert keys.counts == fx["keylog"]["labels"]
    for c in fx["connections"]:
        tc, res = decrypt(conns[c["client_port"]], keys)
        _check_connection(name, c, conns[c["client_port"]], twins[c["twin_client_port"]], tc, res)


@pytest.mark.parametrize("name", ["tls12-rsa-aes128-cbc-sha-kafka-python", "tls12-rsa-aes256-cbc-sha256-kafkajs"])
def test_rsa_key_exchange_from_the_rsa_lines_alone(name):
    """Without CLIENT_RANDOM lines, the RSA lines' pre-master secrets and the extended master
    secret's session hash (RFC 7627) give the master secret."""
    fx, conns, twins = _streams(name)
    keys = keylog_of(name, drop_labels=("CLIENT_RANDOM",))
    assert set(keys.counts) == {"RSA"}
    for c in fx["connections"]:
        assert c["extended_master_secret"]
        tc, res = decrypt(conns[c["client_port"]], keys)
        _check_connection(name, c, conns[c["client_port"]], twins[c["twin_client_port"]], tc, res)


def test_tls12_resumed_connections_use_the_session_learnt_from_the_first():
    """A resumed TLS 1.2 connection with no key log line of its own decrypts with the master secret
    of the session it resumes, learnt from the earlier connection of the capture (as Wireshark)."""
    name = "tls12-resumption-kafkajs"
    fx, conns, twins = _streams(name)
    resumed = [c for c in fx["connections"] if c["session_resumed"]]
    assert len(resumed) == 3
    path = SECURE / fx["files"]["keylog"]
    drop = {c["client_random"] for c in resumed}
    text = "\n".join(ln for ln in path.read_text().splitlines() if not any(r in ln for r in drop))
    keys = KeyLog()
    assert keys.add_text(text) == []
    assert keys.counts == {"CLIENT_RANDOM": 1}
    by_port = {c["client_port"]: c for c in fx["connections"]}
    for port, conn in conns.items():      # in capture order: the full handshake comes first
        c = by_port[port]
        tc, res = decrypt(conn, keys)
        _check_connection(name, c, conn, twins[c["twin_client_port"]], tc, res)
    # and with a fresh key log, the resumed ones have no key
    keys2 = KeyLog()
    keys2.add_text(text)
    tc, res = decrypt(conns[resumed[0]["client_port"]], keys2)
    assert [e.kind for e in res.events] == [HANDSHAKE, NO_KEY]


@pytest.mark.parametrize("name", ["tls13-aes128-gcm-kafka-python", "tls13-resumption-kafkajs"])
def test_tls13_with_application_secrets_only(name):
    """A key log with the traffic secrets but no handshake secrets still gives the application
    data: the first record that opens with the application keys ends the handshake."""
    fx, conns, twins = _streams(name)
    keys = keylog_of(name, drop_labels=("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET"))
    for c in fx["connections"]:
        conn = conns[c["client_port"]]
        _, res = decrypt(conn, keys)
        tw = twins[c["twin_client_port"]]
        assert bytes(res.plain[C2S]) == tw.stream(C2S)
        assert bytes(res.plain[S2C]) == tw.stream(S2C)
        # the handshake records could not be read, and the decoder says so
        assert {e.kind for e in res.events} - ORDINARY == {"decrypt-failed", "not-decrypted"}
