"""Streaming pcap / pcapng reader down to TCP segments.

Why hand-written and not dpkt: dpkt (installed, well kept) builds a Python object per layer per
packet and reads each record with two ``read`` calls. This reader pulls the file in 1 MiB chunks,
decodes every header with precompiled ``struct.Struct.unpack_from`` at offsets into the chunk, and
copies only the TCP payload. Measured on this machine (2 cores, shared; CPU seconds; 200,000
Ethernet/IPv4/TCP packets of Kafka traffic, 110 MB; ``python tests/test_capture_bench.py``):

  ===============================================  =============
  this reader, ``iter_packets`` to ``Packet``      ~2.1 us/packet
  dpkt ``pcap.Reader`` + ``ethernet.Ethernet``     ~12 us/packet
  ``iter_capture`` (reassembly, framing, pairing)  ~4.6 us/packet
  tshark summary lines (Kafka dissector on 9092)   ~11 us/packet
  ``tshark -Y kafka -T fields -e correlation_id``  ~26 us/packet
  ``tshark -Y kafka -V``                           ~33 us/packet
  ===============================================  =============

What it reads
  * pcap: both byte orders, micro- and nanosecond magic (and the old Kuznetzov 0xa1b2cd34 variant),
    optionally gzip-compressed (detected by magic).
  * pcapng: sections of either byte order, several IDBs each with its own link type, snap length,
    ``if_tsresol`` and ``if_tsoffset``; EPB, SPB and the obsolete PB; other blocks are skipped.
  * link types: Ethernet (1; 802.1Q / 802.1ad / QinQ tags, stacked), Linux SLL (113) and SLL2
    (276), raw IP (101, 12, 14; 228 IPv4, 229 IPv6), BSD null (0, host-endian family) and LOOP
    (108, big-endian family).
  * IPv4 with options (fragments skipped and counted), IPv6 with hop-by-hop, routing, destination
    options, fragment, AH, mobility, HIP and shim6 headers walked. TCP only.

Damage
  * a record longer than the snap length is an error for that record (``oversize-record``; the
    record is skipped without being buffered) and reading goes on;
  * a record longer than the bytes left in the file ends reading cleanly (``truncated-record``,
    with the packet number and the byte offset);
  * a pcapng block whose lengths do not add up ends reading (``corrupt-block``).
"""
from __future__ import annotations

import os
import socket
import struct
import zlib
from typing import BinaryIO, Iterator

from .errors import CaptureError
from .events import (CORRUPT_BLOCK, IP_FRAGMENT, NON_IP, NON_TCP, OVERSIZE_RECORD, TRUNCATED_HEADER,
                     TRUNCATED_RECORD, UNSUPPORTED_LINK, CaptureStats, Damage, Packet)

CHUNK = 1 << 20
# Records larger than this are never buffered, whatever the snap length says.
HARD_RECORD_LIMIT = 64 << 20

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1e-6, 16),
    b"\xa1\xb2\xc3\xd4": (">", 1e-6, 16),
    b"\x4d\x3c\xb2\xa1": ("<", 1e-9, 16),
    b"\xa1\xb2\x3c\x4d": (">", 1e-9, 16),
    b"\x34\xcd\xb2\xa1": ("<", 1e-6, 24),  # Kuznetzov's modified pcap: 8 more bytes per record
    b"\xa1\xb2\xcd\x34": (">", 1e-6, 24),
}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"

# link types
LT_NULL, LT_ETHERNET, LT_RAW12, LT_RAW14, LT_RAW, LT_LOOP = 0, 1, 12, 14, 101, 108
LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2 = 113, 228, 229, 276
SUPPORTED_LINKTYPES = frozenset({LT_NULL, LT_ETHERNET, LT_RAW12, LT_RAW14, LT_RAW, LT_LOOP,
                                 LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2})

_H = struct.Struct(">H").unpack_from
_I_BE = struct.Struct(">I").unpack_from
_I_LE = struct.Struct("<I").unpack_from
_IPV4 = struct.Struct(">BxHxxHxB").unpack_from      # vihl, total length, flags/frag, proto
_IPV6 = struct.Struct(">4xHB").unpack_from          # payload length, next header
_TCP = struct.Struct(">HHIIH").unpack_from          # sport, dport, seq, ack, offset+flags
_VLAN_TYPES = (0x8100, 0x88A8, 0x9100, 0x9200)
_V6_EXT = frozenset({0, 43, 60, 135, 139, 140})     # generic (len+1)*8 extension headers
_AF_INET6 = frozenset({10, 24, 28, 30})             # Linux, OpenBSD/NetBSD, FreeBSD, Darwin

_ntoa = socket.inet_ntoa
_tnew = tuple.__new__


def _ntop6(b: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6, b)


def _read_fully(f: BinaryIO, n: int) -> bytes:
    """Read up to ``n`` bytes, looping over short reads; fewer only at end of file.

    A compressed stream cut short (gzip's EOFError) reads as the end of the file, so the record
    layer reports the truncated record like any other cut capture.
    """
    try:
        data = f.read(n)
    except EOFError:
        return b""
    if data is None:
        data = b""
    if len(data) >= n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        try:
            more = f.read(n - got)
        except EOFError:
            break
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class _Chunks:
    """A sliding window over a binary stream: ``ensure(pos, n)`` makes buf[pos:pos+n] present.

    Kept as attributes (buf, base) that the record loops copy into locals; ``base`` is the file
    offset of ``buf[0]`` (for error messages).
    """

    __slots__ = ("f", "buf", "base", "eof")

    def __init__(self, f: BinaryIO, initial: bytes = b""):
        self.f = f
        self.buf = initial
        self.base = 0
        self.eof = False

    def refill(self, pos: int, need: int) -> int:
        """Drop buf[:pos], read so that at least ``need`` bytes follow; return the new pos (0)."""
        rest = self.buf[pos:]
        self.base += pos
        if self.eof:
            self.buf = rest
            return 0
        want = need - len(rest)
        data = _read_fully(self.f, want if want > CHUNK else CHUNK)
        if len(data) < want or not data:
            self.eof = True
        self.buf = rest + data if rest else data
        return 0

    def discard(self, pos: int, n: int) -> tuple[int, int]:
        """Skip ``n`` bytes from ``pos`` without buffering them: (bytes skipped, new pos)."""
        avail = len(self.buf) - pos
        if n <= avail:
            return n, pos + n
        skipped = avail
        self.base += len(self.buf)
        self.buf = b""
        left = n - avail
        while left > 0:
            d = _read_fully(self.f, min(left, CHUNK))
            if not d:
                self.eof = True
                break
            skipped += len(d)
            left -= len(d)
            self.base += len(d)
        return skipped, 0


def _open(path_or_fileobj, file_label):
    if isinstance(path_or_fileobj, (str, bytes, os.PathLike)):
        try:
            f = open(path_or_fileobj, "rb")
        except OSError as e:
            raise CaptureError(f"cannot open capture {os.fsdecode(path_or_fileobj)}: {e.strerror}") from None
        label = file_label or os.fsdecode(path_or_fileobj)
        return f, label, True
    f = path_or_fileobj
    label = file_label or getattr(f, "name", None) or "<stream>"
    if not isinstance(label, str):
        label = str(label)
    return f, label, False


def iter_records(path_or_fileobj, file_label: str | None = None, *, stats: CaptureStats | None = None):
    """Yield capture records as ``(frame, ts, linktype, buf, start, end)`` or ``Damage``.

    ``buf[start:end]`` is the captured packet (``buf`` is the current read chunk: use it before
    asking for the next record). ``frame`` counts records from 1 as Wireshark does.
    """
    f, label, close = _open(path_or_fileobj, file_label)
    try:
        head = _read_fully(f, 4)
        if head[:2] == b"\x1f\x8b":
            f2 = _Gunzip(_Prefixed(head, f), label)
            head = _read_fully(f2, 4)
            src = f2
        else:
            src = f
        if stats is not None:
            stats.files += 1
        if len(head) < 4:
            raise CaptureError(f"{label}: not a capture file: only {len(head)} bytes")
        if head in PCAP_MAGICS:
            yield from _pcap_records(src, head, label, stats)
        elif head == PCAPNG_SHB:
            yield from _pcapng_records(src, head, label, stats)
        else:
            raise CaptureError(f"{label}: not a pcap or pcapng file: magic 0x{head.hex()} at offset 0")
    except OSError as e:
        raise CaptureError(f"{label}: read error: {e}") from None
    finally:
        if close:
            f.close()


class _Gunzip:
    """Streaming gzip decompression (several members allowed). A stream cut short just ends: the
    bytes decompressed so far are all returned, and the record layer reports the cut."""

    def __init__(self, f, label: str):
        self.f = f
        self.label = label
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.out = bytearray()
        self.done = False

    def read(self, n: int = -1) -> bytes:
        while not self.done and (n < 0 or len(self.out) < n):
            raw = self.f.read(1 << 16)
            if not raw:
                self.done = True
                break
            while raw:
                try:
                    self.out += self.z.decompress(raw)
                except zlib.error as e:
                    raise CaptureError(f"{self.label}: gzip data corrupt: {e}") from None
                if self.z.eof:
                    raw = self.z.unused_data
                    self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                else:
                    raw = b""
        if n < 0 or n >= len(self.out):
            data = bytes(self.out)
            self.out.clear()
        else:
            data = bytes(self.out[:n])
            del self.out[:n]
        return data


class _Prefixed:
    """A read-only file object that first returns ``head`` then the rest of ``f``."""

    def __init__(self, head: bytes, f):
        self.head = head
        self.f = f

    def read(self, n=-1):
        if self.head:
            if n is None or n < 0:
                d = self.head + self.f.read()
                self.head = b""
                return d
            d = self.head[:n]
            self.head = self.head[n:]
            if len(d) < n:
                d += self.f.read(n - len(d)) or b""
            return d
        return self.f.read(n)


def _pcap_records(f, magic, label, stats):
    bo, unit, hlen = PCAP_MAGICS[magic]
    rest = _read_fully(f, 20)
    if len(rest) < 20:
        raise CaptureError(f"{label}: pcap file header cut short: {4 + len(rest)} of 24 bytes")
    _vmaj, _vmin, _zone, _sigfigs, snaplen, network = struct.unpack(bo + "HHiIII", rest)
    linktype = network & 0xFFFF
    limit = snaplen if 0 < snaplen < HARD_RECORD_LIMIT else HARD_RECORD_LIMIT
    rec = struct.Struct(bo + "IIII").unpack_from
    ch = _Chunks(f)
    ch.base = 24
    buf = b""
    pos = 0
    frame = 0
    while True:
        if len(buf) - pos < hlen:
            pos = ch.refill(pos, hlen)
            buf = ch.buf
            if not buf:
                return
            if len(buf) < hlen:
                frame += 1
                yield _damage(stats, label, frame, TRUNCATED_RECORD, len(buf),
                              f"record header of packet {frame} at offset {ch.base} cut short: "
                              f"{len(buf)} of {hlen} bytes left in the file")
                return
        sec, frac, caplen, _orig = rec(buf, pos)
        frame += 1
        if caplen > limit:
            off = ch.base + pos
            pos += hlen
            skipped, pos = ch.discard(pos, caplen)
            buf = ch.buf
            if skipped < caplen:
                yield _damage(stats, label, frame, TRUNCATED_RECORD, skipped,
                              f"packet {frame} at offset {off} claims {caplen} bytes "
                              f"(over the snap length {snaplen}); only {skipped} left in the file")
                return
            yield _damage(stats, label, frame, OVERSIZE_RECORD, caplen,
                          f"packet {frame} at offset {off}: captured length {caplen} exceeds "
                          f"the snap length {limit}; record skipped")
            continue
        end = pos + hlen + caplen
        if end > len(buf):
            pos = ch.refill(pos, hlen + caplen)
            buf = ch.buf
            end = hlen + caplen
            if end > len(buf):
                yield _damage(stats, label, frame, TRUNCATED_RECORD, len(buf) - hlen,
                              f"packet {frame} at offset {ch.base} claims {caplen} bytes; only "
                              f"{len(buf) - hlen} left in the file")
                return
        yield frame, sec + frac * unit, linktype, buf, pos + hlen, end
        pos = end


_SHB_LE = b"\x4d\x3c\x2b\x1a"
_SHB_BE = b"\x1a\x2b\x3c\x4d"


def _pcapng_records(f, head, label, stats):
    ch = _Chunks(f, head)
    buf = ch.buf
    pos = 0
    frame = 0
    bo = "<"
    u32 = struct.Struct("<I").unpack_from
    epb = struct.Struct("<IIIII").unpack_from
    pb = struct.Struct("<HHIIII").unpack_from
    ifaces: list = []
    drops: dict = {}
    section = 0
    last_ts = 0.0
    while True:
        if len(buf) - pos < 12:
            pos = ch.refill(pos, 12)
            buf = ch.buf
            if not buf:
                return
            if len(buf) < 8:
                yield _damage(stats, label, None, TRUNCATED_RECORD, len(buf),
                              f"block header at offset {ch.base} cut short: {len(buf)} bytes left")
                return
        btype = buf[pos:pos + 4]
        if btype == PCAPNG_SHB:
            magic = buf[pos + 8:pos + 12]
            if magic == _SHB_LE:
                bo = "<"
            elif magic == _SHB_BE:
                bo = ">"
            else:
                if frame == 0 and ch.base + pos == 0:
                    raise CaptureError(f"{label}: pcapng section header with bad byte-order magic "
                                       f"0x{magic.hex()} at offset 8")
                yield _damage(stats, label, None, CORRUPT_BLOCK, len(buf) - pos,
                              f"section header at offset {ch.base + pos} has a bad byte-order magic "
                              f"0x{magic.hex()}; reading stops")
                return
            u32 = struct.Struct(bo + "I").unpack_from
            epb = struct.Struct(bo + "IIIII").unpack_from
            pb = struct.Struct(bo + "HHIIII").unpack_from
            ifaces = []
            section += 1
        t = u32(buf, pos)[0]
        blen = u32(buf, pos + 4)[0]
        boff = ch.base + pos
        if blen < 12 or blen % 4:
            yield _damage(stats, label, None, CORRUPT_BLOCK, len(buf) - pos,
                          f"block of type 0x{t:08x} at offset {boff} has an impossible length {blen}; "
                          "reading stops")
            return
        is_packet = t in (6, 3, 2)
        if blen > HARD_RECORD_LIMIT:
            if is_packet:
                frame += 1
            skipped, pos = ch.discard(pos, blen)
            buf = ch.buf
            if skipped < blen:
                yield _damage(stats, label, frame if is_packet else None, TRUNCATED_RECORD, skipped,
                              f"block at offset {boff} claims {blen} bytes; only {skipped} left in the file")
                return
            yield _damage(stats, label, frame if is_packet else None, OVERSIZE_RECORD, blen,
                          f"block of type 0x{t:08x} at offset {boff} is {blen} bytes; skipped")
            continue
        if len(buf) - pos < blen:
            pos = ch.refill(pos, blen)
            buf = ch.buf
            if len(buf) < blen:
                if is_packet:
                    frame += 1
                yield _damage(stats, label, frame if is_packet else None, TRUNCATED_RECORD, len(buf),
                              f"{'packet ' + str(frame) + ' ' if is_packet else ''}block at offset {boff} "
                              f"claims {blen} bytes; only {len(buf)} left in the file")
                return
        if u32(buf, pos + blen - 4)[0] != blen:
            yield _damage(stats, label, None, CORRUPT_BLOCK, blen,
                          f"block at offset {boff}: trailing length {u32(buf, pos + blen - 4)[0]} "
                          f"differs from leading length {blen}; reading stops")
            return
        if t == 6:  # Enhanced Packet Block
            frame += 1
            if blen < 32:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame}: enhanced packet block at offset {boff} too short ({blen})")
                pos += blen
                continue
            ifid, hi, lo, caplen, _orig = epb(buf, pos + 8)
            if caplen > blen - 32:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame} at offset {boff}: captured length {caplen} does not fit "
                              f"its {blen}-byte block; record skipped")
                pos += blen
                continue
            if ifid >= len(ifaces):
                yield _damage(stats, label, frame, CORRUPT_BLOCK, caplen,
                              f"packet {frame} at offset {boff}: interface {ifid} was never described")
                pos += blen
                continue
            linktype, snaplen, div, tsoff = ifaces[ifid]
            if snaplen and caplen > snaplen:
                yield _damage(stats, label, frame, OVERSIZE_RECORD, caplen,
                              f"packet {frame} at offset {boff}: captured length {caplen} exceeds "
                              f"interface {ifid}'s snap length {snaplen}; record skipped")
                pos += blen
                continue
            last_ts = ((hi << 32) | lo) / div + tsoff
            start = pos + 28
            yield frame, last_ts, linktype, buf, start, start + caplen
        elif t == 3:  # Simple Packet Block: interface 0, no timestamp
            frame += 1
            if not ifaces:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen - 16,
                              f"packet {frame}: simple packet block at offset {boff} before any interface")
                pos += blen
                continue
            linktype, snaplen, _div, _tsoff = ifaces[0]
            orig = u32(buf, pos + 8)[0]
            caplen = max(0, min(orig, blen - 16))
            if snaplen:
                caplen = min(caplen, snaplen)
            start = pos + 12
            yield frame, last_ts, linktype, buf, start, start + caplen
        elif t == 2:  # obsolete Packet Block
            frame += 1
            if blen < 32:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame}: packet block at offset {boff} too short ({blen})")
                pos += blen
                continue
            ifid, _drops, hi, lo, caplen, _orig = pb(buf, pos + 8)
            if caplen > blen - 32 or ifid >= len(ifaces):
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame}: bad packet block at offset {boff}; record skipped")
                pos += blen
                continue
            linktype, snaplen, div, tsoff = ifaces[ifid]
            last_ts = ((hi << 32) | lo) / div + tsoff
            start = pos + 28
            yield frame, last_ts, linktype, buf, start, start + caplen
        elif t == 5 and stats is not None and blen >= 24:  # Interface Statistics Block
            ifid = u32(buf, pos + 8)[0]
            o = pos + 20
            oend = pos + blen - 4
            while o + 4 <= oend:
                code, olen = struct.unpack_from(bo + "HH", buf, o)
                if code == 0:
                    break
                if code == 5 and olen == 8 and o + 12 <= oend:  # isb_ifdrop: cumulative
                    v = struct.unpack_from(bo + "Q", buf, o + 4)[0]
                    old = drops.get((section, ifid), 0)
                    drops[(section, ifid)] = v
                    stats.capture_drops += v - old
                o += 4 + ((olen + 3) & ~3)
        elif t == 1:  # Interface Description Block
            if blen < 20:
                yield _damage(stats, label, None, CORRUPT_BLOCK, blen,
                              f"interface description block at offset {boff} too short ({blen})")
                pos += blen
                continue
            linktype, _res, snaplen = struct.unpack_from(bo + "HHI", buf, pos + 8)
            div, tsoff = 1e6, 0
            o = pos + 16
            oend = pos + blen - 4
            while o + 4 <= oend:
                code, olen = struct.unpack_from(bo + "HH", buf, o)
                if code == 0:
                    break
                val = buf[o + 4:o + 4 + olen]
                if code == 9 and olen >= 1:
                    r = val[0]
                    div = float(2 ** (r & 0x7F)) if r & 0x80 else float(10 ** r)
                elif code == 14 and olen >= 8:
                    tsoff = struct.unpack_from(bo + "q", val)[0]
                o += 4 + ((olen + 3) & ~3)
            ifaces.append((linktype, snaplen if snaplen < HARD_RECORD_LIMIT else 0, div, tsoff))
        pos += blen


def _damage(stats, label, frame, kind, nbytes, detail):
    if stats is not None:
        stats.add_damage(kind, nbytes)
    return Damage(label, frame, None, kind, nbytes, detail)


def iter_packets(path_or_fileobj, file_label: str | None = None, *, stats: CaptureStats | None = None,
                 report_skipped: bool = False) -> Iterator[Packet | Damage]:
    """Stream the TCP segments of one capture file as ``Packet`` tuples, in file order.

    ``Damage`` events for the file itself (truncated or oversize records, corrupt blocks, an
    unsupported link type once per link type) are yielded in order among the packets. Packets that
    are not TCP (non-IP, other protocols, IP fragments, headers cut by the snap length) are counted
    in ``stats.skipped``; with ``report_skipped=True`` each also yields a ``Damage`` event.
    """
    if stats is None:
        stats = CaptureStats()
    label = file_label or _label_of(path_or_fileobj)
    ipcache: dict = {}
    unsupported: set = set()
    skipped = stats.skipped
    npk = ntcp = 0
    try:
        for rec in iter_records(path_or_fileobj, file_label, stats=stats):
            if rec.__class__ is Damage:
                if rec.frame is not None and rec.kind in (OVERSIZE_RECORD, CORRUPT_BLOCK):
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
            elif lt == LT_SLL or lt == LT_SLL2:
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
            elif lt == LT_RAW or lt == LT_RAW12 or lt == LT_RAW14 or lt == LT_IPV4 or lt == LT_IPV6:
                ver = buf[off] >> 4 if end > off else 0
                reason = NON_IP if end > off else TRUNCATED_HEADER
            elif lt == LT_NULL or lt == LT_LOOP:
                if end - off < 4:
                    reason = TRUNCATED_HEADER
                    ver = 0
                else:
                    if lt == LT_LOOP:
                        fam = _I_BE(buf, off)[0]
                    else:
                        fam = _I_LE(buf, off)[0]
                        if fam > 0xFFFF:
                            fam = _I_BE(buf, off)[0]
                    off += 4
                    ver = 4 if fam == 2 else 6 if fam in _AF_INET6 else 0
                    reason = NON_IP
            else:
                if lt not in unsupported:
                    unsupported.add(lt)
                    yield _damage(stats, label, frame, UNSUPPORTED_LINK, 0,
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


def _label_of(path_or_fileobj) -> str:
    if isinstance(path_or_fileobj, (str, bytes, os.PathLike)):
        return os.fsdecode(path_or_fileobj)
    name = getattr(path_or_fileobj, "name", None)
    return name if isinstance(name, str) else "<stream>"
