"""Segment indexes: ``*.index`` (offset index) and ``*.timeindex`` (time index), and their check.

An offset index entry is 8 bytes, int32 offset relative to the segment's base offset and int32
file position: the batch at that position has that (last) offset. A time index entry is 12 bytes,
int64 timestamp and int32 relative offset: up to that offset, no record has a larger timestamp.
Index files are preallocated and zero-filled: like Kafka's DumpLogSegments, reading stops at the
first entry (after the first) whose relative offset is 0.

``verify_index`` checks entries against the segment beside the index, as DumpLogSegments does: an
offset index entry must point at a batch boundary whose last offset is the entry's offset; a time
index entry's offset must be the last offset of a batch whose largest record timestamp is the
entry's timestamp, and timestamps must grow.
"""
from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from kwire_cli.logs.segment import iter_segment

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


@dataclass
class IndexEntry:
    number: int
    offset: int                 # absolute (base offset + relative)
    position: int | None = None  # offset index
    timestamp: int | None = None  # time index
    problem: str | None = None   # set by verify_index

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "index-entry", "entry": self.number, "offset": self.offset}
        if self.position is not None:
            out["position"] = self.position
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        if self.problem is not None:
            out["problem"] = self.problem
        return out


def read_index(f: BinaryIO, kind: str, base_offset: int) -> Iterator[IndexEntry | str]:
    """The entries of an index file (``kind``: "offset-index" or "time-index"); a trailing part
    entry is reported as a string (one line)."""
    st = _OFFSET_ENTRY if kind == "offset-index" else _TIME_ENTRY
    i = 0
    while True:
        chunk = f.read(st.size * 4096)
        if not chunk:
            return
        usable = len(chunk) - len(chunk) % st.size
        for a, b in st.iter_unpack(chunk[:usable]):
            rel, other = (a, b) if kind == "offset-index" else (b, a)
            if rel == 0 and i > 0:
                return  # the preallocated, zero-filled rest
            if kind == "offset-index":
                yield IndexEntry(i, base_offset + rel, position=other)
            else:
                yield IndexEntry(i, base_offset + rel, timestamp=other)
            i += 1
        if usable != len(chunk):
            yield f"{len(chunk) - usable} trailing bytes after entry {i - 1}: not a whole {st.size}-byte entry"
            return


class SegmentMap:
    """What ``--verify`` needs of a segment's batches, from one pass over it: their positions, last
    offsets and largest record timestamps, in three arrays of 8-byte numbers (24 bytes a batch:
    3 million batches take 72 MB, not the gigabyte dicts of tuples took)."""

    def __init__(self, f: BinaryIO, size: int | None = None) -> None:
        self.positions, self.lasts, self.stamps = array("q"), array("q"), array("q")
        for e in iter_segment(f, size=size):
            if e.kind != "batch" or e.last_offset is None:
                continue
            self.positions.append(e.position)
            self.lasts.append(e.last_offset)
            self.stamps.append(e.max_timestamp)
        self._order: array | None = None  # indexes of the batches by last offset (when not in file order)
        self._keys: array | None = None

    def __len__(self) -> int:
        return len(self.positions)

    def at_position(self, position: int) -> tuple[int, int] | None:
        """(last offset, largest timestamp) of the batch at ``position``."""
        i = bisect.bisect_left(self.positions, position)
        if i < len(self.positions) and self.positions[i] == position:
            return self.lasts[i], self.stamps[i]
        return None

    def ending_at(self, offset: int) -> tuple[int, int] | None:
        """(position, largest timestamp) of the (last) batch whose last offset is ``offset``."""
        lasts = self.lasts
        if self._keys is None:
            if all(lasts[i] <= lasts[i + 1] for i in range(len(lasts) - 1)):
                self._keys = lasts
            else:  # a damaged segment: offsets out of order
                self._order = array("q", sorted(range(len(lasts)), key=lasts.__getitem__))
                self._keys = array("q", (lasts[i] for i in self._order))
        i = bisect.bisect_right(self._keys, offset) - 1
        if i < 0 or self._keys[i] != offset:
            return None
        j = self._order[i] if self._order is not None else i
        return self.positions[j], self.stamps[j]


def segment_map(f: BinaryIO, size: int | None = None) -> SegmentMap:
    """One pass over a segment: its batches' positions, last offsets and largest timestamps."""
    return SegmentMap(f, size)


class IndexCheck:
    """Index entries checked one at a time against the segment (``problem`` set on each the segment
    contradicts; ``bad`` counts them), so an index of any size is streamed."""

    def __init__(self, kind: str, segment: SegmentMap) -> None:
        self.kind, self.segment = kind, segment
        self.prev_offset: int | None = None
        self.prev_ts: int | None = None
        self.bad = 0

    def check(self, e: IndexEntry) -> None:
        problem = None
        prev_offset = self.prev_offset
        if self.kind == "offset-index":
            got = self.segment.at_position(e.position if e.position is not None else -1)
            if got is None:
                problem = f"position {e.position} is not a batch boundary of the segment"
            elif got[0] != e.offset:
                problem = f"the batch at position {e.position} ends at offset {got[0]}, not {e.offset}"
            elif prev_offset is not None and e.offset <= prev_offset:
                problem = f"offset {e.offset} does not follow {prev_offset}"
        else:
            found = self.segment.ending_at(e.offset)
            if found is None:
                problem = f"offset {e.offset} is not the last offset of a batch of the segment"
            elif found[1] != e.timestamp:
                problem = (f"the batch ending at offset {e.offset} has largest timestamp {found[1]}, "
                           f"not {e.timestamp}")
            elif self.prev_ts is not None and e.timestamp is not None and e.timestamp <= self.prev_ts:
                problem = f"timestamp {e.timestamp} does not follow {self.prev_ts}"
            self.prev_ts = e.timestamp
        self.prev_offset = e.offset
        if problem is not None:
            e.problem = problem
            self.bad += 1


def verify_index(entries: Iterable[IndexEntry], kind: str, segment: SegmentMap) -> int:
    """Set ``problem`` on every entry the segment contradicts; the number of them."""
    check = IndexCheck(kind, segment)
    for e in entries:
        check.check(e)
    return check.bad
