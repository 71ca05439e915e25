"""The proxied conversations written as a pcap file, as the client saw them (answers after the
proxy's changes): IPv4 or IPv6 in LINKTYPE_RAW records, a TCP handshake when a connection opens,
the payload in segments of at most 65,000 bytes with consistent sequence numbers, a FIN each way
when it closes. `kwire pcap` and tshark read it like a capture of the client's side."""
from __future__ import annotations

import ipaddress
import struct
import threading
import time
from typing import BinaryIO

LINKTYPE_RAW = 101
SYN, FIN, PSH, ACK = 0x02, 0x01, 0x08, 0x10
MAX_SEG = 65000


def _csum(data: bytes) -> int:
    """The Internet checksum (RFC 1071). The ones' complement sum of the 16-bit words is the bytes,
    read as one big-endian number, modulo 0xFFFF (2**16 is 1 modulo 0xFFFF), 0 read as 0xFFFF
    unless every word is 0: one C-speed conversion instead of a Python loop over the words."""
    if len(data) % 2:
        data += b"\0"
    n = int.from_bytes(data, "big")
    s = n % 0xFFFF
    if s == 0 and n:
        s = 0xFFFF
    return ~s & 0xFFFF


class PcapOut:
    """Thread-safe: connections write their segments as they happen."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.lock = threading.Lock()
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, LINKTYPE_RAW))
        f.flush()

    def _packet(self, src: tuple[str, int], dst: tuple[str, int], seq: int, ack: int, flags: int,
                payload: bytes = b"") -> None:
        s, d = ipaddress.ip_address(src[0]), ipaddress.ip_address(dst[0])
        tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                          65535, 0, 0)
        if s.version == 4 and d.version == 4:
            pseudo = s.packed + d.packed + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
            c = _csum(pseudo + tcp + payload)
            tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0x4000, 64, 6, 0,
                             s.packed, d.packed)
            ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
        else:
            s6 = s if s.version == 6 else ipaddress.IPv6Address(f"::ffff:{s}")
            d6 = d if d.version == 6 else ipaddress.IPv6Address(f"::ffff:{d}")
            pseudo = s6.packed + d6.packed + struct.pack("!I3xB", len(tcp) + len(payload), 6)
            c = _csum(pseudo + tcp + payload)
            tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
            ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp) + len(payload), 6, 64, s6.packed, d6.packed)
        pkt = ip + tcp + payload
        t = time.time()
        with self.lock:
            self.f.write(struct.pack("<IIII", int(t), int((t % 1) * 1_000_000), len(pkt), len(pkt)) + pkt)
            self.f.flush()

    def connection(self, client: tuple[str, int], server: tuple[str, int]) -> PcapConnection:
        return PcapConnection(self, client, server)


class PcapConnection:
    def __init__(self, out: PcapOut, client: tuple[str, int], server: tuple[str, int]) -> None:
        self.out, self.ends = out, (client, server)
        self.seq = [1000, 5000]
        c, s = client, server
        out._packet(c, s, self.seq[0], 0, SYN)
        out._packet(s, c, self.seq[1], self.seq[0] + 1, SYN | ACK)
        self.seq = [self.seq[0] + 1, self.seq[1] + 1]
        out._packet(c, s, self.seq[0], self.seq[1], ACK)

    def data(self, side: int, payload: bytes) -> None:
        """``side``: 0 client to server, 1 server to client."""
        a, b = self.ends[side], self.ends[1 - side]
        for i in range(0, len(payload), MAX_SEG):
            chunk = payload[i:i + MAX_SEG]
            self.out._packet(a, b, self.seq[side], self.seq[1 - side], PSH | ACK, chunk)
            self.seq[side] += len(chunk)

    def close(self) -> None:
        c, s = self.ends
        self.out._packet(c, s, self.seq[0], self.seq[1], FIN | ACK)
        self.out._packet(s, c, self.seq[1], self.seq[0] + 1, FIN | ACK)
        self.out._packet(c, s, self.seq[0] + 1, self.seq[1] + 1, ACK)
