"""One exception family for everything kwire refuses: every message is one line naming where."""
from __future__ import annotations


class KwireError(Exception):
    """Base of every error kwire reports to a user (exit code 1 in the CLI)."""


class SpecError(KwireError):
    """A message spec file breaks a rule of Kafka's message format (names file and field)."""


class DecodeError(KwireError):
    """Bytes that do not decode. Carries the field path and the byte offset.

    The path is built up while the error travels out of nested structs and arrays, so the
    innermost decoder only says what went wrong and where in the bytes.
    """

    def __init__(self, reason: str, offset: int | None = None, path: list[str] | None = None,
                 context: str = ""):
        self.reason = reason
        self.offset = offset
        self.path: list[str] = path or []
        self.context = context
        super().__init__(reason)

    def prefix(self, element: str) -> "DecodeError":
        self.path.insert(0, element)
        return self

    @property
    def field_path(self) -> str:
        out = ""
        for p in self.path:
            out += p if (p.startswith("[") or not out) else "." + p
        return out

    def __str__(self) -> str:  # one line
        fp = self.field_path
        if self.reason.startswith("has no field"):  # "<message> <path> has no field X (versions ...)"
            return " ".join(p for p in (self.context, fp, self.reason) if p)
        where = f"{self.context}: " if self.context else ""
        if fp:
            where += f"{fp}: "
        return where + self.reason


class EncodeError(DecodeError):
    """A value tree that cannot be written at the asked version (names the field path)."""

    def __init__(self, reason: str, path: list[str] | None = None, context: str = ""):
        super().__init__(reason, None, path, context)
