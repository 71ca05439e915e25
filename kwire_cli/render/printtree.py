"""``print_tree``: a tree (or one label) printed as Rich's ``Tree`` prints it, a line at a time.

Off a terminal, where Rich would print no styles, the lines are kwire's own (render/plaintree.py)
and Rich is not imported; with styles (on a terminal, ``kwire --color always``) they carry the
escape codes Rich's console writes (render/styledtree.py). Either way the lines are made as the
tree is walked (``Node.fill`` makes a big array's items as they print) and written 64 KB at a
time, so that a tree of millions of lines (a Fetch answer of 400,000 partitions) costs what one
line does.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import IO

from kwire_cli.render.page import page_width
from kwire_cli.render.plaintree import Label, Node, plain_ok, stream_lines


def write_lines(stream: IO[str], lines: Iterable[str]) -> None:
    """Write ``lines`` 64 KB at a time, then flush (as Rich does after each print: a tree shows
    before the next frame decodes)."""
    buf: list[str] = []
    size = 0
    for line in lines:
        buf.append(line)
        size += len(line) + 1
        if size >= 65536:
            buf.append("")
            stream.write("\n".join(buf))
            buf.clear()
            size = 0
    if buf:
        buf.append("")
        stream.write("\n".join(buf))
    stream.flush()


def print_tree(root: Node | Label, stderr: bool = False) -> None:
    """Print a tree (or one label) as Rich's ``Tree`` would, its lines made as the tree is walked
    and written 64 KB at a time, so that a tree of millions of lines (a Fetch answer of 400,000
    partitions) costs what one line does. Where Rich would print no styles (not a terminal) it is
    done without Rich; with styles (render/styledtree.py) the codes are those Rich's console
    writes; a label too wide for its line is laid out by Rich alone, as Rich's tree would."""
    stream = sys.stderr if stderr else sys.stdout
    node = root if isinstance(root, Node) else Node(root)
    if plain_ok(stream):
        write_lines(stream, stream_lines(node, page_width()))
        return
    from kwire_cli.render.console import make_console  # imports Rich: only when it prints styles
    from kwire_cli.render.styledtree import styled_lines
    console = make_console(stderr)
    lines = styled_lines(node, console)
    if lines is None:
        console.print(node.to_rich())
    else:
        write_lines(stream, lines)
