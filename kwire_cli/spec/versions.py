"""Version ranges as the message specs write them: `N`, `N-M`, `N+`, `none`."""
from __future__ import annotations

from dataclasses import dataclass

from kwire_cli.errors import SpecError

OPEN = 0x7FFF  # Kafka's Short.MAX_VALUE: the top of an open range


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int  # inclusive; OPEN for "N+"; lo > hi means empty ("none")

    @classmethod
    def parse(cls, text: object, what: str = "versions") -> Versions:
        if isinstance(text, int):
            text = str(text)
        if not isinstance(text, str):
            raise SpecError(f"{what}: expected a version range string, got {text!r}")
        s = text.strip()
        try:
            if s == "none":
                return NONE
            if s.endswith("+"):
                return cls(int(s[:-1]), OPEN)
            if "-" in s:
                a, b = s.split("-", 1)
                lo, hi = int(a), int(b)
                if lo > hi:
                    raise SpecError(f"{what}: range {s!r} runs backwards")
                return cls(lo, hi)
            v = int(s)
            return cls(v, v)
        except ValueError:
            raise SpecError(f"{what}: {text!r} is not N, N-M, N+ or none") from None

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    @property
    def open_ended(self) -> bool:
        return not self.empty and self.hi == OPEN

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NONE

    def issubset(self, other: Versions) -> bool:
        return self.empty or (other.lo <= self.lo and self.hi <= other.hi)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == OPEN:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)
