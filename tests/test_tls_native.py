"""The TLS 1.3 record loop in C (kwire_cli/tls/_records13.c, over OpenSSL's libcrypto) against the
Python one (``cryptography``'s AEAD classes): the same plaintext, the same stops, the same state,
on records built here of every kind (application data, padded, handshake and alert inside, empty,
shorter than the tag, not authenticating, cut short, over the limit) and on the recorded TLS 1.3
captures, whole and damaged (bytes flipped, lost, inserted, cut), fed in pieces of every size."""
from __future__ import annotations

import importlib
import random

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from kwire_cli.tls import MAX_RECORD, KeyLog, Plaintext, TlsConnection, keys
from kwire_cli.tls.suites import SUITES
from tls_gen import session
from tls_util import SECURE, connections, keylog_of, manifest

pytestmark = pytest.mark.skipif(keys.native_opener is None, reason="_records13 not built or no libcrypto.so.3")

NATIVE = keys.native_opener
CIPHERS = {"aes-128-gcm": (AESGCM, 16), "aes-256-gcm": (AESGCM, 32), "chacha20-poly1305": (ChaCha20Poly1305, 32)}


def record(aead, iv: int, seq: int, inner: bytes, ctype: int = 23, version: bytes = b"\x03\x03") -> bytes:
    n = len(inner) + 16
    header = bytes((ctype,)) + version + n.to_bytes(2, "big")
    return header + aead.encrypt((iv ^ seq).to_bytes(12, "big"), inner, header)


def opened(cipher: tuple, data: bytes, p: int, seq: int):
    """The records of a run from ``p`` that authenticate under ``cipher`` ((AEAD, IV, max_len)), as
    (end, their inner plaintext), record sequence numbers from ``seq``: where both contracts below
    stop reading."""
    aead, iv, max_len = cipher
    n = len(data)
    while n - p >= 5 and data[p] == 23 and data[p + 1] == 3 and data[p + 2] <= 4:
        end = p + 5 + (data[p + 3] << 8 | data[p + 4])
        if end > n or end - p > MAX_RECORD + 5 or end - p > max_len + 5:
            return
        try:
            pt = aead.decrypt((iv ^ seq).to_bytes(12, "big"), data[p + 5:end], data[p:p + 5])
        except Exception:
            return
        yield end, pt
        seq += 1
        p = end


def reference(cipher: tuple, data: bytes, p: int, seq: int, pos: int, d: int, out: list):
    """The contract of ``Opener.records``, in Python (as fast.py's ``_app13`` loop, which
    does not stop before records over ``max_len``); ``cipher``: (AEAD, IV, max_len)."""
    plain = 0
    for end, pt in opened(cipher, data, p, seq):
        seq += 1
        total = end - p
        p = end
        if pt and pt[-1] == 23:
            if len(pt) > 1:
                plain += len(pt) - 1
                out.append(Plaintext(d, pt[:-1], pos, pos + total))
            pos += total
            continue
        return p, seq, pos, plain, pt
    return p, seq, pos, plain, None


def only_tickets(pt: bytes) -> bool:
    """An inner plaintext of whole NewSessionTicket messages, no padding."""
    if len(pt) < 5 or pt[-1] != 22:
        return False
    p, n = 0, len(pt) - 1
    while p < n:
        if n - p < 4 or pt[p] != 4:
            return False
        p += 4 + int.from_bytes(pt[p + 1:p + 4], "big")
    return p == n


def reference_feed(cipher: tuple, data: bytes, seq: int, pos: int, d: int, out: list, tuples: bool):
    """The contract of ``Opener.feed`` (after ``attach(seq, pos, d)``), in Python: as ``records``
    from the start of ``data``, but it stops before the record ``records`` stops after, and reads
    on past records of whole NewSessionTicket messages. (where, seq, pos, plaintext bytes)."""
    p = plain = 0
    for end, pt in opened(cipher, data, 0, seq):
        total = end - p
        if pt and pt[-1] == 23:
            if len(pt) > 1:
                plain += len(pt) - 1
                out.append(Plaintext(d, pt[:-1], pos, pos + total) if tuples else pt[:-1])
        elif not only_tickets(pt):
            break
        seq += 1
        p = end
        pos += total
    return p, seq, pos, plain


def reference_opens(cipher: tuple, data: bytes, p: int, seq: int):
    """The contract of ``Opener.opens``, in Python: every record of the run that authenticates,
    whatever its inner plaintext holds."""
    pts = []
    for end, pt in opened(cipher, data, p, seq):
        pts.append(pt)
        seq += 1
        p = end
    return p, seq, pts


@pytest.mark.parametrize("name", sorted(CIPHERS))
def test_records_of_every_kind_open_as_in_python(name):
    cls, klen = CIPHERS[name]
    rng = random.Random(name)
    key, ivb = rng.randbytes(klen), rng.randbytes(12)
    iv = int.from_bytes(ivb, "big")
    aead = cls(key)
    opener = NATIVE(name, key, ivb)
    assert opener.max_len == (MAX_RECORD if name.startswith("chacha") else 4096)
    kinds = [b"x" * 300 + b"\x17", b"\x17", b"", b"hello" + b"\x17" + b"\x00" * 7, b"\x00" * 5,
             b"\x14\x00\x00\x04abcd\x16", b"\x01\x00\x15", rng.randbytes(16384) + b"\x17", b"y\x17",
             b"\x04\x00\x00\x03abc\x16", b"\x04\x00\x00\x01a\x04\x00\x00\x00\x16",     # NewSessionTickets
             b"\x04\x00\x00\x01a\x18\x00\x00\x01\x00\x16", b"\x04\x00\x00\x03ab\x16",  # a KeyUpdate; cut short
             b"\x04\x00\x00\x01a\x16\x00", b"\x04\x00\x00\x00\x16"]                      # padded; empty ticket
    for trial in range(300):
        seq0 = rng.choice([0, 1, 7, 2**32 + 5, 2**63 + 1])
        seq = seq0
        parts = []
        for _ in range(rng.randint(1, 8)):
            what = rng.random()
            if what < 0.6:
                size = rng.choice([rng.randint(0, 400), rng.randint(4000, 4200)])   # about max_len too
                parts.append(record(aead, iv, seq, rng.randbytes(size) + b"\x17"))
            elif what < 0.8:
                parts.append(record(aead, iv, seq, rng.choice(kinds)))
            elif what < 0.85:
                r = bytearray(record(aead, iv, seq, b"abc\x17"))
                r[rng.randrange(5, len(r))] ^= 1 << rng.randrange(8)     # does not authenticate
                parts.append(bytes(r))
            elif what < 0.9:
                parts.append(b"\x17\x03\x03\x00" + bytes((rng.randint(0, 16),)) + rng.randbytes(16))  # short
            elif what < 0.95:
                parts.append(record(aead, iv, seq, b"q\x17", ctype=rng.choice([21, 22, 20])))
            else:
                parts.append(b"\x17\x03\x03\x48\x01" + rng.randbytes(40))    # over the limit / cut short
            seq += 1
        data = b"".join(parts)
        if rng.random() < 0.3:
            data = data[:rng.randrange(len(data) + 1)]
        p = rng.choice([0, 0, 1])
        mine: list = []
        ref: list = []
        got = opener.records(data, p, seq0, 1000, trial & 1, mine, Plaintext)
        want = reference((aead, iv, opener.max_len), data, p, seq0, 1000, trial & 1, ref)
        assert got == want and mine == ref and all(type(x) is Plaintext for x in mine), trial
        # a memoryview of the same bytes reads the same
        again: list = []
        assert opener.records(memoryview(data), p, seq0, 1000, trial & 1, again, Plaintext) == want and again == ref
        # the handshake phase's call: every record of the run, whatever is inside
        runs = reference_opens((aead, iv, opener.max_len), data, p, seq0)
        assert opener.opens(data, p, seq0) == runs, trial
        assert opener.opens(memoryview(data), p, seq0) == runs, trial
        # the direction's state held by the opener (attach, feed, detach): the same records, up
        # to the record ``records`` stops after, which is left for the record layer to read
        opener.attach(seq0, 1000, trial & 1)
        held: list = []
        q = opener.feed(data[p:], held, Plaintext if trial % 2 else None)
        wanted: list = []
        wp, wseq, wpos, wplain = reference_feed((aead, iv, opener.max_len), data[p:], seq0, 1000, trial & 1, wanted,
                                                bool(trial % 2))
        assert q == wp and held == wanted, trial
        assert opener.detach() == (wseq, wpos, wseq - seq0, wpos - 1000, wplain, wp), trial


@pytest.mark.parametrize("name", sorted(CIPHERS))
def test_one_record_opens_as_in_python(name):
    cls, klen = CIPHERS[name]
    rng = random.Random(name + "open")
    key, ivb = rng.randbytes(klen), rng.randbytes(12)
    iv = int.from_bytes(ivb, "big")
    aead = cls(key)
    opener = NATIVE(name, key, ivb)
    for trial in range(500):
        seq = rng.choice([0, 3, 2**40 + 1, 2**64 - 1])
        r = bytearray(record(aead, iv, seq, rng.randbytes(rng.choice([0, 1, 15, 16, 17, 300, 2000]))))
        if trial % 3 == 1:
            r[rng.randrange(len(r))] ^= 1 << rng.randrange(8)
        elif trial % 3 == 2:
            del r[rng.randrange(5, len(r)):]
        header, body = bytes(r[:5]), bytes(r[5:])
        try:
            want = aead.decrypt((iv ^ seq).to_bytes(12, "big"), body, header)
        except Exception:
            want = None
        assert opener.open(seq, body, header) == want, trial
        assert opener.open(seq, memoryview(r)[5:], header) == want, trial
    with pytest.raises(ValueError):
        opener.open(0, b"x" * 20, b"abc")


@pytest.mark.parametrize("suite_id", [0x1301, 0x1302, 0x1303])
def test_keys_derived_natively_are_the_python_ones(suite_id):
    """``cipher13`` with the native opener derives key and IV in C (EVP_MAC): its cipher opens
    what the keys ``traffic_keys13`` derives in Python sealed, and nothing sealed under others."""
    suite = SUITES[suite_id]
    cls = AESGCM if suite.cipher == "gcm" else ChaCha20Poly1305
    rng = random.Random(suite_id)
    for _ in range(200):
        secret = rng.randbytes(48 if suite.prf == "sha384" else 32)
        key, ivb = keys.traffic_keys13(suite, secret)
        iv = int.from_bytes(ivb, "big")
        native = keys.cipher13(suite, secret)
        assert native.native is not None
        seq = rng.randrange(1000)
        body = rng.randbytes(rng.randint(0, 100)) + b"\x17"
        r = record(cls(key), iv, seq, body)
        assert native.decrypt(seq, 23, 0x0303, r[5:]) == body
        with pytest.raises(keys.DecryptFailed):
            native.decrypt(seq + 1, 23, 0x0303, r[5:])
        other = keys.cipher13(suite, secret[:-1] + bytes((secret[-1] ^ 1,)))
        with pytest.raises(keys.DecryptFailed):
            other.decrypt(seq, 23, 0x0303, r[5:])


def test_bad_opener_arguments():
    with pytest.raises(ValueError):
        NATIVE("aes-128-ccm", b"k" * 16, b"i" * 12)
    with pytest.raises(ValueError):
        NATIVE("aes-128-gcm", b"k" * 32, b"i" * 12)
    with pytest.raises(ValueError):
        NATIVE("aes-128-gcm", b"k" * 16, b"i" * 8)
    assert "k" not in repr(NATIVE("aes-128-gcm", b"k" * 16, b"i" * 12))
    unkeyed = NATIVE.__new__(NATIVE)
    with pytest.raises(ValueError):
        unkeyed.open(0, b"x" * 20, b"\x17\x03\x03\x00\x14")
    with pytest.raises(ValueError):
        unkeyed.records(b"", 0, 0, 0, 0, [], Plaintext)


def test_a_build_older_than_the_sources_is_not_used():
    """A ``_records13`` built before a call the record layer makes was added (a checkout not
    rebuilt) is left aside for the Python path, not used until that call fails."""
    import types

    built = importlib.import_module("kwire_cli.tls._records13")
    assert keys.native_complete(built)

    class OlderOpener:       # the calls of a build from before ``opens``
        open = NATIVE.open
        records = NATIVE.records

    older = types.ModuleType("_records13")
    older.Opener = OlderOpener
    older.derive = built.derive
    assert not keys.native_complete(older)
    no_derive = types.ModuleType("_records13")
    no_derive.Opener = NATIVE
    assert not keys.native_complete(no_derive)


TLS13 = [n for n, f in manifest()["fixtures"].items()
         if n.startswith("tls13") and "keylog" in f["files"]] + ["sasl-ssl-scram-sha-256-kafkajs-tls13"]


def _run(segments, keylog, cuts, edits):
    """Feed ``segments`` re-cut at ``cuts`` with ``edits`` (offset -> action) applied: every item and
    the counters."""
    tc = TlsConnection(keylog)
    items: list = []
    off = [0, 0]
    for d, data in segments:
        data = bytearray(data)
        start = off[d]
        off[d] += len(data)
        pieces: list = []
        p = 0
        for at, (ed, action, arg) in sorted(edits.items()):
            if ed != d or not start <= at < start + len(data) or at - start < p:
                continue
            rel = at - start
            if action == "flip":
                data[rel] ^= arg
            elif action == "gap":
                pieces.append(("feed", bytes(data[p:rel])))
                pieces.append(("gap", arg))
                p = min(len(data), rel + arg)
            else:
                pieces.append(("feed", bytes(data[p:rel]) + arg))
                p = rel
        pieces.append(("feed", bytes(data[p:])))
        for kind, x in pieces:
            if kind == "gap":
                items += tc.gap(d, x)
                continue
            i = 0
            while i < len(x):
                k = cuts.choice([len(x), len(x), 1, 5, 100, 1448, 17000])
                items += tc.feed(d, x[i:i + k])
                i += k
    items += tc.finish()
    return items, [c.as_dict() for c in tc.counters], tc.handshake


@pytest.mark.parametrize("name", TLS13)
def test_captures_whole_and_damaged_give_the_same_items_native_or_not(name, monkeypatch):
    fx = manifest()["fixtures"][name]
    keylog = keylog_of(name)
    conns = connections(SECURE / fx["files"]["capture"], fx["port"])
    rng = random.Random(name)
    for conn in conns.values():
        sizes = [sum(len(b) for dd, b in conn.segments if dd == d) for d in (0, 1)]
        for trial in range(12):
            edits = {}
            for _ in range(0 if trial == 0 else rng.randint(1, 3)):
                d = rng.randint(0, 1)
                action = rng.choice(["flip", "flip", "gap", "insert"])
                arg = {"flip": rng.randint(1, 255), "gap": rng.randint(1, 200),
                       "insert": rng.randbytes(rng.randint(1, 30))}[action]
                edits[rng.randrange(max(1, sizes[d]))] = (d, action, arg)
            seed = rng.random()
            monkeypatch.setattr(keys, "native_opener", NATIVE)
            native = _run(conn.segments, keylog, random.Random(seed), edits)
            monkeypatch.setattr(keys, "native_opener", None)
            python = _run(conn.segments, keylog, random.Random(seed), edits)
            assert native == python, (conn.client_port, trial, edits)
            if trial == 0:
                assert any(type(x) is Plaintext for x in native[0])


def test_a_session_of_long_and_short_records_gives_the_same_items_native_or_not(monkeypatch):
    """Records over the native opener's limit (AES-GCM over 4 KiB) go through the Python path
    in the middle of runs of short ones: the same items and counters, whole and damaged."""
    s = session("1.3", None, sizes=(300, 40000, 1, 7, 20000, 50, 3, 9000, 16384, 2, 4200, 4060, 2100) + (5,) * 40,
                seed=3)
    keylog = KeyLog()
    assert keylog.add_text(s["keylog"]) == []
    (conn,) = s["connections"]
    segments = [(d, bytes.fromhex(h)) for d, h in conn["segments"]]
    sizes = [sum(len(b) for dd, b in segments if dd == d) for d in (0, 1)]
    rng = random.Random(4)
    for trial in range(10):
        edits = {}
        for _ in range(0 if trial == 0 else rng.randint(1, 3)):
            d = rng.randint(0, 1)
            edits[rng.randrange(sizes[d])] = (d, rng.choice(["flip", "gap"]), rng.randint(1, 200))
        seed = rng.random()
        monkeypatch.setattr(keys, "native_opener", NATIVE)
        native = _run(segments, keylog, random.Random(seed), edits)
        monkeypatch.setattr(keys, "native_opener", None)
        python = _run(segments, keylog, random.Random(seed), edits)
        assert native == python, (trial, edits)
        if trial == 0:
            got = [b"".join(x.data for x in native[0] if type(x) is Plaintext and x.direction == d) for d in (0, 1)]
            assert got == [bytes.fromhex(x) for x in conn["sent"]]


def test_records_read_through_direct_are_those_of_feed(monkeypatch):
    """The capture's TLS stage hands the next bytes of a direction to ``TlsConnection.direct``
    (the record state held by the native opener) when there is one there, the rest to ``feed``:
    the same plaintext and counters as ``feed`` alone, with the counters read at any point."""
    monkeypatch.setattr(keys, "native_opener", NATIVE)
    s = session("1.3", None, sizes=(300, 5, 20000, 7, 3000) + (50,) * 30 + (1,) * 5, seed=5)
    keylog = KeyLog()
    assert keylog.add_text(s["keylog"]) == []
    (conn,) = s["connections"]
    segments = [(d, bytes.fromhex(h)) for d, h in conn["segments"]]
    whole = TlsConnection(keylog)
    want = [b"", b""]
    for d, data in segments:
        want[d] += b"".join(x.data for x in whole.feed(d, data) if type(x) is Plaintext)
    whole.finish()
    for every in (1, 3, 1000):
        tc = TlsConnection(keylog)
        got = [b"", b""]
        direct = 0
        for i, (d, data) in enumerate(segments):
            f = tc.direct[d]
            if f is not None:
                pts: list = []
                p = f.feed(data, pts)
                got[d] += b"".join(pts)
                data = data[p:]
                direct += p > 0
            if data:
                got[d] += b"".join(x.data for x in tc.feed(d, data) if type(x) is Plaintext)
            if i % every == 0:
                assert [c.records for c in tc.counters] <= [c.records for c in whole.counters]
        tc.finish()
        assert direct or every == 1   # (reading the counters takes the state back)
        assert got == want == [bytes.fromhex(x) for x in conn["sent"]]
        assert [c.as_dict() for c in tc.counters] == [c.as_dict() for c in whole.counters]
