"""Capture files cut into byte ranges at packet boundaries, each read on its own by the capture reader.

Spark's ``binaryFile`` source hands a whole file to one task as one value (and fails past 2 GB), so
the job never uses it. Instead:

1. ``plan_file(path)`` (driver, reads the first 64 KiB): what the file is. A pcap's 24-byte header,
   a pcapng's section header and interface blocks (the *header context*), gzip (not splittable:
   read whole, streamed), or a per-file failure with the reader's own message.
2. ``index_range(...)`` (one small task per nominal range of ``split_size`` bytes): find the first
   packet boundary at or after the nominal start by scanning for plausible packet headers (a
   chain of them must follow), walk the packets of the range and count them. The driver stitches
   the ranges along the chain that starts at the file's first packet (``stitch``), so adjacent
   ranges always agree on where one ends and the next begins, and every range knows the number
   of its first packet (packet numbers match ``kwire pcap``'s).
3. ``read_range(...)`` (one task per range): ``kwire_cli.capture.iter_packets`` over the range's
   bytes (``RangeFile``) after the file's header context, streamed in the reader's 1 MiB chunks;
   the reader is told the range's file offset and the packets before it, so packet numbers and
   byte offsets in its damage reports are the whole file's.
4. ``range_connections(...)`` (the connection pre-pass, one task per range): the connections of
   the packets ``read_range`` would give, from the packet, IP and TCP headers only
   (``kwire_cli.capture.headerscan`` over an mmap of the file); None where that scan cannot
   answer exactly (gzip, a file that is not a capture: the caller reads the range in full).

Nothing here parses packets or their headers itself: ``kwire_cli.capture.formats`` knows the
file structure (magic table, header context, plausible packet at an offset, walking packets) and
the capture reader reads them.
"""
from __future__ import annotations

import io
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from kwire_cli.capture import CaptureError, CaptureStats, Damage, Packet, iter_records, linklayer
from kwire_cli.capture.events import UNSUPPORTED_LINK
from kwire_cli.capture.formats import Layout, header_context, packet_at, sniff, walk_packets
from kwire_cli.capture.headerscan import four_tuple, tcp_connections

HEAD_PROBE = 64 << 10
DEFAULT_SPLIT = 64 << 20
CHAIN = 8                      # plausible packets in a row that make a boundary


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
    data_start: int = 0         # offset of the first packet / first block after the prefix
    layout: Layout | None = None  # byte order, packet header length, snap length (capture.formats)
    first_ts: float | None = None
    ranges: list = field(default_factory=list)  # [(start, end, packets before)], filled by stitch()


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
        f = open(path, "rb")  # noqa: SIM115 - closed by the `with f:` below, after the OSError check
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
        if sniff(head) == "gzip":
            p.kind = "whole"
            return p
        if first is not None and first.__class__ is not Damage:
            p.first_ts = first[1]
        layout = header_context(head)
        if layout is None:
            p.kind = "whole"  # pcapng header context longer than the probe or odd: read it whole
            return p
        p.layout = layout
        p.data_start = layout.data_start
        p.prefix = head[:layout.data_start]
        p.kind = layout.kind
        if p.size - p.data_start <= split_size:
            p.kind = "whole"
    return p


# ----------------------------------------------------------------------------------- index task
def _chain_ok(mm, p: int, plan: FilePlan) -> bool:
    layout = plan.layout
    assert layout is not None  # a pcap/pcapng plan (plan_file sets it)
    prev = None
    for _ in range(CHAIN):
        if p == len(mm):
            return True  # the chain reached the end of the file exactly
        r = packet_at(mm, p, layout, prev, plan.first_ts)
        if r is None:
            return False
        p += r[0]
        prev = r[1] if plan.kind == "pcap" else None
    return True


def find_boundary(mm, start: int, stop: int, plan: FilePlan) -> int | None:
    """The first offset in [start, stop) where a chain of plausible packets begins."""
    step = 1 if plan.kind == "pcap" else 4
    p = start if step == 1 else (start + 3) & ~3
    while p < stop:
        if _chain_ok(mm, p, plan):
            return p
        p += step
    return None


def walk(mm, p: int, stop: int, plan: FilePlan, seen: list | None = None) -> tuple[int, int]:
    """Follow packets from ``p`` (a boundary) while they start before ``stop``: (end, packets)
    (``capture.formats.walk_packets``)."""
    assert plan.layout is not None  # a pcap/pcapng plan (plan_file sets it)
    return walk_packets(mm, p, stop, plan.layout, seen)


def index_range(plan: FilePlan, i: int, nominal: list[int]) -> tuple[int, int | None, int, int, bool]:
    """For nominal range ``i``: (i, boundary found by scanning, end of its chain walk, packets,
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
    """Ranges [(start, end, packets before)] along the one chain that starts at the first packet.

    A range whose scanned boundary disagrees with where the previous range's walk ended (a false
    boundary, or a packet longer than a range) is walked again from the agreed point on the
    driver, so no packet is read twice or lost. A pcapng file with interface descriptions (or
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
                    continue  # the previous packet runs past this whole range
                if mm is None:
                    f = open(plan.path, "rb")  # noqa: SIM115 - closed in the finally below, with its mmap
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
    """Bytes [start, end) of a file (the capture reader reads them after the header context)."""

    def __init__(self, path: str, start: int, end: int):
        self.f = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.f.seek(start)
        self.left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = len(b)
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


def read_range(plan: FilePlan, file_index: int, rng: tuple[int, int, int] | None, range_no: int,
               stats: CaptureStats) -> Iterator[Packet | Damage]:
    """Packets (``file`` = ``file_index``) and reader damage of one range (or the whole file).

    ``stats`` gets the reader's counters; the file is counted once, by its first range.
    """
    opened: RangeFile | None = None
    header_damage = 0
    # the link-layer walk makes each packet with the file's rank as its ``file`` (Spark's rows carry
    # the rank; the reader's messages and damage keep the file's label): no copy of each packet
    if rng is None or plan.kind == "whole":
        records = iter_records(plan.path, plan.label, stats=stats)
    else:
        start, end, packets_before = rng
        if range_no:
            header_damage = _header_damage(plan)
        opened = RangeFile(plan.path, start, end)
        records = iter_records(io.BufferedReader(opened, 1 << 20), plan.label, stats=stats, header=plan.prefix,
                               offset=start, packet_base=packets_before)
    items = linklayer.packets(records, file_index, stats)  # type: ignore[arg-type]
    files_before = stats.files
    try:
        for item in items:
            if item.__class__ is Packet:
                yield item
            elif isinstance(item, Damage):
                if header_damage:  # damage of the header context: reported by the file's first range
                    header_damage -= 1
                    stats.damage_count[item.kind] -= 1
                    stats.damage_bytes[item.kind] -= item.bytes
                    continue
                if range_no and item.kind == UNSUPPORTED_LINK:
                    stats.damage_count[UNSUPPORTED_LINK] -= 1  # reported by the file's first range
                    continue
                yield item
    finally:
        if range_no:
            stats.files = files_before
        if opened is not None:
            opened.close()


def _header_damage(plan: FilePlan) -> int:
    """How many damage events the reader gives for the header context alone (an interface
    description too short, an option past its block): every range reads the header context
    first, so these are the first damage events of every range; the first range reports them."""
    n = 0
    try:
        for item in iter_records(io.BytesIO(plan.prefix), plan.label, stats=CaptureStats()):
            if item.__class__ is Damage:
                n += 1
    except CaptureError:
        return 0
    return n


# ----------------------------------------------------------------------------------- pre-pass task
def range_connections(plan: FilePlan, rng: tuple[int, int, int] | None) -> dict[tuple, int] | None:
    """The (src ip, src port, dst ip, dst port) of every packet ``read_range`` gives for this range
    (or the whole file) and their captured TCP bytes, read from the headers only; None where the
    header scan cannot answer exactly (``capture.headerscan``: gzip, a file that is not a capture,
    ...): read it in full."""
    whole = rng is None or plan.kind == "whole"
    try:
        f = open(plan.path, "rb")  # noqa: SIM115 - closed by the `with f:` below
    except OSError:
        return None
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return None
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        with mm:
            if whole:
                keys = tcp_connections(mm, 0, size, None)
            else:
                assert rng is not None
                keys = tcp_connections(mm, rng[0], min(rng[1], size), plan.prefix)
    return None if keys is None else {four_tuple(k): n for k, n in keys.items()}
