"""The optional native records fast path: ``v2_records`` of kwire_cli/records/_native.c.

Loaded once, at import, unless ``KWIRE_NO_SPEEDUPS=1`` (or the extension was not built: then
``extension`` is None and kwire runs the Python fast path, ``v2.v2_records_fast``, which stays the
reference). ``set_enabled(False)`` switches it off at call time; ``kwire_cli.codec.native.use_speedups``
calls it together with the codec's own switch.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kwire_cli import speedups

extension = speedups.load("kwire_cli.records._native")

# v2_records(rb, count, base_offset, base_ts, room, show_bytes, header_key) -> list | None |
# NotImplemented (see _native.c), or None without the extension
v2_records: Callable[..., Any] | None = None if extension is None else extension.v2_records


def available() -> bool:
    """The native records fast path is built and was not turned off with KWIRE_NO_SPEEDUPS=1."""
    return extension is not None


def set_enabled(flag: bool) -> bool:
    """Switch the native fast path on or off (off: it returns NotImplemented and the Python fast
    path runs); returns the previous setting. Without the extension this is always off."""
    if extension is None:
        return False
    return bool(extension.set_enabled(bool(flag)))
