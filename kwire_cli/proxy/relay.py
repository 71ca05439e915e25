"""One direction of a proxied connection (sans-io): bytes are forwarded as they arrive, and the
frames they carry are handed over whole for decoding; a frame the proxy must change (an answer
with broker addresses) is held until it is whole, then forwarded changed.

``feed(chunk)`` returns actions in stream order: ``("bytes", b)`` to forward now, and
``("frame", frame, held)`` for each frame completed (size prefix included; ``held``: its bytes
were not forwarded yet and the caller forwards it, changed or not)."""
from __future__ import annotations

import struct
from collections.abc import Callable

from kwire_cli.errors import DecodeError

_SIZE_CORR = struct.Struct(">ii")
Action = tuple


class FrameRelay:
    def __init__(self, max_frame: int, hold: Callable[[bytes], bool] | None = None) -> None:
        """``hold(head)``: given the first 8 bytes of a frame (size, then for an answer its
        correlation id), whether the frame must be held whole before it is forwarded."""
        self.max_frame = max_frame
        self.hold = hold
        self._head = bytearray()        # bytes of a frame whose first 8 have not all come
        self._cur = bytearray()         # the frame being collected (for decoding, and when held)
        self._left = 0                  # bytes of the current frame still to come
        self._held = False
        self.offset = 0                 # stream offset, for errors

    def feed(self, chunk: bytes) -> list[Action]:
        out: list[Action] = []
        mv = memoryview(chunk)
        i, n = 0, len(chunk)
        passthrough = bytearray()
        while i < n:
            if self._left:
                take = min(self._left, n - i)
                piece = mv[i:i + take]
                self._cur += piece
                if not self._held:
                    passthrough += piece
                self._left -= take
                i += take
                if not self._left:
                    self._finish(out, passthrough)
                continue
            need = 8 - len(self._head)
            take = min(need, n - i)
            self._head += mv[i:i + take]
            i += take
            if len(self._head) < 8:
                break
            size, _ = _SIZE_CORR.unpack_from(self._head)
            if size < 4 or size > self.max_frame:
                raise DecodeError(f"frame size {size} at stream offset {self.offset} is not a Kafka frame "
                                  f"(below 4, or over the cap of {self.max_frame} bytes; --max-frame-size raises it)",
                                  self.offset)
            self._held = bool(self.hold and self.hold(bytes(self._head)))
            self._cur = bytearray(self._head)
            if not self._held:
                passthrough += self._head
            self._head = bytearray()
            self._left = size + 4 - 8
            if not self._left:
                self._finish(out, passthrough)
        if passthrough:
            out.append(("bytes", bytes(passthrough)))
        return out

    def _finish(self, out: list[Action], passthrough: bytearray) -> None:
        if passthrough:
            out.append(("bytes", bytes(passthrough)))
            passthrough.clear()
        frame = bytes(self._cur)
        self.offset += len(frame)
        out.append(("frame", frame, self._held))
        self._cur = bytearray()
        self._held = False

    @property
    def pending(self) -> int:
        """Bytes of the frame in progress (forwarded already or not)."""
        return len(self._head) + len(self._cur)

    @property
    def unforwarded(self) -> int:
        """Bytes taken in but not yet forwarded: a frame's first bytes before its head is whole, or a
        held frame in progress."""
        return len(self._head) + (len(self._cur) if self._held else 0)
