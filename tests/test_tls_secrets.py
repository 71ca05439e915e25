"""Key material never appears in a message, a repr, a str or an exception text of kwire_cli.tls:
neither the key log's secrets nor anything derived from them (key blocks, traffic keys, the next
secrets after a KeyUpdate), whatever happened to the connection."""
from __future__ import annotations

import base64

import pytest

from kwire_cli.tls import C2S, S2C, KeyLog, TlsConnection
from test_tls_hostile import records, replay, stream_of
from tls_util import SECURE, connections, decrypt, keylog_of, manifest, tls_fixtures


def _forms(secret: bytes) -> set[str]:
    h = secret.hex()
    return {h, h.upper(), repr(secret)[2:-1], base64.b64encode(secret).decode()}


def _file_secrets(name: str) -> set[bytes]:
    fx = manifest()["fixtures"][name]
    out = set()
    for ln in (SECURE / fx["files"]["keylog"]).read_text().splitlines():
        parts = ln.split()
        if len(parts) == 3 and not ln.startswith("#"):
            out.add(bytes.fromhex(parts[2]))
    return out


def _walk(obj, seen, tls_objects, raw):
    """Every kwire_cli.tls object reachable from obj (and the raw bytes they hold)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (bytes, bytearray)):
        if len(obj) >= 12:
            raw.add(bytes(obj))
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _walk(k, seen, tls_objects, raw)
            _walk(v, seen, tls_objects, raw)
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _walk(v, seen, tls_objects, raw)
        return
    mod = type(obj).__module__ or ""
    if not mod.startswith("kwire_cli.tls"):
        return
    tls_objects.append(obj)
    names = []
    for klass in type(obj).__mro__:
        names += list(getattr(klass, "__slots__", ()))
    names += list(getattr(obj, "__dict__", {}))
    for n in names:
        if hasattr(obj, n):
            _walk(getattr(obj, n), seen, tls_objects, raw)


def _assert_clean(texts, secrets):
    forms = set()
    for s in secrets:
        forms |= _forms(s)
    for t in texts:
        for f in forms:
            assert f not in t, "key material in: %s" % t[:200]


@pytest.mark.parametrize("name", tls_fixtures(with_keylog=True))
def test_no_key_material_in_any_text(name):
    fx = manifest()["fixtures"][name]
    keys = keylog_of(name)
    secrets = _file_secrets(name)
    conns = connections(SECURE / fx["files"]["capture"], fx["port"])
    texts = [repr(keys), str(keys), repr(vars(keys))]
    for conn in conns.values():
        tc, res = decrypt(conn, keys)
        # and damaged: a gap, a flipped byte
        recs = records(stream_of(conn.segments, S2C))
        edits = [(S2C, recs[-2][0] + 2, "gap", 9), (C2S, len(stream_of(conn.segments, C2S)) - 10, "flip", 1)]
        run = replay(conn.segments, keys, edits)
        objs: list = []
        raw: set[bytes] = set()
        for root in (tc, run.tc, keys):
            _walk(root, set(), objs, raw)
        # what the decoder derived (keys, IVs, next secrets) counts as key material too, except
        # the public bytes it keeps (client randoms, session ids, tickets, buffered ciphertext)
        public = {bytes.fromhex(c["client_random"]) for c in fx["connections"]}
        derived = {b for b in raw if b not in public and len(b) in (12, 16, 20, 32, 48, 64)}
        for o in objs:
            texts += [repr(o), str(o)]
        for e in res.events + run.events():
            texts += [e.message, str(e), repr(e)]
        texts += [repr(tc.handshake), repr(tc.counters), repr(tc)]
        wire = stream_of(conn.segments, C2S) + stream_of(conn.segments, S2C)
        derived = {b for b in derived if b not in wire}
        assert derived      # the keys the decoder derived were found, and are checked too
        _assert_clean(texts, secrets | derived)
    assert secrets


def test_bad_key_log_lines_made_of_real_secrets_do_not_echo_them():
    name = "tls13-keyupdate-openssl"
    secrets = _file_secrets(name)
    keys = KeyLog()
    lines = []
    for s in secrets:
        h = s.hex()
        lines += [h, "CLIENT_RANDOM %s %s" % ("00" * 32, h[:-1]), "CLIENT_RANDOM %s" % h,
                  "%s %s %s" % (h.upper(), "00" * 32, h), "RSA %s %s" % (h, h), "X %s" % h]
    problems = keys.add_text("\n".join(lines))
    assert len(problems) == len(lines) - len(secrets)     # "X <hex>": an unknown label, counted
    _assert_clean([str(p) for p in problems] + [repr(p) for p in problems] + [repr(keys)], secrets)


def test_exceptions_do_not_carry_key_material():
    keys = keylog_of("tls13-chacha20-kafka-python")
    secrets = _file_secrets("tls13-chacha20-kafka-python")
    tc = TlsConnection(keys)
    texts = []
    for bad in (lambda: tc.feed(5, b"x"), lambda: tc.gap(-1, 3)):
        with pytest.raises(ValueError, match="direction must be 0 or 1") as e:
            bad()
        texts.append(str(e.value))
    _assert_clean(texts, secrets)
