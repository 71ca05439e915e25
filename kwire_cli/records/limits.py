"""What one Kafka frame may cost to decode: decompressed bytes and decoded records + headers.

Two levels:

* the **limits in force** (``FrameLimits``), process-wide, set by ``set_frame_limits`` (the
  command line's ``--max-decompressed`` / ``--max-records``) and read with ``frame_limits()``;
* a **frame budget** (``FrameBudget``): what is left of those allowances while one frame is
  decoded. All batches of all records fields of one message charge the same budget, so a frame of
  many batches, each under the per-batch cap, cannot decompress more than the frame's cap in total.

A budget is opened with the context manager ``frame_budget()``, or, where a context manager costs
too much (the compiled codec, once per message), with ``open_frame()`` / ``close_frame(token)``;
``current_budget()`` is the budget in force (None outside one). Budgets live in a context variable,
so threads and asyncio tasks each have their own.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import NamedTuple

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024   # one batch's cap when the caller gives none
DEFAULT_MAX_FRAME_DECOMPRESSED = 256 * 1024 * 1024
# ... for the commands that read captures (kwire pcap, proxy, spark-decode), whose goal is 500 MB:
# the bytes decompressed and the plain ASCII keys and values made of them (not charged: the record
# loops make them, a str the size of the bytes) are alive together at the end of a batch, so a
# frame costs about twice its cap (a zstd batch of 266,041 records of a 1,000-byte ASCII value,
# 256 MiB: 731 MB in kwire pcap --summary, 764 MB as JSON lines; at 128 MiB, about 400 MB)
CAPTURE_MAX_FRAME_DECOMPRESSED = 128 * 1024 * 1024
# Decoded items per frame: records, record headers and legacy messages count 1, record batches
# BATCH_ITEMS. An item can be made of as little as 2 to 7 bytes (zstd makes millions of them out
# of a few KB), so this, not the bytes, bounds the value tree. Measured (CPython 3.11, the records
# fast path in C; tracemalloc's traced size after decode_request of a Produce request holding
# 200,000 items of one kind, over 200,000; the method of tests/memory_bombs.py):
#
#   empty record (null key and value, no headers)         416 B
#   record with a 1-byte key and value (text or hex)      884 B
#   empty header ({"Key": "", "Value": {"text": ""}})     376 B
#   magic 0 message, inner or top-level (null key/value)  568 B
#   empty v2 batch (its dict, no records)                 992 B  -> counts BATCH_ITEMS = 2
#
# so at most ~900 B of tree per item. The outputs add little to it (JSON is streamed, the decode
# tree shows at most 10,000 lines of records, kwire pcap writes one frame's line at a time), so
# 400,000 items keep a frame's tree under ~360 MB: with the ~110 MB kwire starts with, kwire
# decode stays under 1 GiB and kwire pcap under 500 MB (tests/test_memory_bombs.py; bench/README.md,
# "Memory bombs"). Real frames stay far below it (a 1 MiB producer batch of 100-byte records is ~10,000
# items; a 50 MiB fetch of them, 500,000).
DEFAULT_MAX_FRAME_ITEMS = 400_000
# The message codec's own budget of array items per decoded message (FrameLimits.array_items) is
# this default or the cap set, if higher: a Metadata answer of 50,000 partitions with three replicas
# is 350,010 of them; a tree holds at most ~0.8 KB an item (a Fetch answer's partition with its
# leader sent; ~0.6 KB without: absent tagged structs share one default dict), ApiVersions ~190 B,
# Metadata ~90 B.
BATCH_ITEMS = 2

# the command-line options that set the limits below (named in the messages of a limit reached)
DECOMPRESSED_OPTION = "--max-decompressed"
ITEMS_OPTION = "--max-records"


class FrameLimits(NamedTuple):
    """The per-frame limits in force (see ``set_frame_limits``): decompressed bytes, all batches
    together, and decoded records + record headers."""

    decompressed: int = DEFAULT_MAX_FRAME_DECOMPRESSED
    items: int = DEFAULT_MAX_FRAME_ITEMS

    @property
    def array_items(self) -> int:
        """The message codec's cap of array elements (and unknown tagged fields) per decoded
        message: ``items`` when above the default, else the default. A cap of records set low
        (to look at the first few) leaves the frame's arrays whole; one set high raises both."""
        return max(self.items, DEFAULT_MAX_FRAME_ITEMS)


# process-wide; replaced as a whole, so a reader sees both values of one setting. The message
# codec reads it once per message (open_frame).
_limits = FrameLimits()
# called with the new limits on each change (the message codec keeps its own copy of the items cap,
# read once per message by the generated decoders and the native one)
_watchers: list[Callable[[FrameLimits], object]] = []


def frame_limits() -> FrameLimits:
    """The per-frame limits in force: ``FrameLimits(decompressed, items)``."""
    return _limits


def _check_limit(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"the frame's {what} must be a whole number above 0, got {value!r}")
    return value


def set_frame_limits(decompressed: int | None = None, items: int | None = None) -> FrameLimits:
    """Set the process-wide per-frame limits that ``frame_budget`` and the message codec use when
    not given explicit ones; None leaves a value as it is. Returns the previous limits, so that
    ``set_frame_limits(*previous)`` restores them.

    Raises ValueError (one line) unless each given value is an int above 0."""
    global _limits
    prev = _limits
    d = prev.decompressed if decompressed is None else _check_limit(decompressed, "decompressed byte cap")
    n = prev.items if items is None else _check_limit(items, "cap of records and headers")
    _limits = FrameLimits(d, n)
    for watch in _watchers:
        watch(_limits)
    return prev


def watch_frame_limits(watch: Callable[[FrameLimits], object]) -> None:
    """Call ``watch(limits)`` now and with the new limits each time ``set_frame_limits`` changes
    them (for a layer above that keeps a copy where a lookup per message costs too much)."""
    _watchers.append(watch)
    watch(_limits)


class FrameBudget:
    """What is left of one frame's allowances (see ``frame_budget``): decompressed bytes, and
    decoded records and record headers. ``max_items`` None: the limit in force."""

    __slots__ = ("limit", "left", "max_items", "items_left")

    def __init__(self, limit: int, max_items: int | None = None):
        if max_items is None:
            max_items = _limits.items
        self.limit = self.left = limit
        self.max_items = self.items_left = max_items


_frame: contextvars.ContextVar[FrameBudget | None] = contextvars.ContextVar("kwire_frame_budget", default=None)

# current_budget(): the frame budget in force, or None outside one (the context variable's own get,
# no Python call in between: the records decoder asks once per batch)
current_budget = _frame.get


def open_frame() -> contextvars.Token[FrameBudget | None]:
    """Open a frame budget with the limits in force; returns the token for ``close_frame``.

    For hot paths that cannot afford a context manager: the caller checks ``current_budget()`` is
    None first (nested scopes share the outermost budget) and closes in a ``finally``."""
    return _frame.set(FrameBudget(*_limits))


def close_frame(token: contextvars.Token[FrameBudget | None]) -> None:
    """Close the budget ``open_frame`` opened."""
    _frame.reset(token)


@contextlib.contextmanager
def frame_budget(limit: int | None = None, max_items: int | None = None) -> Iterator[FrameBudget]:
    """Cap the bytes decompressed while the block runs, all batches and records fields together
    (one Kafka frame): a frame of many batches, each under the per-batch cap, cannot decompress
    more than ``limit`` in total, nor decode more than ``max_items`` records and record headers.
    None: the limits in force (``set_frame_limits``; by default 256 MiB and 400,000).
    Nested scopes share the outermost one's budget."""
    outer = _frame.get()
    if outer is not None:
        yield outer
        return
    lim = _limits
    budget = FrameBudget(int(lim.decompressed if limit is None else limit),
                         int(lim.items if max_items is None else max_items))
    token = _frame.set(budget)
    try:
        yield budget
    finally:
        _frame.reset(token)
