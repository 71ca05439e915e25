"""A command in a process of its own that says its peak resident memory as it exits: VmHWM, the
peak of the process's own memory since its exec. (``ru_maxrss`` from ``wait4`` or
``RUSAGE_CHILDREN`` also counts the memory the child had before its exec: a copy of the forking
test process, hundreds of MB in a pytest worker that ran other tests first.)"""
from __future__ import annotations

import sys
from typing import AnyStr

MARK = "KWIRE-PEAK-RSS-KB"
_PRELUDE = ("import atexit, sys\n"
            "def _peak_rss():\n"
            "    kb = next(x.split()[1] for x in open('/proc/self/status') if x.startswith('VmHWM:'))\n"
            f"    sys.stderr.write('\\n{MARK} ' + kb + '\\n')\n"
            "atexit.register(_peak_rss)\n")
_KWIRE = "import runpy\nsys.argv = ['kwire', *sys.argv[1:]]\nrunpy.run_module('kwire_cli', run_name='__main__')\n"


def kwire_argv(args: list[str]) -> list[str]:
    """``kwire ARGS`` (this checkout's, by ``python -m kwire_cli``) saying its peak as it exits."""
    return [sys.executable, "-c", _PRELUDE + _KWIRE, *args]


def python_argv(code: str, args: tuple[str, ...] = ()) -> list[str]:
    """``python -c CODE ARGS`` saying its peak as it exits."""
    return [sys.executable, "-c", _PRELUDE + code, *args]


def split(stderr: AnyStr) -> tuple[AnyStr, int]:
    """The command's own stderr and its peak RSS in bytes, from what it wrote to stderr."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    at = text.rfind("\n" + MARK + " ")
    assert at >= 0, f"no peak memory said (the process did not exit normally): {text[-2000:]}"
    kb = int(text[at + len(MARK) + 2:].split()[0])
    own = text[:at]
    return (own.encode() if isinstance(stderr, bytes) else own), kb * 1024  # type: ignore[return-value]
