"""`kwire decode`'s trees printed without Rich (kwire_cli.render.plaintree) are the lines Rich
prints: every frame of the bundled client captures, as `kwire decode` builds its tree, rendered both
ways on the page widths kwire uses off a terminal; where a line would not fit, the plain path
declines and Rich lays the tree out."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from kwire_cli.capture import KafkaFrame, iter_capture
from kwire_cli.codec.headers import request_header_version, response_header_version
from kwire_cli.codec.message import decode_request, decode_response
from kwire_cli.errors import KwireError
from kwire_cli.render.plaintree import Label, Node, plain_lines
from kwire_cli.render.tree import message_tree
from kwire_cli.spec.registry import registry

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "fixtures" / "captures").glob("*.pcap"))


def _trees(path: Path):
    reg = registry()
    for fr in iter_capture(str(path)):
        if not isinstance(fr, KafkaFrame) or (fr.kind == "response" and fr.api_key is None):
            continue
        try:
            if fr.kind == "request":
                m = decode_request(fr.data, size_prefixed=False)
            else:
                assert fr.api_key is not None and fr.api_version is not None
                m = decode_response(fr.data, fr.api_key, fr.api_version, size_prefixed=False)
        except KwireError:
            continue
        api = reg.api(m.api_key)
        hv = (request_header_version if m.kind == "request" else response_header_version)(api, m.api_version)
        hs = reg.schema("RequestHeader" if m.kind == "request" else "ResponseHeader").struct
        yield message_tree(m.api_name, m.api_key, m.api_version, m.kind, m.header, m.body, fr.size,
                           header_struct=hs, header_version=hv, body_struct=api.spec(m.kind).struct)


def _rich_lines(root: Node, width: int) -> list[str]:
    out = io.StringIO()
    Console(file=out, markup=False, highlight=False, emoji=False, width=width, no_color=True,
            soft_wrap=False).print(root.to_rich())
    return out.getvalue().split("\n")[:-1]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_plain_lines_are_rich_lines(path, monkeypatch):
    compared = declined = 0
    for width in (200, 100):
        monkeypatch.setenv("COLUMNS", str(width))
        for tree in _trees(path):
            plain = plain_lines(tree)
            if plain is None:
                declined += 1
                assert max(len(x) for x in _rich_lines(tree, 10_000)) > width  # it really would not fit
                continue
            assert plain == _rich_lines(tree, width)
            compared += 1
    assert compared >= 10


def test_multi_line_and_wide_labels():
    root = Node(Label("\nfirst", style="bold"))
    kid = root.add(Label("a"))
    kid.add(Label("b\nc"))
    root.add(Label("漢字" * 3)).add(Label("x"))
    assert plain_lines(root) == _rich_lines(root, 200)
    wide = Node(Label("漢" * 60))
    os.environ.pop("COLUMNS", None)
    assert plain_lines(wide) == _rich_lines(wide, 200)
    assert plain_lines(Node(Label("漢" * 101))) is None  # 202 cells: Rich folds it


def test_decode_to_a_pipe_does_not_import_rich(tmp_path):
    """The start-up saving is real: one message decoded to a pipe never imports Rich, and prints
    what Rich prints (forced through Rich by a page too narrow for the plain path)."""
    hx = (ROOT / "fixtures" / "hex" / "metadata-request-v1.hex").read_text()
    code = ("import sys, runpy; sys.argv = ['kwire', 'decode', sys.argv[1]];\n"
            "try:\n    runpy.run_module('kwire_cli', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('RICH' if 'rich' in sys.modules else 'NORICH', file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    p = subprocess.run([sys.executable, "-c", code, hx], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stderr.strip().endswith("NORICH"), p.stderr
    narrow = subprocess.run([sys.executable, "-c", code, hx], capture_output=True, text=True,
                            env={**env, "COLUMNS": "30"})
    assert narrow.stderr.strip().endswith("RICH") and not narrow.stderr.strip().endswith("NORICH")
    wide = subprocess.run([sys.executable, "-m", "kwire_cli", "decode", hx], capture_output=True, text=True,
                          env={**env, "COLUMNS": "30000"})
    # TTY_COMPATIBLE set (to "0": Rich prints no styles) sends the tree through Rich
    through_rich = subprocess.run([sys.executable, "-m", "kwire_cli", "decode", hx], capture_output=True,
                                  text=True, env={**env, "COLUMNS": "30000", "TTY_COMPATIBLE": "0"})
    assert wide.stdout.splitlines()[0].startswith("Metadata v1 request")
    assert wide.stdout == through_rich.stdout


@pytest.mark.parametrize("how,styled", [((), False), (("--color", "always"), True), (("--color", "never"), False),
                                        (("--color", "auto"), False)])
def test_color_option(how, styled):
    """`kwire --color always` styles a tree even into a pipe (for less -R), `never` never does;
    KWIRE_COLOR says the same; the lines are the same words either way."""
    hx = (ROOT / "fixtures" / "hex" / "metadata-request-v1.hex").read_text()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    env.pop("KWIRE_COLOR", None)
    p = subprocess.run([sys.executable, "-m", "kwire_cli", *how, "decode", hx], capture_output=True, env=env)
    plain = subprocess.run([sys.executable, "-m", "kwire_cli", "decode", hx], capture_output=True, env=env).stdout
    assert p.returncode == 0 and (b"\x1b[" in p.stdout) == styled
    assert re.sub(rb"\x1b\[[0-9;]*m", b"", p.stdout) == plain
    if how:
        by_env = subprocess.run([sys.executable, "-m", "kwire_cli", "decode", hx], capture_output=True,
                                env={**env, "KWIRE_COLOR": how[1]})
        assert by_env.stdout == p.stdout


def _printed(tree: Node, monkeypatch) -> list[str]:
    """What ``print_tree`` writes for ``tree`` to a file (not a terminal)."""
    from kwire_cli.render.printtree import print_tree
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    monkeypatch.setattr(sys, "stdout", out)
    print_tree(tree)
    out.flush()
    return raw.getvalue().decode().split("\n")[:-1]


@pytest.mark.parametrize("width", [200, 60, 30])
def test_printed_trees_are_rich_lines_also_where_labels_fold(width, monkeypatch):
    """``print_tree`` writes a tree as it walks it and hands only a label too wide for its line to
    Rich: every tree of a capture at three page widths (at 60 and 30 many labels fold) prints what
    Rich prints for the whole tree."""
    monkeypatch.setenv("COLUMNS", str(width))
    folded = 0
    for tree in _trees(CAPTURES[0]):
        assert _printed(tree, monkeypatch) == _rich_lines(tree, width)
        folded += plain_lines(tree) is None
    assert folded if width < 200 else not folded


def test_a_tree_is_made_as_it_prints():
    """A node's ``fill`` makes its children when the walk reaches them, after the children added,
    and again for each walk: nothing of a big array's items is kept."""
    made = []

    def kids():
        for i in range(3):
            made.append(i)
            yield Node(Label(f"[{i}]"))
    root = Node(Label("root"))
    root.add(Label("first"))
    big = root.add(Label("items"))
    big.fill = kids
    assert made == [] and big.children == []
    assert plain_lines(root) == ["root", "├── first", "└── items", "    ├── [0]", "    ├── [1]", "    └── [2]"]
    assert plain_lines(root) == _rich_lines(root, 200) and made == [0, 1, 2] * 3
