"""The options commands share: --format and its output, API and version lookups (with shell
completion of API names), and the decoding limits (--max-frame-size, --max-decompressed,
--max-records). A bad value is a one-line usage error naming the option.
"""
from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import click

from kwire_cli.cli.app import KwireUsageError, diagnostic
from kwire_cli.errors import KwireError

# --------------------------------------------------------------------------- --format, APIs

FORMATS = ("pretty", "json", "yaml")


def shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message, cut short when long (an option value can be megabytes)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def resolve_api(value: str, option: str = "--api"):
    """An API by name or key (`Metadata`, `metadata`, `MetadataRequest`, `3`), or a usage error."""
    from kwire_cli.spec.registry import registry
    if len(value) > 100:  # no API name or key is this long (and Python converts at most 4300 digits)
        raise KwireUsageError(f"{option}: unknown API {shown(value)} (see `kwire list`)")
    try:
        return registry().api(value)
    except KwireError as e:
        raise KwireUsageError(f"{option}: {e}") from None


def check_version(api, version: int, kind: str = "request", option: str = "--version",
                  allow_newer: bool = False) -> int:
    """``allow_newer``: a version above the newest the specs know is taken (decoding reads it with the
    newest layout as an assumed version, or says why not)."""
    spec = api.spec(kind)
    if allow_newer and spec.valid_versions.hi < version <= 0x7FFF:
        return version
    if version not in spec.valid_versions:
        raise KwireUsageError(f"{option}: {api.name} has no version {version} "
                              f"(valid: {spec.valid_versions})")
    return version


def emit(value: Any, fmt: str) -> None:
    """Write a value tree as JSON or YAML to stdout, as it is made (``kwire_cli.render.json``'s
    ``write_json`` and ``write_yaml``): a decoded frame of a million records never exists as one
    string."""
    from kwire_cli.cli.app import std_binary
    from kwire_cli.render.json import write_json, write_yaml
    sys.stdout.flush()
    out = std_binary("stdout")
    if fmt == "json":
        write_json(value, out.write, careful=may_hold_floats(value))
    elif fmt == "yaml":
        write_yaml(value, out.write)
    else:
        raise ValueError(f"unknown output format {fmt!r}")
    out.flush()


def may_hold_floats(value: Any) -> bool:
    """Whether a tree to write may hold floats: anything but decoded messages (a dict with an
    ``api_key``, or a list of them) of APIs without float64 fields."""
    from kwire_cli.render.jsonlines import float_apis
    docs = value if isinstance(value, list) else [value]
    floats = None
    for d in docs:
        if not isinstance(d, dict) or not isinstance(d.get("api_key"), int):
            if isinstance(d, dict) and "error" in d and "api_key" not in d:
                continue  # a frame that did not decode: its input and error
            return True
        if floats is None:
            floats = float_apis()
        if d["api_key"] in floats:
            return True
    return False


def complete_api(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list:
    """Shell completion of API names (Click's standard mechanism)."""
    from click.shell_completion import CompletionItem

    from kwire_cli.spec.registry import registry
    try:
        apis = registry().apis.values()
    except KwireError:
        return []
    return [CompletionItem(a.name) for a in apis if a.name.lower().startswith(incomplete.lower())]


def complete_version(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list:
    """Shell completion of versions: those of the API the command line names (--api or API), else none."""
    from click.shell_completion import CompletionItem

    from kwire_cli.spec.registry import registry
    name = ctx.params.get("api_name")
    if name is None:
        return []
    try:
        valid = registry().api(name).request.valid_versions
    except KwireError:
        return []
    return [CompletionItem(str(v)) for v in range(valid.lo, valid.hi + 1) if str(v).startswith(incomplete)]


def complete_api_versions(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of ``API V1 V2`` arguments (``kwire diff``): API names first, then the
    versions of the API given; a MESSAGE file (``@FILE``) completes as ``complete_input`` does."""
    from click.shell_completion import CompletionItem

    from kwire_cli.spec.registry import registry
    if incomplete.startswith("@") or (ctx.params.get("what_if") is not None):
        return complete_input(ctx, param, incomplete)
    given = ctx.params.get(param.name or "") or ()
    if not given:
        return complete_api(ctx, param, incomplete)
    try:
        valid = registry().api(given[0]).request.valid_versions
    except KwireError:
        return []
    return [CompletionItem(str(v)) for v in range(valid.lo, valid.hi + 1) if str(v).startswith(incomplete)]


def complete_input(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list:
    """Shell completion of a MESSAGE/INPUT argument: ``@FILE`` completes the file's path after the @
    (the shell cannot: the word starts with @), ``-`` is stdin; anything else is left to the shell's
    own file completion (bare paths are read as files too)."""
    import glob

    from click.shell_completion import CompletionItem
    if not incomplete.startswith("@"):
        return [CompletionItem(incomplete, type="file")]
    base = os.path.expanduser(incomplete[1:])
    out = []
    for p in sorted(glob.glob(glob.escape(base) + "*"))[:200]:
        out.append(CompletionItem("@" + p + ("/" if os.path.isdir(p) else "")))
    return out


# --------------------------------------------------------------------------- decoding limits

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([KMGT])(?:I?B)?|B)?", re.IGNORECASE)
_SHIFTS = {"K": 10, "M": 20, "G": 30, "T": 40}
_SIZE_FORMS = "bytes, or a number with K, M or G, as in 300000, 512MiB, 1G"
_MAX_DIGITS = 30  # far past any memory; a longer number is refused before int() (4300 digits at most)


def parse_size(value: Any, option: str) -> int:
    """A byte count from SIZE text: plain bytes (``300000``, ``300000B``) or a number with a binary
    K / M / G / T suffix, optionally followed by ``iB`` or ``B`` (``512MiB``, ``1G``, ``1.5GB``: all
    powers of 1024). Anything else, or a size below 1 byte, is a one-line usage error naming
    ``option``."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        text = str(value).strip()
        m = _SIZE.fullmatch(text)
        if m is None or ("." in m.group(1) and not m.group(2)):
            raise KwireUsageError(f"{option}: {shown(text)} is not a size ({_SIZE_FORMS})")
        if len(m.group(1)) > _MAX_DIGITS:
            raise KwireUsageError(f"{option}: {shown(text)} is too large a size")
        shift = _SHIFTS[m.group(2).upper()] if m.group(2) else 0
        if "." in m.group(1):
            whole, frac = m.group(1).split(".")
            n = (int(whole + frac) << shift) // 10 ** len(frac)
        else:
            n = int(m.group(1)) << shift
    if n < 1:
        raise KwireUsageError(f"{option}: {value!r} is not a size above 0 bytes")
    return n


def parse_count(value: Any, option: str) -> int:
    """A whole number above 0 (``4000000``; ``_`` or ``,`` between digit groups is fine), else a
    one-line usage error naming ``option``."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        text = str(value).strip()
        if not re.fullmatch(r"\d+(?:[_,]\d+)*", text):
            raise KwireUsageError(f"{option}: {shown(text)} is not a count (a whole number above 0, as in 4000000)")
        digits = text.replace("_", "").replace(",", "")
        if len(digits) > _MAX_DIGITS:
            raise KwireUsageError(f"{option}: {shown(text)} is too large a count")
        n = int(digits)
    if n < 1:
        raise KwireUsageError(f"{option}: {value!r} is not a count above 0")
    return n


class DecodeLimits(NamedTuple):
    """The safety limits given on the command line (None: the default): the capture
    reassembler's largest frame (``max_frame``, bytes), and per frame the decompressed bytes of all
    record batches together (``decompressed``) and the records + record headers (``items``).
    Picklable, so a distributed job can hand it to its workers and ``apply`` it there."""

    max_frame: int | None = None
    decompressed: int | None = None
    items: int | None = None

    def frame_size(self) -> int:
        """The capture reassembler's largest frame: the one given, else the default."""
        from kwire_cli.capture.kafka import DEFAULT_MAX_FRAME
        return DEFAULT_MAX_FRAME if self.max_frame is None else self.max_frame

    @contextmanager
    def apply(self) -> Iterator[None]:
        """Set the per-frame limits (``kwire_cli.records.limits.set_frame_limits``) for the
        block and put the previous ones back after it, however it ends."""
        from kwire_cli.records.limits import set_frame_limits
        previous = set_frame_limits(self.decompressed, self.items)
        try:
            yield
        finally:
            set_frame_limits(*previous)


def _limit_callback(parse: Callable[[Any, str], int]) -> Callable:
    def callback(_ctx: click.Context, param: click.Parameter, value: Any) -> int | None:
        return None if value is None else parse(value, param.opts[0])
    return callback


def limit_options(capture: bool = False) -> Callable:
    """Decorator: the decoding-limit options, --max-frame-size SIZE (``capture=True`` only: the
    capture reassembler's cap), --max-decompressed SIZE and --max-records N, handed to the command
    as one keyword argument, ``limits`` (a ``DecodeLimits``; use ``with limits.apply():`` around
    the decoding, and ``limits.frame_size()`` for the reassembler)."""
    # the defaults are written out (importing kwire_cli.capture / kwire_cli.records here would
    # slow every command's start); tests/test_limits_cli.py checks them against the constants
    opts = []
    if capture:
        opts.append(click.option(
            "--max-frame-size", "max_frame_size", metavar="SIZE", callback=_limit_callback(parse_size),
            help="Largest Kafka frame to reassemble (default 100MiB); a bigger one is reported as "
                 "oversize-frame damage. SIZE is bytes, or a number with K, M or G (512MiB, 1G)."))
    # kwire_cli.records.limits.CAPTURE_MAX_FRAME_DECOMPRESSED / DEFAULT_MAX_FRAME_DECOMPRESSED
    decompressed_default = (128 << 20) if capture else None
    opts.append(click.option(
        "--max-decompressed", "max_decompressed", metavar="SIZE", callback=_limit_callback(parse_size),
        help="Most bytes decompressed per frame, all record batches together, counting what keys and "
             f"values take as hex or text unless plain ASCII under 1MiB (default {128 if capture else 256}MiB); "
             "a batch past it is shown undecoded with an error."))
    opts.append(click.option(
        "--max-records", "max_records", metavar="N", callback=_limit_callback(parse_count),
        help="Most records plus record headers decoded per frame, a record batch counting 2 "
             "(default 400000); a batch past it is shown cut, with an error. Above 400000 it also "
             "raises the cap of array items per frame (400000), past which a frame does not decode."))

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            decompressed = kwargs.pop("max_decompressed")
            kwargs["limits"] = DecodeLimits(kwargs.pop("max_frame_size", None),
                                            decompressed_default if decompressed is None else decompressed,
                                            kwargs.pop("max_records"))
            return f(*args, **kwargs)
        for opt in reversed(opts):
            command = opt(command)
        return command
    return decorate


# --------------------------------------------------------------------------- secrets

def tls_keylog_option(dsb: bool = True) -> Callable:
    """Decorator: --tls-keylog FILE (repeatable), handed to the command as ``tls_keylogs``; read
    them with ``read_keylogs``. ``dsb``: the command also reads pcapng Decryption Secrets Blocks."""
    return click.option(
        "--tls-keylog", "tls_keylogs", multiple=True, metavar="FILE",
        help="Decrypt TLS with the secrets of this NSS key log (SSLKEYLOGFILE, as Wireshark reads; "
             "repeatable). " + ("Decryption Secrets Blocks of pcapng files are read without it." if dsb else
                                "Decryption Secrets Blocks of pcapng files are not read here: give their "
                                "secrets as a key log (tshark -r F.pcapng --export-tls-session-keys keys.txt)."))


def read_keylogs(paths: tuple[str, ...]) -> Any:
    """The secrets of the --tls-keylog files, in one ``kwire_cli.tls.KeyLog`` (lines that are not
    key log lines are counted in one warning per file, naming the first; no secret is shown)."""
    from kwire_cli.tls import KeyLog
    keylog = KeyLog()
    for path in paths:
        try:
            with open(path, "rb") as f:
                # read whole, a block at a time: a key log grows for the life of a process
                problems = keylog.add_chunks(iter(functools.partial(f.read, 1 << 20), b""), source=path)
        except OSError as e:
            raise KwireUsageError(f"--tls-keylog: cannot read {path}: {e.strerror or e}") from None
        if problems:
            diagnostic("warning", f"--tls-keylog {path}: {len(problems)} lines not read ({problems[0]})")
    return keylog


def show_secrets_option() -> Callable:
    """Decorator: --show-secrets, handed to the command as ``show_secrets`` (secrets are redacted
    by default: ``kwire_cli.codec.secrets``)."""
    return click.option(
        "--show-secrets", "show_secrets", is_flag=True,
        help="Show secrets (SASL passwords, SCRAM proofs and signatures, bearer and GSSAPI tokens, SCRAM "
             "salted passwords, delegation token HMACs, sensitive config values), which are shown as "
             '{"redacted": REASON, "bytes": N} by default.')
