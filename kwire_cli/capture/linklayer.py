"""Link layer -> IP -> TCP, written once: from captured packets to their TCP segments.

The capture reader (``reader.iter_packets``: every packet of a capture) and the byte-dump reader
(``kwire_cli.inputs``: a pasted ``tshark -x`` frame cut down to its TCP payload) both use it.

* ``packets(records, label, stats, report_skipped=False)`` walks a stream of captured packets,
  ``(number, ts, linktype, buf, start, end)`` as ``reader.iter_records`` yields them, and yields a
  ``Packet`` per TCP segment. It is the capture reader's hot loop, so the walk is written inline
  (a function call per packet costs about 5% of the reader's time: measured, see the commit).
* ``tcp_segment(linktype, buf, start=0, end=None)`` runs that same loop on one packet and gives
  its ``Segment`` (addresses as text, ports, seq/ack, flags, payload) or the reason it has none.

Link types (pcap LINKTYPE_ values): Ethernet (1; 802.1Q / 802.1ad / QinQ tags, stacked), Linux
SLL (113) and SLL2 (276), raw IP (101, 12, 14; 228 IPv4, 229 IPv6), BSD null (0, host-endian
family) and LOOP (108, big-endian family). IPv4 with options (fragments are skipped), IPv6 with
hop-by-hop, routing, destination options, fragment, AH, mobility, HIP and shim6 headers walked.
TCP only.
"""
from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .events import (
    CORRUPT_BLOCK,
    IP_FRAGMENT,
    NON_IP,
    NON_TCP,
    OVERSIZE_RECORD,
    TRUNCATED_HEADER,
    UNSUPPORTED_LINK,
    CaptureStats,
    Damage,
    Note,
    Packet,
)
from .formats import Data

# link types
LT_NULL, LT_ETHERNET, LT_RAW12, LT_RAW14, LT_RAW, LT_LOOP = 0, 1, 12, 14, 101, 108
LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2 = 113, 228, 229, 276
SUPPORTED_LINKTYPES = frozenset({LT_NULL, LT_ETHERNET, LT_RAW12, LT_RAW14, LT_RAW, LT_LOOP,
                                 LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2})

_SLL_TYPES = frozenset({LT_SLL, LT_SLL2})
_RAW_IP_TYPES = frozenset({LT_RAW, LT_RAW12, LT_RAW14, LT_IPV4, LT_IPV6})
_BSD_TYPES = frozenset({LT_NULL, LT_LOOP})

_H = struct.Struct(">H").unpack_from
_I_BE = struct.Struct(">I").unpack_from
_I_LE = struct.Struct("<I").unpack_from
_IPV4 = struct.Struct(">BxHxxHxB").unpack_from      # vihl, total length, flags/frag, proto
_IPV6 = struct.Struct(">4xHB").unpack_from          # payload length, next header
_TCP = struct.Struct(">HHIIH").unpack_from          # sport, dport, seq, ack, offset+flags
_VLAN_TYPES = (0x8100, 0x88A8, 0x9100, 0x9200)
_V6_EXT = frozenset({0, 43, 60, 135, 139, 140})     # generic (len+1)*8 extension headers
_AF_INET6 = frozenset({10, 24, 28, 30})             # Linux, OpenBSD/NetBSD, FreeBSD, Darwin


def bsd_ip_version(buf: Data, off: int, loop: bool) -> int:
    """The IP version (4, 6; 0: another family) of a BSD null / LOOP header's 4-byte address family
    at ``off``: big-endian for LOOP, the capturing host's order for null (read little-endian, and
    big-endian when that gives no family)."""
    if loop:
        fam = _I_BE(buf, off)[0]
    else:
        fam = _I_LE(buf, off)[0]
        if fam > 0xFFFF:
            fam = _I_BE(buf, off)[0]
    return 4 if fam == 2 else 6 if fam in _AF_INET6 else 0

# damage of a record that has a packet number and counts as a packet read (stats.packets)
_NUMBERED_DAMAGE = (OVERSIZE_RECORD, CORRUPT_BLOCK)

_ntoa = socket.inet_ntoa
_tnew = tuple.__new__


def _ntop6(b: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6, b)


def packets(records: Iterable[Any], label: str, stats: CaptureStats, report_skipped: bool = False
            ) -> Iterator[Packet | Damage | Note]:
    """The TCP segments of captured packets, as ``Packet`` tuples, in order.

    ``records`` yields ``(number, ts, linktype, buf, start, end)`` (the packet is
    ``buf[start:end]``) or ``Damage`` events, which pass through. A packet of a link type not
    supported gives one ``UNSUPPORTED_LINK`` damage event per link type. Packets that are not TCP
    (non-IP, other protocols, IP fragments, headers cut by the snap length) are counted in
    ``stats.skipped``; with ``report_skipped=True`` each also yields a ``Damage`` event (``kind``:
    the reason). Adds to ``stats.packets`` (packets read) and ``stats.tcp_packets``.
    """
    ipcache: dict[bytes, tuple[str, str]] = {}
    unsupported: set[int] = set()
    skipped = stats.skipped
    npk = ntcp = 0
    addr = b""
    ip_end = 0
    reason: str | None
    try:
        for rec in records:
            if rec.__class__ is Damage or rec.__class__ is Note:
                if rec.packet is not None and rec.kind in _NUMBERED_DAMAGE:
                    npk += 1
                yield rec
                continue
            frame, ts, lt, buf, off, end = rec
            npk += 1
            # ---- link layer -> (ip version, offset)
            if lt == 1:
                if end - off < 14:
                    reason = TRUNCATED_HEADER
                    ver = 0
                else:
                    et = _H(buf, off + 12)[0]
                    off += 14
                    while et in _VLAN_TYPES and end - off >= 4:
                        et = _H(buf, off + 2)[0]
                        off += 4
                    ver = 4 if et == 0x0800 else 6 if et == 0x86DD else 0
                    reason = NON_IP
            elif lt in _SLL_TYPES:
                hl = 16 if lt == LT_SLL else 20
                if end - off < hl:
                    reason = TRUNCATED_HEADER
                    ver = 0
                else:
                    et = _H(buf, off + (14 if lt == LT_SLL else 0))[0]
                    off += hl
                    while et in _VLAN_TYPES and end - off >= 4:
                        et = _H(buf, off + 2)[0]
                        off += 4
                    ver = 4 if et == 0x0800 else 6 if et == 0x86DD else 0
                    reason = NON_IP
            elif lt in _RAW_IP_TYPES:
                ver = buf[off] >> 4 if end > off else 0
                reason = NON_IP if end > off else TRUNCATED_HEADER
            elif lt in _BSD_TYPES:
                if end - off < 4:
                    reason = TRUNCATED_HEADER
                    ver = 0
                else:
                    ver = bsd_ip_version(buf, off, lt == LT_LOOP)
                    off += 4
                    reason = NON_IP
            else:
                if lt not in unsupported:
                    unsupported.add(lt)
                    stats.add_damage(UNSUPPORTED_LINK, 0)
                    yield Damage(label, frame, None, UNSUPPORTED_LINK, 0,
                                 f"packet {frame}: link type {lt} is not supported; its packets are skipped")
                skipped[UNSUPPORTED_LINK] = skipped.get(UNSUPPORTED_LINK, 0) + 1
                continue
            # ---- network layer
            if ver == 4:
                if end - off < 20:
                    reason = TRUNCATED_HEADER
                else:
                    vihl, total, frag, proto = _IPV4(buf, off)
                    ihl = (vihl & 15) << 2
                    if vihl >> 4 != 4 or ihl < 20:
                        reason = NON_IP
                    elif frag & 0x3FFF:
                        reason = IP_FRAGMENT
                    elif proto != 6:
                        reason = NON_TCP
                    elif end - off < ihl:
                        reason = TRUNCATED_HEADER
                    else:
                        addr = buf[off + 12:off + 20]
                        ip_end = off + total if total >= ihl else end  # 0: TSO, length not filled in
                        off += ihl
                        reason = None
            elif ver == 6:
                if end - off < 40:
                    reason = TRUNCATED_HEADER
                else:
                    plen, nh = _IPV6(buf, off)
                    addr = buf[off + 8:off + 40]
                    off += 40
                    ip_end = off + plen if plen else end  # 0: jumbogram
                    reason = None
                    while nh != 6:
                        if end - off < 8:
                            reason = TRUNCATED_HEADER
                            break
                        if nh in _V6_EXT:
                            nh, hl = buf[off], (buf[off + 1] + 1) << 3
                        elif nh == 44:  # fragment
                            if _H(buf, off + 2)[0] & 0xFFF9:
                                reason = IP_FRAGMENT
                                break
                            nh, hl = buf[off], 8
                        elif nh == 51:  # AH
                            nh, hl = buf[off], (buf[off + 1] + 2) << 2
                        else:
                            reason = NON_TCP
                            break
                        off += hl
            elif reason is not TRUNCATED_HEADER:
                reason = NON_IP
            if reason is not None:
                skipped[reason] = skipped.get(reason, 0) + 1
                if report_skipped:
                    yield Damage(label, frame, None, reason, 0, f"packet {frame}: skipped ({reason})", ts)
                continue
            # ---- TCP
            if end - off < 20:
                skipped[TRUNCATED_HEADER] = skipped.get(TRUNCATED_HEADER, 0) + 1
                if report_skipped:
                    yield Damage(label, frame, None, TRUNCATED_HEADER, 0,
                                 f"packet {frame}: TCP header cut short", ts)
                continue
            sport, dport, seq, ack, offfl = _TCP(buf, off)
            pstart = off + ((offfl >> 10) & 0x3C)
            if pstart < off + 20:
                skipped[TRUNCATED_HEADER] = skipped.get(TRUNCATED_HEADER, 0) + 1
                if report_skipped:
                    yield Damage(label, frame, None, TRUNCATED_HEADER, 0,
                                 f"packet {frame}: TCP header length {pstart - off} is below 20 bytes", ts)
                continue
            wire_len = ip_end - pstart
            if wire_len < 0:
                wire_len = 0
            pend = ip_end if ip_end < end else end
            payload = buf[pstart:pend] if pend > pstart else b""
            pair = ipcache.get(addr)
            if pair is None:
                if len(ipcache) > 65536:
                    ipcache.clear()
                if len(addr) == 8:
                    pair = ipcache[addr] = (_ntoa(addr[:4]), _ntoa(addr[4:]))
                else:
                    pair = ipcache[addr] = (_ntop6(addr[:16]), _ntop6(addr[16:]))
            s, d = pair
            ntcp += 1
            yield _tnew(Packet, (label, frame, ts, s, sport, d, dport, seq, ack, offfl & 0xFF, payload, wire_len))
    finally:
        stats.packets += npk
        stats.tcp_packets += ntcp


class Segment(NamedTuple):
    """The TCP segment of one captured packet (``tcp_segment``)."""

    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    seq: int
    ack: int
    flags: int          # the TCP flags byte (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10)
    payload: bytes      # the captured TCP payload
    wire_len: int       # the payload length the IP header claims (> len(payload): the capture cut it)


def tcp_segment(linktype: int, buf: bytes, start: int = 0, end: int | None = None) -> Segment | str:
    """The TCP segment of the packet ``buf[start:end]`` of link type ``linktype``, or the reason it
    has none: ``UNSUPPORTED_LINK``, ``NON_IP``, ``NON_TCP``, ``IP_FRAGMENT`` or
    ``TRUNCATED_HEADER`` (the skip kinds of ``kwire_cli.capture.events``)."""
    rec = (1, 0.0, linktype, buf, start, len(buf) if end is None else end)
    for item in packets((rec,), "", CaptureStats(), report_skipped=True):
        if item.__class__ is Packet:
            return Segment(*item[3:])
        return item.kind  # type: ignore[union-attr]
    return TRUNCATED_HEADER  # pragma: no cover - the loop yields one item per packet
