"""Every exception kwire raises for what it refuses: one family, every message one line naming where.

    KwireError                      base of all (the CLI prints it on one line and exits 1)
    ├── SpecError                   a message spec file breaks a rule of Kafka's message format
    ├── CodecError                  shared base of the codec's errors: field path, byte offset, context
    │   ├── DecodeError             bytes that do not decode                 kind "decode-error"
    │   │   ├── UnknownApiKey       an API key the specs do not know          kind "unknown-api-key"
    │   │   ├── UnknownVersion      a version the API does not have           kind "unknown-version"
    │   │   └── TrailingBytes       bytes left after a complete message       kind "trailing-bytes"
    │   └── EncodeError             a value tree that cannot be written (a sibling of DecodeError)
    ├── RecordsError                a records field whose framing cannot be used, or a value that
    │                               cannot be encoded as one
    ├── CompressionError            a compressed payload that cannot be decompressed
    │   └── DecompressedTooLarge    ... because it would exceed the cap
    ├── CaptureError                a capture file that cannot be read at all
    ├── InputError                  input (hex, bytes, YAML documents) that cannot be read
    ├── NegotiationError            a broker answer or client range that cannot be read
    ├── FilterError                 a display filter that does not parse or does not apply
    └── SparkJobError               a spark-decode job that cannot run or went wrong

Code that needs the kind of a failure reads ``getattr(e, "kind", "decode-error")``, never the
message text.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class KwireError(Exception):
    """Base of every error kwire reports to a user (exit code 1 in the CLI)."""


class SpecError(KwireError):
    """A message spec file breaks a rule of Kafka's message format (names file and field)."""


class CodecError(KwireError):
    """The codec's errors: a reason, the field path and (decode) the byte offset.

    The path is built up while the error travels out of nested structs and arrays, so the
    innermost decoder or encoder only says what went wrong (and where in the bytes).
    ``context`` names the message (``"Metadata v12 request"``), set by the outermost caller.
    """

    def __init__(self, reason: str, offset: int | None = None, path: list[str] | None = None,
                 context: str = ""):
        self.reason = reason
        self.offset = offset
        self.path: list[str] = path or []
        self.context = context
        super().__init__(reason)

    def prefix(self, element: str) -> CodecError:
        """Put the enclosing field name (or ``[i]`` array index) in front of the path; returns self."""
        self.path.insert(0, element)
        return self

    @property
    def field_path(self) -> str:
        return join_path(self.path)

    def __str__(self) -> str:  # one line
        fp = self.field_path
        if self.reason.startswith("has no field"):  # "<message> <path> has no field X (versions ...)"
            return " ".join(p for p in (self.context, fp, self.reason) if p)
        where = f"{self.context}: " if self.context else ""
        if fp:
            where += f"{fp}: "
        return where + self.reason


class DecodeError(CodecError):
    """Bytes that do not decode. Carries the field path and the byte offset.

    ``rule``: which rule of the format the bytes break, as the violations list of lenient decoding
    names it (``truncated``, ``null-not-nullable``, ``invalid-utf8``, ``bad-length``, ``tag-size``,
    ``tag-order``, ``trailing-bytes``, ``too-deep``, ``records``, ``missing-tags``; ``unreadable`` when unnamed)."""

    kind = "decode-error"
    rule = "unreadable"
    # lenient decoding that had to stop: what it read up to here (a codec Message whose violations
    # end with this error), for the caller to show; None otherwise
    partial: Any = None


class UnknownApiKey(DecodeError):
    """A request (or a response asked for) with an API key the specs do not know."""

    kind = "unknown-api-key"


class UnknownVersion(DecodeError):
    """A version the API does not have (outside its validVersions)."""

    kind = "unknown-version"


class TrailingBytes(DecodeError):
    """Bytes left over after a complete message (or frame).

    ``decoded``: what decoded before them (the complete ``Message``), or None where there is
    nothing to keep (a size prefix shorter than the bytes given)."""

    kind = "trailing-bytes"
    rule = "trailing-bytes"

    def __init__(self, reason: str, offset: int | None = None, path: list[str] | None = None,
                 context: str = "", decoded: Any = None):
        super().__init__(reason, offset, path, context)
        self.decoded = decoded


def join_path(parts: Sequence[str]) -> str:
    """``["Topics", "[0]", "Name"]`` -> ``Topics[0].Name``."""
    out = ""
    for p in parts:
        out += p if (p.startswith("[") or not out) else "." + p
    return out


@dataclass(frozen=True)
class Violation:
    """A rule of the format the bytes break, where lenient decoding read past it (or stopped).

    ``path``: the field (``Topics[0].Name``; empty for the message itself); ``offset``: the byte in
    the input; ``rule``: a ``DecodeError.rule`` name; ``detail``: what was found, one line."""

    path: str
    offset: int | None
    rule: str
    detail: str

    @classmethod
    def of(cls, err: DecodeError, where: Sequence[str] = ()) -> Violation:
        return cls(join_path(list(where) + err.path), err.offset, err.rule, err.reason)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "offset": self.offset, "rule": self.rule, "detail": self.detail}

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"{self.rule}{where}: {self.detail}"


class EncodeError(CodecError):
    """A value tree that cannot be written at the asked version (names the field path)."""

    def __init__(self, reason: str, path: list[str] | None = None, context: str = ""):
        super().__init__(reason, None, path, context)


class RecordsError(KwireError):
    """A records field whose framing cannot be used, or a value that cannot be encoded.

    The message is one line naming the batch index and byte offset (decode) or the value path
    (encode). The message codec wraps it with the field path of the records field."""


class CompressionError(KwireError):
    """A compressed payload that cannot be decompressed (corrupt, truncated, unsupported).

    ``produced``: bytes decompressed before the failure was found (charged to the frame budget)."""

    def __init__(self, message: str = "", produced: int = 0):
        super().__init__(message)
        self.produced = produced


class DecompressedTooLarge(CompressionError):
    """The decompressed payload would exceed the configured cap."""


class CaptureError(KwireError):
    """A capture file that cannot be read at all (one line: what and where).

    Only whole-file problems raise (not a capture at all, an unreadable header). Damage inside a
    capture (a truncated packet, a lost TCP segment, an unframeable byte run) is reported as a
    ``Damage`` event and counted; reading goes on where it can."""


class InputError(KwireError):
    """Input that cannot be read: hex or byte dumps, YAML/JSON message documents, files."""


class NegotiationError(KwireError):
    """A broker answer, or a client's version ranges, that cannot be read."""


class FilterError(KwireError):
    """A display filter that does not parse, or names a field that does not exist."""


class SparkJobError(KwireError):
    """A spark-decode job that cannot run (no input, no PySpark) or failed."""
