"""What a capture file is, and where its packets lie: pcap and pcapng structure, once.

The capture reader (``reader.iter_records``), ``kwire negotiate`` (is this input a capture?) and
Spark's range reader (``kwire_cli.spark.reading``: cut a file at packet boundaries) all use these.

* ``PCAP_MAGICS``, ``PCAPNG_SHB``, ``GZIP_MAGIC``: the one magic table. pcap in both byte orders,
  micro- and nanosecond timestamps, and Kuznetzov's modified pcap (24-byte packet headers);
  pcapng's section header block; gzip (a compressed capture, read whole).
* ``sniff(head)``: what the first bytes of a file say it is, looking inside gzip.
* ``header_context(head)``: the layout of an uncompressed capture: byte order, packet header
  length, where the first packet starts (after the pcap file header, or after the pcapng section
  header and the interface descriptions before the first packet: the *header context* a reader
  needs before it can read any range of the file).
* ``packet_at(buf, p, layout, ...)``: is there a plausible packet (pcap packet header, pcapng
  block) at offset ``p``; ``walk_packets(buf, p, stop, layout)``: follow packets from ``p``.
"""
from __future__ import annotations

import mmap
import struct
import zlib
from typing import Any, NamedTuple

# what a capture's bytes are read from: a chunk read from a file, or an mmap of the whole file
Data = bytes | bytearray | memoryview | mmap.mmap


class PcapMagic(NamedTuple):
    """What a pcap file's magic number says."""

    byte_order: str    # struct prefix: "<" or ">"
    ts_unit: float     # seconds per unit of the timestamp's fraction field
    header_len: int    # bytes of each packet header (16; 24 in Kuznetzov's modified pcap)


PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": PcapMagic("<", 1e-6, 16),
    b"\xa1\xb2\xc3\xd4": PcapMagic(">", 1e-6, 16),
    b"\x4d\x3c\xb2\xa1": PcapMagic("<", 1e-9, 16),
    b"\xa1\xb2\x3c\x4d": PcapMagic(">", 1e-9, 16),
    b"\x34\xcd\xb2\xa1": PcapMagic("<", 1e-6, 24),  # Kuznetzov's modified pcap: 8 more bytes per packet
    b"\xa1\xb2\xcd\x34": PcapMagic(">", 1e-6, 24),
}
PCAP_FILE_HEADER = 24
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"
PCAPNG_BYTE_ORDER = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}  # section header's magic
GZIP_MAGIC = b"\x1f\x8b"
#: how many bytes of a file ``capture_kind`` wants
SNIFF_BYTES = 64 << 10

# pcapng block types
PCAPNG_IDB, PCAPNG_PB, PCAPNG_SPB, PCAPNG_ISB, PCAPNG_EPB = 1, 2, 3, 5, 6
PCAPNG_PACKET_BLOCKS = frozenset({PCAPNG_PB, PCAPNG_SPB, PCAPNG_EPB})
PCAPNG_KNOWN_BLOCKS = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 0x0A0D0D0A, 0x00000BAD, 0x40000BAD})

#: packets (pcap packet records, pcapng blocks) larger than this are never buffered, whatever the
#: snap length says
HARD_RECORD_LIMIT = 64 << 20

#: a plausible chain of pcap packets: at most this many seconds between two of them, and the first
#: within a year of the reference time
MAX_TS_STEP = 7 * 86400
MAX_TS_FROM_REFERENCE = 366 * 86400


def sniff(head: bytes) -> str | None:
    """What the first bytes of a file are: ``"pcap"``, ``"pcapng"``, ``"gzip"`` or None.

    Give at least 4 bytes. Use ``capture_kind`` to look inside gzip."""
    magic = head[:4]
    if magic in PCAP_MAGICS:
        return "pcap"
    if magic == PCAPNG_SHB:
        return "pcapng"
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    return None


def capture_kind(head: bytes) -> str | None:
    """``"pcap"`` or ``"pcapng"`` when ``head`` starts a capture, gzip-compressed or not; else None.

    ``head``: the first bytes of a file, ``SNIFF_BYTES`` of them (a compressed file's first
    deflate block must be there for its first bytes to come out)."""
    kind = sniff(head)
    if kind != "gzip":
        return kind
    try:
        inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 4)
    except zlib.error:
        return None
    kind = sniff(inner)
    return kind if kind in ("pcap", "pcapng") else None


class Layout(NamedTuple):
    """Where the packets of an uncompressed capture lie (``header_context``)."""

    kind: str            # "pcap" | "pcapng"
    byte_order: str      # "<" | ">" (pcapng: of the first section)
    data_start: int      # offset of the first packet (pcapng: of the first block after the header context)
    header_len: int = 0  # pcap: bytes of each packet header (16, or 24); pcapng: 0
    ts_unit: float = 0.0  # pcap: seconds per unit of the timestamp fraction (1e-6, 1e-9)
    snaplen: int = 0     # pcap: the file's snap length


def header_context(head: bytes) -> Layout | None:
    """The layout of a capture from its first bytes; ``head[:layout.data_start]`` is its header
    context (what a reader of any byte range of the file needs first).

    pcap: the 24-byte file header. pcapng: the section header and the blocks after it up to the
    first packet block (interface descriptions). None when ``head`` is not an uncompressed
    capture, is too short to hold the header context, or the pcapng section holds no packet
    before a second section header.
    """
    magic = head[:4]
    pm = PCAP_MAGICS.get(magic)
    if pm is not None:
        if len(head) < PCAP_FILE_HEADER:
            return None
        snaplen = struct.unpack_from(pm.byte_order + "I", head, 16)[0]
        return Layout("pcap", pm.byte_order, PCAP_FILE_HEADER, pm.header_len, pm.ts_unit, snaplen)
    if magic != PCAPNG_SHB or len(head) < 28:
        return None
    bo = PCAPNG_BYTE_ORDER.get(head[8:12])
    if bo is None:
        return None
    pos = 0
    while pos + 12 <= len(head):
        t, blen = struct.unpack_from(bo + "II", head, pos)
        if blen < 12 or blen % 4 or pos + blen > len(head):
            return None
        if pos and t in PCAPNG_PACKET_BLOCKS:
            return Layout("pcapng", bo, pos)
        if pos and t == 0x0A0D0D0A:
            return None  # a second section right away
        pos += blen
    return None


def packet_at(buf: Data, p: int, layout: Layout, prev_sec: int | None = None,
              reference: float | None = None) -> tuple[int, int] | None:
    """``(length, timestamp seconds)`` when a plausible packet starts at offset ``p`` of ``buf``
    (bytes, or an mmap of the whole file), else None.

    pcap: a packet header whose lengths fit the hard limit (not the snap length: a record longer
    than it is read whole, as Wireshark does), whose fraction
    is below one second, and whose time is within ``MAX_TS_STEP`` of ``prev_sec`` (the packet
    before it in a chain) or, for the first of a chain, within a year of ``reference`` (e.g. the
    file's first packet time). pcapng: a known block type whose leading and trailing lengths
    agree (timestamp 0).
    """
    if layout.kind == "pcapng":
        if p + 12 > len(buf):
            return None
        t, blen = struct.unpack_from(layout.byte_order + "II", buf, p)
        if t not in PCAPNG_KNOWN_BLOCKS or blen < 12 or blen % 4 or blen > HARD_RECORD_LIMIT:
            return None
        if p + blen > len(buf) or struct.unpack_from(layout.byte_order + "I", buf, p + blen - 4)[0] != blen:
            return None
        return blen, 0
    if p + layout.header_len > len(buf):
        return None
    sec, frac, incl, orig = struct.unpack_from(layout.byte_order + "IIII", buf, p)
    # (a record over the snap length is read whole, as the reader does: only the hard limit)
    if incl > HARD_RECORD_LIMIT or orig < incl or orig > HARD_RECORD_LIMIT:
        return None
    if frac >= (1_000_000 if layout.ts_unit == 1e-6 else 1_000_000_000):
        return None
    if prev_sec is not None:
        if abs(sec - prev_sec) > MAX_TS_STEP:
            return None
    elif reference is not None and abs(sec - int(reference)) > MAX_TS_FROM_REFERENCE:
        return None
    return layout.header_len + incl, sec


def walk_packets(buf: Data, p: int, stop: int, layout: Layout, seen: list[Any] | None = None) -> tuple[int, int]:
    """Follow packets from offset ``p`` (a packet boundary) while they start before ``stop``:
    ``(offset where the walk ended, packets passed)``, counted as the capture reader numbers them.

    pcapng: the offsets of section headers and interface descriptions met on the way are added
    to ``seen`` (a reader of a range only knows the interfaces described before the first packet).
    """
    n = 0
    size = len(buf)
    if layout.kind == "pcap":
        rec = struct.Struct(layout.byte_order + "8xI").unpack_from
        hlen = layout.header_len
        while p < stop:
            if p + hlen > size:
                return size, n + 1  # a cut packet header: the reader counts it as a packet
            p += hlen + rec(buf, p)[0]
            n += 1
        return p, n
    u2 = struct.Struct(layout.byte_order + "II").unpack_from
    while p < stop:
        if p + 8 > size:
            return size, n
        t, blen = u2(buf, p)
        if blen < 12:
            return size, n  # corrupt: the reader stops here too
        if t in PCAPNG_PACKET_BLOCKS:
            n += 1
        elif seen is not None and (t == PCAPNG_IDB or t == 0x0A0D0D0A):
            seen.append(p)
        p += blen
    return p, n
