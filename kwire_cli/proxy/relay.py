"""One direction of a proxied connection (sans-io): bytes are forwarded as they arrive, and the
frames they carry are handed over whole for decoding; a frame the proxy must change (an answer
with broker addresses) is held until it is whole, then forwarded changed.

``feed(chunk)`` returns actions in stream order: ``("bytes", b)`` to forward now, and
``("frame", frame, held)`` for each frame completed (size prefix included; ``held``: its bytes
were not forwarded yet and the caller forwards it, changed or not).

The forwarding path copies nothing it does not have to: a chunk with no held frame in it is
forwarded as the very object that came in (``("bytes", chunk)``), whatever frame boundaries it
crosses; only the bytes of each frame are gathered once (one join) for the decoder."""
from __future__ import annotations

import struct
from collections.abc import Callable

from kwire_cli.errors import DecodeError

_SIZE_CORR = struct.Struct(">ii")
Action = tuple


class RelayError(DecodeError):
    """Bytes that are not a Kafka frame. ``actions``: what the chunk gave before them (held frames
    completed, bytes to forward), to act on before the connection ends."""

    def __init__(self, message: str, offset: int, actions: list[Action]) -> None:
        super().__init__(message, offset)
        self.actions = actions


class FrameRelay:
    def __init__(self, max_frame: int, hold: Callable[[bytes], bool] | None = None, gather: bool = True) -> None:
        """``hold(head)``: given the first 8 bytes of a frame (size, then for an answer its
        correlation id), whether the frame must be held whole before it is forwarded. ``gather``
        False: a frame that is not held is handed over as the list of its pieces (the head's 8
        bytes, then memoryviews of the chunks that carried it), not joined into one ``bytes``."""
        self.max_frame = max_frame
        self.hold = hold
        self.gather = gather
        self._head = b""                # a frame's first bytes, fewer than 8 so far (not forwarded yet)
        self._parts: list[bytes | memoryview] = []  # the frame being collected (for decoding, and when held)
        self._have = 0                  # bytes in _parts
        self._left = 0                  # bytes of the current frame still to come
        self._held = False
        self.offset = 0                 # stream offset, for errors
        self.broken = False             # bytes that are not a Kafka frame came: nothing more is read

    def feed(self, chunk: bytes) -> list[Action]:
        """The actions for ``chunk``. ``("bytes", ...)`` and held frames come in stream order; a frame
        that is not held is handed over as it completes, possibly before the ``("bytes", ...)``
        that carries its last bytes (the caller acts on one feed's actions at once)."""
        if self.broken:
            raise RelayError("the stream is not framed any more", self.offset, [])
        out: list[Action] = []
        n = len(chunk)
        mv = memoryview(chunk)
        i = 0
        fwd = 0          # chunk[fwd:stop] is forwarded (not emitted yet) ...
        stop = n
        prefix = b""     # ... after these carried-over head bytes of a frame not held
        while i < n:
            if self._left:
                take = min(self._left, n - i)
                self._parts.append(mv[i:i + take])
                self._have += take
                i += take
                self._left -= take
                if self._held:
                    fwd = i
                if not self._left:
                    self._finish(out)
                continue
            at = i  # a new frame: its head first
            carried = self._head
            if carried or n - i < 8:
                piece = chunk[i:i + 8 - len(carried)]
                head = carried + piece
                i += len(piece)
                if len(head) < 8:  # the rest comes with the next chunk; these bytes wait for it
                    self._head = head
                    stop = at
                    break
                self._head = b""
            else:
                head = chunk[i:i + 8]
                i += 8
            size, _ = _SIZE_CORR.unpack_from(head)
            if size < 4 or size > self.max_frame:
                if prefix or fwd < at:  # what came before the bad bytes goes on
                    out.append(("bytes", prefix + chunk[fwd:at]))
                self.broken = True
                raise RelayError(f"frame size {size} at stream offset {self.offset} is not a Kafka frame "
                                 f"(below 4, or over the cap of {self.max_frame} bytes; --max-frame-size raises it)",
                                 self.offset, out)
            self._held = bool(self.hold and self.hold(head))
            if self._held:  # what came before it goes out now; the frame waits until it is whole
                if prefix or fwd < at:
                    out.append(("bytes", prefix + chunk[fwd:at]))
                    prefix = b""
                fwd = i
            elif carried:   # only ever at the chunk's start (fwd == at == 0)
                prefix = carried
            self._parts = [head]
            self._have = 8
            self._left = size - 4
            if not self._left:
                self._finish(out)
        if fwd == 0 and stop == n and not prefix:
            if n:
                out.append(("bytes", chunk))  # the chunk as it came: no copy
        elif prefix or fwd < stop:
            out.append(("bytes", prefix + chunk[fwd:stop]))
        return out

    def _finish(self, out: list[Action]) -> None:
        parts = self._parts
        if self.gather or self._held:
            frame = b"".join(parts)
            self.offset += len(frame)
            out.append(("frame", frame, self._held))
        else:
            self.offset += self._have
            out.append(("frame", parts, False))
        self._parts = []
        self._have = 0
        self._held = False

    def tail(self) -> bytes:
        """At the end of the stream: the bytes taken in and not forwarded (a frame's first bytes, a
        held frame cut short), to forward as they came; the relay starts afresh."""
        rest = self._head or (b"".join(self._parts) if self._held else b"")
        self._head, self._parts, self._have, self._left, self._held = b"", [], 0, 0, False
        return bytes(rest)

    @property
    def pending(self) -> int:
        """Bytes of the frame in progress (forwarded already or not)."""
        return len(self._head) + self._have

    @property
    def unforwarded(self) -> int:
        """Bytes taken in but not yet forwarded: a frame's first bytes before its head is whole, or a
        held frame in progress."""
        return len(self._head) + (self._have if self._held else 0)
