"""TLS inside kwire's capture reading (issue 16): the recorded TLS captures of fixtures/secure,
decrypted with their key logs (or the secrets blocks of their pcapng copies), give the Kafka
frames the recorder logged for each connection, kwire pcap says what each connection negotiated,
a capture without its keys is reported once per connection and never framed as Kafka, and
tshark with the same key log finds the same frames."""
from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cli_run import kwire
from kwire_cli.capture import CaptureStats, KafkaFrame, iter_capture
from kwire_cli.capture.events import Note
from kwire_cli.tls import KeyLog

SECURE = Path(__file__).resolve().parents[1] / "fixtures" / "secure"
MANIFEST = json.loads((SECURE / "manifest.json").read_text())
TLS = {n: f for n, f in MANIFEST["fixtures"].items() if f["kind"] == "tls"}
WITH_KEYS = [n for n, f in TLS.items() if "keylog" in f["files"]]
NO_KEY = [n for n, f in TLS.items() if "keylog" not in f["files"]]
DSB = [n for n, f in TLS.items() if "dsb_pcapng" in f["files"]]


def keys_of(f: dict) -> KeyLog:
    k = KeyLog()
    assert k.add_text((SECURE / f["files"]["keylog"]).read_bytes()) == []
    return k


def read(path: Path, port: int, keylog: KeyLog | None) -> tuple[list, list, list, CaptureStats]:
    stats = CaptureStats()
    frames, damage, notes = [], [], []
    for ev in iter_capture(str(path), broker_ports=[port], stats=stats, keylog=keylog):
        if isinstance(ev, KafkaFrame):
            frames.append(ev)
        elif isinstance(ev, Note):
            notes.append(ev)
        else:
            damage.append(ev)
    return frames, damage, notes, stats


def client_port(conn: str) -> int:
    return int(conn.split("->")[0].rsplit(":", 1)[1])


def by_connection(frames: list) -> dict[int, Counter]:
    out: dict[int, Counter] = {}
    for fr in frames:
        out.setdefault(client_port(fr.conn), Counter())[(fr.kind, fr.api_key, fr.api_version, fr.correlation_id)] += 1
    return out


def expected(f: dict) -> dict[int, Counter]:
    return {c["client_port"]: Counter((k, a, v, corr) for _d, _who, k, a, v, corr, _n in c["frames"])
            for c in f["connections"] if c["frames"]}


def same_as_recorded(frames: list, f: dict) -> None:
    """The frames of each connection are the ones the recorder relayed: every request, and every
    response the TLS terminator got to send before the client hung up (librdkafka closes with
    requests in flight: their answers reached the terminator, never the client's connection)."""
    mine, want = by_connection(frames), expected(f)
    assert set(mine) == set(want)
    for port, got in mine.items():
        requests = Counter({k: v for k, v in want[port].items() if k[0] == "request"})
        assert Counter({k: v for k, v in got.items() if k[0] == "request"}) == requests
        assert got <= want[port], port
    short = sum(sum(w.values()) for w in want.values()) - len(frames)
    assert short <= (3 if f["client"] == "confluent-kafka" else 0), short


def test_the_fixtures_are_all_here():
    assert len(WITH_KEYS) == 13 and NO_KEY == ["tls13-nokey-kafka-python"] and len(DSB) == 2


@pytest.mark.parametrize("name", WITH_KEYS)
def test_decrypted_frames_are_the_ones_on_each_connection(name):
    f = TLS[name]
    frames, damage, notes, stats = read(SECURE / f["files"]["capture"], f["port"], keys_of(f))
    same_as_recorded(frames, f)
    # every frame's bytes are what the connection's plaintext twin carried, in the same order
    twin, *_ = read(SECURE / f["files"]["plaintext_twin"], f["twin_port"], None)
    twin_of = {c["client_port"]: c["twin_client_port"] for c in f["connections"]}
    for port in by_connection(frames):
        for kind in ("request", "response"):  # each direction's frames, in order
            ours = [(fr.correlation_id, fr.data) for fr in frames if client_port(fr.conn) == port and fr.kind == kind]
            theirs = [(fr.correlation_id, fr.data) for fr in twin
                      if client_port(fr.conn) == twin_of[port] and fr.kind == kind]
            assert ours == theirs[:len(ours)] and ours
    assert stats.reconcile()["ok"]
    assert stats.tls_connections == stats.tls_decrypted == len(f["connections"])
    assert not [d for d in damage if d.kind.startswith("tls-")], damage
    # one handshake note per connection, naming what the recorder saw negotiated
    hs = {client_port(n.conn): n.detail for n in notes if n.kind == "tls"}
    for c in f["connections"]:
        assert c["tls_version"] in hs[c["client_port"]] and c["cipher_suite"] in hs[c["client_port"]]
    want = Counter(f"{c['tls_version']} {c['cipher_suite']}" for c in f["connections"])
    assert stats.tls_sessions == dict(want)


@pytest.mark.parametrize("name", DSB)
def test_decryption_secrets_blocks_are_read_from_the_pcapng(name):
    f = TLS[name]
    frames, damage, _notes, stats = read(SECURE / f["files"]["dsb_pcapng"], f["port"], None)
    same_as_recorded(frames, f)
    assert stats.tls_decrypted == len(f["connections"]) and not [d for d in damage if d.kind.startswith("tls-")]


def test_without_its_key_a_connection_is_reported_once_and_never_framed():
    f = TLS[NO_KEY[0]]
    frames, damage, notes, stats = read(SECURE / f["files"]["capture"], f["port"], KeyLog())
    assert frames == []
    # not damage: the records are whole, only their keys are missing
    assert damage == []
    nokey = [n for n in notes if n.kind == "tls-no-key"]
    assert sorted(client_port(n.conn) for n in nokey) == sorted(c["client_port"] for c in f["connections"])
    assert all("no key" in n.detail and "bytes not decrypted" in n.detail for n in nokey)
    assert stats.tls_connections == 6 and stats.tls_decrypted == 0 and stats.reconcile()["ok"]
    assert stats.tls_not_decrypted == {"TLS 1.3 on 127.0.0.1:%d" % f["port"]: 6}
    # the client random is public and named; no frames invented from ciphertext
    for c in f["connections"]:
        assert any(c["client_random"][:8] in n.detail for n in nokey)
    # the handshakes are still readable, named once (the connection is the note's own)
    hs = [n for n in notes if n.kind == "tls"]
    assert len(hs) == len(f["connections"]) and all(n.conn not in n.detail for n in notes)


def test_kwire_pcap_tls_keylog_rows_and_summary():
    f = TLS["tls13-chacha20-kafkajs"]
    cap = str(SECURE / f["files"]["capture"])
    key = str(SECURE / f["files"]["keylog"])
    r = kwire("pcap", cap, "--port", "9093", "--tls-keylog", key, "--format", "jsonl")
    assert r.code == 0, r
    rows = [json.loads(x) for x in r.out.splitlines()]
    assert len(rows) == sum(sum(c.values()) for c in expected(f).values())
    assert all(x["error"] is None for x in rows)
    twin = kwire("pcap", str(SECURE / f["files"]["plaintext_twin"]), "--port", "19093", "--format", "jsonl")
    strip = ("frame", "ts", "src", "dst", "conn", "request_frame", "latency_ms", "file")
    assert [{k: v for k, v in x.items() if k not in strip} for x in rows] == \
           [{k: v for k, v in json.loads(x).items() if k not in strip} for x in twin.out.splitlines()]
    s = kwire("pcap", cap, "--port", "9093", "--tls-keylog", key, "--summary", "--format", "json")
    tls = json.loads(s.out)["tls"]
    assert tls["connections"] == tls["decrypted"] == 4
    assert tls["sessions"] == {"TLSv1.3 TLS_CHACHA20_POLY1305_SHA256": 4}
    t = kwire("pcap", cap, "--port", "9093", "--tls-keylog", key, "--summary")
    assert "TLS connections 4, decrypted 4 (TLSv1.3 TLS_CHACHA20_POLY1305_SHA256 4)" in t.out
    # without the key log: no frame, no damage, the connections counted per server
    n = kwire("pcap", cap, "--port", "9093", "--summary", "--format", "json")
    summ = json.loads(n.out)
    assert summ["frames"] == 0 and summ["tls"]["not_decrypted"] == {"TLS 1.3 on 127.0.0.1:9093": 4}
    assert not summ.get("damage")


def test_bad_key_log_arguments_are_one_line():
    f = TLS["tls13-chacha20-kafkajs"]
    cap = str(SECURE / f["files"]["capture"])
    r = kwire("pcap", cap, "--tls-keylog", "/nonexistent/keys.log")
    assert r.code == 2 and r.err.count("\n") == 1 and "--tls-keylog" in r.err and "/nonexistent/keys.log" in r.err
    r = kwire("pcap", cap, "--port", "9093", "--tls-keylog", cap, "--summary", "--format", "json")
    assert r.code == 0 and "kwire: warning: --tls-keylog" in r.err and "lines not read" in r.err


TSHARK = shutil.which("tshark")


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed")
@pytest.mark.parametrize("name", WITH_KEYS)
def test_tshark_with_the_same_key_log_finds_the_same_requests(name):
    """tshark decrypts with the key log and dissects Kafka (its dissector knows fewer versions, so
    compare what both see: the request API keys and correlation ids per packet)."""
    f = TLS[name]
    cap, key, port = SECURE / f["files"]["capture"], SECURE / f["files"]["keylog"], f["port"]
    r = subprocess.run([TSHARK, "-r", str(cap), "-o", f"tls.keylog_file:{key}", "-d", f"tcp.port=={port},tls",
                        "-d", f"tls.port=={port},kafka", "-Y", "kafka.request_key", "-T", "fields",
                        "-e", "frame.number", "-e", "kafka.request_key", "-e", "kafka.correlation_id"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    theirs = Counter()
    for line in r.stdout.splitlines():
        _num, keys, corrs = line.split("\t")
        for k, c in zip(keys.split(","), corrs.split(","), strict=True):
            theirs[(int(k), int(c))] += 1
    frames, *_ = read(cap, port, keys_of(f))
    ours = Counter((fr.api_key, fr.correlation_id) for fr in frames if fr.kind == "request")
    assert ours == theirs and sum(ours.values()) > 0


def test_a_key_log_of_any_size_is_read_whole(tmp_path):
    """A key log over 64 MiB (it grows for the life of a process) whose capture's secrets are at
    its end: read whole, the capture decrypts; the file is made sparse (a 70 MB hole, which reads
    as one line too long), so the test takes no time to write it."""
    f = TLS["tls13-chacha20-kafkajs"]
    cap = str(SECURE / f["files"]["capture"])
    big = tmp_path / "sslkeylog.log"
    with big.open("wb") as out:
        out.truncate(70 << 20)
        out.seek(70 << 20)
        out.write(b"\n" + (SECURE / f["files"]["keylog"]).read_bytes())
    r = kwire("pcap", cap, "--port", "9093", "--tls-keylog", str(big), "--summary", "--format", "json")
    assert r.code == 0, r
    tls = json.loads(r.out)["tls"]
    assert tls["connections"] == tls["decrypted"] == 4
    assert r.err.count("\n") == 1 and "1 lines not read" in r.err and "line 1: line longer than" in r.err


def test_a_tls_capture_without_its_keys_says_so_on_stderr(tmp_path):
    """No key log: one note per TLS version and server saying which option gives the keys, no
    damage warning; with a key log that lacks them: that their client randoms are not in it."""
    for name, port, ver, n in (("tls12-ecdhe-rsa-chacha20-kafkajs", 9093, "TLS 1.2", 4),
                               ("tls13-nokey-kafka-python", 9093, "TLS 1.3", 6)):
        cap = str(SECURE / TLS[name]["files"]["capture"])
        r = kwire("pcap", cap)
        assert r.code == 0, r
        assert r.err == ("kwire: note: %s on 127.0.0.1:%d: %d connections not decrypted; give --tls-keylog FILE "
                         "(the client's SSLKEYLOGFILE)\n" % (ver, port, n))
    other = str(SECURE / TLS["tls12-ecdhe-rsa-chacha20-kafkajs"]["files"]["keylog"])
    cap = str(SECURE / TLS["tls13-chacha20-kafkajs"]["files"]["capture"])
    r = kwire("pcap", cap, "--tls-keylog", other)
    assert r.code == 0 and r.err == ("kwire: note: TLS 1.3 on 127.0.0.1:9093: 4 connections not decrypted: "
                                     "their client randoms are not in the key log\n")
    # the summary's handshake lines name the connection once
    s = kwire("pcap", cap, "--summary")
    lines = [x for x in s.out.splitlines() if "TLSv1.3 TLS_CHACHA20_POLY1305_SHA256" in x and "->" in x]
    assert len(lines) == 4 and all(x.count("->") == 1 for x in lines)
    # damage lines too: a key log whose traffic secrets are wrong
    wrong = tmp_path / "wrong.keylog"
    good = (SECURE / TLS["tls13-chacha20-kafkajs"]["files"]["keylog"]).read_text()
    wrong.write_text("\n".join(" ".join((*x.split()[:2], "ff" * 32)) if "TRAFFIC_SECRET_0" in x else x
                               for x in good.splitlines()))
    s = kwire("pcap", cap, "--tls-keylog", str(wrong), "--summary")
    failed = [x for x in s.out.splitlines() if "tls-decrypt-failed:" in x]
    assert failed and all(x.count("->") == 1 for x in failed)
