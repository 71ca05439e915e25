"""Kafka frames from the blocks of a dump: several messages in one input.

A dump may hold many messages: a log with many hex lines, a ``tcpdump`` of a conversation, a
Follow TCP Stream dump with both directions, two binary frames in one file. ``split_frames``
turns ``Block``s (``kwire_cli.inputs.dump``) into ``Frame``s, the bytes of one message each:

1. a block that is a whole captured packet is cut to its TCP payload (a packet without payload,
   an ACK, is left out); a tshark "Reassembled TCP" block stands for the segments it was
   reassembled from;
2. blocks that went the same way (``Block.direction``; blocks with none count as one way) are
   one byte stream: when their bytes chain exactly into size-prefixed Kafka frames (a 4-byte
   size, that many bytes, the next size, ... to the last byte), those are the frames;
3. else each block is split the same way when its own bytes chain exactly, and is one frame
   when they do not (plain hex paragraphs that do not chain stay one frame, as one message
   written over several paragraphs).

``pair_frames`` then decodes them one after another: a frame that decodes as a request is one,
a frame whose correlation id answers an earlier request (of the same connection, the other way)
is decoded as that request's response; the rest go to a fallback (a ``Decoder``: the command's
``--api``/``--version`` target, ``kwire_cli.inputs.decoding.Target``) or are reported unpaired.
Errors stay with their frame; nothing stops at the first. ``kwire_cli.inputs.decoding`` is the
policy over this: when pairing applies, and how one frame is decoded.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kwire_cli.codec import decode_request, decode_response
from kwire_cli.codec.framing import has_size_prefix
from kwire_cli.errors import InputError, KwireError
from kwire_cli.inputs.dump import Block

_SIZE = struct.Struct(">i")
#: the smallest Kafka frame: a response header (correlation id) alone
MIN_FRAME = 4


@dataclass(frozen=True)
class Frame:
    """The bytes of one Kafka message (size prefix included when it had one) and where they
    came from: the blocks they were read from, and the direction they went when known."""

    data: bytes
    blocks: tuple[Block, ...]
    direction: str | None = None
    #: where the frame starts in the bytes of its blocks (of its way)
    start: int = 0

    @property
    def first_line(self) -> int:
        return self.blocks[0].first_line

    @property
    def last_line(self) -> int:
        return self.blocks[-1].last_line

    @property
    def lines(self) -> str:
        """``line 3`` or ``lines 3-7`` (``bytes 0-29`` of raw bytes)."""
        if self.blocks[0].form == "binary":
            return f"bytes {self.start}-{self.start + len(self.data) - 1}"
        if self.first_line == self.last_line:
            return f"line {self.first_line}"
        return f"lines {self.first_line}-{self.last_line}"

    def where(self) -> str:
        """Where the frame is: its lines, and its direction when known."""
        return self.lines + (f" ({self.direction})" if self.direction else "")

    def provenance(self) -> dict[str, Any]:
        """The frame's place in the input, for JSON output."""
        labels = [b.label for b in self.blocks if b.label]
        return {"first_line": self.first_line, "last_line": self.last_line, "form": self.blocks[0].form,
                "label": labels[0] if len(labels) == 1 else (labels or None), "direction": self.direction,
                "bytes": len(self.data)}


def chain(data: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each size-prefixed frame when ``data`` is exactly a run of them (each at
    least ``MIN_FRAME`` bytes after its size); else None."""
    spans = []
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 4:
            return None
        size = _SIZE.unpack_from(data, pos)[0]
        if size < MIN_FRAME or size > n - pos - 4:
            return None
        spans.append((pos, pos + 4 + size))
        pos += 4 + size
    return spans or None


@dataclass
class _Piece:
    data: bytes
    block: Block
    direction: str | None
    order: int


def _payload(block: Block) -> bytes:
    """The bytes of ``block`` as a stream carries them: the TCP payload of a whole packet."""
    if block.linktype is None or block.direction is None:
        return block.data
    from kwire_cli.capture.linklayer import tcp_segment  # a dumped packet only: the capture package is not cheap

    if has_size_prefix(block.data):
        return block.data
    seg = tcp_segment(block.linktype, block.data)
    return block.data if isinstance(seg, str) else seg.payload


def _pieces(blocks: Sequence[Block]) -> list[_Piece]:
    pieces: list[_Piece] = []
    for i, b in enumerate(blocks):
        if b.label and "reassembled" in b.label.lower():
            direction = None
            tail = b.data
            # the segments it was reassembled from: the packet before it, and earlier ones of its way
            while pieces and tail and tail.endswith(pieces[-1].data) and (
                    direction is None or pieces[-1].direction == direction):
                direction = pieces[-1].direction
                tail = tail[:-len(pieces[-1].data)]
                pieces.pop()
            pieces.append(_Piece(b.data, b, direction, i))
            continue
        data = _payload(b)
        if data:
            pieces.append(_Piece(data, b, b.direction, i))
    return pieces


def split_frames(blocks: Sequence[Block], *, chained: bool = True) -> list[Frame]:
    """The Kafka frames in ``blocks`` (see the module's description), in input order. With
    ``chained=False`` (no size prefixes: ``--no-size-prefix``, ``--no-header``) each block is one
    frame and plain hex paragraphs are one."""
    pieces = _pieces(blocks)
    if not pieces:
        raise InputError("no bytes: the dumped packets carry no TCP payload")
    if not chained:
        if all(p.block.form == "hex" for p in pieces):
            return [Frame(b"".join(p.data for p in pieces), tuple(p.block for p in pieces), None)]
        return [Frame(p.data, (p.block,), p.direction) for p in pieces]
    ways: dict[str | None, list[_Piece]] = {}
    for p in pieces:
        ways.setdefault(p.direction, []).append(p)
    out: list[tuple[int, Frame]] = []
    for direction, run in ways.items():
        stream = b"".join(p.data for p in run)
        spans = chain(stream)
        if spans is not None:
            out.extend(_frames_of_stream(run, spans, direction))
            continue
        per_piece = [chain(p.data) for p in run]
        if direction is None and len(run) > 1 and all(s is None for s in per_piece) and all(
                p.block.form == "hex" for p in run):
            out.append((run[0].order, Frame(stream, tuple(p.block for p in run), None)))
            continue
        for p, s in zip(run, per_piece, strict=True):
            if s is None:
                out.append((p.order, Frame(p.data, (p.block,), direction)))
            else:
                out.extend((p.order, Frame(p.data[a:b], (p.block,), direction, a)) for a, b in s)
    out.sort(key=lambda t: t[0])
    return [f for _, f in out]


def _frames_of_stream(run: list[_Piece], spans: list[tuple[int, int]], direction: str | None
                      ) -> list[tuple[int, Frame]]:
    starts = []
    pos = 0
    for p in run:
        starts.append(pos)
        pos += len(p.data)
    out = []
    stream = b"".join(p.data for p in run)
    for a, b in spans:
        covering = [p for p, s in zip(run, starts, strict=True) if s < b and s + len(p.data) > a]
        out.append((covering[0].order, Frame(stream[a:b], tuple(p.block for p in covering), direction, a)))
    return out


# --------------------------------------------------------------------------- pairing


@dataclass
class Decoded:
    """One frame decoded: its message, or the error it gave; a response paired with a request
    names the request's index in the list."""

    frame: Frame
    message: Any = None
    error: KwireError | None = None
    request: int | None = None

    @property
    def kind(self) -> str | None:
        return getattr(self.message, "kind", None)


def correlation_id(data: bytes) -> int | None:
    """The correlation id a response frame starts with (after its size prefix, when it has one)."""
    at = 4 if has_size_prefix(data) else 0
    if len(data) < at + 4:
        return None
    return int(_SIZE.unpack_from(data, at)[0])


def _connection(direction: str | None) -> frozenset[str] | None:
    if direction is None:
        return None
    return frozenset(direction.split(" > ", 1))


def _reverse(direction: str) -> str:
    return " > ".join(reversed(direction.split(" > ", 1)))


class Decoder(Protocol):
    """What decodes a frame nothing in the input pairs: the command's --api/--version target."""

    def decode(self, data: bytes, records: str | None = None) -> Any: ...


def pair_frames(frames: Sequence[Frame], *, records: str | None = None,
                unpaired: Decoder | None = None) -> list[Decoded]:
    """``iter_pair_frames`` as a list."""
    return list(iter_pair_frames(frames, records=records, unpaired=unpaired))


def iter_pair_frames(frames: Sequence[Frame], *, records: str | None = None,
                     unpaired: Decoder | None = None) -> Iterator[Decoded]:
    """Decode ``frames`` one after another, responses with the API and version of the request
    they answer (by correlation id, within one connection when the dump gives directions); each
    is yielded as soon as it is decoded, and only the API, version and direction of requests
    waiting for an answer are kept (a decoded frame can be hundreds of MB: the caller prints it
    and lets it go before the next one decodes).

    A frame whose correlation id an earlier request of its connection (the other way) waits for
    is tried as that request's response first; any other frame as a request, unless it goes the
    way responses go. What is neither goes to ``unpaired`` (the ``--api``/``--version`` of the
    command line) when given; else its error says what it would need."""
    # (connection, correlation id) -> (index, api key, api version, direction) of the request
    pending: dict[tuple[frozenset[str] | None, int], tuple[int, int, int, str | None]] = {}
    response_ways: set[str] = set()
    for index, frame in enumerate(frames):
        d = Decoded(frame)
        _pair_one(d, index, pending, response_ways, records, unpaired)
        yield d


_Pending = dict[tuple[frozenset[str] | None, int], tuple[int, int, int, str | None]]


def _pair_one(d: Decoded, index: int, pending: _Pending, response_ways: set[str], records: str | None,
              unpaired: Decoder | None) -> None:
    """``iter_pair_frames``' work on one frame: decode it into ``d``."""
    frame = d.frame
    conn = _connection(frame.direction)
    cid = correlation_id(frame.data)
    waiting = pending.get((conn, cid)) if cid is not None else None
    key = (conn, cid if cid is not None else -1)
    if waiting is not None and frame.direction is not None and waiting[3] == frame.direction:
        waiting = None  # the same way as the request: not its answer
    if waiting is not None:
        asked, api_key, api_version, _ = waiting
        try:
            d.message = decode_response(frame.data, api_key, api_version, records=records)
        except KwireError as e:
            d.error = e
        else:
            d.request = asked
            del pending[key]
            return
        if frame.direction is not None:
            d.request = asked
            return  # it goes the answer's way: its error is the answer's
    on_response_way = frame.direction is not None and frame.direction in response_ways
    request_error: KwireError | None = None
    if not on_response_way:
        try:
            msg = decode_request(frame.data, records=records)
        except KwireError as e:
            request_error = e
        else:
            d.message, d.error, d.request = msg, None, None
            pending[(conn, int((msg.header or {}).get("CorrelationId", -1)))] = (
                index, msg.api_key, msg.api_version, frame.direction)
            if frame.direction is not None:
                response_ways.add(_reverse(frame.direction))
            return
    if d.error is not None:
        return  # the answer to a request that does not decode at its version: that error
    if unpaired is not None:
        try:
            d.message = unpaired.decode(frame.data, records=records)
        except KwireError as e:
            d.error = e
        return
    if request_error is not None and frame.direction is None:
        if getattr(request_error, "reason", None) is not None:
            request_error.reason += " (if this is a response, give --api NAME --version N)"  # type: ignore[attr-defined]
        d.error = request_error
        return
    if request_error is not None and not on_response_way:
        d.error = request_error
        return
    what = f"correlation id {cid}" if cid is not None else f"{len(frame.data)} bytes"
    d.error = InputError(f"a response ({what}) that no request in the input asks for: give --api NAME "
                         "--version N to decode it")
