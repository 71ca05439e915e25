"""Errors of the capture reader.

``CaptureError`` derives from kwire's ``KwireError`` (``kwire_cli.codec.errors`` per DESIGN.md, or
``kwire_cli.errors`` where it lives today); if neither is importable yet it falls back to
``Exception`` so this package stays usable on its own.

Only whole-file problems raise (not a capture at all, an unreadable header). Damage inside a
capture (a truncated record, a lost TCP segment, an unframeable byte run) is reported as a
``Damage`` event and counted in ``CaptureStats``; reading goes on where it can.
"""
from __future__ import annotations

try:  # pragma: no cover - depends on what the rest of the tree provides
    from kwire_cli.codec.errors import KwireError as _Base
except Exception:  # noqa: BLE001
    try:
        from kwire_cli.errors import KwireError as _Base
    except Exception:  # noqa: BLE001
        _Base = Exception


class CaptureError(_Base):
    """A capture file that cannot be read at all (one line: what and where)."""
