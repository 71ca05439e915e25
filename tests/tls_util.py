"""Test helpers for kwire_cli.tls: per-connection TCP byte streams out of the recorded captures
(kwire's own packet reader and a minimal reassembly), the DSBs of a pcapng, and running a
TlsConnection over a connection."""
from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

from kwire_cli.capture import Packet, iter_packets
from kwire_cli.tls import C2S, S2C, KeyLog, Plaintext, TlsConnection, TlsEvent

ROOT = Path(__file__).resolve().parents[1]
SECURE = ROOT / "fixtures" / "secure"
SYN = 0x02


@cache
def manifest() -> dict:
    return json.loads((SECURE / "manifest.json").read_text())


def tls_fixtures(with_keylog: bool | None = None) -> list[str]:
    """Names of the fixtures with TLS (tls/, keyupdate, and the SASL ones over TLS)."""
    out = []
    for name, fx in manifest()["fixtures"].items():
        if "plaintext_twin" not in fx.get("files", {}):
            continue
        has = "keylog" in fx["files"]
        if with_keylog is None or has == with_keylog:
            out.append(name)
    return out


class Connection:
    """One TCP connection of a capture: its segments' payloads in capture order, in stream order
    per direction (retransmitted bytes dropped), as ``(direction, bytes)``; C2S = towards
    ``server_port``. ``holes``: bytes the reassembly could not place (0 in the fixtures)."""

    def __init__(self, client_port: int):
        self.client_port = client_port
        self.segments: list[tuple[int, bytes]] = []
        self.next_seq: list[int | None] = [None, None]
        self.pending: list[dict[int, bytes]] = [{}, {}]
        self.holes = 0

    def add(self, d: int, pkt: Packet) -> None:
        seq = pkt.seq
        if pkt.flags & SYN:
            self.next_seq[d] = (seq + 1) & 0xFFFFFFFF
            return
        data = pkt.payload
        if not data:
            return
        nxt = self.next_seq[d]
        if nxt is None:
            nxt = seq
        self.pending[d][seq] = data
        # deliver everything that is now in order
        while True:
            placed = False
            for s in list(self.pending[d]):
                off = (s - nxt) & 0xFFFFFFFF
                if off >= 1 << 31:          # starts before nxt: retransmission / overlap
                    chunk = self.pending[d].pop(s)
                    skip = (nxt - s) & 0xFFFFFFFF
                    if skip < len(chunk):
                        self.segments.append((d, chunk[skip:]))
                        nxt = (nxt + len(chunk) - skip) & 0xFFFFFFFF
                    placed = True
                elif off == 0:
                    chunk = self.pending[d].pop(s)
                    self.segments.append((d, chunk))
                    nxt = (nxt + len(chunk)) & 0xFFFFFFFF
                    placed = True
            if not placed:
                break
        self.next_seq[d] = nxt

    def stream(self, d: int) -> bytes:
        return b"".join(b for dd, b in self.segments if dd == d)


def connections(path: Path, server_port: int) -> dict[int, Connection]:
    """Connections of a capture by client port (direction C2S = towards ``server_port``)."""
    conns: dict[int, Connection] = {}
    for item in iter_packets(str(path)):
        if type(item) is not Packet:
            continue
        if item.dst_port == server_port:
            d, cport = C2S, item.src_port
        elif item.src_port == server_port:
            d, cport = S2C, item.dst_port
        else:
            continue
        conn = conns.get(cport)
        if conn is None:
            conn = conns[cport] = Connection(cport)
        conn.add(d, item)
    for conn in conns.values():
        conn.holes = sum(len(b) for p in conn.pending for b in p.values())
    return conns


def dsb_bodies(path: Path) -> list[tuple[bytes, bool]]:
    """The Decryption Secrets Blocks of a pcapng: (block body, little endian)."""
    data = path.read_bytes()
    out = []
    p = 0
    little = True
    while p + 12 <= len(data):
        btype = struct.unpack_from("<I", data, p)[0]
        if btype == 0x0A0D0D0A:
            little = struct.unpack_from("<I", data, p + 8)[0] == 0x1A2B3C4D
        fmt = "<I" if little else ">I"
        btype = struct.unpack_from(fmt, data, p)[0]
        blen = struct.unpack_from(fmt, data, p + 4)[0]
        if blen < 12 or p + blen > len(data):
            break
        if btype == 0x0000000A:
            out.append((data[p + 8:p + blen - 4], little))
        p += blen
    return out


def keylog_of(name: str, drop_labels: tuple[str, ...] = ()) -> KeyLog:
    fx = manifest()["fixtures"][name]
    text = (SECURE / fx["files"]["keylog"]).read_bytes()
    if drop_labels:
        text = b"\n".join(ln for ln in text.split(b"\n") if ln.split(b" ", 1)[0].decode() not in drop_labels)
    keys = KeyLog()
    assert keys.add_text(text, fx["files"]["keylog"]) == []
    return keys


class Result:
    def __init__(self) -> None:
        self.plain: list[bytearray] = [bytearray(), bytearray()]
        self.events: list[TlsEvent] = []
        self.items: list[Plaintext | TlsEvent] = []

    def take(self, items: list[Plaintext | TlsEvent]) -> None:
        for it in items:
            self.items.append(it)
            if isinstance(it, Plaintext):
                self.plain[it.direction] += it.data
            else:
                self.events.append(it)

    def kinds(self, kind: str) -> list[TlsEvent]:
        return [e for e in self.events if e.kind == kind]


def decrypt(conn: Connection, keys: KeyLog, chunk: int | None = None) -> tuple[TlsConnection, Result]:
    """Feed a connection's segments (optionally re-cut into ``chunk``-byte pieces) to a decoder."""
    tc = TlsConnection(keys, label="port %d" % conn.client_port)
    res = Result()
    for d, data in conn.segments:
        if chunk is None:
            res.take(tc.feed(d, data))
        else:
            for i in range(0, len(data), chunk):
                res.take(tc.feed(d, data[i:i + chunk]))
    res.take(tc.finish())
    return tc, res
