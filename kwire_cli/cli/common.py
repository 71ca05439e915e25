"""What the commands share: reading bytes in any common dump form, --format, API lookup, errors.

Exit codes: 0 ok, 1 the input could not be decoded or encoded (a `KwireError`), 2 a usage
error (unknown option, unknown API, version out of range, input that cannot be read).
"""
from __future__ import annotations

import functools
import re
import struct
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import click

from kwire_cli.errors import DecodeError, KwireError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class InputError(KwireError):
    """Input text that is not any form of hex dump kwire knows (exit 1)."""


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


# --------------------------------------------------------------------------- hex dumps

_XXD = re.compile(r"^([0-9A-Fa-f]{4,16}):\s(.*)$")            # 00000000: 0000 001d ...  ascii
_OFFSET = re.compile(r"^([0-9A-Fa-f]{4,16})(\s{2,}|\t)(\S.*)$")  # hexdump -C, tshark, Wireshark
_LONE_OFFSET = re.compile(r"^[0-9A-Fa-f]{4,16}$")               # hexdump -C's last line
_LABEL = re.compile(r"^(.*\S)\s*\((\d+) bytes?\):$")              # tshark: "Reassembled TCP (74 bytes):"
_HEXDUMP_ASCII = re.compile(r"\s\|.*\|\s*$")
_HEX_TOKEN = re.compile(r"^(?:[0-9A-Fa-f]{2})+$")
_MAX_REPEAT = 100 << 20  # a '*' line of hexdump -C never stands for more (a broker's largest frame)
_SEPARATORS = re.compile(r"(?:0[xX]|\\[xX])(?=[0-9A-Fa-f])|[\s:,;.\-_]+")


def _plain_hex(text: str, line_no: int | None = None) -> bytes:
    """Hex with optional spaces, newlines, colons, commas, 0x or \\x prefixes."""
    where = f"line {line_no}, " if line_no else ""
    cleaned = []
    for lineno, line in enumerate(text.splitlines() or [text], start=line_no or 1):
        s = line.split("#", 1)[0]
        s = _SEPARATORS.sub("", s)
        m = re.search(r"[^0-9A-Fa-f]", s)
        if m:
            col = _column_of(line, m.group(0))
            raise InputError(f"not hex: unexpected character {m.group(0)!r} at line {lineno}, column {col}")
        cleaned.append(s)
    digits = "".join(cleaned)
    if not digits:
        raise InputError("no hex digits in the input")
    if len(digits) % 2:
        raise InputError(f"{where}odd number of hex digits ({len(digits)}): a byte needs two")
    return bytes.fromhex(digits)


def _column_of(line: str, ch: str) -> int:
    i = line.find(ch)
    return i + 1 if i >= 0 else 1


class _DumpLine:
    __slots__ = ("lineno", "offset", "hex", "exact")

    def __init__(self, lineno: int, offset: int, hexpart: bytes, exact: bool):
        self.lineno, self.offset, self.hex, self.exact = lineno, offset, hexpart, exact


def _dump_tokens(rest: str, xxd: bool) -> tuple[list[str], bool]:
    """Hex tokens of a dump line after its offset; `exact` when an ASCII column was cut off
    by a delimiter (|...| in hexdump -C) rather than by a guess."""
    if _HEXDUMP_ASCII.search(rest):
        return _HEXDUMP_ASCII.sub("", rest).split(), True
    # xxd and tshark: the hex area ends at the first run of two or more spaces
    # (hexdump -C's middle double space is only seen together with |ascii|)
    area = re.split(r"\s{2,}", rest.strip(), maxsplit=1)[0]
    return area.split(), False


def _parse_offset_dump(lines: list[tuple[int, str]]) -> list[tuple[str | None, bytes]] | None:
    """Parse xxd / hexdump -C / tshark / Wireshark dumps into labelled blocks of bytes.

    Returns None when the text is not an offset dump (then it is read as plain hex)."""
    blocks: list[tuple[str | None, list[_DumpLine]]] = []
    label: str | None = None
    current: list[_DumpLine] | None = None
    repeat_marks: set[int] = set()
    kinds = set()
    for lineno, line in lines:
        s = line.rstrip()
        m_label = _LABEL.match(s.strip())
        if m_label and not _XXD.match(s.strip()):
            label = m_label.group(1)
            current = None
            continue
        st = s.strip()
        if st == "*":
            if current is None:
                return None
            repeat_marks.add(len(current))
            continue
        if _LONE_OFFSET.match(st) and current:
            current.append(_DumpLine(lineno, int(st, 16), b"", True))  # end marker
            continue
        m = _XXD.match(st)
        if m:
            kinds.add("xxd")
            tokens, exact = _dump_tokens(m.group(2), True)
        else:
            m = _OFFSET.match(st)
            if not m:
                return None
            kinds.add("offset")
            tokens, exact = _dump_tokens(m.group(3), False)
        if not tokens or not all(_HEX_TOKEN.match(t) for t in tokens):
            return None
        offset = int(m.group(1), 16)
        if current is None or (offset == 0 and current and current[-1].offset >= 0 and offset < current[-1].offset):
            current = []
            blocks.append((label, current))
            label = None
        current.append(_DumpLine(lineno, offset, bytes.fromhex("".join(tokens)), exact))
    if not blocks or len(kinds) > 1:
        return None
    out: list[tuple[str | None, bytes]] = []
    for lbl, dl in blocks:
        data = bytearray()
        base = dl[0].offset
        for i, d in enumerate(dl):
            pos = d.offset - base
            if pos < len(data):
                raise InputError(f"hex dump offsets go backwards at line {d.lineno} "
                                 f"(offset {d.offset:#x} after {base + len(data):#x})")
            if pos > len(data):
                if i not in repeat_marks or i == 0:
                    raise InputError(f"hex dump skips bytes at line {d.lineno} "
                                     f"(offset {d.offset:#x}, expected {base + len(data):#x})")
                prev = dl[i - 1].hex
                if not prev or (pos - len(data)) % len(prev):
                    raise InputError(f"cannot expand the '*' before line {d.lineno}")
                if pos - len(data) > _MAX_REPEAT:
                    raise InputError(f"the '*' before line {d.lineno} stands for {pos - len(data)} bytes, "
                                     f"more than a Kafka frame ({_MAX_REPEAT} bytes)")
                data += prev * ((pos - len(data)) // len(prev))
            data += d.hex
        out.append((lbl, bytes(data)))
    return out


def parse_hex(text: str) -> bytes:
    """Bytes from hex text in any common dump form.

    Accepted: plain hex; hex with spaces, newlines, colons or commas; 0x / \\x prefixes;
    `xxd` output; `hexdump -C` output (with `*` for repeated lines); tshark's `-x` and
    Wireshark's "Copy as Hex Dump" output. When a tshark dump has several blocks (a frame and
    a "Reassembled TCP" block), the reassembled one is used; a frame that starts with
    Ethernet + IPv4/IPv6 + TCP headers is cut down to its TCP payload.
    """
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not lines:
        raise InputError("empty input: no hex digits")
    blocks = _parse_offset_dump(lines) if len(lines) > 1 or _looks_like_dump(lines[0][1]) else None
    if blocks is None:
        return _plain_hex(text)
    if len(blocks) == 1:
        return _strip_frame(blocks[0][1])
    reassembled = [b for lbl, b in blocks if lbl and "reassembled" in lbl.lower()]
    if len(reassembled) == 1:
        return reassembled[0]
    raise InputError(f"the dump holds {len(blocks)} separate blocks of bytes; give one message at a time")


def _looks_like_dump(line: str) -> bool:
    s = line.strip()
    return bool(_XXD.match(s) or (_OFFSET.match(s) and re.search(r"\s{2,}\S", s)))


def _strip_frame(data: bytes) -> bytes:
    """The TCP payload when `data` is a whole Ethernet frame carrying TCP, else `data`."""
    from kwire_cli.codec.framing import has_size_prefix
    if has_size_prefix(data) or len(data) < 54:
        return data
    pos = 12
    ethertype = struct.unpack_from(">H", data, pos)[0]
    pos += 2
    while ethertype in (0x8100, 0x88A8) and len(data) >= pos + 4:  # VLAN tags
        ethertype = struct.unpack_from(">H", data, pos + 2)[0]
        pos += 4
    if ethertype == 0x0800 and data[pos] >> 4 == 4:
        ihl = (data[pos] & 0x0F) * 4
        proto = data[pos + 9]
        total = struct.unpack_from(">H", data, pos + 2)[0]
        ip_end = pos + total
        pos += ihl
    elif ethertype == 0x86DD and data[pos] >> 4 == 6:
        proto = data[pos + 6]
        ip_end = pos + 40 + struct.unpack_from(">H", data, pos + 4)[0]
        pos += 40
    else:
        return data
    if proto != 6 or len(data) < pos + 20 or ip_end > len(data):
        return data
    tcp_len = (data[pos + 12] >> 4) * 4
    payload = data[pos + tcp_len: ip_end]
    return payload if payload else data


def bytes_from_source(raw: bytes, *, binary: bool | None = None) -> bytes:
    """Raw binary when `binary` (or, when None, when the data is not text); else parsed hex."""
    if binary is None:
        binary = not _is_text(raw)
    if binary:
        if not raw:
            raise InputError("empty input")
        return raw
    return parse_hex(raw.decode("ascii", errors="replace"))


def _is_text(raw: bytes) -> bool:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c.isprintable() or c in "\t\r\n\f\v" for c in text)


def read_input(arg: str | None, *, binary: bool | None = None, what: str = "INPUT") -> bytes:
    """INPUT as the commands take it: hex text, `-` for stdin, `@path` for a file."""
    if arg is None or arg == "-":
        stream = std_binary("stdin")
        if arg is None and stream.isatty():
            raise KwireUsageError(f"no {what}: give hex, @FILE or - (stdin)")
        return bytes_from_source(stream.read(), binary=binary)
    if arg.startswith("@"):
        path = Path(arg[1:])
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise KwireUsageError(f"{what}: file {path} does not exist") from None
        except IsADirectoryError:
            raise KwireUsageError(f"{what}: {path} is a directory") from None
        except OSError as e:
            raise KwireUsageError(f"{what}: cannot read {path}: {e.strerror}") from None
        try:
            return bytes_from_source(raw, binary=binary)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
    if binary:
        raise KwireUsageError("--binary needs @FILE or - (stdin)")
    return parse_hex(arg)


# --------------------------------------------------------------------------- options

FORMATS = ("pretty", "json", "yaml")


def format_option(default: str = "pretty", formats: tuple[str, ...] = FORMATS) -> Callable:
    return click.option("--format", "fmt", type=click.Choice(formats, case_sensitive=False), default=default,
                        show_default=True, help="Output: a Rich tree/table (pretty), JSON or YAML.")


def resolve_api(value: str, option: str = "--api"):
    """An API by name or key (`Metadata`, `metadata`, `MetadataRequest`, `3`), or a usage error."""
    from kwire_cli.spec.registry import registry
    try:
        return registry().api(value)
    except KwireError as e:
        raise KwireUsageError(f"{option}: {e}") from None


def check_version(api, version: int, kind: str = "request", option: str = "--version") -> int:
    spec = api.spec(kind)
    if version not in spec.valid_versions:
        raise KwireUsageError(f"{option}: {api.name} has no version {version} "
                              f"(valid: {spec.valid_versions})")
    return version


def emit(value: Any, fmt: str) -> None:
    """Write a value tree as JSON or YAML to stdout."""
    from kwire_cli.render.json import dumps
    click.echo(dumps(value, fmt), nl=False)


# --------------------------------------------------------------------------- decoding limits

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([KMGT])(?:I?B)?|B)?", re.IGNORECASE)
_SHIFTS = {"K": 10, "M": 20, "G": 30, "T": 40}
_SIZE_FORMS = "bytes, or a number with K, M or G, as in 300000, 512MiB, 1G"


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
            raise KwireUsageError(f"{option}: {text!r} is not a size ({_SIZE_FORMS})")
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
        if not re.fullmatch(r"\d+(?:[_,]?\d+)*", text):
            raise KwireUsageError(f"{option}: {text!r} is not a count (a whole number above 0, as in 4000000)")
        n = int(text.replace("_", "").replace(",", ""))
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
        """Set the per-frame limits (``kwire_cli.records.compression.set_frame_limits``) for the
        block and put the previous ones back after it, however it ends."""
        from kwire_cli.records.compression import set_frame_limits
        previous = set_frame_limits(self.decompressed, self.items)
        try:
            yield
        finally:
            set_frame_limits(*previous)


def _limit_callback(parse: Callable[[Any, str], int]) -> Callable:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> int | None:
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
    opts.append(click.option(
        "--max-decompressed", "max_decompressed", metavar="SIZE", callback=_limit_callback(parse_size),
        help="Most bytes decompressed per frame, all record batches together (default 256MiB); "
             "a batch past it is shown undecoded with an error."))
    opts.append(click.option(
        "--max-records", "max_records", metavar="N", callback=_limit_callback(parse_count),
        help="Most records plus record headers decoded per frame (default 4000000); a batch past "
             "it is shown undecoded with an error."))

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs["limits"] = DecodeLimits(kwargs.pop("max_frame_size", None), kwargs.pop("max_decompressed"),
                                            kwargs.pop("max_records"))
            return f(*args, **kwargs)
        for opt in reversed(opts):
            command = opt(command)
        return command
    return decorate


# --------------------------------------------------------------------------- message documents

class MessageDoc:
    """One message as YAML/JSON describes it: api, version, kind, header, body."""

    KEYS = {"api": "api", "api_key": "api", "api_name": "api", "version": "version",
            "api_version": "version", "kind": "kind", "header": "header", "body": "body"}
    IGNORED = ("size", "partial", "error")

    def __init__(self, api, version: int, kind: str, header: dict | None, body: dict, where: str):
        self.api, self.version, self.kind, self.header, self.body, self.where = (
            api, version, kind, header, body, where)

    def encode(self, *, size_prefix: bool = True, header: bool = True) -> bytes:
        from kwire_cli.codec import encode_body, encode_request, encode_response
        if not header:
            return encode_body(self.api.key, self.version, self.kind, self.body)
        enc = encode_request if self.kind == "request" else encode_response
        return enc(self.api.key, self.version, self.header, self.body, size_prefix=size_prefix)


def load_documents(text: str, where: str) -> list[Any]:
    """YAML (JSON is YAML too) documents; a one-line error naming the line on bad syntax."""
    import yaml

    from kwire_cli.yamlsafe import safe_load_all
    try:
        docs = [d for d in safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{where}: not valid YAML or JSON{at}: {problem}") from None
    except RecursionError:
        raise InputError(f"{where}: YAML or JSON nested too deep to read") from None
    if not docs:
        raise InputError(f"{where}: no message in the file")
    return docs


def message_docs(text: str, where: str, *, api: str | None = None, version: int | None = None,
                 kind: str | None = None) -> list[MessageDoc]:
    """Message documents from YAML/JSON text; `api`/`version`/`kind` fill in (or must agree with)
    what the documents say. Accepts kwire decode's JSON output as is."""
    out = []
    docs = load_documents(text, where)
    for i, doc in enumerate(docs):
        w = where if len(docs) == 1 else f"{where} document {i + 1}"
        out.append(message_doc(doc, w, api=api, version=version, kind=kind))
    return out


def message_doc(doc: Any, where: str, *, api: str | None = None, version: int | None = None,
                kind: str | None = None) -> MessageDoc:
    from kwire_cli.spec.registry import registry
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a mapping with api, version, kind and body, "
                         f"got {type(doc).__name__}")
    fields: dict[str, Any] = {}
    for k, v in doc.items():
        if k in MessageDoc.IGNORED:
            continue
        if k not in MessageDoc.KEYS:
            raise InputError(f"{where}: unknown key {k!r} (expected api, version, kind, header, body)")
        canon = MessageDoc.KEYS[k]
        if canon == "api" and canon in fields:
            # api_key and api_name together (kwire decode's JSON): they must name the same API
            a, b = registry().api(fields["api"]), registry().api(v)
            if a.key != b.key:
                raise InputError(f"{where}: api_key and api_name name different APIs ({a.name}, {b.name})")
            continue
        fields[canon] = v
    given = {"api": api, "version": version, "kind": kind}
    for k, opt in given.items():
        if opt is None:
            continue
        if k not in fields:
            fields[k] = opt
        elif k == "api":
            if registry().api(fields[k]).key != resolve_api(opt).key:
                raise InputError(f"{where}: says api {fields[k]!r} but --api says {opt!r}")
        elif fields[k] != opt:
            raise InputError(f"{where}: says {k} {fields[k]!r} but --{k} says {opt!r}")
    for k in ("api", "version"):
        if k not in fields:
            raise InputError(f"{where}: no {k} given (add `{k}:` or use --{k})")
    try:
        a = registry().api(fields["api"])
    except KwireError as e:
        raise InputError(f"{where}: {e}") from None
    v = fields["version"]
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"{where}: version must be a number, got {v!r}")
    k = fields.get("kind", "request")
    if k not in ("request", "response"):
        raise InputError(f"{where}: kind must be request or response, got {k!r}")
    if v not in a.spec(k).valid_versions:
        raise InputError(f"{where}: {a.name} has no version {v} (valid: {a.spec(k).valid_versions})")
    header = fields.get("header")
    if header is not None and not isinstance(header, dict):
        raise InputError(f"{where}: header must be a mapping of header fields")
    body = fields.get("body")
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise InputError(f"{where}: body must be a mapping of fields")
    return MessageDoc(a, v, k, header, body, where)


def read_text_source(arg: str | None, what: str = "FILE") -> tuple[str, str]:
    """(text, name) from a path, @path or - (stdin)."""
    if arg is None or arg == "-":
        stream = std_binary("stdin")
        if arg is None and stream.isatty():
            raise KwireUsageError(f"no {what}: give a YAML/JSON file or - (stdin)")
        raw, name = stream.read(), "<stdin>"
    else:
        path = Path(arg[1:] if arg.startswith("@") else arg)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise KwireUsageError(f"{what}: file {path} does not exist") from None
        except OSError as e:
            raise KwireUsageError(f"{what}: cannot read {path}: {e.strerror}") from None
        name = str(path)
    try:
        return raw.decode("utf-8"), name
    except UnicodeDecodeError as e:
        raise InputError(f"{name}: not UTF-8 text (byte {e.start})") from None


# --------------------------------------------------------------------------- decoding targets

class Target:
    """What to decode INPUT as: resolved from --api, --version, --kind, --request, --no-header."""

    def __init__(self, api, version: int | None, kind: str, no_header: bool, size_prefix: bool | None,
                 request_msg=None):
        self.api, self.version, self.kind = api, version, kind
        self.no_header, self.size_prefix, self.request_msg = no_header, size_prefix, request_msg
        self.kind_guessed = False

    def decode(self, data: bytes, records: str | None = None):
        from kwire_cli.codec import decode_body, decode_request, decode_response
        from kwire_cli.codec.framing import has_size_prefix
        try:
            if self.no_header:
                msg = decode_body(data, self.api.key, self.version, self.kind, records=records)
            elif self.kind == "request":
                msg = decode_request(data, size_prefixed=self.size_prefix, records=records)
            else:
                msg = decode_response(data, self.api.key, self.version, size_prefixed=self.size_prefix,
                                      records=records)
        except KwireError as e:
            # say so when the first 4 bytes look like a size prefix that does not fit
            if (self.size_prefix is None and not self.no_header and len(data) >= 4
                    and not has_size_prefix(data)):
                n = struct.unpack_from(">i", data, 0)[0]
                if 0 < n < 4 * len(data) + 64:
                    hint = (f" (read without a size prefix: the first 4 bytes say {n} bytes follow, "
                            f"but {len(data) - 4} do)")
                    if isinstance(e, DecodeError):
                        e.reason += hint
                    else:
                        e.args = (f"{e}{hint}",)
                    raise
            if (self.kind_guessed and self.kind == "request" and isinstance(e, DecodeError)
                    and (e.context.endswith("header") or "API key" in e.reason or "valid version" in e.reason)):
                e.reason += " (if this is a response, give --api NAME --version N, or --request HEX)"
            raise
        if self.kind == "request" and not self.no_header:
            if self.api is not None and msg.api_key != self.api.key:
                raise KwireError(f"the request is {msg.api_name} (api key {msg.api_key}), not {self.api.name} "
                                 f"as --api says")
            if self.version is not None and msg.api_version != self.version:
                raise KwireError(f"the request is {msg.api_name} v{msg.api_version}, not v{self.version} "
                                 f"as --version says")
        if self.request_msg is not None and msg.header and self.request_msg.header:
            want, got = self.request_msg.header.get("CorrelationId"), msg.header.get("CorrelationId")
            if want != got:
                click.echo(f"kwire: warning: the response's CorrelationId {got} differs from the "
                           f"request's {want}", err=True)
        return msg


def resolve_target(api_name: str | None, api_version: int | None, kind: str | None,
                   request_input: str | None, no_header: bool = False, size_prefix: bool | None = None,
                   *, input_on_stdin: bool = False) -> Target:
    from kwire_cli.codec import decode_request
    api = resolve_api(api_name) if api_name is not None else None
    request_msg = None
    if request_input is not None:
        if input_on_stdin and request_input == "-":
            raise KwireUsageError("INPUT and --request cannot both read stdin")
        try:
            request_msg = decode_request(read_input(request_input, what="--request"))
        except KwireError as e:
            if isinstance(e, click.ClickException):
                raise
            raise KwireError(f"--request: {e}") from None
        if api is not None and api.key != request_msg.api_key:
            raise KwireUsageError(f"--api {api_name} does not match the request, which is "
                                  f"{request_msg.api_name} (api key {request_msg.api_key})")
        if api_version is not None and api_version != request_msg.api_version:
            raise KwireUsageError(f"--version {api_version} does not match the request, which is "
                                  f"v{request_msg.api_version}")
        api = resolve_api(str(request_msg.api_key))
        api_version = request_msg.api_version
    guessed = kind is None
    if kind is None:
        kind = "response" if (api is not None or request_msg is not None) else "request"
    if kind == "response" or no_header:
        if api is None or api_version is None:
            what = "a bare body" if no_header else "a response"
            raise KwireUsageError(f"{what} does not name its API: give --api NAME --version N"
                                  + ("" if no_header else ", or --request HEX"))
    if api_version is not None and api is not None:
        check_version(api, api_version, kind)
    if no_header and size_prefix:
        raise KwireUsageError("--no-header bodies have no size prefix; drop --size-prefix")
    t = Target(api, api_version, kind, no_header, size_prefix, request_msg)
    t.kind_guessed = guessed
    return t


def complete_api(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
    """Shell completion of API names (Click's standard mechanism)."""
    from click.shell_completion import CompletionItem
    from kwire_cli.spec.registry import registry
    try:
        apis = registry().apis.values()
    except KwireError:
        return []
    return [CompletionItem(a.name) for a in apis if a.name.lower().startswith(incomplete.lower())]
