"""Key logs (NSS format as Wireshark reads it) and pcapng Decryption Secrets Blocks: what is read,
what is counted and skipped, what is reported (by line number, never with the line's content)."""
from __future__ import annotations

import pickle
import random
import struct

import pytest

from kwire_cli.tls import SECRETS_TLS, KeyLog, Secret
from kwire_cli.tls.keylog import MAX_LINE, MAX_PROBLEMS, KeyLogProblem
from tls_util import SECURE, dsb_bodies, manifest, tls_fixtures

CR = "ab" * 32
MASTER = "5e" * 48
SECRET32 = "c7" * 32


@pytest.mark.parametrize("name", tls_fixtures(with_keylog=True))
def test_fixture_key_logs_read_with_the_manifests_counts(name):
    fx = manifest()["fixtures"][name]
    keys = KeyLog()
    raw = (SECURE / fx["files"]["keylog"]).read_bytes()
    assert keys.add_text(raw, fx["files"]["keylog"]) == []
    labels = dict(fx["keylog"]["labels"])
    ignored = {k: labels.pop(k) for k in list(labels) if k.endswith("_N")}
    assert keys.counts == labels
    assert keys.ignored == ignored
    clients = {c["client_random"] for c in fx["connections"]}
    assert {cr.hex() for cr in keys.client_randoms()} == clients
    assert keys.comments == raw.count(b"\n#") + raw.startswith(b"#")


def test_labels_and_lookups():
    rsa_prefix = "0102030405060708"
    text = "\n".join([
        "# a comment", "",
        "CLIENT_RANDOM %s %s" % (CR, MASTER),
        "RSA %s %s" % (rsa_prefix, "03" * 48),
        "PMS_CLIENT_RANDOM %s %s" % ("cd" * 32, "04" * 48),
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET %s %s" % (CR, SECRET32),
        "SERVER_HANDSHAKE_TRAFFIC_SECRET %s %s" % (CR, "d1" * 48),
        "CLIENT_TRAFFIC_SECRET_0 %s %s" % (CR, SECRET32),
        "SERVER_TRAFFIC_SECRET_0 %s %s" % (CR.upper(), SECRET32.upper()),
        "CLIENT_EARLY_TRAFFIC_SECRET %s %s" % (CR, SECRET32),
        "EXPORTER_SECRET %s %s" % (CR, SECRET32),
        "EARLY_EXPORTER_SECRET %s %s\r" % (CR, SECRET32),
        "CLIENT_TRAFFIC_SECRET_N %s %s" % (CR, SECRET32),
        "SOMETHING_NEW %s %s" % (CR, SECRET32),
    ])
    keys = KeyLog()
    assert keys.add_text(text) == []
    assert keys.comments == 1
    assert keys.ignored == {"CLIENT_TRAFFIC_SECRET_N": 1, "SOMETHING_NEW": 1}
    assert sum(keys.counts.values()) == 10
    cr = bytes.fromhex(CR)
    assert keys.get("CLIENT_RANDOM", cr) == Secret(bytes.fromhex(MASTER))
    assert keys.get("SERVER_TRAFFIC_SECRET_0", cr).reveal() == bytes.fromhex(SECRET32)
    assert len(keys.get("SERVER_HANDSHAKE_TRAFFIC_SECRET", cr)) == 48
    assert keys.get("CLIENT_RANDOM", bytes(32)) is None
    assert keys.rsa_premaster(bytes.fromhex(rsa_prefix) + b"rest of the encrypted pre-master").reveal() == b"\x03" * 48
    assert keys.has_client_random(cr) and keys.has_client_random(bytes.fromhex("cd" * 32))
    # a later line for the same label and client random replaces the earlier one
    keys.add_line("CLIENT_RANDOM %s %s" % (CR, "77" * 48))
    assert keys.get("CLIENT_RANDOM", cr).reveal() == b"\x77" * 48


BAD_LINES = [
    ("CLIENT_RANDOM %s" % CR, "CLIENT_RANDOM: expected 3 fields, found 2"),
    ("CLIENT_RANDOM %s %s extra" % (CR, MASTER), "CLIENT_RANDOM: expected 3 fields, found 4"),
    ("CLIENT_RANDOM %s %s" % (CR, MASTER[:-1]), "CLIENT_RANDOM: the secret is not an even number of hex digits"),
    ("CLIENT_RANDOM %s %s" % (CR[:-2], MASTER), "CLIENT_RANDOM: the client random is 62 hex digits, not 64"),
    ("CLIENT_RANDOM %s %s" % (CR, "zz" + MASTER[2:]), "CLIENT_RANDOM: the secret is not an even number of hex digits"),
    ("CLIENT_RANDOM %s %s" % ("g" + CR[1:], MASTER), "CLIENT_RANDOM: the client random is not hex"),
    ("CLIENT_RANDOM %s %s" % (CR, SECRET32), "CLIENT_RANDOM: the master secret is 32 bytes, not 48"),
    ("RSA %s %s" % ("01" * 7, "03" * 48), "RSA: the encrypted pre-master prefix is 14 hex digits, not 16"),
    ("RSA %s %s" % ("01" * 8, "03" * 40), "RSA: the pre-master secret is 40 bytes, not 48"),
    ("CLIENT_TRAFFIC_SECRET_0 %s %s" % (CR, "aa" * 20), "CLIENT_TRAFFIC_SECRET_0: the secret is 20 bytes, not 32, 48 or 64"),
    ("client_random %s %s" % (CR, MASTER), "not a key log line (the first word is not a label)"),
    (MASTER, "not a key log line (one word, no label)"),
    ("DEADBEEF %s %s" % (CR, MASTER), "not a key log line (the first word is not a label)"),
    ("%s %s %s" % (SECRET32, CR, MASTER), "not a key log line (the first word is not a label)"),
    ("hello, world", "not a key log line (the first word is not a label)"),
    ("CLIENT_RANDOM %s %s" % (CR, "ab" * (MAX_LINE // 2)), "line longer than %d characters, not read" % MAX_LINE),
]


@pytest.mark.parametrize("line,reason", BAD_LINES)
def test_a_bad_line_is_one_problem_naming_its_line_and_never_its_content(line, reason):
    keys = KeyLog()
    text = "# first\nCLIENT_RANDOM %s %s\n%s\n" % ("ef" * 32, "11" * 48, line)
    problems = keys.add_text(text, "my.keylog")
    assert len(problems) == 1
    (p,) = problems
    assert (p.source, p.line, p.reason) == ("my.keylog", 3, reason)
    assert str(p) == "my.keylog line 3: " + reason
    # no word of the line (secrets, randoms, unknown text) appears in what is reported
    for word in line.split():
        if word not in reason.split(":")[0].split():
            assert word not in str(p) and word not in repr(p) and word.lower() not in str(p).lower()
    assert "11" * 48 not in repr(keys)
    assert keys.counts == {"CLIENT_RANDOM": 1}      # the good line is read, the bad one is not
    assert keys.problems == problems


def test_problems_are_capped_and_the_rest_counted():
    keys = KeyLog()
    junk = b"\n".join(b"junk line %d" % i for i in range(5000))
    problems = keys.add_text(junk, "junk")
    assert len(problems) == MAX_PROBLEMS + 1
    assert str(problems[-1]) == "junk: %d more lines not read" % (5000 - MAX_PROBLEMS)
    assert keys.more_problems == 5000 - MAX_PROBLEMS
    assert len(keys) == 0


def test_binary_junk_is_no_traceback():
    keys = KeyLog()
    blob = bytes(range(256)) * 64 + b"\nCLIENT_RANDOM " + b"\xff" * 64 + b" " + b"\x00" * 96
    problems = keys.add_text(blob)
    assert problems and all(p.line for p in problems[:-1])
    assert len(keys) == 0


def test_secret_and_keylog_reprs_say_sizes_only():
    s = Secret(bytes.fromhex(MASTER))
    assert repr(s) == str(s) == "<secret 48 bytes>"
    assert MASTER not in "%r %s %a" % (s, s, s)
    keys = KeyLog()
    keys.add_text("CLIENT_RANDOM %s %s\nCLIENT_TRAFFIC_SECRET_0 %s %s" % (CR, MASTER, CR, SECRET32))
    assert repr(keys) == "<KeyLog 2 secrets, 1 client randoms, 0 problems>"
    for obj in (keys, vars(keys), keys._by_label, keys.counts):
        assert MASTER not in repr(obj) and SECRET32 not in repr(obj) and "^" not in repr(obj)
    # picklable (spark-decode ships the key log to executors), secrets intact
    back = pickle.loads(pickle.dumps(keys))
    assert back.get("CLIENT_RANDOM", bytes.fromhex(CR)) == s


def _dsb(stype: int, data: bytes, little: bool = True) -> bytes:
    pad = (-len(data)) % 4
    fmt = "<II" if little else ">II"
    return struct.pack(fmt, stype, len(data)) + data + b"\x00" * pad


def test_decryption_secrets_block_bodies():
    log = ("CLIENT_RANDOM %s %s\n" % (CR, MASTER)).encode()
    keys = KeyLog()
    assert keys.add_dsb_block(_dsb(SECRETS_TLS, log)) == []
    assert keys.add_dsb_block(_dsb(SECRETS_TLS, log.replace(b"5e", b"6e"), little=False), little_endian=False) == []
    assert keys.get("CLIENT_RANDOM", bytes.fromhex(CR)).reveal() == b"\x6e" * 48
    # other secrets types are counted and skipped
    assert keys.add_dsb_block(_dsb(0x57474B4C, b"wireguard keys")) == []
    assert keys.add_dsb_block(_dsb(0x12345678, b"?")) == []
    assert keys.ignored == {"DSB WireGuard key log": 1, "DSB secrets type 0x12345678": 1}
    # damaged blocks
    (p,) = keys.add_dsb_block(b"\x4b\x53\x4c")
    assert str(p) == "decryption secrets block: decryption secrets block of 3 bytes, shorter than its 8-byte header"
    (p,) = keys.add_dsb_block(struct.pack("<II", SECRETS_TLS, 1000) + log, source="x.pcapng block 2")
    assert str(p) == "x.pcapng block 2: decryption secrets block says 1000 bytes of secrets, holds %d" % len(log)
    # a bad line inside a DSB is reported like a key log line
    (p,) = keys.add_dsb_block(_dsb(SECRETS_TLS, log + b"CLIENT_RANDOM 00\n"), source="dsb")
    assert str(p) == "dsb line 2: CLIENT_RANDOM: expected 3 fields, found 2"


@pytest.mark.parametrize("name", [n for n in tls_fixtures(True) if "dsb_pcapng" in manifest()["fixtures"][n]["files"]])
def test_fixture_dsb_holds_the_key_log(name):
    fx = manifest()["fixtures"][name]
    ((body, little),) = dsb_bodies(SECURE / fx["files"]["dsb_pcapng"])
    a, b = KeyLog(), KeyLog()
    assert a.add_dsb_block(body, little) == []
    b.add_text((SECURE / fx["files"]["keylog"]).read_bytes())
    assert a.counts == b.counts
    for cr in b.client_randoms():
        for label in b.counts:
            assert a.get(label, cr) == b.get(label, cr)


@pytest.mark.parametrize("size", [1, 7, 64, 1000, 1 << 20])
def test_a_key_log_read_in_pieces_reads_as_whole(size):
    """add_chunks with the key log cut anywhere (inside a line, a label, a CRLF) reads the same
    secrets, counts and problems, with the same line numbers, as add_text."""
    raw = b"".join((SECURE / fx["files"]["keylog"]).read_bytes()
                   for fx in manifest()["fixtures"].values() if "keylog" in fx.get("files", {}))
    raw += b"\r\nnot a key log line\n" + b"X" * (5 * MAX_LINE) + b"\nCLIENT_RANDOM 12\n# last"
    whole, pieces = KeyLog(), KeyLog()
    expected = whole.add_text(raw, "k")
    got = pieces.add_chunks((raw[i:i + size] for i in range(0, len(raw), size)), "k")
    assert got == expected and len(expected) == 3
    n = raw.count(b"\n")
    assert [p.line for p in expected] == [n - 2, n - 1, n]
    assert pieces.counts == whole.counts and pieces.comments == whole.comments
    assert pieces.client_randoms() == whole.client_randoms()
    for cr in whole.client_randoms():
        for label in whole.counts:
            assert pieces.get(label, cr) == whole.get(label, cr)


def test_a_line_of_any_length_is_not_held():
    """A 'line' of 64 MiB without a newline (a file that is not a key log): one problem, and the
    lines after it are read."""
    keys = KeyLog()
    chunk = b"\x00" * (1 << 20)
    problems = keys.add_chunks([*(chunk for _ in range(64)), b"\nCLIENT_RANDOM %s %s\n" % (CR.encode(), MASTER.encode())])
    assert [(p.line, p.reason) for p in problems] == [(1, "line longer than %d characters, not read" % MAX_LINE)]
    assert keys.get("CLIENT_RANDOM", bytes.fromhex(CR)) == Secret(bytes.fromhex(MASTER))


def test_lines_as_openssl_writes_them_read_as_any_other_line():
    """``add_chunks`` reads well-formed lines without the per-line checks: the same secrets,
    counts and problems as ``add_line`` gives line by line, on lines near and far from that form."""
    rng = random.Random(3)
    labels = ["CLIENT_RANDOM", "PMS_CLIENT_RANDOM", "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0",
              "EXPORTER_SECRET", "EARLY_EXPORTER_SECRET", "CLIENT_EARLY_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_1",
              "RSA", "client_random", "CLIENT_RANDOMX"]
    lines = []
    for _ in range(3000):
        cr = rng.randbytes(rng.choice([32, 32, 32, 31, 8])).hex()
        sec = rng.randbytes(rng.choice([32, 48, 64, 48, 16, 65])).hex()
        if rng.random() < 0.2:
            sec = sec.upper()
        if rng.random() < 0.05:
            sec = sec[:-1] + "g"
        sep = rng.choice([" ", " ", " ", "  ", "\t"])
        line = rng.choice(labels) + sep + cr + sep + sec + rng.choice(["", "", "", " ", "\r"])
        if rng.random() < 0.02:
            line = "# " + line
        lines.append(line.encode())
    lines += lines[:50]     # later lines replace earlier ones
    text = b"\n".join(lines)
    fast, slow = KeyLog(), KeyLog()
    got = fast.add_chunks([text[i:i + 4096] for i in range(0, len(text), 4096)], "f")
    want = [p for p in (slow.add_line(ln, no, "f") for no, ln in enumerate(lines, 1)) if p is not None]
    more = KeyLogProblem("f", 0, "%d more lines not read" % slow.more_problems)
    assert slow.more_problems and fast.more_problems == slow.more_problems and got == [*want, more]
    assert fast.problems == [*slow.problems, more] and fast.counts == slow.counts
    assert fast.ignored == slow.ignored and fast.comments == slow.comments and len(fast) == len(slow)
    for ln in lines:
        words = ln.split()
        if len(words) == 3 and len(words[1]) == 64:
            label, cr = words[0].decode(), bytes.fromhex(words[1].decode())
            assert fast.get(label, cr) == slow.get(label, cr)
    assert sum(fast.counts.values()) > 500
