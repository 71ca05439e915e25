#!/usr/bin/env python3
"""Re-write an Ethernet pcap with another link-layer header, for the dump fixtures.

    python scripts/relink_capture.py IN.pcap OUT.pcap {sll,sll2,rawip,null}

`editcap -T` only relabels the link type; the bytes of each packet keep their Ethernet header.
This replaces the 14-byte Ethernet header of every packet by the header the link type really has,
as a capture on that kind of interface would hold it:

* sll   (LINKTYPE_LINUX_SLL, 113): 16 bytes, as `tcpdump -i any` wrote it before libpcap 1.10
* sll2  (LINKTYPE_LINUX_SLL2, 276): 20 bytes, as `tcpdump -i any` writes it with libpcap >= 1.10
* rawip (LINKTYPE_RAW, 101): no link header, the IP packet alone (tun devices, some cloud mirrors)
* null  (LINKTYPE_NULL, 0): BSD loopback, a 4-byte address family in the writer's byte order
  (macOS `tcpdump -i lo0`); written little-endian with AF_INET = 2, as on x86 and arm64 Macs

Timestamps, packet order and the IP packets are unchanged.
"""
from __future__ import annotations

import struct
import sys

import dpkt

LINKTYPES = {"sll": 113, "sll2": 276, "rawip": 101, "null": 0}
ETH_HLEN = 14
ETHERTYPE_IPV4 = 0x0800
ARPHRD_LOOPBACK = 772


def link_header(kind: str, eth: bytes, ifindex: int = 1) -> bytes:
    src, ethertype = eth[6:12], struct.unpack("!H", eth[12:14])[0]
    if kind == "rawip":
        return b""
    if kind == "null":
        return struct.pack("<I", 2)  # AF_INET, host (little-endian) byte order
    # packet type 0 (addressed to this host), ARPHRD_LOOPBACK, the 6-byte address padded to 8
    if kind == "sll":
        return struct.pack("!HHH8sH", 0, ARPHRD_LOOPBACK, 6, src + b"\0\0", ethertype)
    if kind == "sll2":
        return struct.pack("!HHIHBB8s", ethertype, 0, ifindex, ARPHRD_LOOPBACK, 0, 6, src + b"\0\0")
    raise ValueError(kind)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[2] not in LINKTYPES:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    src, dst, kind = argv
    with open(src, "rb") as f_in, open(dst, "wb") as f_out:
        reader = dpkt.pcap.Reader(f_in)
        if reader.datalink() != dpkt.pcap.DLT_EN10MB:
            print(f"{src}: not an Ethernet capture (link type {reader.datalink()})", file=sys.stderr)
            return 1
        writer = dpkt.pcap.Writer(f_out, snaplen=reader.snaplen, linktype=LINKTYPES[kind])
        for ts, buf in reader:
            if len(buf) < ETH_HLEN or struct.unpack("!H", buf[12:14])[0] != ETHERTYPE_IPV4:
                print(f"{src}: a packet that is not IPv4 over Ethernet", file=sys.stderr)
                return 1
            writer.writepkt(link_header(kind, buf[:ETH_HLEN]) + buf[ETH_HLEN:], ts=ts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
