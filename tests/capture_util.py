"""A small pcap / pcapng writer and packet builder for building test captures.

Independent of kwire_cli.capture (no imports from it) so tests compare the reader against bytes
built another way.
"""
from __future__ import annotations

import io
import socket
import struct

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


# ---------------------------------------------------------------- Kafka frames
def kafka_request(api_key: int, api_version: int, corr: int, client_id: str | None = "kwire-test",
                  body: bytes = b"", flexible: bool = False, tags: bytes = b"\x00") -> bytes:
    """A size-prefixed request: header (v1, or v2 with a tagged-field section) then ``body``."""
    h = struct.pack(">hhi", api_key, api_version, corr)
    if client_id is None:
        h += struct.pack(">h", -1)
    else:
        c = client_id.encode()
        h += struct.pack(">h", len(c)) + c
    if flexible:
        h += tags
    msg = h + body
    return struct.pack(">i", len(msg)) + msg


def kafka_response(corr: int, body: bytes = b"") -> bytes:
    msg = struct.pack(">i", corr) + body
    return struct.pack(">i", len(msg)) + msg


def produce_body(acks: int, version: int, transactional_id: str | None = None) -> bytes:
    """Just enough of a Produce body for the acks to be found (plus some filler)."""
    if version <= 2:
        return struct.pack(">hi", acks, 30000) + b"\x00\x00\x00\x00"
    if version <= 8:
        t = struct.pack(">h", -1) if transactional_id is None else \
            struct.pack(">h", len(transactional_id)) + transactional_id.encode()
        return t + struct.pack(">hi", acks, 30000) + b"\x00\x00\x00\x00"
    t = b"\x00" if transactional_id is None else bytes([len(transactional_id) + 1]) + transactional_id.encode()
    return t + struct.pack(">hi", acks, 30000) + b"\x01\x00"


# ---------------------------------------------------------------- layers
def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f">{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes = b"",
        options: bytes = b"", window: int = 65535) -> bytes:
    assert len(options) % 4 == 0
    off = (20 + len(options)) // 4
    return struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, off << 4, flags,
                       window, 0, 0) + options + payload


def ipv4(src: str, dst: str, payload: bytes, proto: int = 6, options: bytes = b"", ident: int = 1,
         flags_frag: int = 0x4000, total_len: int | None = None, ttl: int = 64) -> bytes:
    assert len(options) % 4 == 0
    ihl = 5 + len(options) // 4
    tl = 20 + len(options) + len(payload) if total_len is None else total_len
    h = struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, tl, ident, flags_frag, ttl, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst)) + options
    h = h[:10] + struct.pack(">H", _csum(h)) + h[12:]
    return h + payload


def ipv6(src: str, dst: str, payload: bytes, ext: list[tuple[int, bytes]] = (), proto: int = 6) -> bytes:
    """``ext``: (header type, header bytes without the next-header byte) in order; each header's
    first byte (next header) is filled in."""
    chain = b""
    types = [t for t, _ in ext] + [proto]
    for i, (_t, body) in enumerate(ext):
        chain += bytes([types[i + 1]]) + body
    first = types[0]
    return struct.pack(">IHBB16s16s", 0x60000000, len(chain) + len(payload), first, 64,
                       socket.inet_pton(socket.AF_INET6, src), socket.inet_pton(socket.AF_INET6, dst)) + chain + payload


def hop_by_hop(nbytes: int = 8) -> bytes:
    """A hop-by-hop / destination options header body of ``nbytes`` total (multiple of 8)."""
    assert nbytes % 8 == 0
    return bytes([nbytes // 8 - 1]) + b"\x01" + bytes([nbytes - 4]) + b"\x00" * (nbytes - 4)


def routing_header() -> bytes:
    return bytes([0, 0, 0]) + b"\x00" * 4  # type 0, 0 segments left, len 0 (8 bytes)


def fragment_header(offset: int = 0, more: bool = False, ident: int = 7) -> bytes:
    return b"\x00" + struct.pack(">HI", (offset << 3) | int(more), ident)


def ethernet(payload: bytes, ethertype: int, vlans: list[tuple[int, int]] = ()) -> bytes:
    """``vlans``: (tpid, vid) outermost first, e.g. [(0x88a8, 100), (0x8100, 200)]."""
    h = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01"
    for tpid, vid in vlans:
        h += struct.pack(">HH", tpid, vid)
    h += struct.pack(">H", ethertype)
    frame = h + payload
    if len(frame) < 60:
        frame += b"\xee" * (60 - len(frame))  # Ethernet padding: the IP length must bound the payload
    return frame


def sll(payload: bytes, proto: int) -> bytes:
    return struct.pack(">HHH8sH", 0, 772, 6, b"\x00" * 8, proto) + payload


def sll2(payload: bytes, proto: int) -> bytes:
    return struct.pack(">HHIHBB8s", proto, 0, 1, 772, 0, 6, b"\x00" * 8) + payload


def null(payload: bytes, family: int, order: str = "<") -> bytes:
    return struct.pack(order + "I", family) + payload


def loop(payload: bytes, family: int) -> bytes:
    return struct.pack(">I", family) + payload


def ip_packet(src: str, dst: str, seg: bytes) -> tuple[bytes, int]:
    """IPv4 or IPv6 around a TCP segment; returns (packet, ethertype)."""
    if ":" in src:
        return ipv6(src, dst, seg), 0x86DD
    return ipv4(src, dst, seg), 0x0800


# ---------------------------------------------------------------- capture files
class PcapWriter:
    def __init__(self, f, linktype: int = 1, order: str = "<", nanos: bool = False, snaplen: int = 262144):
        self.f, self.order, self.nanos = f, order, nanos
        magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
        f.write(struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))

    def write(self, ts: float | tuple[int, int], data: bytes, caplen: int | None = None,
              origlen: int | None = None) -> None:
        if isinstance(ts, tuple):
            sec, frac = ts
        else:
            sec = int(ts)
            frac = round((ts - sec) * (1e9 if self.nanos else 1e6))
        cl = len(data) if caplen is None else caplen
        self.f.write(struct.pack(self.order + "IIII", sec, frac, cl, len(data) if origlen is None else origlen))
        self.f.write(data)


class PcapngWriter:
    def __init__(self, f, order: str = "<"):
        self.f, self.o = f, order
        self.ifaces: list[int] = []  # tsresol divisor per interface
        self.section()

    def _block(self, btype: int, body: bytes) -> None:
        body += b"\x00" * (-len(body) % 4)
        n = len(body) + 12
        self.f.write(struct.pack(self.o + "II", btype, n) + body + struct.pack(self.o + "I", n))

    def section(self) -> None:
        self.ifaces = []
        self._block(0x0A0D0D0A, struct.pack(self.o + "IHHq", 0x1A2B3C4D, 1, 0, -1))

    def interface(self, linktype: int, snaplen: int = 0, tsresol: int | None = None,
                  tsoffset: int | None = None) -> int:
        opts = b""
        if tsresol is not None:
            opts += struct.pack(self.o + "HH", 9, 1) + bytes([tsresol]) + b"\x00" * 3
        if tsoffset is not None:
            opts += struct.pack(self.o + "HHq", 14, 8, tsoffset)
        if opts:
            opts += struct.pack(self.o + "HH", 0, 0)
        self._block(1, struct.pack(self.o + "HHI", linktype, 0, snaplen) + opts)
        if tsresol is None:
            div = 10 ** 6
        elif tsresol & 0x80:
            div = 2 ** (tsresol & 0x7F)
        else:
            div = 10 ** tsresol
        self.ifaces.append(div)
        return len(self.ifaces) - 1

    def epb(self, ifid: int, ts: float, data: bytes, caplen: int | None = None) -> None:
        t = round(ts * self.ifaces[ifid])
        cl = len(data) if caplen is None else caplen
        body = struct.pack(self.o + "IIIII", ifid, t >> 32, t & 0xFFFFFFFF, cl, len(data)) + data
        body += b"\x00" * (-len(body) % 4)
        body += struct.pack(self.o + "HH", 1, 4) + b"note" + struct.pack(self.o + "HH", 0, 0)  # a comment option
        self._block(6, body)

    def spb(self, data: bytes) -> None:
        self._block(3, struct.pack(self.o + "I", len(data)) + data)

    def unknown(self, btype: int = 0x00000BAD, body: bytes = b"whatever") -> None:
        self._block(btype, body)

    def name_resolution(self) -> None:
        self._block(4, struct.pack(self.o + "HH", 1, 8) + socket.inet_aton("10.0.0.1") + b"abc\x00"
                    + struct.pack(self.o + "HH", 0, 0))

    def interface_stats(self, ifid: int, ifdrop: int | None = None) -> None:
        opts = b""
        if ifdrop is not None:
            opts = struct.pack(self.o + "HHQ", 5, 8, ifdrop) + struct.pack(self.o + "HH", 0, 0)
        self._block(5, struct.pack(self.o + "III", ifid, 0, 0) + opts)


# ---------------------------------------------------------------- conversations
class Conversation:
    """Seq/ack bookkeeping for one TCP connection; produces segment tuples
    ``(src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload)``."""

    def __init__(self, client=("10.0.0.1", 50000), server=("10.0.0.2", 9092), isn_c: int = 1000,
                 isn_s: int = 5000):
        self.c, self.s = client, server
        self.seq = {0: isn_c & 0xFFFFFFFF, 1: isn_s & 0xFFFFFFFF}

    def _ends(self, side: int):
        return (self.c, self.s) if side == 0 else (self.s, self.c)

    def handshake(self) -> list:
        c, s = self.c, self.s
        out = [(c[0], c[1], s[0], s[1], self.seq[0], 0, SYN, b""),
               (s[0], s[1], c[0], c[1], self.seq[1], self.seq[0] + 1, SYN | ACK, b"")]
        self.seq[0] = (self.seq[0] + 1) & 0xFFFFFFFF
        self.seq[1] = (self.seq[1] + 1) & 0xFFFFFFFF
        out.append((c[0], c[1], s[0], s[1], self.seq[0], self.seq[1], ACK, b""))
        return out

    def send(self, side: int, data: bytes, mss: int | None = None) -> list:
        """Segments carrying ``data`` from ``side`` (0 client, 1 server), cut at ``mss``."""
        a, b = self._ends(side)
        out = []
        step = mss or max(len(data), 1)
        for i in range(0, len(data), step):
            chunk = data[i:i + step]
            out.append((a[0], a[1], b[0], b[1], self.seq[side], self.seq[1 - side], ACK | PSH, chunk))
            self.seq[side] = (self.seq[side] + len(chunk)) & 0xFFFFFFFF
        return out

    def ack(self, side: int) -> tuple:
        a, b = self._ends(side)
        return (a[0], a[1], b[0], b[1], self.seq[side], self.seq[1 - side], ACK, b"")

    def fin(self, side: int) -> tuple:
        a, b = self._ends(side)
        t = (a[0], a[1], b[0], b[1], self.seq[side], self.seq[1 - side], FIN | ACK, b"")
        self.seq[side] = (self.seq[side] + 1) & 0xFFFFFFFF
        return t


def segment_bytes(seg: tuple) -> tuple[bytes, int]:
    """IP packet bytes of a segment tuple and its ethertype."""
    sip, sp, dip, dp, seq, ack, flags, payload = seg
    return ip_packet(sip, dip, tcp(sp, dp, seq, ack, flags, payload))


def ethernet_frame(seg: tuple, vlans=()) -> bytes:
    pkt, et = segment_bytes(seg)
    return ethernet(pkt, et, vlans)


def write_pcap(segments: list, *, linktype: int = 1, order: str = "<", nanos: bool = False,
               encap=None, t0: float = 1_700_000_000.0, dt: float = 0.001, snaplen: int = 262144) -> bytes:
    """A whole pcap of ``segments``; ``encap(seg) -> link-layer bytes`` (default Ethernet)."""
    f = io.BytesIO()
    w = PcapWriter(f, linktype, order, nanos, snaplen)
    encap = encap or ethernet_frame
    for i, seg in enumerate(segments):
        w.write((int(t0) + (i * 1000 + 123) // 1_000_000, ((i * 1000 + 123) % 1_000_000) * (1000 if nanos else 1))
                if dt == 0.001 else t0 + i * dt, encap(seg))
    return f.getvalue()


def pcap_ts(i: int, t0: int = 1_700_000_000) -> float:
    """The timestamp ``write_pcap`` gives record ``i`` (default dt): t0 + i ms + 123 us."""
    return t0 + (i * 1000 + 123) / 1e6
