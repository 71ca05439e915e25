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
    optionally gzip-compressed (detected by magic; the magic table is ``formats.PCAP_MAGICS``).
  * pcapng: sections of either byte order, several IDBs each with its own link type, snap length,
    ``if_tsresol`` and ``if_tsoffset``; EPB, SPB and the obsolete PB; other blocks are skipped.
  * link types, IPv4 and IPv6: as ``linklayer.packets`` walks them (Ethernet with VLAN tags, Linux
    SLL and SLL2, raw IP, BSD null and LOOP; IPv4 options, IPv6 extension headers). TCP only.
  * a byte range of a file (Spark's range reader): ``iter_records``' ``header``, ``offset`` and
    ``packet_base`` make damage reports name the whole file's packet numbers and offsets.

Damage
  * a record longer than the snap length of its file header (pcap) or interface (pcapng) is read
    whole, as Wireshark does, with one ``over-snaplen`` note per file; a record longer than
    ``HARD_RECORD_LIMIT`` (64 MiB, the most a record may hold) is an error for that record
    (``oversize-record``; the record is skipped without being buffered) and reading goes on;
  * a record longer than the bytes left in the file ends reading cleanly (``truncated-record``,
    with the packet number and the byte offset);
  * a pcapng block whose lengths do not add up ends reading (``corrupt-block``);
  * a pcapng option the reader reads (IDB ``if_tsresol``, ``if_tsoffset``; ISB ``isb_ifdrop``) is
    bounded by its own block: an option that runs past the block ends that block's options, a known
    option of the wrong length is ignored (its default stands); each is a ``corrupt-block`` note
    naming the block and the option's offset, and the block is kept (an interface stays described,
    so its packets are read; the header-only scan, which reads no options, walks the same).
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from kwire_cli.errors import CaptureError
from kwire_cli.tls import DSB_BLOCK_TYPE, KeyLog

from . import linklayer
from .chunks import Chunks, Gunzip, Prefixed, read_fully
from .events import (
    CORRUPT_BLOCK,
    OVER_SNAPLEN,
    OVERSIZE_RECORD,
    TRUNCATED_RECORD,
    CaptureStats,
    Damage,
    Note,
    Packet,
)
from .formats import GZIP_MAGIC, HARD_RECORD_LIMIT, PCAP_FILE_HEADER, PCAP_MAGICS, PCAPNG_BYTE_ORDER, PCAPNG_SHB

# a captured packet as the reader gives it: (number, timestamp, link type, chunk, start, end): the
# packet is chunk[start:end]
Record = tuple[int, float, int, bytes, int, int]
Records = Iterator[Record | Damage | Note]
Offsets = Callable[[int], int]  # offset in what the reader reads -> offset in the file


def _open(path_or_fileobj: Any, file_label: str | None) -> tuple[BinaryIO, str, bool]:
    if isinstance(path_or_fileobj, (str, bytes, os.PathLike)):
        try:
            f = open(path_or_fileobj, "rb")  # noqa: SIM115 - the caller closes it (close=True)
        except OSError as e:
            raise CaptureError(f"cannot open capture {os.fsdecode(path_or_fileobj)}: {e.strerror}") from None
        label = file_label or os.fsdecode(path_or_fileobj)
        return f, label, True
    f = path_or_fileobj
    label = file_label or getattr(f, "name", None) or "<stream>"
    if not isinstance(label, str):
        label = str(label)
    return f, label, False


def iter_records(path_or_fileobj: Any, file_label: str | None = None, *, stats: CaptureStats | None = None,
                 header: bytes | None = None, offset: int | None = None, packet_base: int = 0,
                 keylog: KeyLog | None = None) -> Records:
    """Yield the packets of a capture as ``(number, ts, linktype, buf, start, end)`` or ``Damage``.

    ``buf[start:end]`` is the captured packet (``buf`` is the current read chunk: use it before
    asking for the next packet). Packets are numbered from 1 as Wireshark does.

    A byte range of a file: ``header`` is the file's header context (``formats.header_context``;
    ``path_or_fileobj`` then holds the bytes of the range only, starting at a packet boundary),
    ``offset`` the file offset of the range's first byte, and ``packet_base`` the number of
    packets before it. Packet numbers and byte offsets in damage reports are then the whole file's.

    ``keylog``: a ``kwire_cli.tls.KeyLog`` that the TLS secrets of pcapng Decryption Secrets Blocks
    are added to as they are read (they come before the packets they decrypt).
    """
    src: BinaryIO | Gunzip | Prefixed
    opened, label, close = _open(path_or_fileobj, file_label)
    at = _offsets(header, offset)
    try:
        f: BinaryIO | Prefixed = opened if header is None else Prefixed(header, opened)
        head = read_fully(f, 4)
        if head[:2] == GZIP_MAGIC:
            f2 = Gunzip(Prefixed(head, f), label)
            head = read_fully(f2, 4)
            src = f2
        else:
            src = f
        if stats is not None:
            stats.files += 1
        if len(head) < 4:
            raise CaptureError(f"{label}: not a capture file: only {len(head)} bytes")
        if head in PCAP_MAGICS:
            yield from _pcap_records(src, head, label, stats, packet_base, at)
        elif head == PCAPNG_SHB:
            yield from _pcapng_records(src, head, label, stats, packet_base, at, keylog)
        else:
            raise CaptureError(f"{label}: not a pcap or pcapng file: magic 0x{head.hex()} at offset 0")
    except OSError as e:
        raise CaptureError(f"{label}: read error: {e}") from None
    finally:
        if close:
            opened.close()


def _offsets(header: bytes | None, offset: int | None) -> Offsets:
    """Offset in what the reader reads -> offset in the file (``header`` + a range from ``offset``)."""
    if header is None or offset is None:
        return _same
    lim = len(header)
    shift = offset - lim

    def at(v: int) -> int:
        return v + shift if v >= lim else v
    return at


def _same(v: int) -> int:
    return v


def _pcap_records(f: BinaryIO | Gunzip | Prefixed, magic: bytes, label: str, stats: CaptureStats | None, frame: int,
                  at: Offsets) -> Records:
    bo, unit, hlen = PCAP_MAGICS[magic]
    rest = read_fully(f, PCAP_FILE_HEADER - 4)
    if len(rest) < PCAP_FILE_HEADER - 4:
        raise CaptureError(f"{label}: pcap file header cut short: {4 + len(rest)} of {PCAP_FILE_HEADER} bytes")
    _vmaj, _vmin, _zone, _sigfigs, snaplen, network = struct.unpack(bo + "HHiIII", rest)
    linktype = network & 0xFFFF
    limit = HARD_RECORD_LIMIT
    over = snaplen if 0 < snaplen < HARD_RECORD_LIMIT else limit  # past it: one note, read whole
    rec = struct.Struct(bo + "IIII").unpack_from
    ch = Chunks(f)
    ch.base = PCAP_FILE_HEADER
    buf = b""
    pos = 0
    while True:
        if len(buf) - pos < hlen:
            pos = ch.refill(pos, hlen)
            buf = ch.buf
            if not buf:
                return
            if len(buf) < hlen:
                frame += 1
                yield _damage(stats, label, frame, TRUNCATED_RECORD, len(buf),
                              f"record header of packet {frame} at offset {at(ch.base)} cut short: "
                              f"{len(buf)} of {hlen} bytes left in the file")
                return
        sec, frac, caplen, _orig = rec(buf, pos)
        frame += 1
        if caplen > limit:
            off = at(ch.base + pos)
            pos += hlen
            skipped, pos = ch.discard(pos, caplen)
            buf = ch.buf
            if skipped < caplen:
                yield _damage(stats, label, frame, TRUNCATED_RECORD, skipped,
                              f"packet {frame} at offset {off} claims {caplen} bytes "
                              f"(over the limit of {limit}); only {skipped} left in the file")
                return
            yield _damage(stats, label, frame, OVERSIZE_RECORD, caplen,
                          f"packet {frame} at offset {off}: captured length {caplen} exceeds "
                          f"{limit} bytes, the most a record may hold; record skipped")
            continue
        if caplen > over:
            over = limit
            yield _over_snaplen(label, frame, caplen, f"the file header's snap length {snaplen}")
        end = pos + hlen + caplen
        if end > len(buf):
            pos = ch.refill(pos, hlen + caplen)
            buf = ch.buf
            end = hlen + caplen
            if end > len(buf):
                yield _damage(stats, label, frame, TRUNCATED_RECORD, len(buf) - hlen,
                              f"packet {frame} at offset {at(ch.base)} claims {caplen} bytes; only "
                              f"{len(buf) - hlen} left in the file")
                return
        yield frame, sec + frac * unit, linktype, buf, pos + hlen, end
        pos = end


def _pcapng_records(f: BinaryIO | Gunzip | Prefixed, head: bytes, label: str, stats: CaptureStats | None,
                    frame: int, at: Offsets, keylog: KeyLog | None = None) -> Records:
    ch = Chunks(f, head)
    buf = ch.buf
    pos = 0
    first = frame
    bo = "<"
    u32 = struct.Struct("<I").unpack_from
    epb = struct.Struct("<IIIII").unpack_from
    pb = struct.Struct("<HHIIII").unpack_from
    ifaces: list[tuple[int, int, float, float]] = []  # (link type, snap length, ticks per second, offset)
    drops: dict[tuple[int, int], int] = {}  # (section, interface) -> packets dropped
    section = 0
    last_ts = 0.0
    noted = False  # a record over its interface's snap length was noted
    while True:
        if len(buf) - pos < 12:
            pos = ch.refill(pos, 12)
            buf = ch.buf
            if not buf:
                return
            if len(buf) < 8:
                yield _damage(stats, label, None, TRUNCATED_RECORD, len(buf),
                              f"block header at offset {at(ch.base)} cut short: {len(buf)} bytes left")
                return
        btype = buf[pos:pos + 4]
        if btype == PCAPNG_SHB:
            magic = buf[pos + 8:pos + 12]
            if magic in PCAPNG_BYTE_ORDER:
                bo = PCAPNG_BYTE_ORDER[magic]
            else:
                if frame == first and ch.base + pos == 0:
                    raise CaptureError(f"{label}: pcapng section header with bad byte-order magic "
                                       f"0x{magic.hex()} at offset 8")
                yield _damage(stats, label, None, CORRUPT_BLOCK, len(buf) - pos,
                              f"section header at offset {at(ch.base + pos)} has a bad byte-order magic "
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
                          f"block of type 0x{t:08x} at offset {at(boff)} has an impossible length {blen}; "
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
                              f"block at offset {at(boff)} claims {blen} bytes; only {skipped} left in the file")
                return
            yield _damage(stats, label, frame if is_packet else None, OVERSIZE_RECORD, blen,
                          f"block of type 0x{t:08x} at offset {at(boff)} is {blen} bytes; skipped")
            continue
        if len(buf) - pos < blen:
            pos = ch.refill(pos, blen)
            buf = ch.buf
            if len(buf) < blen:
                if is_packet:
                    frame += 1
                yield _damage(stats, label, frame if is_packet else None, TRUNCATED_RECORD, len(buf),
                              f"{'packet ' + str(frame) + ' ' if is_packet else ''}block at offset {at(boff)} "
                              f"claims {blen} bytes; only {len(buf)} left in the file")
                return
        if u32(buf, pos + blen - 4)[0] != blen:
            yield _damage(stats, label, None, CORRUPT_BLOCK, blen,
                          f"block at offset {at(boff)}: trailing length {u32(buf, pos + blen - 4)[0]} "
                          f"differs from leading length {blen}; reading stops")
            return
        if t == 6:  # Enhanced Packet Block
            frame += 1
            if blen < 32:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame}: enhanced packet block at offset {at(boff)} too short ({blen})")
                pos += blen
                continue
            ifid, hi, lo, caplen, _orig = epb(buf, pos + 8)
            if caplen > blen - 32:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame} at offset {at(boff)}: captured length {caplen} does not fit "
                              f"its {blen}-byte block; record skipped")
                pos += blen
                continue
            if ifid >= len(ifaces):
                yield _damage(stats, label, frame, CORRUPT_BLOCK, caplen,
                              f"packet {frame} at offset {at(boff)}: interface {ifid} was never described")
                pos += blen
                continue
            linktype, snaplen, div, tsoff = ifaces[ifid]
            if snaplen and caplen > snaplen and not noted:
                noted = True
                yield _over_snaplen(label, frame, caplen, f"interface {ifid}'s snap length {snaplen}")
            last_ts = ((hi << 32) | lo) / div + tsoff
            start = pos + 28
            yield frame, last_ts, linktype, buf, start, start + caplen
        elif t == 3:  # Simple Packet Block: interface 0, no timestamp
            frame += 1
            if not ifaces:
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen - 16,
                              f"packet {frame}: simple packet block at offset {at(boff)} before any interface")
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
                              f"packet {frame}: packet block at offset {at(boff)} too short ({blen})")
                pos += blen
                continue
            ifid, _drops, hi, lo, caplen, _orig = pb(buf, pos + 8)
            if caplen > blen - 32 or ifid >= len(ifaces):
                yield _damage(stats, label, frame, CORRUPT_BLOCK, blen,
                              f"packet {frame}: bad packet block at offset {at(boff)}; record skipped")
                pos += blen
                continue
            linktype, snaplen, div, tsoff = ifaces[ifid]
            last_ts = ((hi << 32) | lo) / div + tsoff
            start = pos + 28
            yield frame, last_ts, linktype, buf, start, start + caplen
        elif t == DSB_BLOCK_TYPE and keylog is not None:  # Decryption Secrets Block
            for problem in keylog.add_dsb_block(bytes(buf[pos + 8:pos + blen - 4]), bo == "<",
                                                source=f"{label}: decryption secrets block at offset {at(boff)}"):
                yield _damage(stats, label, None, CORRUPT_BLOCK, 0, str(problem))
        elif t == 5 and stats is not None and blen >= 24:  # Interface Statistics Block
            ifid = u32(buf, pos + 8)[0]
            oend = pos + blen - 4
            for code, vo, olen in _options(buf, pos + 20, oend, bo):
                if code < 0:
                    yield _option_damage(stats, label, "interface statistics block", at(boff), code,
                                         at(ch.base + vo), olen, oend - vo)
                    break
                if code == 5:  # isb_ifdrop: cumulative
                    if olen != 8:
                        yield _option_length_damage(stats, label, "interface statistics block", at(boff),
                                                    "isb_ifdrop", at(ch.base + vo - 4), olen, 8)
                        continue
                    v = struct.unpack_from(bo + "Q", buf, vo)[0]
                    old = drops.get((section, ifid), 0)
                    drops[(section, ifid)] = v
                    stats.capture_drops += v - old
        elif t == 1:  # Interface Description Block
            if blen < 20:
                yield _damage(stats, label, None, CORRUPT_BLOCK, blen,
                              f"interface description block at offset {at(boff)} too short ({blen})")
                pos += blen
                continue
            linktype, _res, snaplen = struct.unpack_from(bo + "HHI", buf, pos + 8)
            div, tsoff = 1e6, 0
            oend = pos + blen - 4
            for code, vo, olen in _options(buf, pos + 16, oend, bo):
                if code < 0:
                    yield _option_damage(stats, label, "interface description block", at(boff), code,
                                         at(ch.base + vo), olen, oend - vo)
                    break
                if code == 9:  # if_tsresol: one byte
                    if olen != 1:
                        yield _option_length_damage(stats, label, "interface description block", at(boff),
                                                    "if_tsresol", at(ch.base + vo - 4), olen, 1)
                        continue
                    r = buf[vo]
                    div = float(2 ** (r & 0x7F)) if r & 0x80 else float(10 ** r)
                elif code == 14:  # if_tsoffset: signed seconds, 8 bytes
                    if olen != 8:
                        yield _option_length_damage(stats, label, "interface description block", at(boff),
                                                    "if_tsoffset", at(ch.base + vo - 4), olen, 8)
                        continue
                    tsoff = struct.unpack_from(bo + "q", buf, vo)[0]
            ifaces.append((linktype, snaplen if snaplen < HARD_RECORD_LIMIT else 0, div, tsoff))
        pos += blen


def _options(buf: bytes, o: int, oend: int, bo: str) -> Iterator[tuple[int, int, int]]:
    """The options of a pcapng block whose options run from ``o`` to ``oend`` (the trailing block
    length), each as ``(code, value offset, value length)``, up to ``opt_endofopt`` or the end.
    Every value yielded lies inside the block: an option whose header or value runs past ``oend``
    ends the walk with ``(-1 - code, its offset, its value length)`` (code -1, length -1: a header
    cut short). ``o`` and ``oend`` are 4-aligned in the block, so a value that fits, fits padded."""
    while o < oend:
        if o + 4 > oend:
            yield -1, o, -1
            return
        code, olen = struct.unpack_from(bo + "HH", buf, o)
        if code == 0:
            return
        if o + 4 + olen > oend:
            yield -1 - code, o, olen
            return
        yield code, o + 4, olen
        o += 4 + ((olen + 3) & ~3)


_OPTION_NAMES = {("interface description block", 9): "if_tsresol",
                 ("interface description block", 14): "if_tsoffset",
                 ("interface statistics block", 5): "isb_ifdrop"}


def _option_damage(stats: CaptureStats | None, label: str, what: str, boff: int, bad: int, ooff: int, olen: int,
                   left: int) -> Damage:
    """An option that runs past its block (``left`` bytes from its offset to the block's trailing
    length): the options from it on are ignored, the block is kept with what it said before."""
    if olen < 0:
        return _damage(stats, label, None, CORRUPT_BLOCK, left,
                       f"{what} at offset {boff}: option header at offset {ooff} cut short: {left} bytes left "
                       "in the block; options from there ignored")
    code = -1 - bad
    name = _OPTION_NAMES.get((what, code), f"{code}")
    return _damage(stats, label, None, CORRUPT_BLOCK, left,
                   f"{what} at offset {boff}: option {name} at offset {ooff} claims {olen} bytes; only "
                   f"{left - 4} left in the block; options from there ignored")


def _option_length_damage(stats: CaptureStats | None, label: str, what: str, boff: int, name: str, ooff: int,
                          olen: int, want: int) -> Damage:
    """A known option of the wrong length: ignored (its default stands), the block is kept."""
    return _damage(stats, label, None, CORRUPT_BLOCK, olen,
                   f"{what} at offset {boff}: option {name} at offset {ooff} is {olen} bytes, not {want}; ignored")


def _over_snaplen(label: str, frame: int, caplen: int, what: str) -> Note:
    """The one note of a file whose records may be longer than its snap length."""
    return Note(label, frame, None, OVER_SNAPLEN,
                f"packet {frame}: captured length {caplen} exceeds {what}; records longer than the snap "
                "length are read whole, as Wireshark does", None)


def _damage(stats: CaptureStats | None, label: str, frame: int | None, kind: str, nbytes: int, detail: str) -> Damage:
    if stats is not None:
        stats.add_damage(kind, nbytes)
    return Damage(label, frame, None, kind, nbytes, detail)


def iter_packets(path_or_fileobj: Any, file_label: str | None = None, *, stats: CaptureStats | None = None,
                 report_skipped: bool = False, **where: Any) -> Iterator[Packet | Damage | Note]:
    """Stream the TCP segments of one capture file as ``Packet`` tuples, in file order.

    ``Damage`` events for the file itself (truncated or oversize records, corrupt blocks, an
    unsupported link type once per link type) are yielded in order among the packets. Packets that
    are not TCP (non-IP, other protocols, IP fragments, headers cut by the snap length) are counted
    in ``stats.skipped``; with ``report_skipped=True`` each also yields a ``Damage`` event. The
    link layer -> IP -> TCP walk is ``linklayer.packets``. ``where``: ``header``, ``offset`` and
    ``packet_base``, as for ``iter_records`` (a byte range of a file).
    """
    if stats is None:
        stats = CaptureStats()
    label = file_label or _label_of(path_or_fileobj)
    # the walk's generator itself, not a generator delegating to it: one layer less per packet
    return linklayer.packets(iter_records(path_or_fileobj, file_label, stats=stats, **where), label, stats,
                             report_skipped)


def _label_of(path_or_fileobj: Any) -> str:
    if isinstance(path_or_fileobj, (str, bytes, os.PathLike)):
        return os.fsdecode(path_or_fileobj)
    name = getattr(path_or_fileobj, "name", None)
    return name if isinstance(name, str) else "<stream>"
