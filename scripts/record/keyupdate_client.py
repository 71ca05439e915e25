#!/usr/bin/env python3
"""Send prepared Kafka requests over ``openssl s_client`` with TLS 1.3 KeyUpdates in between.

    python scripts/record/keyupdate_client.py --connect 127.0.0.1:9093 --ca ca.pem \\
        --keylog client.keylog [--ciphersuites TLS_AES_128_GCM_SHA256] > result.json

No Kafka client can trigger a TLS 1.3 KeyUpdate: Python's ``ssl`` does not expose OpenSSL's
``SSL_key_update``, Node has no API for it, librdkafka never sends one.  ``openssl s_client``
does: a line ``K`` on its standard input sends a KeyUpdate asking the peer to update too
(``update_requested``; the server answers with its own KeyUpdate), ``k`` sends one that does not.
So this script writes raw Kafka request frames (built here byte by byte) into s_client's stdin,
with ``K`` and ``k`` commands between them, pausing after each so that the answer comes back
before the next step:

    ApiVersions v0 (correlation id 1)
    K   -> client KeyUpdate(update_requested); the server updates its keys too
    Metadata v1, all topics (correlation id 2)
    k   -> client KeyUpdate(update_not_requested)
    Metadata v1, all topics (correlation id 3)
    K   -> both sides update again
    ApiVersions v0 (correlation id 4)
    end of input -> s_client sends close_notify and closes

The key log (``-keylogfile``) holds only the initial TLS 1.3 secrets; the traffic secrets after
each KeyUpdate derive from them (RFC 8446 7.2: HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)).
Prints one JSON object: the steps sent and how many response bytes s_client printed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
import time

CLIENT_ID = b"kwire-openssl-s_client"


def request(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, len(CLIENT_ID)) + CLIENT_ID + body
    return struct.pack(">i", len(payload)) + payload


STEPS = [
    ("request", request(18, 0, 1), "ApiVersions v0"),
    ("command", b"K\n", "KeyUpdate update_requested"),
    ("request", request(3, 1, 2, struct.pack(">i", -1)), "Metadata v1 (all topics)"),
    ("command", b"k\n", "KeyUpdate update_not_requested"),
    ("request", request(3, 1, 3, struct.pack(">i", -1)), "Metadata v1 (all topics)"),
    ("command", b"K\n", "KeyUpdate update_requested"),
    ("request", request(18, 0, 4), "ApiVersions v0"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connect", required=True, help="HOST:PORT of the TLS listener")
    ap.add_argument("--ca", required=True)
    ap.add_argument("--keylog", required=True)
    ap.add_argument("--ciphersuites", default="TLS_AES_128_GCM_SHA256")
    ap.add_argument("--servername", default="localhost")
    ap.add_argument("--pause", type=float, default=0.6, help="seconds after each step")
    args = ap.parse_args(argv)
    openssl = shutil.which("openssl")
    if not openssl:
        print(json.dumps({"error": "openssl not found"}))
        return 1
    cmd = [openssl, "s_client", "-connect", args.connect, "-servername", args.servername, "-CAfile", args.ca,
           "-verify_return_error", "-tls1_3", "-ciphersuites", args.ciphersuites, "-keylogfile", args.keylog,
           "-no_ign_eof"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    time.sleep(args.pause)  # handshake
    done = []
    for kind, data, what in STEPS:
        proc.stdin.write(data)
        proc.stdin.flush()
        done.append({"step": kind, "what": what, "bytes": len(data) if kind == "request" else None})
        time.sleep(args.pause)
    try:
        out, err = proc.communicate(timeout=15)  # closes stdin: s_client sends close_notify
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    text = err.decode("latin-1")
    result = {"steps": done, "exit": proc.returncode, "stdout_bytes": len(out),
              "keyupdate_lines": sum(1 for ln in (out + err).decode("latin-1").splitlines() if "KEYUPDATE" in ln),
              "verify": next((ln.strip() for ln in out.decode("latin-1").splitlines()
                              if "Verify return code" in ln), None),
              "stderr_tail": text.strip().splitlines()[-3:]}
    print(json.dumps(result))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
