"""The little Kafka knowledge the capture layer needs to find and pair Kafka frames.

* ``looks_like_request`` / ``find_request_start``: is there a plausible request header here
  (size, api_key, api_version, correlation id, client id)? Used to resynchronise a client->broker
  byte stream and to tell which side of a connection is the client.
* ``find_response_start``: the next offset where a response to one of the open requests starts;
  ``find_response_start_blind`` the same when the requests were never captured.
* ``request_prefix``: a request frame's api key, version and correlation id.
* ``produce_acks``: the acks of a Produce request (acks=0 means no response will come).
* ``broker_side``: which endpoint of a connection is the broker.
"""
from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable
from typing import Protocol

from kwire_cli.codec.peek import peek_request_field
from kwire_cli.errors import KwireError
from kwire_cli.wire import Buffer

DEFAULT_MAX_FRAME = 100 << 20   # 100 MiB
MAX_FRAME_OPTION = "--max-frame-size"  # the command-line option that sets it (named in damage)
MAX_API_KEY = 100
MAX_API_VERSION = 30
PRODUCE = 0

_REQ_HEAD = struct.Struct(">ihhih")   # size, api_key, api_version, correlation_id, client_id len
_PREFIX = struct.Struct(">hhi")
_I32 = struct.Struct(">i")

# Candidate request starts: size < 2^27 (first byte 0..7), api_key 0..127 (0x00, 0x00-0x7f),
# api_version 0..31 (0x00, 0x00-0x1f). Verified precisely in Python afterwards.
REQUEST_CANDIDATE = re.compile(rb"[\x00-\x07][\x00-\xff]{3}\x00[\x00-\x7f]\x00[\x00-\x1f]", re.DOTALL)
_REQ_CANDIDATE = REQUEST_CANDIDATE
_PRINTABLE = bytes(range(0x20, 0x7F))

# Callable the caller may pass to tighten resync: (api_key, api_version) -> bool
ApiCheck = Callable[[int, int], bool]


class FrameCheck(Protocol):
    """What resynchronisation may ask about a candidate frame (``check.CodecCheck`` answers with the
    codec). Frames are given without their size prefix."""

    def api_ok(self, api_key: int, api_version: int) -> bool: ...

    def response_header_version(self, api_key: int, api_version: int) -> int: ...

    def layouts(self) -> list[tuple[int, int]]: ...  # every (api key, version) worth trying blind

    def request(self, data: bytes) -> int: ...  # 2: decodes exactly, 1: with trailing bytes, 0: not

    def response(self, data: bytes, api_key: int, api_version: int) -> int: ...  # as request

    def rare_response(self, data: bytes, api_key: int, api_version: int) -> int: ...  # as response, uncompiled

    def request_prefix(self, prefix: bytes, size: int) -> bool: ...  # could these bytes begin one?

    def response_prefix(self, prefix: bytes, size: int, api_key: int, api_version: int) -> bool: ...


def plausible_at(buf: Buffer, i: int, max_frame: int, api_check: ApiCheck | None) -> int:
    """1: plausible request header at buf[i:], 0: not, -1: cannot tell yet (need more bytes)."""
    n = len(buf)
    if n - i < 14:
        return -1
    size, ak, av, corr, cid = _REQ_HEAD.unpack_from(buf, i)
    if not (10 <= size <= max_frame and 0 <= ak <= MAX_API_KEY and 0 <= av <= MAX_API_VERSION
            and corr >= 0 and -1 <= cid <= size - 10):
        return 0
    if api_check is not None and not api_check(ak, av):
        return 0
    if cid > 0:
        if n - i < 14 + cid:
            return -1
        if bytes(buf[i + 14:i + 14 + cid]).translate(None, _PRINTABLE):
            return 0
    return 1


def looks_like_request(data: Buffer, max_frame: int = DEFAULT_MAX_FRAME, api_check: ApiCheck | None = None) -> bool:
    """True if ``data`` (size prefix included) starts with a plausible Kafka request header."""
    return plausible_at(data, 0, max_frame, api_check) == 1


def find_request_start(buf: bytes | bytearray, start: int = 0, max_frame: int = DEFAULT_MAX_FRAME,
                       api_check: ApiCheck | None = None) -> tuple[int, bool]:
    """Scan ``buf`` from ``start`` for a plausible request start.

    Returns ``(offset, True)`` for a confirmed start, ``(offset, False)`` when a candidate at
    ``offset`` needs more bytes to judge, or ``(keep_from, False)`` with nothing found: bytes before
    ``keep_from`` can never start a request (the last 13 bytes are kept for the next look).
    """
    n = len(buf)
    i = start
    search = _REQ_CANDIDATE.search
    while True:
        m = search(buf, i)
        if m is None:
            return max(start, n - 13), False
        i = m.start()
        r = plausible_at(buf, i, max_frame, api_check)
        if r == 1:
            return i, True
        if r == -1:
            return i, False
        i += 1


def find_response_start(buf: bytes | bytearray, open_ids: Iterable[int], start: int = 0,
                        max_frame: int = DEFAULT_MAX_FRAME) -> tuple[int, bool]:
    """First offset >= ``start`` where a response to one of ``open_ids`` plausibly starts.

    Returns ``(offset, True)`` when found, else ``(keep_from, False)``: nothing before
    ``keep_from`` can start such a response (the last 7 bytes are kept).
    """
    n = len(buf)
    best = -1
    for corr in open_ids:
        pat = _I32.pack(corr)
        j = buf.find(pat, start + 4)
        while j != -1:
            if best != -1 and j - 4 >= best:
                break
            size = _I32.unpack_from(buf, j - 4)[0]
            if 4 <= size <= max_frame:
                best = j - 4
                break
            j = buf.find(pat, j + 1)
    if best != -1:
        return best, True
    return max(start, n - 7), False


def find_response_start_blind(buf: Buffer, start: int = 0, max_frame: int = DEFAULT_MAX_FRAME) -> tuple[int, bool]:
    """Like ``find_response_start`` for a connection whose requests were never captured (only the
    broker's side is in the file): a sane size and a correlation id in 0..2**24, and when the
    whole candidate frame is buffered, a sane size right after it."""
    n = len(buf)
    i = start
    unpack = _I32.unpack_from
    while n - i >= 8:
        size = unpack(buf, i)[0]
        if 4 <= size <= max_frame:
            corr = unpack(buf, i + 4)[0]
            if 0 <= corr < (1 << 24):
                nxt = i + 4 + size
                if nxt + 4 > n:
                    return i, True
                nsize = unpack(buf, nxt)[0]
                if 4 <= nsize <= max_frame:
                    return i, True
        i += 1
    return max(start, n - 7), False


def request_prefix(data: Buffer) -> tuple[int, int, int] | None:
    """``(api_key, api_version, correlation_id)`` of a request frame (no size prefix), or None."""
    if len(data) < 8:
        return None
    head: tuple[int, int, int] = _PREFIX.unpack_from(data, 0)
    return head


def produce_acks(data: bytes, api_version: int | None = None) -> int | None:
    """The ``acks`` of a Produce request frame (without size prefix); None if it cannot be read.

    Read by the codec from the header and the body fields before ``Acks`` (their layout per
    version comes from the spec), so a request cut short after its acks still gives them."""
    try:
        acks: int | None = peek_request_field(data, "Acks", api_version=api_version)
        return acks
    except KwireError:
        return None


def broker_side(a: tuple[str, int], b: tuple[str, int], broker_ports: Iterable[int] = (9092,), *,
                known_brokers: Iterable[tuple[str, int]] = (), request_from: int | None = None,
                syn_receiver: int | None = None) -> tuple[int, str]:
    """Which of two endpoints (``(ip, port)``) is the broker: ``(0 or 1, reason)``.

    In order: exactly one side on a broker port (``"port"``); exactly one side a broker endpoint
    already learned on another connection (``"known-broker"``); the other side sent a plausible
    request header (``request_from`` is that sender's index; ``"request-header"``); the side that
    received the SYN (``"syn"``); else the lower port (``"lower-port"``, ties: ``b``).
    """
    ports = broker_ports if isinstance(broker_ports, (set, frozenset)) else set(broker_ports)
    pa, pb = a[1] in ports, b[1] in ports
    if pa != pb:
        return (0 if pa else 1), "port"
    known = known_brokers if isinstance(known_brokers, (set, frozenset, dict)) else set(known_brokers)
    ka, kb = a in known, b in known
    if ka != kb:
        return (0 if ka else 1), "known-broker"
    if request_from is not None:
        return 1 - request_from, "request-header"
    if syn_receiver is not None:
        return syn_receiver, "syn"
    return (0 if a[1] < b[1] else 1), "lower-port"
