"""The `kwire` command: a Click group whose subcommands live one per module in this package.

Subcommands load lazily (a `kwire decode` never imports PySpark). Every `KwireError` becomes one
line on stderr and exit code 1; Click's usage errors and inputs that cannot be read at all (a
missing file, a directory where a file is wanted: ``SourceError``) exit 2; nothing prints a
traceback unless KWIRE_DEBUG=1 is set.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

import click

from kwire_cli import __version__
from kwire_cli.errors import FilterError, KwireError
from kwire_cli.inputs.source import SourceError

# command name -> (module, attribute); a module that does not exist yet is left out of the list
COMMANDS = {
    "decode": ("kwire_cli.cli.decode", "decode"),
    "encode": ("kwire_cli.cli.encode", "encode"),
    "diff": ("kwire_cli.cli.diff", "diff"),
    "dump-log": ("kwire_cli.cli.dump_log", "dump_log"),
    "describe": ("kwire_cli.cli.describe", "describe"),
    "list": ("kwire_cli.cli.describe", "list_apis"),
    "negotiate": ("kwire_cli.cli.negotiate", "negotiate"),
    "pcap": ("kwire_cli.cli.pcap", "pcap"),
    "proxy": ("kwire_cli.cli.proxy", "proxy"),
    "report": ("kwire_cli.cli.report", "report"),
    "spark-decode": ("kwire_cli.cli.spark_decode", "spark_decode"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        names = []
        for name, (mod, _) in COMMANDS.items():
            if importlib.util.find_spec(mod) is not None:
                names.append(name)
        return sorted(set(names) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS:
            mod, attr = COMMANDS[name]
            if importlib.util.find_spec(mod) is None:
                return None
            return getattr(importlib.import_module(mod), attr)
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # the reader of stdout went away (`kwire pcap ... | head`): a quiet success, as for
            # other Unix tools. Click would exit 1 here; stdout goes to /dev/null so that nothing
            # more fails when Python flushes it on the way out
            _quiet_stdout()
            raise click.exceptions.Exit(0) from None


def _quiet_stdout() -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # no real file descriptor (an in-process test's stdout)
        pass


def _use_specs(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    registry = sys.modules.get("kwire_cli.spec.registry")
    if value or registry is not None:  # (not imported: nothing to reset, and start-up stays lazy)
        from kwire_cli.spec.registry import use_specs
        use_specs(value or None)  # also without --specs: a run before in the same process may have used it
    return value


def _use_record_specs(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value and not os.path.isdir(value):
        raise click.BadParameter(f"{value}: not a directory", param_hint="--record-specs")
    records = sys.modules.get("kwire_cli.spec.records")
    if value or records is not None:
        from kwire_cli.spec.records import use_record_specs
        use_record_specs(value or None)
    return value


def _use_color(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    from kwire_cli.render.page import set_color
    set_color(value)
    return value


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kwire")
@click.option("--specs", "specs", metavar="DIR", envvar="KWIRE_SPECS", callback=_use_specs,
              expose_value=False, is_eager=True,
              help="Use the message specs in DIR (Kafka's JSON format, e.g. a Kafka checkout's "
                   "clients/src/main/resources/common/message) instead of the bundled ones. "
                   "Also read from KWIRE_SPECS.")
@click.option("--record-specs", "record_specs", metavar="DIR", envvar="KWIRE_RECORD_SPECS",
              callback=_use_record_specs, expose_value=False, is_eager=True,
              help="Use the internal-topic record specs in DIR (Kafka's record JSON files, or a Kafka "
                   "checkout, searched) for the records of __consumer_offsets, __cluster_metadata... in "
                   "every command. Also read from KWIRE_RECORD_SPECS.")
@click.option("--color", "color", type=click.Choice(["auto", "always", "never"]), default="auto",
              envvar="KWIRE_COLOR", show_default=True, callback=_use_color, expose_value=False, is_eager=True,
              help="Styles and colours in trees, tables and summaries: on a terminal only (auto; NO_COLOR "
                   "turns them off), always (for less -R), or never. Also read from KWIRE_COLOR.")
def cli() -> None:
    """Read and write the Apache Kafka wire protocol.

    \b
    Examples:
      kwire decode 0000001d001200030000000100056b7769726500066b7769726506302e312e3000
      kwire list
      kwire describe Metadata 12
      kwire pcap fixtures/captures/kafka-python-consume.pcap --summary
    """


def main(argv: list[str] | None = None) -> None:
    """Run the command; every error ends here as one line on stderr, its message escaped
    (``kwire_cli.cli.app.diagnostic``): messages quote input (names, values, file names)."""
    from kwire_cli.cli.app import KwireUsageError, diagnostic
    try:
        cli.main(args=argv, prog_name="kwire", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("kwire: aborted", err=True)
        sys.exit(1)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        if isinstance(e, KwireUsageError):
            e.show()
        else:  # Click's own (a bad option value, a missing argument): one line too, escaped, with where to look
            msg = e.format_message()
            ctx = getattr(e, "ctx", None)
            if isinstance(e, click.UsageError) and ctx is not None:
                msg += f" (see {ctx.command_path} --help)"
            diagnostic("error", msg)
        sys.exit(e.exit_code)
    except SourceError as e:  # an input that cannot be read at all (missing, a directory): usage, in every command
        diagnostic("error", e)
        sys.exit(2)
    except FilterError as e:  # a --filter that does not parse or names what does not exist: usage
        diagnostic("error", e)
        sys.exit(2)
    except KwireError as e:
        diagnostic("error", e)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:  # the system refused a read or a write (disk full, I/O error): not a bug
        if os.environ.get("KWIRE_DEBUG"):
            raise
        diagnostic("error", _os_error(e))
        sys.exit(1)
    except Exception as e:  # a bug in kwire: still one line, unless debugging
        if os.environ.get("KWIRE_DEBUG"):
            raise
        if isinstance(e, ValueError) and "integer string conversion" in str(e):
            # Python refuses to convert more than sys.get_int_max_str_digits() digits; the readers
            # name the place where they can, this is the backstop for any other
            diagnostic("error", f"the input holds a number of more than {sys.get_int_max_str_digits()} digits")
            sys.exit(1)
        diagnostic("internal error", f"{type(e).__name__}: {e} (set KWIRE_DEBUG=1 for a traceback)")
        sys.exit(1)


def _os_error(e: OSError) -> str:
    """The line for an OSError: the file, when Python knows it, and the system's reason (a write to
    stdout that fails, as on a full disk, has no file name: the reason says enough)."""
    reason = e.strerror or str(e)
    if isinstance(e.filename, (str, bytes)):
        return f"{os.fsdecode(e.filename)}: {reason}"
    return reason
