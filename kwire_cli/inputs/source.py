"""Reading an input argument: text given inline, ``@FILE``, ``-`` for standard input, or a path.

One place turns a missing file, a directory or an unreadable file into a one-line error
(``SourceError``; the command line makes it a usage error, exit code 2).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kwire_cli.errors import InputError

STDIN = "<stdin>"


class SourceError(InputError):
    """An input that cannot be read at all: a file that does not exist, a directory, a read error."""


@dataclass(frozen=True)
class Source:
    """The bytes of one input and where they came from."""

    data: bytes
    name: str                                        # the path, "<stdin>", or the argument's role
    origin: Literal["file", "stdin", "argument"]

    @property
    def is_file(self) -> bool:
        return self.origin == "file"

    def text(self) -> str:
        """The bytes as UTF-8 text, or a one-line error naming the first byte that is not."""
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{self.name}: not UTF-8 text (byte {e.start})") from None


def read_source(arg: str | None, *, what: str = "INPUT",
                paths: Literal["@", "any", "existing"] = "@") -> Source:
    """The input an argument names.

    ``-`` (or None) is standard input, ``@PATH`` a file. A bare ``PATH`` is a file too with
    ``paths="any"``, and with ``paths="existing"`` when such a file exists; otherwise (and always
    with the default ``paths="@"``) the argument is the input's text itself. ``what`` names the
    argument in errors (``INPUT: file x.hex does not exist``).
    """
    origin, name = locate_source(arg, paths=paths)
    if origin == "stdin":
        return Source(read_stdin(), STDIN, "stdin")
    if origin == "argument":
        return Source(name.encode("utf-8", errors="surrogateescape"), what, "argument")
    return Source(read_file(name, what), name, "file")


def locate_source(arg: str | None, *, paths: Literal["@", "any", "existing"] = "@"
                  ) -> tuple[Literal["file", "stdin", "argument"], str]:
    """Where ``read_source`` reads the input an argument names, without reading it: ("stdin",
    "<stdin>"), ("file", PATH) or ("argument", the text itself). A reader that streams a file
    (a capture) opens the path itself."""
    if arg is None or arg == "-":
        return "stdin", STDIN
    if arg.startswith("@"):
        return "file", str(Path(arg[1:]))
    if paths == "any" or (paths == "existing" and _is_file(arg)):
        return "file", str(Path(arg))
    return "argument", arg


def read_file(path: str | os.PathLike[str], what: str | None = None, *, limit: int | None = None) -> bytes:
    """The bytes of a file (the first ``limit`` of them, when given); a one-line ``SourceError``
    when it does not exist, is a directory or cannot be read (prefixed with ``what``, the
    argument's role, when given)."""
    where = f"{what}: " if what else ""
    try:
        if limit is not None:
            with open(path, "rb") as f:
                return f.read(limit)
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise SourceError(f"{where}file {os.fspath(path)} does not exist") from None
    except IsADirectoryError:
        raise SourceError(f"{where}{os.fspath(path)} is a directory") from None
    except OSError as e:
        raise SourceError(f"{where}cannot read {os.fspath(path)}: {e.strerror or e}") from None


def read_stdin() -> bytes:
    """All of standard input, as bytes."""
    stream: Any = sys.stdin
    data: bytes = getattr(stream, "buffer", stream).read()
    return data


def _is_file(arg: str) -> bool:
    try:
        return os.path.isfile(arg)
    except (OSError, ValueError):  # a name too long for a path, or holding a NUL
        return False
