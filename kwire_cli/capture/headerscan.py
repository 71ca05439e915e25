"""The TCP connections of a capture from its headers only (spark-decode's connection pre-pass).

``tcp_connections(buf, start, end, header=None)`` gives the connections of the packets the capture
reader (``reader.iter_packets``) would yield for the same bytes, as a dict of raw keys ``(address
bytes, source port, destination port)`` (``addresses`` turns the address bytes into the reader's
``src_ip``, ``dst_ip`` text) to their packets' captured TCP bytes (from the TCP header to the end of
the captured packet: header, payload and any link-layer padding; what spark-decode weighs a
connection by): the same walk of pcap packet records / pcapng blocks and of the link
layer -> IP -> TCP headers, with no payload copy, no ``Packet``, no reassembly. ``buf`` is the
whole file (an mmap) and ``[start, end)`` the bytes the reader would read; ``header`` is the
file's header context (``formats.header_context``) when ``[start, end)`` is a byte range of the
file, None when it is a whole capture from its magic.

A connection key is stateless: the reader's ``Packet`` carries its 4-tuple as the IP and TCP
headers say, a SYN does not start a new key, and the direction-free name is made from the
4-tuple afterwards (``spark.stages``). So the set of keys depends only on which packets the reader
yields and on their headers, and both are decided by header fields alone.

Exact, by walking what the reader walks (``reader._pcap_records``, ``reader._pcapng_records``,
``linklayer.packets``): pcap in both byte orders, micro/nanosecond and Kuznetzov's magic; records
over the hard limit skipped (over the snap length: read whole, as the reader does), a cut record
ending the walk; pcapng sections of either byte order, interfaces (IDB) with their own link
types and snap lengths, EPB, SPB and PB, other blocks skipped, the reader's stops (impossible or
disagreeing block lengths, a cut block) and skips (blocks too short, packets of an undescribed
interface); every link type and IP/TCP case of ``linklayer.packets`` (VLAN tags, SLL/SLL2, raw
IP, BSD null/LOOP, IPv4 options, fragments, IPv6 extension headers, truncated headers; packets of
an unsupported link type give no key, as in the reader).

None (the caller then runs the full reader: ``spark.reading.range_connections``) for what it
does not answer exactly:

* gzip-compressed captures (the bytes are not there to walk without decompressing);
* a file that is not a capture, or whose pcap file header is cut (the reader raises
  ``CaptureError``, whose message the full path reports);
* a header context that does not end where a block ends;
* (the C walk, ``_headerscan.c``) more than 4,096 interfaces in a section.

The C walk (``kwire_cli/capture/_headerscan.c``, built by setup.py) is the same loop; this module's
Python walk is the reference and the fallback when it is not built (or ``KWIRE_NO_SPEEDUPS=1``).
"""
from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from typing import Any

from kwire_cli import speedups

from .formats import HARD_RECORD_LIMIT, PCAP_FILE_HEADER, PCAP_MAGICS, PCAPNG_BYTE_ORDER, PCAPNG_SHB, Data
from .linklayer import bsd_ip_version

RawKey = tuple[bytes, int, int]  # (source + destination address bytes, source port, destination port)

# how a pcapng walk over one run of bytes ended: at its end, or where the reader stops reading
_DONE, _STOPPED = 0, 1

_H = struct.Struct(">H").unpack_from
_I_BE = struct.Struct(">I").unpack_from
_I_LE = struct.Struct("<I").unpack_from
_IPV4 = struct.Struct(">BxHxxHxB").unpack_from      # vihl, total length, flags/frag, proto
_IPV6 = struct.Struct(">4xHB").unpack_from          # payload length, next header
_PORTS_OFF = struct.Struct(">HH8xH").unpack_from    # sport, dport, offset+flags
_VLAN_TYPES = (0x8100, 0x88A8, 0x9100, 0x9200)
_V6_EXT = frozenset({0, 43, 60, 135, 139, 140})


_NATIVE = speedups.load("kwire_cli.capture._headerscan")
#: the C walk, or None (not built, or KWIRE_NO_SPEEDUPS=1)
native_tcp_connections: Callable[..., Any] | None = None if _NATIVE is None else _NATIVE.tcp_connections


def tcp_connections(buf: Data, start: int, end: int, header: bytes | None = None) -> dict[RawKey, int] | None:
    """The raw keys of the TCP packets the capture reader reads from ``header`` + ``buf[start:end]``
    (``header`` None: ``buf[start:end]`` is a whole capture) and their captured TCP bytes, or None
    where the scan cannot answer
    exactly (the module docstring lists when). The C walk when built, else ``py_tcp_connections``."""
    if native_tcp_connections is not None:
        keys: dict[RawKey, int] | None = native_tcp_connections(buf, start, end, header, HARD_RECORD_LIMIT)
        return keys
    return py_tcp_connections(buf, start, end, header)


def addresses(addr: bytes) -> tuple[str, str]:
    """A raw key's address bytes -> (src_ip, dst_ip), the text of the reader's ``Packet``."""
    if len(addr) == 8:
        return socket.inet_ntoa(addr[:4]), socket.inet_ntoa(addr[4:])
    return socket.inet_ntop(socket.AF_INET6, addr[:16]), socket.inet_ntop(socket.AF_INET6, addr[16:])


def four_tuple(key: RawKey) -> tuple[str, int, str, int]:
    """A raw key -> the reader's (src_ip, src_port, dst_ip, dst_port) of its packets."""
    s, d = addresses(key[0])
    return s, key[1], d, key[2]


def py_tcp_connections(buf: Data, start: int, end: int, header: bytes | None = None) -> dict[RawKey, int] | None:
    """``tcp_connections`` in Python (the reference walk)."""
    end = min(end, len(buf))
    keys: dict[RawKey, int] = {}
    head = header if header is not None else buf[start:max(start, min(end, start + PCAP_FILE_HEADER))]
    magic = bytes(head[:4])
    pm = PCAP_MAGICS.get(magic)
    if pm is not None:
        if len(head) < PCAP_FILE_HEADER:
            return None  # the reader raises: file header cut short
        if header is not None and len(header) != PCAP_FILE_HEADER:
            return None
        network = struct.unpack_from(pm.byte_order + "I", head, 20)[0]
        limit = HARD_RECORD_LIMIT  # (a record over the snap length is read whole, as the reader does)
        pos = start if header is not None else start + PCAP_FILE_HEADER
        _pcap_walk(buf, pos, end, pm.byte_order, pm.header_len, limit, network & 0xFFFF, keys)
        return keys
    if magic != PCAPNG_SHB:
        return None  # gzip, or not a capture: the reader's own path
    state: list[Any] = ["<", []]  # byte order, interfaces [(link type, snap length)]
    if header is not None and _pcapng_walk(header, 0, len(header), state, keys) != _DONE:
        return None  # a header context that does not end where a block ends
    _pcapng_walk(buf, start, end, state, keys)
    return keys


def _pcap_walk(buf: Data, pos: int, end: int, bo: str, hlen: int, limit: int, linktype: int,
               keys: dict[RawKey, int]) -> None:
    caplen_at = struct.Struct(bo + "8xI").unpack_from
    while end - pos >= hlen:  # fewer: the end, or a cut record header (the reader stops)
        caplen = caplen_at(buf, pos)[0]
        pos += hlen
        if caplen > limit:  # over the hard limit: skipped (a cut one ends the walk below)
            pos += caplen
            continue
        if pos + caplen > end:
            return  # a cut record: the reader stops
        _packet_key(linktype, buf, pos, pos + caplen, keys)
        pos += caplen


def _pcapng_walk(buf: Data, pos: int, end: int, state: list[Any], keys: dict[RawKey, int]) -> int:
    bo, ifaces = state
    u32 = struct.Struct(bo + "I").unpack_from
    while True:
        left = end - pos
        if left < 12:
            if left == 0:
                state[:] = [bo, ifaces]
                return _DONE
            return _STOPPED  # a cut block (a cut section header too: its magic is bad, below)
        if bytes(buf[pos:pos + 4]) == PCAPNG_SHB:
            nbo = PCAPNG_BYTE_ORDER.get(bytes(buf[pos + 8:pos + 12]))
            if nbo is None:
                # a bad byte-order magic: the reader raises at the file's first byte (no packet
                # read yet), elsewhere it stops; either way no key after this one
                return _STOPPED
            bo = nbo
            u32 = struct.Struct(bo + "I").unpack_from
            ifaces = []
        t = u32(buf, pos)[0]
        blen = u32(buf, pos + 4)[0]
        if blen < 12 or blen % 4:
            return _STOPPED
        if blen > HARD_RECORD_LIMIT:  # skipped unread (a cut one ends the walk)
            if left < blen:
                return _STOPPED
            pos += blen
            continue
        if left < blen or u32(buf, pos + blen - 4)[0] != blen:
            return _STOPPED
        if t == 6 or t == 2:  # Enhanced Packet Block; obsolete Packet Block
            if blen >= 32:
                if t == 6:
                    ifid = u32(buf, pos + 8)[0]
                else:
                    ifid = struct.unpack_from(bo + "H", buf, pos + 8)[0]
                caplen = u32(buf, pos + 20)[0]
                if caplen <= blen - 32 and ifid < len(ifaces):
                    _packet_key(ifaces[ifid][0], buf, pos + 28, pos + 28 + caplen, keys)
        elif t == 3:  # Simple Packet Block: interface 0
            if ifaces:
                linktype, snaplen = ifaces[0]
                caplen = max(0, min(u32(buf, pos + 8)[0], blen - 16))
                if snaplen:
                    caplen = min(caplen, snaplen)
                _packet_key(linktype, buf, pos + 12, pos + 12 + caplen, keys)
        elif t == 1 and blen >= 20:  # Interface Description Block
            linktype, _res, snaplen = struct.unpack_from(bo + "HHI", buf, pos + 8)
            ifaces.append((linktype, snaplen if snaplen < HARD_RECORD_LIMIT else 0))
        pos += blen


def _packet_key(lt: int, buf: Data, off: int, end: int, keys: dict[RawKey, int]) -> None:
    """Count the key of the packet ``buf[off:end]`` of link type ``lt`` and its captured TCP bytes if
    the reader yields a ``Packet`` for it (``linklayer.packets``' walk, step for step)."""
    # ---- link layer -> IP version
    if lt == 1 or lt == 113 or lt == 276:
        hl = 14 if lt == 1 else 16 if lt == 113 else 20
        if end - off < hl:
            return
        et = _H(buf, off + (12 if lt == 1 else 14 if lt == 113 else 0))[0]
        off += hl
        while et in _VLAN_TYPES and end - off >= 4:
            et = _H(buf, off + 2)[0]
            off += 4
        ver = 4 if et == 0x0800 else 6 if et == 0x86DD else 0
    elif lt in (101, 12, 14, 228, 229):
        if end <= off:
            return
        ver = buf[off] >> 4
    elif lt == 0 or lt == 108:
        if end - off < 4:
            return
        ver = bsd_ip_version(buf, off, lt == 108)
        off += 4
    else:
        return  # unsupported link type: skipped
    # ---- network layer
    if ver == 4:
        if end - off < 20:
            return
        vihl, _total, frag, proto = _IPV4(buf, off)
        ihl = (vihl & 15) << 2
        if vihl >> 4 != 4 or ihl < 20 or frag & 0x3FFF or proto != 6 or end - off < ihl:
            return
        addr = buf[off + 12:off + 20]
        off += ihl
    elif ver == 6:
        if end - off < 40:
            return
        _plen, nh = _IPV6(buf, off)
        addr = buf[off + 8:off + 40]
        off += 40
        while nh != 6:
            if end - off < 8:
                return
            if nh in _V6_EXT:
                nh, off = buf[off], off + ((buf[off + 1] + 1) << 3)
            elif nh == 44:
                if _H(buf, off + 2)[0] & 0xFFF9:
                    return
                nh, off = buf[off], off + 8
            elif nh == 51:
                nh, off = buf[off], off + ((buf[off + 1] + 2) << 2)
            else:
                return
    else:
        return
    # ---- TCP
    if end - off < 20:
        return
    sport, dport, offfl = _PORTS_OFF(buf, off)
    if (offfl >> 10) & 0x3C < 20:
        return
    k = (bytes(addr), sport, dport)
    keys[k] = keys.get(k, 0) + end - off
