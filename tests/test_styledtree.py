"""`kwire decode`'s trees printed with styles (kwire_cli.render.styledtree: on a terminal, with
`--color always`) are the bytes Rich's Tree prints: every message of the bundled client captures
and hex fixtures, at page widths where labels fit and where they fold, in each colour system Rich
can pick, with colours taken off (NO_COLOR on a terminal keeps bold and dim) and with no colour
system at all."""
from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from kwire_cli.codec.headers import request_header_version, response_header_version
from kwire_cli.codec.message import decode_request, decode_response
from kwire_cli.inputs.dump import parse_hex
from kwire_cli.render.plaintree import Label, Node
from kwire_cli.render.printtree import write_lines
from kwire_cli.render.styledtree import styled_lines
from kwire_cli.render.tree import message_tree
from kwire_cli.spec.registry import registry

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_plaintree import CAPTURES, _trees

ROOT = Path(__file__).resolve().parents[1]
HEXES = sorted((ROOT / "fixtures" / "hex").glob("*.hex"))
SYSTEMS = ["truecolor", "256", "standard", None]


def _hex_tree(path: Path) -> Node:
    """The tree `kwire decode` prints for a hex fixture (a response read at the version its name says)."""
    reg = registry()
    data = parse_hex(path.read_text())
    api_name, kind, version = path.stem.rsplit("-", 2)
    api = reg.api(api_name)
    m = (decode_request(data) if kind == "request" else decode_response(data, api.key, int(version[1:])))
    hv = (request_header_version if m.kind == "request" else response_header_version)(api, m.api_version)
    hs = reg.schema("RequestHeader" if m.kind == "request" else "ResponseHeader").struct
    return message_tree(m.api_name, m.api_key, m.api_version, m.kind, m.header, m.body, m.size,
                        header_struct=hs, header_version=hv, body_struct=api.spec(m.kind).struct)


def _console(width: int, system: str | None, no_color: bool = False) -> tuple[Console, io.StringIO]:
    """A console as `kwire --color always` makes it (render/console.py), in a colour system."""
    out = io.StringIO()
    return Console(file=out, markup=False, highlight=False, emoji=False, width=width, force_terminal=True,
                   soft_wrap=False, color_system=system, no_color=no_color), out


def _both(tree: Node, width: int, system: str | None, no_color: bool = False) -> tuple[str, str]:
    """(Rich's bytes for the tree, the streamed bytes)."""
    rich, rich_out = _console(width, system, no_color)
    rich.print(tree.to_rich())
    ours, ours_out = _console(width, system, no_color)
    lines = styled_lines(tree, ours)
    assert lines is not None
    write_lines(ours_out, lines)
    return rich_out.getvalue(), ours_out.getvalue()


def _all_trees(captures: list[Path]) -> list[Node]:
    trees = [_hex_tree(p) for p in HEXES]
    for path in captures:
        trees.extend(_trees(path))
    return trees


# three captures (one per client library; about a sixth of the lines of all nine) for the quick loop
SOME = [p for p in CAPTURES if p.stem in ("confluent-kafka-admin", "kafkajs-produce", "kafka-python-admin")]


@pytest.fixture(scope="module")
def trees() -> list[Node]:
    return _all_trees(SOME)


def _compare(trees: list[Node], width: int, system: str | None) -> None:
    escapes = 0
    for tree in trees:
        rich, ours = _both(tree, width, system)
        assert ours == rich
        escapes += "\x1b[" in ours
    assert escapes == (len(trees) if system else 0)


@pytest.mark.parametrize("width,system", [(200, "truecolor"), (100, "256"), (60, "standard"), (30, "truecolor"),
                                          (200, None)])
def test_styled_lines_are_rich_bytes(trees, width, system):
    assert len(trees) > 70
    _compare(trees, width, system)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("width", [200, 30])
def test_every_capture_in_every_colour_system(width, system):
    """Every message of the nine captures (22,000 lines), labels fitting (200) and folding (30)."""
    trees = _all_trees(CAPTURES)
    assert len(trees) > 400
    _compare(trees, width, system)


@pytest.mark.parametrize("system", ["truecolor", "standard"])
def test_no_color_keeps_bold_and_dim(trees, system):
    """A terminal with NO_COLOR: Rich takes the colours off and keeps the other styles."""
    for tree in trees[:40]:
        rich, ours = _both(tree, 200, system, no_color=True)
        assert ours == rich and "\x1b[1m" in ours and "\x1b[36m" not in ours


def test_multi_line_folded_and_empty_labels():
    root = Node(Label("\nfirst", style="bold"))
    kid = root.add(Label("a", style="cyan").append("b", style="cyan").append(" c"))
    kid.add(Label("b\nc", style="bold red").append("d\n\ne", style="dim"))
    kid.add(Label())
    root.add(Label("漢字" * 3, style="italic dim")).add(Label("x"))
    root.add(Label("word " * 30, style="green").append("tail " * 10)).add(Label("漢" * 60, style="bold"))
    for width in (200, 40, 12, 3):
        for system in SYSTEMS:
            rich, ours = _both(root, width, system)
            assert ours == rich, (width, system)


@pytest.mark.parametrize("env", [{"COLORTERM": "truecolor"}, {"TERM": "xterm-256color"}, {"TERM": "xterm"},
                                 {"TERM": "xterm", "NO_COLOR": "1"}])
def test_color_always_in_each_terminal(env):
    """`kwire --color always decode` prints Rich's bytes in the colour system Rich picks from the
    environment."""
    path = ROOT / "fixtures" / "hex" / "fetch-response-v13.hex"
    base = {k: v for k, v in os.environ.items()
            if k not in ("COLORTERM", "TERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "KWIRE_COLOR")}
    full = {**base, **env, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "kwire_cli", "--color", "always", "decode", path.read_text(),
                        "--api", "Fetch", "--version", "13"], capture_output=True, env=full)
    assert p.returncode == 0, p.stderr
    code = ("import io, os, sys\n"
            "from rich.console import Console\n"
            "sys.path.insert(0, 'tests')\n"
            "from test_styledtree import _hex_tree\n"
            "from pathlib import Path\n"
            "out = io.StringIO()\n"
            "Console(file=out, markup=False, highlight=False, emoji=False, width=200, force_terminal=True,"
            " soft_wrap=False).print(_hex_tree(Path(sys.argv[1])).to_rich())\n"
            "sys.stdout.write(out.getvalue())\n")
    want = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, env=full, cwd=ROOT)
    assert want.returncode == 0, want.stderr
    assert p.stdout == want.stdout and b"\x1b[" in p.stdout


def _on_a_terminal(args: list[str], width: int, env: dict[str, str]) -> bytes:
    """What ``kwire ARGS`` writes on a pseudo-terminal ``width`` columns wide (its newlines as written)."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.ONLCR  # no "\r" added before each "\n"
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen([sys.executable, "-m", "kwire_cli", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
    os.close(slave)
    data = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, "kwire wrote nothing for 60 s"
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the writer closed the terminal
            break
        if not chunk:
            break
        data += chunk
    assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    os.close(master)
    return bytes(data)


@pytest.mark.parametrize("width", [120, 50])
def test_decode_on_a_terminal_prints_rich_bytes(width):
    """On a real (pseudo-)terminal `kwire decode` takes the terminal's width and colour system, and
    prints what Rich prints for the tree there."""
    path = ROOT / "fixtures" / "hex" / "produce-request-v9.hex"
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "KWIRE_COLOR")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color")
    got = _on_a_terminal(["decode", path.read_text()], width, env)
    want = io.StringIO()
    Console(file=want, markup=False, highlight=False, emoji=False, width=width, force_terminal=True,
            soft_wrap=False, color_system="256").print(_hex_tree(path).to_rich())
    assert got.decode() == want.getvalue() and b"\x1b[" in got
