#!/usr/bin/env python3
"""A tiny recording TCP proxy for the Kafka protocol: client -> proxy -> broker.

Every byte is forwarded unchanged in both directions.  On the side, each direction's
byte stream is cut into Kafka frames by their 4-byte big-endian size prefix, and each
request is paired with its response by correlation id:

    request header:  int16 api_key, int16 api_version, int32 correlation_id, ...
    response header: int32 correlation_id, ...

A Produce request with acks=0 gets no response from the broker; it is recorded at once
with ``response = None``.  Requests still waiting when their connection closes are
recorded with ``response = None`` too.

Used by scripts/record_fixtures.py (in-process, via :class:`RecordingProxy`), or on its own::

    python scripts/record/proxy.py --listen 127.0.0.1:9093 --upstream 127.0.0.1:9092 \
        --client my-client --out /tmp/pairs

which writes every pair as ``<NNN>-<apikey>-v<version>.json`` when interrupted (Ctrl-C).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass

from kwire_cli.capture.kafka import produce_acks as _capture_produce_acks

PRODUCE = 0


class ProxyError(Exception):
    """Raised for a proxy that cannot start (address in use, bad arguments)."""


@dataclass
class Pair:
    seq: int  # order in which the proxy saw the request, across all connections
    conn: int  # connection number (1-based)
    api_key: int
    api_version: int
    correlation_id: int
    request: bytes  # whole frame, size prefix included
    response: bytes | None = None  # whole frame, size prefix included
    client: str = ""
    scenario: str = ""
    no_response_expected: bool = False  # Produce with acks=0
    # a response that came for an acks=0 Produce anyway (tansu 0.6.0 answers them; Kafka does not)
    unexpected_response: bytes | None = None
    done: bool = False

    def to_json(self) -> dict:
        return {
            "api_key": self.api_key,
            "api_version": self.api_version,
            "client": self.client,
            "scenario": self.scenario,
            "correlation_id": self.correlation_id,
            "connection": self.conn,
            "seq": self.seq,
            "request": self.request.hex(),
            "response": None if self.response is None else self.response.hex(),
            **({"acks": 0} if self.no_response_expected else {}),
            **({"unexpected_response": self.unexpected_response.hex()}
               if self.unexpected_response is not None else {}),
        }


def produce_acks(frame: bytes) -> int | None:
    """The acks field of a Produce request frame (size prefix included), or None if unreadable."""
    return _capture_produce_acks(frame[4:])


class _FrameSplitter:
    """Accumulates a byte stream and yields whole size-prefixed frames."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        frames = []
        while len(self.buf) >= 4:
            (size,) = struct.unpack_from(">i", self.buf, 0)
            if size < 0:
                raise ValueError(f"negative frame size {size}")
            if len(self.buf) < 4 + size:
                break
            frames.append(bytes(self.buf[: 4 + size]))
            del self.buf[: 4 + size]
        return frames


class RecordingProxy:
    """Forward ``listen`` -> ``upstream`` and record request/response pairs.

    Set :attr:`client` / :attr:`scenario` at any time; new requests are labelled with them.
    """

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int], client: str = "") -> None:
        self.listen = listen
        self.upstream = upstream
        self.client = client
        self.scenario = ""
        self.pairs: list[Pair] = []
        self.errors: list[str] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._conn_ids = itertools.count(1)
        self._sock: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._stopping = False

    # -- lifecycle -------------------------------------------------------
    def start(self) -> RecordingProxy:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(self.listen)
        except OSError as exc:
            s.close()
            raise ProxyError(f"proxy cannot listen on {self.listen[0]}:{self.listen[1]}: {exc}") from exc
        s.listen(64)
        self._sock = s
        t = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stopping = True
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        with self._lock:
            socks = list(self._open)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every connection seen so far is closed; True if so."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._open:
                    return True
            time.sleep(0.05)
        return False

    def finished_pairs(self) -> list[Pair]:
        with self._lock:
            return sorted((p for p in self.pairs if p.done), key=lambda p: p.seq)

    # -- internals -------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping:
            try:
                client_sock, _ = self._sock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream, timeout=10)
                up.settimeout(None)
            except OSError as exc:
                self.errors.append(f"upstream connect failed: {exc}")
                client_sock.close()
                continue
            for s in (client_sock, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = next(self._conn_ids)
            state = {"pending": {}, "acks0": {}, "client": self.client, "closed": 0}
            with self._lock:
                self._open.update((client_sock, up))
            for src, dst, direction in ((client_sock, up, "req"), (up, client_sock, "resp")):
                t = threading.Thread(
                    target=self._pump, args=(conn, state, src, dst, direction),
                    name=f"proxy-{conn}-{direction}", daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, conn: int, state: dict, src: socket.socket, dst: socket.socket, direction: str) -> None:
        splitter = _FrameSplitter()
        broken = False
        try:
            while True:
                try:
                    data = src.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    break
                # Parse before forwarding: a request must be registered as pending
                # before its response can possibly come back on the other thread.
                if not broken:
                    try:
                        for frame in splitter.feed(data):
                            self._on_frame(conn, state, frame, direction)
                    except ValueError as exc:
                        broken = True
                        self.errors.append(f"connection {conn} {direction}: {exc}; stopped parsing")
                try:
                    dst.sendall(data)
                except OSError:
                    break
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            with self._lock:
                state["closed"] += 1
                if state["closed"] == 2:
                    for p in state["pending"].values():
                        p.done = True  # never answered
                    state["pending"].clear()
                    self._open.discard(src)
                    self._open.discard(dst)
                    src.close()
                    dst.close()

    def _on_frame(self, conn: int, state: dict, frame: bytes, direction: str) -> None:
        if direction == "req":
            if len(frame) < 12:
                self.errors.append(f"connection {conn}: request frame of {len(frame)} bytes is too short")
                return
            api_key, api_version, corr = struct.unpack_from(">hhi", frame, 4)
            with self._lock:
                p = Pair(next(self._seq), conn, api_key, api_version, corr, frame,
                         client=self.client, scenario=self.scenario)
                self.pairs.append(p)
                if api_key == PRODUCE and produce_acks(frame) == 0:
                    p.no_response_expected = True
                    p.done = True
                    state["acks0"][corr] = p
                else:
                    state["pending"][corr] = p
        else:
            if len(frame) < 8:
                self.errors.append(f"connection {conn}: response frame of {len(frame)} bytes is too short")
                return
            (corr,) = struct.unpack_from(">i", frame, 4)
            with self._lock:
                p = state["pending"].pop(corr, None)
                if p is None and corr in state["acks0"]:
                    state["acks0"].pop(corr).unexpected_response = frame
                    self.notes.append(f"connection {conn}: the broker answered the acks=0 Produce request "
                                      f"with correlation id {corr}")
                    return
                if p is None:
                    self.errors.append(f"connection {conn}: response with unknown correlation id {corr}")
                    return
                p.response = frame
                p.done = True


def write_pairs(pairs: list[Pair], out_dir: str) -> list[str]:
    """Write pairs as <NNN>-<apikey>-v<version>.json (NNN = position in ``pairs``)."""
    os.makedirs(out_dir, exist_ok=True)
    names = []
    for i, p in enumerate(pairs):
        name = f"{i:03d}-{p.api_key}-v{p.api_version}.json"
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(p.to_json(), f, indent=1)
            f.write("\n")
        names.append(name)
    return names


def _hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=_hostport, required=True, help="HOST:PORT the clients connect to")
    ap.add_argument("--upstream", type=_hostport, required=True, help="HOST:PORT of the real broker")
    ap.add_argument("--client", default="client", help="label written into every pair")
    ap.add_argument("--out", required=True, help="directory for the pair files")
    args = ap.parse_args(argv)
    proxy = RecordingProxy(args.listen, args.upstream, client=args.client)
    try:
        proxy.start()
    except ProxyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"proxying {args.listen[0]}:{args.listen[1]} -> {args.upstream[0]}:{args.upstream[1]}; Ctrl-C to stop",
          file=sys.stderr)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    proxy.stop()
    names = write_pairs(proxy.finished_pairs(), args.out)
    print(f"wrote {len(names)} pairs to {args.out}", file=sys.stderr)
    for e in proxy.errors:
        print(f"warning: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
