"""Capture files cut into byte ranges at record boundaries, each read on its own by the capture reader.

Spark's ``binaryFile`` source hands a whole file to one task as one value (and fails past 2 GB), so
the job never uses it. Instead:

1. ``plan_file(path)`` (driver, reads the first 64 KiB): what the file is. A pcap's 24-byte header,
   a pcapng's section header and interface blocks (the *header context*), gzip (not splittable:
   read whole, streamed), or a per-file failure with the reader's own message.
2. ``index_range(...)`` (one small task per nominal range of ``split_size`` bytes): find the first
   record boundary at or after the nominal start by scanning for plausible record headers (a
   chain of them must follow), walk the records of the range and count them. The driver stitches
   the ranges along the chain that starts at the file's first record (``stitch``), so adjacent
   ranges always agree on where one ends and the next begins, and every range knows the packet
   number of its first record (packet numbers match ``kwire pcap``'s).
3. ``read_range(...)`` (one task per range): ``kwire_cli.capture.iter_packets`` over a virtual file
   made of the header context followed by the range's bytes (``RangeFile``), streamed in the
   reader's 1 MiB chunks; packet numbers and byte offsets in damage reports are shifted back to
   the whole file.

Nothing here parses packets itself: the capture reader does, unchanged.
"""
from __future__ import annotations

import io
import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Iterator

from kwire_cli.capture import CaptureError, CaptureStats, Damage, Packet, iter_packets, iter_records
from kwire_cli.capture.events import UNSUPPORTED_LINK
from kwire_cli.capture.reader import HARD_RECORD_LIMIT, PCAP_MAGICS, PCAPNG_SHB

HEAD_PROBE = 64 << 10
DEFAULT_SPLIT = 64 << 20
CHAIN = 8                      # plausible records in a row that make a boundary
MAX_TS_STEP = 7 * 86400        # seconds between consecutive records in a plausible chain
PCAPNG_PACKET_BLOCKS = (2, 3, 6)
PCAPNG_KNOWN_BLOCKS = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 10, 0x0A0D0D0A, 0x00000BAD, 0x40000BAD})


@dataclass
class FilePlan:
    """What the driver learned from a file's first bytes."""

    path: str
    label: str
    size: int = 0
    kind: str = "fail"          # "pcap" | "pcapng" | "whole" (gzip, or too small to split) | "fail"
    failure: str | None = None  # the reader's one-line message for a file it cannot read at all
    counted: bool = False       # kwire pcap counts the file in stats.files (it could be opened)
    prefix: bytes = b""         # header context: pcap file header / pcapng SHB + IDBs
    data_start: int = 0         # offset of the first record / first block after the prefix
    bo: str = "<"
    hlen: int = 16              # pcap record header length
    tsunit: float = 1e-6
    snaplen: int = 0
    first_ts: float | None = None
    ranges: list = field(default_factory=list)  # [(start, end, first_frame)], filled by stitch()


# ----------------------------------------------------------------------------------- driver: plan
class _Head(io.RawIOBase):
    """The first ``limit`` bytes of a file, as a file object (so the reader's header checks run
    on the driver without reading a 1 MiB chunk per file)."""

    def __init__(self, f, limit: int):
        self.f = f
        self.left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        n = min(len(b), self.left)
        data = self.f.read(n)
        b[:len(data)] = data
        self.left -= len(data)
        return len(data)


def plan_file(path: str, label: str | None = None, split_size: int = DEFAULT_SPLIT) -> FilePlan:
    """Look at one file's header. Never raises for a bad file: ``failure`` says what is wrong."""
    label = label or path
    p = FilePlan(path=path, label=label)
    try:
        f = open(path, "rb")
    except OSError as e:
        p.failure = f"{label}: {e.strerror or e}"
        return p
    with f:
        p.counted = True
        try:
            p.size = os.fstat(f.fileno()).st_size
            head = f.read(HEAD_PROBE)
        except OSError as e:
            p.failure = f"{label}: read error: {e}"
            return p
        # the reader's own verdict on the header (same messages as kwire pcap)
        first = None
        try:
            for item in iter_records(io.BufferedReader(_Head(io.BytesIO(head), len(head))), label):
                first = item
                break
        except CaptureError as e:
            msg = str(e)
            p.failure = msg if label in msg else f"{label}: {msg}"
            return p
        if head[:2] == b"\x1f\x8b":
            p.kind = "whole"
            return p
        if first is not None and first.__class__ is not Damage:
            p.first_ts = first[1]
        magic = head[:4]
        if magic in PCAP_MAGICS:
            p.bo, p.tsunit, p.hlen = PCAP_MAGICS[magic]
            p.snaplen = struct.unpack_from(p.bo + "I", head, 16)[0]
            p.prefix = head[:24]
            p.data_start = 24
            p.kind = "pcap"
        elif magic == PCAPNG_SHB:
            ctx = _pcapng_header(head)
            if ctx is None:
                p.kind = "whole"  # header context longer than the probe or odd: read it whole
                return p
            p.bo, p.data_start = ctx
            p.prefix = head[:p.data_start]
            p.kind = "pcapng"
        else:  # pragma: no cover - iter_records raised above
            p.kind = "whole"
        if p.size - p.data_start <= split_size:
            p.kind = "whole"
    return p


def _pcapng_header(head: bytes) -> tuple[str, int] | None:
    """(byte order, offset of the first block after the SHB and the IDBs before any packet)."""
    if len(head) < 28:
        return None
    m = head[8:12]
    bo = "<" if m == b"\x4d\x3c\x2b\x1a" else ">" if m == b"\x1a\x2b\x3c\x4d" else None
    if bo is None:
        return None
    pos = 0
    while pos + 12 <= len(head):
        t, blen = struct.unpack_from(bo + "II", head, pos)
        if blen < 12 or blen % 4 or pos + blen > len(head):
            return None
        if pos and t in PCAPNG_PACKET_BLOCKS:
            return bo, pos
        if pos and t == 0x0A0D0D0A:
            return None  # a second section right away: leave the file whole
        pos += blen
    return None


# ----------------------------------------------------------------------------------- index task
def _pcap_ok(mm, p: int, plan: FilePlan, prev_sec: int | None) -> tuple[int, int] | None:
    """(record length, ts seconds) if a plausible pcap record header is at ``p``."""
    if p + plan.hlen > len(mm):
        return None
    sec, frac, incl, orig = struct.unpack_from(plan.bo + "IIII", mm, p)
    limit = plan.snaplen if 0 < plan.snaplen < HARD_RECORD_LIMIT else HARD_RECORD_LIMIT
    if incl > limit or orig < incl or orig > HARD_RECORD_LIMIT:
        return None
    if frac >= (1_000_000 if plan.tsunit == 1e-6 else 1_000_000_000):
        return None
    ref = prev_sec if prev_sec is not None else (int(plan.first_ts) if plan.first_ts is not None else None)
    if ref is not None and abs(sec - ref) > (MAX_TS_STEP if prev_sec is not None else 366 * 86400):
        return None
    return plan.hlen + incl, sec


def _pcapng_ok(mm, p: int, plan: FilePlan, _prev) -> tuple[int, int] | None:
    if p + 12 > len(mm):
        return None
    t, blen = struct.unpack_from(plan.bo + "II", mm, p)
    if t not in PCAPNG_KNOWN_BLOCKS or blen < 12 or blen % 4 or blen > HARD_RECORD_LIMIT:
        return None
    if p + blen > len(mm) or struct.unpack_from(plan.bo + "I", mm, p + blen - 4)[0] != blen:
        return None
    return blen, 0


def _chain_ok(mm, p: int, plan: FilePlan, check) -> bool:
    prev = None
    for _ in range(CHAIN):
        if p == len(mm):
            return True  # the chain reached the end of the file exactly
        r = check(mm, p, plan, prev)
        if r is None:
            return False
        p += r[0]
        prev = r[1]
    return True


def find_boundary(mm, start: int, stop: int, plan: FilePlan) -> int | None:
    """The first offset in [start, stop) where a chain of plausible records begins."""
    check = _pcap_ok if plan.kind == "pcap" else _pcapng_ok
    step = 1 if plan.kind == "pcap" else 4
    p = start if step == 1 else (start + 3) & ~3
    while p < stop:
        if _chain_ok(mm, p, plan, check):
            return p
        p += step
    return None


def walk(mm, p: int, stop: int, plan: FilePlan, seen: list | None = None) -> tuple[int, int]:
    """Follow records from ``p`` (a boundary) while they start before ``stop``: (end, records).

    pcapng: the offsets of section headers and interface descriptions met on the way go to ``seen``
    (a range reader only knows the interfaces described before the first packet)."""
    n = 0
    size = len(mm)
    if plan.kind == "pcap":
        rec = struct.Struct(plan.bo + "8xI").unpack_from
        hlen = plan.hlen
        while p < stop:
            if p + hlen > size:
                return size, n + 1  # a cut record header: the reader counts it as a packet
            p += hlen + rec(mm, p)[0]
            n += 1
        return p, n
    u2 = struct.Struct(plan.bo + "II").unpack_from
    while p < stop:
        if p + 8 > size:
            return size, n
        t, blen = u2(mm, p)
        if blen < 12:
            return size, n  # corrupt: the reader stops here too
        if t in PCAPNG_PACKET_BLOCKS:
            n += 1
        elif seen is not None and (t == 1 or t == 0x0A0D0D0A):
            seen.append(p)
        p += blen
    return p, n


def index_range(plan: FilePlan, i: int, nominal: list[int]) -> tuple[int, int | None, int, int, bool]:
    """For nominal range ``i``: (i, boundary found by scanning, end of its chain walk, records,
    whether a pcapng section header or interface description came after the first packet)."""
    with open(plan.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return i, None, 0, 0, False
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            start, stop = nominal[i], nominal[i + 1]
            b = plan.data_start if i == 0 else find_boundary(mm, start, stop, plan)
            if b is None:
                return i, None, start, 0, False
            seen: list = []
            end, n = walk(mm, b, stop, plan, seen)
            return i, b, end, n, bool(seen)


def nominal_ranges(plan: FilePlan, split_size: int) -> list[int]:
    """Nominal cut points: data_start, data_start + split, ..., size."""
    cuts = list(range(plan.data_start, plan.size, split_size))
    if len(cuts) > 1 and plan.size - cuts[-1] < split_size // 4:
        cuts.pop()  # no tiny last range
    return cuts + [plan.size]


def stitch(plan: FilePlan, nominal: list[int], results: list[tuple]) -> list[tuple[int, int, int]]:
    """Ranges [(start, end, first_frame)] along the one chain that starts at the first record.

    A range whose scanned boundary disagrees with where the previous range's walk ended (a false
    boundary, or a record longer than a range) is walked again from the agreed point on the
    driver, so no record is read twice or lost. A pcapng file with interface descriptions (or
    sections) after its first packet is left whole (``plan.kind = "whole"``): a range reader
    would not know those interfaces.
    """
    by_i = {r[0]: r for r in results}
    ranges = []
    pos = plan.data_start
    frame = 0
    mm = None
    f = None
    try:
        for i in range(len(nominal) - 1):
            _, b, end, n, headers = by_i[i]
            stop = nominal[i + 1]
            if b != pos:
                if pos >= stop:
                    continue  # the previous record runs past this whole range
                if mm is None:
                    f = open(plan.path, "rb")
                    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                seen: list = []
                end, n = walk(mm, pos, stop, plan, seen)
                headers = bool(seen)
            if headers:
                plan.kind = "whole"
            end = min(end, plan.size)
            if end > pos or i == len(nominal) - 2:
                ranges.append((pos, end if i < len(nominal) - 2 else plan.size, frame))
            frame += n
            pos = end
    finally:
        if mm is not None:
            mm.close()
        if f is not None:
            f.close()
    if not ranges:
        ranges.append((plan.data_start, plan.size, 0))
    return ranges


# ----------------------------------------------------------------------------------- read task
class RangeFile(io.RawIOBase):
    """``prefix`` then bytes [start, end) of a file: what a reader sees as a whole capture."""

    def __init__(self, path: str, prefix: bytes, start: int, end: int):
        self.f = open(path, "rb")
        self.f.seek(start)
        self.prefix = memoryview(prefix)
        self.left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = len(b)
        if self.prefix:
            k = min(n, len(self.prefix))
            b[:k] = self.prefix[:k]
            self.prefix = self.prefix[k:]
            return k
        if self.left <= 0:
            return 0
        k = min(n, self.left)
        got = self.f.readinto(memoryview(b)[:k])
        if not got:
            self.left = 0
            return 0
        self.left -= got
        return got

    def close(self) -> None:
        try:
            self.f.close()
        finally:
            super().close()


_PACKET_RE = re.compile(r"\b(packets?) (\d+)")
_OFFSET_RE = re.compile(r"\b(offset) (\d+)")


def _shift_detail(detail: str, frame0: int, prefix_len: int, start: int) -> str:
    if frame0:
        detail = _PACKET_RE.sub(lambda m: f"{m.group(1)} {int(m.group(2)) + frame0}", detail)
    if start != prefix_len:
        def off(m):
            v = int(m.group(2))
            return f"offset {v - prefix_len + start}" if v >= prefix_len else m.group(0)
        detail = _OFFSET_RE.sub(off, detail)
    return detail


def read_range(plan: FilePlan, file_index: int, rng: tuple[int, int, int] | None, range_no: int,
               stats: CaptureStats) -> Iterator[Packet | Damage]:
    """Packets (``file`` = ``file_index``) and reader damage of one range (or the whole file).

    ``stats`` gets the reader's counters; the file is counted once, by its first range.
    """
    if rng is None or plan.kind == "whole":
        src = plan.path
        frame0, prefix_len, start = 0, 0, 0
        opened = None
    else:
        start, end, frame0 = rng
        opened = RangeFile(plan.path, plan.prefix, start, end)
        src = io.BufferedReader(opened, 1 << 20)
        prefix_len = len(plan.prefix)
    files_before = stats.files
    try:
        for item in iter_packets(src, plan.label, stats=stats):
            if item.__class__ is Packet:
                yield item._replace(file=file_index, frame=item.frame + frame0)
            else:
                if range_no and item.kind == UNSUPPORTED_LINK:
                    stats.damage_count[UNSUPPORTED_LINK] -= 1  # reported by the file's first range
                    continue
                if frame0 or (opened is not None and start != prefix_len):
                    item = Damage(item.file, None if item.frame is None else item.frame + frame0, item.conn,
                                  item.kind, item.bytes, _shift_detail(item.detail, frame0, prefix_len, start),
                                  item.ts)
                yield item
    finally:
        if range_no:
            stats.files = files_before
        if opened is not None:
            opened.close()

