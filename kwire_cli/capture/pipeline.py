"""The one place a capture's pipeline is built: the key log, the check that confirms
resynchronisation and the assembler (TCP reassembly, the byte-stream transforms, framing, pairing:
``stream.StreamAssembler``). Files (``iter_capture``), standard input and ``--follow``
(``live.iter_live``) and Spark's tasks build theirs here, so that they decode alike."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kwire_cli.tls import KeyLog

from .events import CaptureStats
from .kafka import DEFAULT_MAX_FRAME, FrameCheck
from .stream import StreamAssembler

#: the default check: resynchronisation confirmed by the codec (``check.CodecCheck``)
CODEC = "codec"


def frame_check(check: FrameCheck | str | None = CODEC) -> FrameCheck | None:
    """``check`` as a ``FrameCheck``: ``CODEC`` is the codec's (``check.CodecCheck``), None none
    (a plausible header is enough), any other ``FrameCheck`` itself."""
    if isinstance(check, str):
        if check != CODEC:
            raise ValueError(f"unknown frame check {check!r} (CODEC, None or a FrameCheck)")
        from .check import CodecCheck
        return CodecCheck()
    return check


def build_assembler(*, broker_ports: Iterable[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                    stats: CaptureStats | None = None, check: FrameCheck | str | None = CODEC,
                    keylog: KeyLog | None = None, **assembler_options: Any) -> StreamAssembler:
    """A ``StreamAssembler`` for a capture: ``check`` as ``frame_check`` reads it, ``keylog`` the
    key log TLS connections are decrypted with (None: an empty one, which pcapng Decryption
    Secrets Blocks fill as the files are read: pass ``asm.keylog`` to the reader). Other keyword
    options go to ``StreamAssembler`` (``max_buffered``, ``max_open``, ``idle_timeout``,
    ``api_check``, ``strict``, ``resync_window``, ``request_timeout``, ...)."""
    return StreamAssembler(broker_ports=broker_ports, max_frame=max_frame,
                           stats=stats if stats is not None else CaptureStats(), check=frame_check(check),
                           keylog=keylog if keylog is not None else KeyLog(), **assembler_options)
