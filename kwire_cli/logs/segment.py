"""A log segment (``*.log``) or KRaft snapshot (``*.checkpoint``), entry by entry, streamed.

On disk a segment is what a Produce request's records field holds, one entry after another from
position 0: record batches (magic 2) and, in old segments, legacy messages (magic 0/1; a compressed
wrapper holds its inner messages). Every entry starts with an int64 offset and an int32 length, so
the file is read one entry at a time: memory stays one batch, whatever the file's size.

Each entry is decoded by ``kwire_cli.records.decode_records`` (the shape ``kwire decode`` shows,
``ByteOffset`` replaced by the file ``Position``), and each record of an internal topic gets
``Internal``: its key and value decoded by ``kwire_cli.codec.internal`` from the record specs (a
metadata record holding a secret has its raw ``Value`` redacted too, unless ``show_secrets``).

The end of the file: a tail too short for an entry header, an entry whose length runs past the end
(a segment cut while being written) or a length below the smallest entry (zero padding of a
preallocated segment, or damage) is one ``damage`` entry naming the position and the bytes, and
reading stops there: nothing after it can be framed.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from kwire_cli.capture.kafka import DEFAULT_MAX_FRAME
from kwire_cli.codec.internal import decode_internal_batch, is_internal
from kwire_cli.errors import KwireError
from kwire_cli.records import decode_records
from kwire_cli.values.records import decode_batches as decode_values

_HEAD = struct.Struct(">qi")
HEADER_SIZE = 12        # int64 offset + int32 length
MIN_ENTRY_LENGTH = 14   # the smallest legacy message v0 after its length: crc, magic, attributes, key, value
MAX_ENTRY = DEFAULT_MAX_FRAME  # the largest entry read (a Kafka frame's cap in captures, 100 MiB)


@dataclass
class SegmentEntry:
    """One entry of a segment: a decoded batch (``kind`` "batch"), or the damage that ends the file
    (``kind`` "damage", ``reason`` one line)."""

    position: int
    size: int
    kind: str
    batch: dict[str, Any] | None = None
    reason: str | None = None

    @property
    def base_offset(self) -> int | None:
        b = self.batch
        if b is None:
            return None
        return b.get("BaseOffset", b.get("Offset"))

    @property
    def last_offset(self) -> int | None:
        """The offset of the batch's last record (a legacy wrapper's own offset is its last inner
        offset), as Kafka's indexes name a batch."""
        b = self.batch
        if b is None:
            return None
        if "BaseOffset" in b:
            return int(b["BaseOffset"]) + int(b.get("LastOffsetDelta", 0))
        return b.get("Offset")

    @property
    def max_timestamp(self) -> int:
        """The largest record timestamp (what the time index records), -1 when there is none."""
        b = self.batch or {}
        stamps = [r["Timestamp"] for r in b.get("Records") or () if isinstance(r.get("Timestamp"), int)]
        stamps += [m["Timestamp"] for m in b.get("Messages") or () if isinstance(m.get("Timestamp"), int)]
        if stamps:
            return max(stamps)
        if isinstance(b.get("MaxTimestamp"), int):
            return int(b["MaxTimestamp"])
        return int(b.get("Timestamp", -1))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "position": self.position, "size": self.size}
        if self.batch is not None:
            out["batch"] = self.batch
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def decode_entry(data: bytes, position: int, topic: str | None = None,
                 show_secrets: bool = False) -> dict[str, Any]:
    """One entry (offset, length and the rest) as ``kwire decode`` shows a batch, at ``position``."""
    value = decode_records(data)
    assert value is not None
    batches = value["batches"]
    if len(batches) != 1 or value.get("partial_trailing_batch"):
        # cannot happen for a whole entry framed by its own length; kept as damage if it does
        raise KwireError(f"entry at position {position} does not read as one batch")
    batch: dict[str, Any] = {"Position": position}
    for k, v in batches[0].items():
        if k != "ByteOffset":
            batch[k] = v
    if topic is not None and is_internal(topic) and "error" not in batch:
        decode_internal_batch(batch, topic, show_secrets)
    elif "error" not in batch:
        decode_values({"batches": [batch]})  # Schema Registry framed keys and values, when asked
    return batch


def iter_segment(f: BinaryIO, *, topic: str | None = None, show_secrets: bool = False,
                 size: int | None = None, start: int = 0,
                 offsets: tuple[int, int] | None = None, limit: int | None = None,
                 max_entry: int = MAX_ENTRY) -> Iterator[SegmentEntry]:
    """The entries of a segment read from ``f`` (at position ``start``), one at a time. ``size``:
    the file's size when known (a length past it is damage at once, without reading).
    ``offsets``: (first, last) record offsets wanted; a record batch (magic 2) wholly outside them
    is skipped undecoded (its header says its offsets). ``limit``: only the entries that end within
    the file's first ``limit`` bytes (kafka-dump-log's --max-bytes); the first that would not is not
    read, and is said by a last entry of kind "stopped". An entry longer than ``max_entry`` is not
    read: one damage entry, and reading goes on after it (where ``f`` can seek; else it stops)."""
    if size is None:
        try:
            size = os.fstat(f.fileno()).st_size
        except (OSError, AttributeError, ValueError):
            size = None
    pos = start
    read = f.read
    while True:
        head = read(HEADER_SIZE)
        if not head:
            return
        if len(head) < HEADER_SIZE:
            yield SegmentEntry(pos, len(head), "damage",
                               reason=f"truncated tail: {len(head)} bytes at position {pos}, "
                                      f"too few for an entry header ({HEADER_SIZE})")
            return
        offset, length = _HEAD.unpack(head)
        if limit is not None and pos + HEADER_SIZE + max(length, 0) > limit:
            yield SegmentEntry(pos, 0, "stopped",
                               reason=f"stopped at --max-bytes {limit}: the entry at position {pos} (offset {offset}) "
                                      f"ends past it; the rest of the file not read")
            return
        if length < MIN_ENTRY_LENGTH:
            rest = None if size is None else size - pos
            what = "zero padding" if offset == 0 and length == 0 else "damage"
            yield SegmentEntry(pos, rest if rest is not None else HEADER_SIZE, "damage",
                               reason=f"entry at position {pos} has length {length}, below the smallest "
                                      f"entry ({MIN_ENTRY_LENGTH}): {what}; "
                                      f"{'the rest of the file' if rest is None else f'{rest} bytes'} not read")
            return
        if size is not None and pos + HEADER_SIZE + length > size:
            have = size - pos - HEADER_SIZE
            yield SegmentEntry(pos, size - pos, "damage",
                               reason=f"truncated entry at position {pos} (offset {offset}): its length says "
                                      f"{length} bytes, {have} present")
            return
        if length > max_entry:
            yield SegmentEntry(pos, HEADER_SIZE + length, "damage",
                               reason=f"entry at position {pos} (offset {offset}) has length {length}, over the "
                                      f"cap of {max_entry} bytes: not read")
            try:
                f.seek(length, os.SEEK_CUR)
            except (OSError, AttributeError, ValueError):
                return
            pos += HEADER_SIZE + length
            continue
        body = read(length)
        if len(body) < length:
            yield SegmentEntry(pos, HEADER_SIZE + len(body), "damage",
                               reason=f"truncated entry at position {pos} (offset {offset}): its length says "
                                      f"{length} bytes, {len(body)} present")
            return
        if offsets is not None and length >= 15 and body[4] == 2:
            last = offset + int.from_bytes(body[11:15], "big", signed=True)
            if last < offsets[0] or offset > offsets[1]:
                pos += HEADER_SIZE + length
                continue
        try:
            batch = decode_entry(head + body, pos, topic, show_secrets)
        except KwireError as e:
            yield SegmentEntry(pos, HEADER_SIZE + length, "damage", reason=f"entry at position {pos}: {e}")
        else:
            yield SegmentEntry(pos, HEADER_SIZE + length, "batch", batch=batch)
        pos += HEADER_SIZE + length
