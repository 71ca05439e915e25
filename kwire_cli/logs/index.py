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

import struct
from collections.abc import Iterator
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


def segment_map(f: BinaryIO, size: int | None = None) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """One pass over a segment: {position: (last offset, max timestamp)} and {last offset: position}
    of its batches."""
    by_pos: dict[int, tuple[int, int]] = {}
    by_last: dict[int, int] = {}
    for e in iter_segment(f, size=size):
        if e.kind != "batch":
            continue
        last = e.last_offset
        if last is None:
            continue
        by_pos[e.position] = (last, e.max_timestamp)
        by_last[last] = e.position
    return by_pos, by_last


def verify_index(entries: list[IndexEntry], kind: str, by_pos: dict[int, tuple[int, int]],
                 by_last: dict[int, int]) -> int:
    """Set ``problem`` on every entry the segment contradicts; the number of them."""
    bad = 0
    prev_offset = prev_ts = None
    for e in entries:
        problem = None
        if kind == "offset-index":
            got = by_pos.get(e.position if e.position is not None else -1)
            if got is None:
                problem = f"position {e.position} is not a batch boundary of the segment"
            elif got[0] != e.offset:
                problem = f"the batch at position {e.position} ends at offset {got[0]}, not {e.offset}"
            elif prev_offset is not None and e.offset <= prev_offset:
                problem = f"offset {e.offset} does not follow {prev_offset}"
        else:
            pos = by_last.get(e.offset)
            if pos is None:
                problem = f"offset {e.offset} is not the last offset of a batch of the segment"
            elif by_pos[pos][1] != e.timestamp:
                problem = (f"the batch ending at offset {e.offset} has largest timestamp {by_pos[pos][1]}, "
                           f"not {e.timestamp}")
            elif prev_ts is not None and e.timestamp is not None and e.timestamp <= prev_ts:
                problem = f"timestamp {e.timestamp} does not follow {prev_ts}"
            prev_ts = e.timestamp
        prev_offset = e.offset
        if problem is not None:
            e.problem = problem
            bad += 1
    return bad
