"""What every command shares: exit codes, the one-line usage error, the standard streams, and
reading an input argument through ``kwire_cli.inputs``.

Exit codes: 0 ok, 1 the input could not be decoded or encoded (a ``KwireError``), 2 a usage
error (unknown option, unknown API, version out of range, input that cannot be read).
"""
from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any, Literal

import click

from kwire_cli.inputs import (
    Block,
    InputError,
    NotADump,
    Source,
    SourceError,
    bytes_from_source,
    message_bytes,
    read_blocks,
    read_file,
    read_source,
)

if TYPE_CHECKING:
    from kwire_cli.inputs.frames import Frame
from kwire_cli.render.safe import escape

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class KwireUsageError(click.UsageError):
    """A usage error printed as one line, `kwire: error: ...`, exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        diagnostic("error", self.format_message(), file=file)


def diagnostic(level: str, message: object, file: Any = None) -> None:
    """One line on stderr (or ``file``): ``kwire: LEVEL: MESSAGE``, the message escaped
    (``kwire_cli.render.safe.escape``: it often quotes input, a file name or a client id). Every
    ``kwire: error:`` and ``kwire: warning:`` line is written here."""
    click.echo(f"kwire: {level}: {escape(message)}", file=file or sys.stderr, err=file is None)


def std_binary(name: str) -> Any:
    """The binary side of sys.stdin / sys.stdout (what Click's deprecated get_binary_stream gave;
    under click.testing.CliRunner these are its replacements)."""
    stream = getattr(sys, name)
    return getattr(stream, "buffer", stream)


def open_source(arg: str | None, *, what: str, forms: str,
                paths: Literal["@", "any", "existing"] = "@") -> Source:
    """The input an argument names (``kwire_cli.inputs.read_source``); an input that cannot be
    read, or no argument while stdin is a terminal, is a usage error. ``forms`` says what the
    argument may be, for that error (``hex, @FILE or - (stdin)``)."""
    if arg is None and std_binary("stdin").isatty():
        raise KwireUsageError(f"no {what}: give {forms}")
    try:
        return read_source(arg, what=what, paths=paths)
    except SourceError as e:
        raise KwireUsageError(str(e)) from None


def read_input(arg: str | None, *, binary: bool | None = None, what: str = "INPUT") -> bytes:
    """INPUT as the commands take it: hex text, `-` for stdin, `@path` for a file; the bytes of
    the one message it holds, in any dump form (``kwire_cli.inputs.dump``) or raw."""
    if binary and arg is not None and arg != "-" and not arg.startswith("@"):
        raise KwireUsageError("--binary needs @FILE or - (stdin)")
    src = open_source(arg, what=what, forms="hex, @FILE or - (stdin)")
    if src.origin == "argument":
        blocks, src = argument_blocks(arg or "", what)
        if blocks is not None:
            return message_bytes(blocks)
    try:
        return bytes_from_source(src.data, binary=binary)
    except InputError as e:
        if src.is_file:
            raise InputError(f"{src.name}: {e}") from None
        raise


def join_hex_words(_ctx: click.Context, _param: click.Parameter, words: tuple[str, ...]) -> str | None:
    """INPUT given as several arguments (``kwire decode 00 00 00 1d ...``: bytes the shell split at
    spaces) as one, joined by spaces; a file (``@FILE``, ``-``) is one argument alone."""
    if not words:
        return None
    if len(words) > 1:
        odd = next((w for w in words if w == "-" or w.startswith("@")), None)
        if odd is not None:
            raise KwireUsageError(f"INPUT: {odd} names a file: give it alone (bytes may be several arguments)")
    return " ".join(words)


def read_frames(arg: str | None, *, binary: bool | None = None, what: str = "INPUT",
                chained: bool = True, empty: bool = False) -> list[Frame]:
    """The Kafka frames of INPUT (``kwire_cli.inputs.frames``): one, or several when the dump
    holds several messages; errors name the file. ``empty``: an input with no bytes (``''``, an
    empty file) is one empty frame (a bare body of no fields), not an error."""
    from kwire_cli.inputs.frames import Frame, split_frames

    if binary and arg is not None and arg != "-" and not arg.startswith("@"):
        raise KwireUsageError("--binary needs @FILE or - (stdin)")
    src = open_source(arg, what=what, forms="hex, @FILE or - (stdin)")
    if empty and not src.data.strip():
        return [Frame(b"", (Block(b"", 1, 1, "binary" if binary else "hex"),))]
    try:
        blocks = argument_blocks(arg or "", what)[0] if src.origin == "argument" else None
        if blocks is None:
            if src.origin == "argument":  # a bare path to a file that exists
                src = Source(read_file(arg or "", what), arg or "", "file")
            blocks = source_blocks(src.data, binary=binary)
        return split_frames(blocks, chained=chained)
    except InputError as e:
        if src.is_file:
            raise InputError(f"{src.name}: {e}") from None
        raise


#: a word that is a path rather than bytes: /abs, ./rel, ../rel, ~/home, a/b.ext, name.ext
_PATHLIKE = re.compile(r"^(?:~|\.{1,2})?/\S*$|^\S*/\S*\.[A-Za-z]\w{0,7}$"
                       r"|^[\w.-]+\.(?:hex|txt|bin|dump|log|yaml|yml|json|pcap|pcapng|cap|gz|raw|out)$")


def looks_like_path(arg: str) -> bool:
    """True when a command-line argument reads as a file's path, not as bytes."""
    return bool(_PATHLIKE.match(arg.strip()))


def argument_blocks(arg: str, what: str) -> tuple[list[Block] | None, Source]:
    """The blocks of bytes of an argument given inline; (None, the file's source) when it is a
    path to a file that exists (read as the file); a path that does not exist is a usage error
    naming it (``@FILE`` is how a file is given)."""
    if ("/" in arg or looks_like_path(arg)) and not any(c.isspace() for c in arg):
        if os.path.isfile(arg):
            return None, Source(read_file(arg, what), arg, "file")
        if os.path.isdir(arg):
            raise KwireUsageError(f"{what}: is a directory: {arg} (give a file as @FILE)")
        if looks_like_path(arg):
            raise KwireUsageError(f"{what}: no such file: {arg} (give a file as @FILE)")
    try:
        return read_blocks(arg), Source(arg.encode(), what, "argument")
    except NotADump:
        if os.path.isfile(arg):
            return None, Source(read_file(arg, what), arg, "file")
        raise


def source_blocks(raw: bytes, *, binary: bool | None = None) -> list[Block]:
    """The blocks of a file or stdin: its text in any dump form, or (``binary``, or when it is
    not text) its raw bytes as one block."""
    from kwire_cli.inputs import is_text

    if binary is None:
        binary = not is_text(raw)
    if binary:
        if not raw:
            raise InputError("empty input")
        return [Block(raw, 0, 0, "binary")]
    return read_blocks(raw.decode("utf-8", errors="replace"))


def read_text_source(arg: str | None, what: str = "FILE") -> tuple[str, str]:
    """(text, name) from a path, @path or - (stdin): a YAML/JSON file."""
    src = open_source(arg, what=what, forms="a YAML/JSON file or - (stdin)", paths="any")
    return src.text(), src.name


def expand_captures(specs: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Capture FILES as read (``kwire_cli.inputs.paths.expand_paths``): a directory or glob stands
    for the captures in it, what is not a capture there skipped with one note; a file named on the
    command line as given (its errors are the reader's); a name that does not exist, a usage error."""
    from kwire_cli.inputs.paths import expand_paths, not_a_capture
    found = expand_paths(specs, on_skip=note_skipped, accept=not_a_capture)
    note_refused(found.refused)
    if not found.paths:
        raise KwireUsageError("FILES: the directories given hold no " + ("captures" if found.refused else "files"))
    return tuple(found.paths)


def note_refused(refused: list[tuple[str, str]], what: str = "capture") -> None:
    """One note for the files of directories and globs that are not ``what`` (skipped), naming
    the first few and why."""
    if not refused:
        return
    n = len(refused)
    shown = ", ".join(f"{p} ({why})" for p, why in refused[:3]) + (f" and {n - 3} more" if n > 3 else "")
    diagnostic("note", f"skipped {n} file{'s' if n > 1 else ''} that "
                       + (f"are not {what}s" if n > 1 else f"is not a {what}") + f": {shown}")


def note_skipped(path: str, what: str) -> None:
    """A file of a directory that is not read (a FIFO, socket or device), named on stderr."""
    shown = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in path)
    click.echo(f"kwire: note: skipped {shown}: a {what}, not a regular file", err=True)
