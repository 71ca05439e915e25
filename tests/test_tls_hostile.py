"""kwire_cli.tls on damaged and hostile input: gaps (resynchronisation, sequence numbers found
again), garbage between records, records cut short, lengths over the limit, wrong keys, mutated
bytes, hostile handshakes. Never an exception, never plaintext that did not authenticate, never
more than one record and one handshake message buffered per direction; every byte accounted."""
from __future__ import annotations

import random
from functools import cache

import pytest

from kwire_cli.tls import (
    BAD_RECORD,
    C2S,
    DECRYPT_FAILED,
    GAP,
    HANDSHAKE_ERROR,
    MAX_HANDSHAKE,
    MAX_RECORD,
    NOT_DECRYPTED,
    RESYNC,
    S2C,
    TRUNCATED,
    KeyLog,
    Plaintext,
    TlsConnection,
    TlsEvent,
    looks_like_client_hello,
    looks_like_tls_record,
)
from kwire_cli.tls.hello import HelloError, parse_client_hello, parse_server_hello, text
from tls_gen import session
from tls_util import SECURE, connections, keylog_of, manifest

BOUND = 5 + MAX_RECORD + MAX_HANDSHAKE + 4


@cache
def _gen(version: str, cipher: str | None, **kw):
    sizes = (300, 40000, 1, 7, 20000, 50, 3, 9000, 16384, 2, 33000, 100) + (1,) * 150 + (5000, 10)
    s = session(version, cipher, sizes=sizes, seed=7, **kw)
    keys = KeyLog()
    assert keys.add_text(s["keylog"]) == []
    (conn,) = s["connections"]
    return [(d, bytes.fromhex(h)) for d, h in conn["segments"]], keys, [bytes.fromhex(x) for x in conn["sent"]]


SUITES = [("1.3", None, {}), ("1.2", "ECDHE-RSA-CHACHA20-POLY1305", {}), ("1.2", "ECDHE-RSA-AES128-GCM-SHA256", {}),
          ("1.2", "AES128-SHA", {}), ("1.2", "AES256-SHA256", {"no_etm": True})]
IDS = ["tls13-aes256gcm", "tls12-chacha20", "tls12-aes128gcm", "tls12-cbc-etm", "tls12-cbc-mte"]


class Run:
    def __init__(self, keys: KeyLog):
        self.tc = TlsConnection(keys)
        self.items: list[Plaintext | TlsEvent] = []
        self.max_buffered = 0

    def _take(self, items):
        self.items += items
        self.max_buffered = max(self.max_buffered, *self.tc.buffered())

    def feed(self, d, data):
        self._take(self.tc.feed(d, data))

    def gap(self, d, n):
        self._take(self.tc.gap(d, n))

    def finish(self):
        self._take(self.tc.finish())
        for side in self.tc.counters:
            assert side.fed == side.plain + side.decrypted + side.undecrypted + side.skipped + side.truncated
        assert self.max_buffered <= BOUND
        assert self.tc.buffered() == (0, 0)
        return self

    def plain(self, d):
        return [(p.data, p.start, p.end) for p in self.items if isinstance(p, Plaintext) and p.direction == d]

    def events(self, kind=None):
        return [e for e in self.items if isinstance(e, TlsEvent) and (kind is None or e.kind == kind)]


def replay(segments, keys, edits=()):
    """Feed segments; ``edits``: (direction, offset, action, arg) applied at that stream offset:
    "gap" n (drop n bytes, tell the decoder), "insert" bytes, "cut" (drop the rest), "flip" xor."""
    run = Run(keys)
    off = [0, 0]
    cut = [False, False]
    drop = [0, 0]       # bytes of a gap that reaches into the next segments
    done: set[int] = set()
    for d, data in segments:
        start = off[d]
        off[d] += len(data)
        if cut[d]:
            continue
        data = bytearray(data)
        pos = min(drop[d], len(data))
        drop[d] -= pos
        pieces = []
        for i, (ed, at, action, arg) in enumerate(edits):
            if ed != d or i in done or not start + pos <= at < start + len(data):
                continue
            done.add(i)
            rel = at - start
            if action == "flip":
                data[rel] ^= arg
                continue
            pieces.append(("feed", bytes(data[pos:rel])))
            if action == "gap":
                pieces.append(("gap", arg))
                pos = min(rel + arg, len(data))
                drop[d] = rel + arg - pos
            elif action == "insert":
                pieces.append(("feed", arg))
                pos = rel
            elif action == "cut":
                cut[d] = True
                pos = len(data)
                break
        pieces.append(("feed", bytes(data[pos:])))
        for kind, x in pieces:
            if kind == "gap":
                run.gap(d, x)
            elif x:
                run.feed(d, x)
    return run.finish()


def records(stream: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record of a direction's stream (a plain header walk)."""
    out = []
    p = 0
    while p + 5 <= len(stream):
        end = p + 5 + (stream[p + 3] << 8 | stream[p + 4])
        out.append((p, end))
        p = end
    return out


def stream_of(segments, d):
    return b"".join(b for dd, b in segments if dd == d)


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_reference_run(version, cipher, opts):
    segments, keys, sent = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    assert b"".join(p[0] for p in ref.plain(C2S)) == sent[C2S]
    assert b"".join(p[0] for p in ref.plain(S2C)) == sent[S2C]


def _gap_cases(segments):
    recs = records(stream_of(segments, S2C))
    app = recs[len(recs) // 4:]     # well after the handshake
    r = app[3]
    big = next(x for x in app if x[1] - x[0] > 1000)
    return {
        "inside-one-record": (big[0] + 7, 20),
        "rest-of-a-header": (big[0] + 2, 3),
        "a-whole-record": (r[0], r[1] - r[0]),
        "many-records": (r[0] + 9, app[20][0] + 4 - (r[0] + 9)),
        "record-boundaries": (app[5][0], app[40][0] - app[5][0]),
        "small-records": (app[-60][0] + 1, app[-20][0] + 2 - app[-60][0] - 1),
    }


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
@pytest.mark.parametrize("case", ["inside-one-record", "rest-of-a-header", "a-whole-record", "many-records",
                                  "record-boundaries", "small-records"])
def test_gap_resynchronises_and_loses_only_the_records_it_touched(version, cipher, opts, case):
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    at, n = _gap_cases(segments)[case]
    run = replay(segments, keys, [(S2C, at, "gap", n)])
    before = [p for p in ref.plain(S2C) if p[2] <= at]
    after = [p for p in ref.plain(S2C) if p[1] >= at + n]
    assert run.plain(S2C) == before + after
    assert run.plain(C2S) == ref.plain(C2S)
    gaps = run.events(GAP)
    assert len(gaps) == 1 and gaps[0].breaks_stream and gaps[0].nbytes == n and gaps[0].offset == at
    assert run.tc.counters[S2C].lost == n
    assert not run.events(DECRYPT_FAILED) and not run.events(NOT_DECRYPTED)
    resync = run.events(RESYNC)
    if case == "inside-one-record":
        assert resync == []       # the record's end was known: the next one is where it said
    else:
        assert len(resync) == 1
        ev = resync[0]
        lost = [r for r in records(stream_of(segments, S2C)) if r[0] < at + n and r[1] > at]
        if version == "1.3" or "CHACHA" in cipher or "SHA" in cipher:
            assert "(%d records lost" % len(lost) in ev.message


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_garbage_between_records_is_skipped_and_nothing_is_lost(version, cipher, opts):
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    recs = records(stream_of(segments, S2C))
    at = recs[len(recs) // 2][0]
    junk = b"\xff" + random.Random(3).randbytes(999)
    run = replay(segments, keys, [(S2C, at, "insert", junk)])
    shift = [(d, s if s < at else s + 1000, e if s < at else e + 1000) for d, s, e in ref.plain(S2C)]
    assert run.plain(S2C) == shift
    (bad,) = run.events(BAD_RECORD)
    assert bad.offset == at and bad.breaks_stream and "content type 255 is not TLS's" in bad.message
    (res,) = run.events(RESYNC)
    assert res.offset == at + 1000 and "after 1000 bytes skipped" in res.message
    assert run.tc.counters[S2C].skipped == 1000


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_a_fake_record_between_records_fails_and_the_next_one_decrypts(version, cipher, opts):
    """Bytes that look like a record header: the fake record does not authenticate (one event, no
    plaintext), and the real records after it decrypt under the sequence number it did not use."""
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    recs = records(stream_of(segments, S2C))
    at = recs[len(recs) // 2][0]
    fake = bytes((0x17, 3, 3, 0, 64)) + bytes(range(64))
    run = replay(segments, keys, [(S2C, at, "insert", fake)])
    shift = [(d, s if s < at else s + 69, e if s < at else e + 69) for d, s, e in ref.plain(S2C)]
    assert run.plain(S2C) == shift
    (failed,) = run.events(DECRYPT_FAILED)
    assert failed.offset == at and failed.nbytes == 69
    (nd,) = run.events(NOT_DECRYPTED)
    assert "1 records (69 bytes) did not decrypt" in nd.message


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_a_flipped_byte_fails_one_record_only(version, cipher, opts):
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    recs = records(stream_of(segments, C2S))
    r = recs[len(recs) // 2]
    run = replay(segments, keys, [(C2S, r[1] - 3, "flip", 0x40)])
    assert run.plain(C2S) == [p for p in ref.plain(C2S) if p[1] != r[0]]
    (failed,) = run.events(DECRYPT_FAILED)
    assert failed.offset == r[0] and failed.direction == C2S
    assert "not decrypted: " in failed.message


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_stream_cut_inside_a_record(version, cipher, opts):
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    recs = records(stream_of(segments, S2C))
    r = recs[len(recs) // 2]
    run = replay(segments, keys, [(S2C, r[0] + 3, "cut", None)])
    assert run.plain(S2C) == [p for p in ref.plain(S2C) if p[2] <= r[0]]
    (tr,) = run.events(TRUNCATED)
    assert tr.offset == r[0] and tr.nbytes == 3 and "(3 of 5 bytes)" in tr.message
    big = next(x for x in recs[len(recs) // 4:] if x[1] - x[0] > 1000)
    run = replay(segments, keys, [(S2C, big[0] + 30, "cut", None)])
    assert run.plain(S2C) == [p for p in ref.plain(S2C) if p[2] <= big[0]]
    (tr,) = run.events(TRUNCATED)
    assert "at offset %d (30 of %d bytes)" % (big[0], big[1] - big[0]) in tr.message


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_a_length_over_the_limit_is_a_bad_record(version, cipher, opts):
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    recs = records(stream_of(segments, S2C))
    at = recs[len(recs) // 2][0]
    run = replay(segments, keys, [(S2C, at, "insert", bytes((0x17, 3, 3, 0xFF, 0xFF)))])
    assert [p[0] for p in run.plain(S2C)] == [p[0] for p in ref.plain(S2C)]
    (bad,) = run.events(BAD_RECORD)
    assert "record length 65535 is over 2^14+2048" in bad.message


@pytest.mark.parametrize("name,label", [("tls13-chacha20-kafka-python", "CLIENT_TRAFFIC_SECRET_0"),
                                        ("tls12-ecdhe-rsa-aes128-gcm-kafka-python", "CLIENT_RANDOM"),
                                        ("tls12-rsa-aes256-cbc-sha256-kafkajs", "CLIENT_RANDOM")])
def test_a_wrong_key_gives_events_and_no_plaintext(name, label):
    fx = manifest()["fixtures"][name]
    conns = connections(SECURE / fx["files"]["capture"], fx["port"])
    text = (SECURE / fx["files"]["keylog"]).read_text().splitlines()
    wrong = []
    for ln in text:
        if ln.startswith(label + " "):
            lab, cr, sec = ln.split()
            ln = "%s %s %s" % (lab, cr, ("%02x" % (int(sec[:2], 16) ^ 1)) + sec[2:])
        wrong.append(ln)
    keys = KeyLog()
    assert keys.add_text("\n".join(wrong)) == []
    for c in fx["connections"]:
        run = replay(conns[c["client_port"]].segments, keys)
        assert run.plain(C2S) == []
        failed = run.events(DECRYPT_FAILED)
        assert failed and all(e.direction == C2S for e in failed) if label.startswith("CLIENT_T") else failed
        assert len([e for e in failed if e.direction == C2S]) == 1     # one per run of failures
        nd = run.events(NOT_DECRYPTED)
        assert nd and all("did not decrypt" in e.message for e in nd)
        if label == "CLIENT_RANDOM":
            assert run.plain(S2C) == []


def test_looks_like_client_hello():
    fx = manifest()["fixtures"]["tls13-chacha20-kafkajs"]
    conns = connections(SECURE / fx["files"]["capture"], fx["port"])
    first = next(iter(conns.values())).segments[0][1]
    assert looks_like_client_hello(first) is True
    for n in range(6):
        assert looks_like_client_hello(first[:n]) is None
    assert looks_like_client_hello(b"\x00\x00\x00\x10\x00\x12") is False      # a Kafka frame
    assert looks_like_client_hello(b"\x16\x03\x03\x00\x10\x02") is False      # a ServerHello
    assert looks_like_client_hello(b"\x16\x03\x01\xff\xff\x01") is False      # too long
    assert looks_like_client_hello(b"\x16\x02") is False


def _hostile(d0: bytes, d1: bytes = b"", chunk: int = 1 << 30) -> Run:
    run = Run(KeyLog())
    for i in range(0, max(len(d0), len(d1)), chunk):
        run.feed(C2S, d0[i:i + chunk])
        run.feed(S2C, d1[i:i + chunk])
    return run.finish()


def test_a_huge_handshake_message_is_skipped_not_buffered():
    body = b"\x01" + ((16 << 20) - 1).to_bytes(3, "big")
    recs = b"".join(bytes((22, 3, 1)) + (MAX_RECORD).to_bytes(2, "big") + (body if i == 0 else b"\x00" * 4)
                    + b"\x00" * (MAX_RECORD - 4) for i in range(80))
    run = _hostile(recs, chunk=1000)
    (err,) = run.events(HANDSHAKE_ERROR)
    assert "ClientHello message of 16777215 bytes at offset 0 is over the 256 KiB cap; skipped" in err.message
    assert run.max_buffered <= 5 + MAX_RECORD


def test_a_client_hello_that_does_not_parse():
    hello = b"\x01\x00\x00\x05\x03\x03abc"
    run = _hostile(bytes((22, 3, 1, 0, len(hello))) + hello)
    (err,) = run.events(HANDSHAKE_ERROR)
    assert err.message == "direction 0: ClientHello: random needs 32 bytes, 3 left at offset 0"


def test_random_bytes_and_mutated_captures_never_raise():
    rng = random.Random(5)
    # pure noise, both directions, in pieces of varying size
    run = _hostile(rng.randbytes(300_000), rng.randbytes(300_000), chunk=1777)
    assert run.events(BAD_RECORD) and not run.plain(C2S)
    # a capture with bytes mutated, cut, lost and inserted
    fx = manifest()["fixtures"]["tls13-chacha20-kafkajs"]
    conns = connections(SECURE / fx["files"]["capture"], fx["port"])
    keys = keylog_of("tls13-chacha20-kafkajs")
    for conn in conns.values():
        streams = [len(stream_of(conn.segments, d)) for d in (0, 1)]
        for _ in range(40):
            edits = []
            for _ in range(rng.randint(1, 4)):
                d = rng.randint(0, 1)
                at = rng.randrange(max(1, streams[d]))
                action = rng.choice(["gap", "insert", "flip", "cut", "flip"])
                arg = {"gap": rng.randint(1, 300), "insert": rng.randbytes(rng.randint(1, 40)),
                       "flip": rng.randint(1, 255), "cut": None}[action]
                edits.append((d, at, action, arg))
            replay(conn.segments, keys, sorted(edits, key=lambda e: e[1]))


def test_bad_arguments_are_value_errors():
    tc = TlsConnection(KeyLog())
    with pytest.raises(ValueError, match="direction must be 0 or 1, not 2"):
        tc.feed(2, b"x")
    tc.finish()
    with pytest.raises(ValueError, match="feed or gap after finish"):
        tc.feed(0, b"x")
    assert tc.finish() == []


def _fixture(name):
    fx = manifest()["fixtures"][name]
    conns = connections(SECURE / fx["files"]["capture"], fx["port"])
    twins = connections(SECURE / fx["files"]["plaintext_twin"], fx["twin_port"])
    return fx, conns, twins, keylog_of(name)


@pytest.mark.parametrize("name", ["tls12-ecdhe-rsa-aes128-gcm-kafka-python", "tls12-ecdhe-rsa-chacha20-kafkajs",
                                  "tls12-rsa-aes128-cbc-sha-kafka-python"])
def test_tls12_lost_change_cipher_spec_and_finished(name):
    """A gap that takes the client's change_cipher_spec and Finished: its keys start at the next
    record, whose sequence number (1) is found."""
    fx, conns, twins, keys = _fixture(name)
    for c in fx["connections"]:
        conn = conns[c["client_port"]]
        recs = records(stream_of(conn.segments, C2S))
        stream = stream_of(conn.segments, C2S)
        i = next(i for i, r in enumerate(recs) if stream[r[0]] == 20)       # the client's CCS
        ccs, fin = recs[i], recs[i + 1]
        if len(recs) <= i + 2:
            continue
        run = replay(conn.segments, keys, [(C2S, ccs[0], "gap", fin[1] - ccs[0])])
        assert b"".join(p[0] for p in run.plain(C2S)) == twins[c["twin_client_port"]].stream(C2S)
        assert b"".join(p[0] for p in run.plain(S2C)) == twins[c["twin_client_port"]].stream(S2C)


def test_a_capture_that_starts_after_the_handshake():
    """No ClientHello: no client random to find keys with; one event, every byte counted."""
    _, conns, _, keys = _fixture("tls13-chacha20-kafkajs")
    for conn in conns.values():
        streams = [stream_of(conn.segments, d) for d in (C2S, S2C)]
        # from the first application record of each direction on
        tc = TlsConnection(keys)
        ref = replay(conn.segments, keys)
        firsts = [min(p[1] for p in ref.plain(d)) for d in (C2S, S2C)]
        tails = [streams[d][firsts[d]:] for d in (C2S, S2C)]
        assert looks_like_tls_record(tails[C2S]) is True and looks_like_client_hello(tails[C2S]) is False
        items = tc.feed(S2C, tails[S2C]) + tc.feed(C2S, tails[C2S]) + tc.finish()
        assert not [it for it in items if isinstance(it, Plaintext)]
        (ev,) = items
        assert ev.kind == "no-key"
        assert ev.message == "TLS, no ClientHello seen, so no client random to find keys; %d bytes not decrypted" % (
            len(tails[0]) + len(tails[1]))


def test_looks_like_tls_record():
    assert looks_like_tls_record(b"\x17\x03\x03\x40\x11") is True
    assert looks_like_tls_record(b"\x17\x03\x03\x48\x01") is False      # 18433: over the limit
    assert looks_like_tls_record(b"\x00\x00\x01\x00\x00\x12") is False  # a Kafka frame
    assert looks_like_tls_record(b"\x15\x03") is None


def _junk(kind: str, size: int) -> bytes:
    """``size`` bytes of junk made of plausible TLS 1.2/1.3 record headers: "dense", a header every
    5 bytes whose record is 16 KiB long (each one a candidate); "cycle", two small records that
    chain, then a byte that is no header (a record found and lost again every 31 bytes)."""
    rng = random.Random(11)
    out = bytearray()
    while len(out) < size:
        if kind == "dense":
            out += b"\x17\x03\x03\x40\x00"
        else:
            out += (b"\x17\x03\x03\x00\x0a" + rng.randbytes(10)) * 2 + b"\xff"
    return bytes(out[:size])


@pytest.mark.parametrize("kind,with_keys", [("dense", True), ("cycle", True), ("cycle", False)])
def test_record_boundary_recovery_is_linear_in_a_segment(kind, with_keys):
    """2 MB of junk of plausible record headers in one segment after a real handshake and its
    records: the search for a record boundary walks the segment once (it took minutes when each
    candidate searched the rest of the segment again, and a record found and lost again every
    few bytes recursed until RecursionError). Generous time bound: 20 s (a fraction of one here)."""
    import time

    segments, keys, sent = _gen("1.3", None)
    run = Run(keys if with_keys else KeyLog())
    for d, data in segments:
        run.feed(d, data)
    end = sum(len(b) for d, b in segments if d == S2C)
    junk = _junk(kind, 2_000_000)
    t0 = time.process_time()
    run.feed(S2C, junk)
    run.finish()
    elapsed = time.process_time() - t0
    assert elapsed < 20, "%.1f s for 2 MB of junk" % elapsed
    c = run.tc.counters[S2C]
    assert c.fed == end + len(junk)
    if with_keys:
        assert b"".join(p[0] for p in run.plain(S2C)) == sent[S2C]   # nothing of the junk as plaintext
        assert c.decrypted + c.plain == end
    else:
        assert run.plain(S2C) == []
    if kind == "cycle":
        resync = run.events(RESYNC)
        assert resync and all(e.offset >= end for e in resync)


def test_server_names_read_as_text_safe_for_a_terminal():
    """The SNI of a ClientHello: printable ASCII as it is, every other byte (and the backslash)
    as \\xNN, whether the extension holds one name (read by index) or a list (read field by field)."""
    rng = random.Random(11)

    def reference(b: bytes) -> str:
        return "".join(chr(c) if 32 <= c < 127 and c != 92 else "\\x%02x" % c for c in b)

    def hello_with(ext: bytes) -> bytes:
        exts = (0).to_bytes(2, "big") + len(ext).to_bytes(2, "big") + ext
        return (b"\x03\x03" + bytes(32) + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
                + len(exts).to_bytes(2, "big") + exts)

    for _ in range(3000):
        name = bytes(rng.choice([rng.randrange(256), rng.randrange(32, 127), 92, 127, 31]) for _ in range(rng.randrange(20)))
        entry = b"\x00" + len(name).to_bytes(2, "big") + name
        assert text(name) == reference(name)
        assert parse_client_hello(hello_with(len(entry).to_bytes(2, "big") + entry)).sni == reference(name)
        other = b"\x07\x00\x01z"
        two = other + entry
        assert parse_client_hello(hello_with(len(two).to_bytes(2, "big") + two)).sni == reference(name)
        bad = len(entry).to_bytes(2, "big") + entry[:-1] if name else b"\x00\x05\x00\x00\x09"
        assert parse_client_hello(hello_with(bad)).sni is None


def test_server_hellos_of_any_bytes_read_field_by_field():
    """A ServerHello's fixed fields (version, random, session id, suite, compression) and then
    its extensions; bytes that end before a field are a HelloError naming it."""
    rng = random.Random(12)
    for _ in range(20000):
        n = rng.choice([rng.randrange(80), rng.randrange(30, 45), 38 + rng.randrange(40)])
        b = bytearray(rng.randbytes(n))
        if n > 34 and rng.random() < 0.7:
            b[34] = rng.randrange(min(33, n))
        body = bytes(b)
        p = 35 + body[34] if n > 34 else n + 1
        try:
            sh = parse_server_hello(body)
        except HelloError as e:
            assert p + 3 > n or "extension" in str(e), (body.hex(), e)
            continue
        assert p + 3 <= n
        assert (sh.legacy_version, sh.random, sh.session_id, sh.cipher_suite) == (
            body[0] << 8 | body[1], body[2:34], body[35:p], body[p] << 8 | body[p + 1])


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_a_false_header_running_past_the_end_hides_no_record(version, cipher, opts):
    """After a gap, ciphertext that happens to read as a record header claiming more bytes than the
    stream has left is no record: the records after it, to the end, are still found (a candidate
    waited for at the end is searched inside)."""
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    st = stream_of(segments, S2C)
    app = records(st)[len(records(st)) // 4:]
    big = next(x for x in app if x[1] - x[0] > 1000)
    assert len(st) - (big[0] + 100) < 18436      # the false header below runs past the end
    at, n = big[0] + 2, 3
    fake_at = big[0] + 100
    fake = bytes((0x17, 3, 3, 0x47, 0xFF))       # application data of 18431 bytes
    edits = [(S2C, at, "gap", n)] + [(S2C, fake_at + i, "flip", st[fake_at + i] ^ fake[i]) for i in range(5)]
    run = replay(segments, keys, edits)
    after = [p for p in ref.plain(S2C) if p[1] >= at + n]
    assert after
    assert run.plain(S2C) == [p for p in ref.plain(S2C) if p[2] <= at] + after
    (res,) = run.events(RESYNC)
    assert res.offset == big[1] and "records found again" in res.message


@pytest.mark.parametrize("version,cipher,opts", SUITES, ids=IDS)
def test_a_false_header_cut_by_a_second_gap_hides_no_record(version, cipher, opts):
    """After a gap, ciphertext that reads as a record header claiming 18 KB is still waited for
    when a second gap comes, inside the run of small records its claimed length covers: the bytes it
    waits for will never follow, so it is no record, and the real records between it and the second
    gap are found (the search goes on inside it), as are those after the second gap."""
    segments, keys, _ = _gen(version, cipher, **opts)
    ref = replay(segments, keys)
    st = stream_of(segments, S2C)
    recs = records(st)
    big = [r for r in recs[:-3] if r[1] - r[0] > 1000][-1]   # the last big record before the small ones
    at, n = big[0] + 2, 3
    fake_at = big[0] + 100
    fake = bytes((0x17, 3, 3, 0x47, 0xFF))       # application data of 18431 bytes
    inside = [r for r in recs if r[0] >= big[1] and r[1] <= fake_at + 5 + 18431]
    assert len(inside) >= 20 and inside[-1][1] < len(st) - 1000
    second = inside[len(inside) // 2]
    at2, n2 = second[0] + 1, 2                   # the second gap, in a record the false one covers
    edits = [(S2C, at, "gap", n)] + [(S2C, fake_at + i, "flip", st[fake_at + i] ^ fake[i]) for i in range(5)]
    run = replay(segments, keys, [*edits, (S2C, at2, "gap", n2)])
    plain = ref.plain(S2C)
    between = [p for p in plain if p[1] >= at + n and p[2] <= at2]
    assert len(between) >= 10
    assert run.plain(S2C) == [p for p in plain if p[2] <= at] + between + [p for p in plain if p[1] >= at2 + n2]
    assert run.plain(C2S) == ref.plain(C2S)
    assert [e.offset for e in run.events(GAP)] == [at, at2]
    found = run.events(RESYNC)
    assert [e.offset for e in found] == [big[1], second[1]] and all("records found again" in e.message for e in found)
    assert not run.events(DECRYPT_FAILED) and not run.events(NOT_DECRYPTED)
