"""What every command shares: exit codes, the one-line usage error, the standard streams, and
reading an input argument through ``kwire_cli.inputs``.

Exit codes: 0 ok, 1 the input could not be decoded or encoded (a ``KwireError``), 2 a usage
error (unknown option, unknown API, version out of range, input that cannot be read).
"""
from __future__ import annotations

import sys
from typing import Any, Literal

import click

from kwire_cli.inputs import InputError, Source, SourceError, bytes_from_source, parse_hex, read_source

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class KwireUsageError(click.UsageError):
    """A usage error printed as one line, `kwire: error: ...`, exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"kwire: error: {self.format_message()}", file=file or sys.stderr, err=file is None)


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
        return parse_hex(arg or "")
    try:
        return bytes_from_source(src.data, binary=binary)
    except InputError as e:
        if src.is_file:
            raise InputError(f"{src.name}: {e}") from None
        raise


def read_text_source(arg: str | None, what: str = "FILE") -> tuple[str, str]:
    """(text, name) from a path, @path or - (stdin): a YAML/JSON file."""
    src = open_source(arg, what=what, forms="a YAML/JSON file or - (stdin)", paths="any")
    return src.text(), src.name
