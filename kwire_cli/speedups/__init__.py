"""kwire's optional C extensions, loaded by one rule. Each is built by setup.py where a compiler
is there and changes only the time a result takes, never the result: every caller keeps a
Python path that is the reference. ``KWIRE_NO_SPEEDUPS`` set to anything but empty or ``0``
turns them all off."""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType


def turned_off() -> bool:
    """``KWIRE_NO_SPEEDUPS`` asks for the Python paths only."""
    return os.environ.get("KWIRE_NO_SPEEDUPS", "") not in ("", "0")


def load(name: str, complete: Callable[[ModuleType], bool] | None = None) -> ModuleType | None:
    """The built extension ``name`` (a dotted module name), or None: turned off, not built, or
    (with ``complete``) a build that lacks what its caller needs, such as one older than its
    sources: its caller then runs its Python path."""
    if turned_off():
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if complete is None or complete(module) else None
