"""A partition's producer and transaction state files: ``*.snapshot`` and ``*.txnindex``.

* **Producer state snapshot** (``<offset>.snapshot``, written by the broker's producer state
  manager when a segment rolls and at shutdown): int16 version (1), uint32 CRC-32C of everything
  after it, then an int32-counted array of entries, each int64 producer id, int16 producer epoch,
  int32 last sequence, int64 last offset, int32 offset delta, int64 timestamp, int32 coordinator
  epoch, int64 first offset of the producer's open transaction (-1: none). The broker refuses a
  snapshot of another version or with a CRC that does not match (and rebuilds the state from the
  log); ``read_producer_snapshot`` shows the entries anyway, with the problem named.
* **Transaction index** (``<base offset>.txnindex``, beside a segment that holds aborted
  transactions): 34-byte entries, int16 version (0), int64 producer id, int64 first offset,
  int64 last offset, int64 last stable offset.
"""
from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from crc32c import crc32c

PRODUCER_SNAPSHOT_VERSION = 1
TXN_INDEX_VERSION = 0
_SNAPSHOT_HEAD = struct.Struct(">hIi")
_PRODUCER_ENTRY = struct.Struct(">qhiqiqiq")
_ABORTED_TXN = struct.Struct(">hqqqq")
PRODUCER_FIELDS = ("producer_id", "producer_epoch", "last_sequence", "last_offset", "offset_delta", "timestamp",
                   "coordinator_epoch", "current_txn_first_offset")
TXN_FIELDS = ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset")
MAX_SNAPSHOT_BYTES = 1 << 30  # a snapshot is read whole (the broker does the same): larger is not one


@dataclass
class ProducerSnapshot:
    version: int | None = None
    crc: int | None = None
    computed_crc: int | None = None
    producers: int = 0          # entries there are room for, of those the count says
    entries: list[dict[str, int]] = field(default_factory=list)  # read_producer_snapshot's only
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"type": "producer-snapshot", "version": self.version, "crc": self.crc,
                "computed_crc": self.computed_crc, "producers": self.producers, "problems": self.problems}


CHUNK = 1 << 20


def scan_producer_snapshot(f: BinaryIO) -> ProducerSnapshot:
    """A producer state snapshot's header, its CRC computed over the file read a megabyte at a
    time, and what in it the broker would refuse; its entries are ``iter_producers``' (memory stays
    a megabyte whatever the count says)."""
    snap = ProducerSnapshot()
    f.seek(0)
    head = f.read(_SNAPSHOT_HEAD.size)
    if len(head) < _SNAPSHOT_HEAD.size:
        snap.problems.append(f"{len(head)} bytes: shorter than the {_SNAPSHOT_HEAD.size}-byte header (version, "
                             "CRC, entry count)")
        return snap
    snap.version, snap.crc, count = _SNAPSHOT_HEAD.unpack(head)
    crc, size = crc32c(head[6:]), len(head)
    while chunk := f.read(CHUNK):
        crc = crc32c(chunk, crc)
        size += len(chunk)
    snap.computed_crc = crc
    if snap.version != PRODUCER_SNAPSHOT_VERSION:
        snap.problems.append(f"version {snap.version}: the broker reads version {PRODUCER_SNAPSHOT_VERSION} only")
    if snap.crc != snap.computed_crc:
        snap.problems.append(f"CRC 0x{snap.crc:08x} stored, 0x{snap.computed_crc:08x} computed: the broker would "
                             "discard this snapshot")
    room = (size - _SNAPSHOT_HEAD.size) // _PRODUCER_ENTRY.size
    if count < 0 or count > room:
        snap.problems.append(f"entry count {count} at byte 6, but the {size - _SNAPSHOT_HEAD.size} bytes "
                             f"after it hold {room} entries of {_PRODUCER_ENTRY.size} bytes")
    snap.producers = n = min(max(count, 0), room)
    end = _SNAPSHOT_HEAD.size + n * _PRODUCER_ENTRY.size
    if count == n and end != size:
        snap.problems.append(f"{size - end} bytes after the last entry (at byte {end})")
    return snap


def iter_producers(f: BinaryIO, snap: ProducerSnapshot) -> Iterator[dict[str, int]]:
    """The entries ``scan_producer_snapshot`` found room for, one at a time."""
    f.seek(_SNAPSHOT_HEAD.size, os.SEEK_SET)
    left = snap.producers
    per = max(1, CHUNK // _PRODUCER_ENTRY.size)
    while left > 0:
        chunk = f.read(min(left, per) * _PRODUCER_ENTRY.size)
        usable = len(chunk) - len(chunk) % _PRODUCER_ENTRY.size
        if not usable:
            return  # the file shrank meanwhile
        for v in _PRODUCER_ENTRY.iter_unpack(memoryview(chunk)[:usable]):
            yield dict(zip(PRODUCER_FIELDS, v, strict=True))
        left -= usable // _PRODUCER_ENTRY.size


def read_producer_snapshot(data: bytes) -> ProducerSnapshot:
    """The entries of a producer state snapshot's bytes (in ``entries``), and what in them the
    broker would refuse."""
    f = io.BytesIO(data)
    snap = scan_producer_snapshot(f)
    snap.entries = list(iter_producers(f, snap))
    return snap


def read_txn_index(f: BinaryIO) -> Iterator[dict[str, int] | str]:
    """The aborted transactions of a ``*.txnindex``, in file order; a partial last entry or an entry
    of an unknown version is reported as a string (one line)."""
    pos = 0
    rest = b""
    while True:
        chunk = f.read(_ABORTED_TXN.size * 2048)
        if not chunk:
            if rest:
                yield f"{len(rest)} bytes at byte {pos}: a partial entry ({_ABORTED_TXN.size} bytes each)"
            return
        if rest:
            chunk = rest + chunk
        usable = len(chunk) - len(chunk) % _ABORTED_TXN.size
        rest = chunk[usable:]
        for v in _ABORTED_TXN.iter_unpack(memoryview(chunk)[:usable]):
            entry = dict(zip(TXN_FIELDS, v, strict=True))
            if entry["version"] != TXN_INDEX_VERSION:
                yield (f"entry at byte {pos}: version {entry['version']} (the broker reads version "
                       f"{TXN_INDEX_VERSION} and stops here)")
                return
            yield entry
            pos += _ABORTED_TXN.size
