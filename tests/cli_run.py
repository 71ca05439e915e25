"""Run `kwire` the way a user does (through kwire_cli.cli.main) inside Click's CliRunner."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from click.testing import CliRunner

from kwire_cli.cli import main

ROOT = Path(__file__).resolve().parents[1]


class Result:
    def __init__(self, code: int, out: bytes, err: bytes):
        self.code, self.out_bytes, self.err_bytes = code, out, err
        self.out = out.decode("utf-8", errors="replace")
        self.err = err.decode("utf-8", errors="replace")

    def json(self):
        return json.loads(self.out)

    def __repr__(self) -> str:
        return f"Result(code={self.code}, out={self.out[:300]!r}, err={self.err!r})"


def kwire(*args: str, input: bytes | str | None = None, env: dict | None = None) -> Result:
    if len(args) == 1 and " " in args[0]:
        args = tuple(shlex.split(args[0]))
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return Result(code, out.getvalue(), err.getvalue())


def pipeline(line: str) -> Result:
    """Run `kwire ... | kwire ...` by feeding each command's stdout to the next one's stdin."""
    data = None
    res = None
    for part in line.split("|"):
        words = shlex.split(part)
        assert words[0] == "kwire", part
        res = kwire(*words[1:], input=data)
        if res.code != 0:
            return res
        data = res.out_bytes
    return res


def pairs() -> list[tuple[str, dict]]:
    """The recorded request/response pairs (fixtures/pairs/<client>/*.json)."""
    out = []
    for p in sorted((ROOT / "fixtures" / "pairs").glob("*/*.json")):
        out.append((f"{p.parent.name}/{p.stem}", json.loads(p.read_text())))
    return out
