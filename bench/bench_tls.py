"""TLS decryption micro-benchmark: kwire_cli.tls.TlsConnection on whole TCP byte streams.

    python bench/bench_tls.py                 # ~30 s on 2 cores
    python bench/bench_tls.py --quick         # short loops, a smoke test
    python bench/bench_tls.py --json tls.json
    python bench/bench_tls.py --clock cpu     # this process's CPU time (steadier on a shared machine)

The streams:

* fixtures: every connection of every recorded TLS capture with a key log (fixtures/secure: 18
  captures, 95 connections, TLS 1.2 and 1.3, GCM, ChaCha20-Poly1305, CBC), read with kwire's
  packet reader. Small Kafka flows (ApiVersions, Metadata, a few produces and fetches): mostly
  handshakes, so this measures the per-connection cost (hellos, key schedule) as much as records.
* bulk / small, per record protection: a session made in memory by the system OpenSSL
  (tests/tls_gen.py, the test suite's generator), the client sending N messages and the server
  answering each with as many bytes. bulk: 32 messages of 128 KiB each way (full 16 KiB records,
  as in a big Fetch response); small: 4000 messages of 200 bytes each way (one short record each,
  as in produce requests and heartbeats). What a peer writes is cut into TCP segments of at most
  1448 bytes, as on an Ethernet link.

For each: the whole decoder (every segment fed, both directions interleaved as captured, then
finish()) and, as the floor, ``cryptography`` alone doing the same work for the application
records: one AEAD call per record on as many bytes (or AES-CBC over the blocks plus the HMAC), with
a key of the connection's suite -- what no decoder can go below.
Reported: MB/s of TLS stream bytes (what a capture holds), MB/s of plaintext out, records/s, and
decoder / cipher-only, the share of the time that is not the cipher. Timing: a loop calibrated to
--run-time seconds, best of --repeat runs.
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import cryptography  # noqa: E402
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes  # noqa: E402
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305  # noqa: E402
from cryptography.hazmat.primitives.hmac import HMAC  # noqa: E402

from kwire_cli.tls import SUITES as TLS_SUITES  # noqa: E402
from kwire_cli.tls import KeyLog, Plaintext, TlsConnection  # noqa: E402

SUITES = [
    ("TLS 1.3 AES-128-GCM", "1.3", "TLS_AES_128_GCM_SHA256"),
    ("TLS 1.3 ChaCha20-Poly1305", "1.3", "TLS_CHACHA20_POLY1305_SHA256"),
    ("TLS 1.2 ECDHE AES-128-GCM", "1.2", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("TLS 1.2 ECDHE ChaCha20-Poly1305", "1.2", "ECDHE-RSA-CHACHA20-POLY1305"),
    ("TLS 1.2 AES-128-CBC-SHA256 (ETM)", "1.2", "ECDHE-RSA-AES128-SHA256"),
    ("TLS 1.2 AES-128-CBC-SHA256 (MtE)", "1.2", "ECDHE-RSA-AES128-SHA256/no_etm"),
]
SHAPES = {"bulk": (32, 128 * 1024), "small": (4000, 200)}
MSS = 1448    # TCP segments as on an Ethernet link (what a write of the peer becomes)


def clock_fn(name: str):
    return time.process_time if name == "cpu" else time.perf_counter


def timed(fn, run_time: float, repeat: int, clock) -> float:
    """Seconds per call: best of ``repeat`` runs of a loop calibrated to ``run_time``."""
    fn()
    n = 1
    while True:
        t = clock()
        for _ in range(n):
            fn()
        dt = clock() - t
        if dt >= run_time / 4 or n >= 1 << 20:
            break
        n *= 2
    n = max(1, int(n * run_time / max(dt, 1e-9)))
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = clock()
        for _ in range(n):
            fn()
        best = min(best, (clock() - t) / n)
    return best


class Workload:
    def __init__(self, name: str, conns: list[list[tuple[int, bytes]]], keys: KeyLog):
        self.name = name
        self.conns = conns
        self.keys = keys
        self.stream_bytes = sum(len(b) for c in conns for _, b in c)
        out = self.decode()
        self.plain_bytes = sum(len(p.data) for p in out)
        self.records = len(out)
        self.app = self._app_records()

    def decode(self) -> list[Plaintext]:
        out = []
        for segments in self.conns:
            tc = TlsConnection(self.keys)
            for d, data in segments:
                for it in tc.feed(d, data):
                    if type(it) is Plaintext:
                        out.append(it)
            tc.finish()
        return out

    def run_decoder(self) -> None:
        for segments in self.conns:
            tc = TlsConnection(self.keys)
            feed = tc.feed
            for d, data in segments:
                feed(d, data)
            tc.finish()

    def _app_records(self) -> list[tuple[object, int]]:
        """(primitive, ciphertext length) of every application record, for the cipher-only floor:
        one ``cryptography`` call per record on as many bytes, with a key of the connection's suite."""
        out: list[tuple[object, int]] = []
        for segments in self.conns:
            tc = TlsConnection(self.keys)
            pieces = [it for d, data in segments for it in tc.feed(d, data) if type(it) is Plaintext]
            assert tc.handshake is not None
            prim = _primitive(TLS_SUITES[tc.handshake.cipher_suite_id])
            out += [(prim, p.end - p.start - 5) for p in pieces]
        return out

    def run_cipher_only(self) -> None:
        for prim, n in self.app:
            prim(n)  # type: ignore[operator]


_DATA = bytes(1 << 15)
_NONCE = bytes(12)
_AAD = bytes(13)


def _primitive(suite):
    """The work ``cryptography`` does for one record of ``n`` bytes of this suite: AEAD over the
    ciphertext (encrypt: the same work as decrypt, no tag failure), or AES-CBC decrypt of the
    blocks plus the HMAC (over the ciphertext with ETM, over the plaintext without)."""
    key = bytes(range(suite.key_len))
    if suite.cipher in ("gcm", "ccm"):
        a = AESGCM(key) if suite.cipher == "gcm" else AESCCM(key, tag_length=suite.tag_len)
        over = suite.tag_len + (1 if suite.tls13 else 8)
        return lambda n: a.encrypt(_NONCE, _DATA[:max(0, n - over)], _AAD)
    if suite.cipher == "chacha":
        c = ChaCha20Poly1305(key)
        over = suite.tag_len + (1 if suite.tls13 else 0)
        return lambda n: c.encrypt(_NONCE, _DATA[:max(0, n - over)], _AAD)
    mac_key = bytes(32)
    algo = {"sha1": hashes.SHA1, "sha256": hashes.SHA256, "sha384": hashes.SHA384}[suite.mac]

    def cbc(n: int) -> None:
        dec = Cipher(algorithms.AES(key), modes.CBC(bytes(16))).decryptor()
        dec.update(_DATA[:n - n % 16])
        h = HMAC(mac_key, algo())
        h.update(_DATA[:n])
        h.finalize()
    return cbc


def fixture_workload() -> Workload:
    from tls_util import SECURE, connections, manifest, tls_fixtures
    keys = KeyLog()
    conns = []
    for name in tls_fixtures(with_keylog=True):
        fx = manifest()["fixtures"][name]
        keys.add_text((SECURE / fx["files"]["keylog"]).read_bytes())
        for conn in connections(SECURE / fx["files"]["capture"], fx["port"]).values():
            conns.append(conn.segments)
    return Workload("fixtures (18 captures, %d connections)" % len(conns), conns, keys)


def generated_workload(label: str, version: str, suite: str, shape: str) -> Workload:
    from tls_gen import session, session_in_subprocess
    count, size = SHAPES[shape]
    sizes = (size,) * count
    opts = {}
    if suite.endswith("/no_etm"):
        suite = suite.split("/")[0]
        opts["no_etm"] = True
    if version == "1.3":
        s = session_in_subprocess(suite, version="1.3", sizes=list(sizes), seed=3, mss=MSS)
    else:
        s = session("1.2", suite, sizes=sizes, seed=3, mss=MSS, **opts)
    keys = KeyLog()
    keys.add_text(s["keylog"])
    conns = [[(d, bytes.fromhex(h)) for d, h in c["segments"]] for c in s["connections"]]
    return Workload("%s, %s" % (label, shape), conns, keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--run-time", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.quick:
        args.run_time, args.repeat = 0.1, 2
    clock = clock_fn(args.clock)
    loads = [fixture_workload()]
    shapes = ("bulk",) if args.quick else ("bulk", "small")
    for shape in shapes:
        for label, version, suite in SUITES:
            loads.append(generated_workload(label, version, suite, shape))
    rows = []
    print("%-50s %9s %9s %10s %11s %9s" % ("stream", "TLS MB/s", "plain MB/s", "records/s",
                                           "cipher MB/s", "dec/ciph"))
    for w in loads:
        t = timed(w.run_decoder, args.run_time, args.repeat, clock)
        tc = timed(w.run_cipher_only, args.run_time, args.repeat, clock)
        row = {"stream": w.name, "stream_bytes": w.stream_bytes, "plaintext_bytes": w.plain_bytes,
               "records": w.records, "seconds": t, "tls_mb_s": w.stream_bytes / t / 1e6,
               "plain_mb_s": w.plain_bytes / t / 1e6, "records_s": w.records / t,
               "cipher_only_seconds": tc, "cipher_only_mb_s": w.stream_bytes / tc / 1e6,
               "decoder_over_cipher": t / tc}
        rows.append(row)
        print("%-50s %9.1f %9.1f %10.0f %11.1f %9.2f" % (w.name[:50], row["tls_mb_s"], row["plain_mb_s"],
                                                       row["records_s"], row["cipher_only_mb_s"],
                                                       row["decoder_over_cipher"]))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "python": sys.version.split()[0], "platform": platform.platform(),
            "cryptography": cryptography.__version__, "clock": args.clock, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
