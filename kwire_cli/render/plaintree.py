"""Labels and trees as plain data, printed without Rich when the output is not a terminal.

``kwire decode`` prints one tree per message. Building it from Rich's ``Text`` and ``Tree`` costs
Rich's import (about a fifth of a one-message decode's start-up) and about 250 us and 3 KB per line
when printed. Here a tree is a ``Node`` of ``Label`` s (text in styled spans, the subset of
``rich.text.Text`` the tree code uses). Written to a pipe or a file, where Rich prints no styles,
``print_tree`` writes the lines itself, exactly as Rich lays them out (its guides, ``├── ``,
``│   ``, ``└── ``); on a terminal, or when a line would not fit the page and Rich would fold it, or
when Rich is asked to behave as a terminal (FORCE_COLOR, TTY_COMPATIBLE), the tree is converted to
Rich's classes and Rich prints it, so the output never depends on which path was taken
(tests/test_plaintree.py compares the two on real messages).
"""
from __future__ import annotations

import os
import sys
from typing import IO, Any

from kwire_cli.render.page import color_mode, page_width

# Rich's tree guides (rich.tree.Tree.TREE_GUIDES[0]: the default, unstyled guide)
SPACE, CONTINUE, FORK, END = "    ", "│   ", "├── ", "└── "


class Label:
    """One line of text in styled spans (a style is a Rich style string, or None)."""

    __slots__ = ("spans",)

    def __init__(self, text: str = "", style: str | None = None) -> None:
        self.spans: list[tuple[str, str | None]] = [(text, style)] if text else []

    def append(self, text: str, style: str | None = None) -> Label:
        if text:
            self.spans.append((text, style))
        return self

    def append_text(self, other: Label) -> Label:
        self.spans.extend(other.spans)
        return self

    def __add__(self, other: Label) -> Label:
        out = Label()
        out.spans = self.spans + other.spans
        return out

    @property
    def plain(self) -> str:
        return "".join(t for t, _ in self.spans)

    def to_rich(self) -> Any:
        from rich.text import Text
        t = Text()
        for text, style in self.spans:
            t.append(text, style=style or "")
        return t


class Node:
    """A tree node: a label and its children, in order."""

    __slots__ = ("label", "children")

    def __init__(self, label: Label) -> None:
        self.label = label
        self.children: list[Node] = []

    def add(self, label: Label) -> Node:
        node = Node(label)
        self.children.append(node)
        return node

    def to_rich(self) -> Any:
        from rich.tree import Tree
        root = Tree(self.label.to_rich())
        todo = [(root, self)]
        while todo:
            rich_node, node = todo.pop()
            for child in node.children:
                todo.append((rich_node.add(child.label.to_rich()), child))
        return root


def plain_lines(root: Node) -> list[str] | None:
    """The lines Rich prints for ``root`` on a page of ``width`` cells with no styles; None when a
    label would not fit its line (Rich would fold it) and Rich must lay the tree out."""
    width = page_width()
    out: list[str] = []
    # (node, the guides before its label, the guides before its children's labels)
    todo: list[tuple[Node, str, str]] = [(root, "", "")]
    while todo:
        node, lead, inner = todo.pop()
        for i, text in enumerate(node.label.plain.split("\n")):
            guides = inner if i else lead
            room = width - len(guides)
            if len(text) > room or (not text.isascii() and len(text) * 2 > room and cells(text) > room):
                return None
            out.append(guides + text)
        kids = node.children
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            todo.append((kids[i], inner + (END if last else FORK), inner + (SPACE if last else CONTINUE)))
    return out


def cells(text: str) -> int:
    """Terminal cells of ``text`` as Rich counts them (wide characters take two)."""
    from rich.cells import cell_len
    return cell_len(text)


def plain_ok(stream: IO[str]) -> bool:
    """Whether Rich would print to ``stream`` as to a plain file: not a terminal, no styles, UTF-8 guides."""
    if color_mode[0] == "always" or (hasattr(stream, "isatty") and stream.isatty()):
        return False
    env = os.environ
    if env.get("FORCE_COLOR") or env.get("TTY_COMPATIBLE") or env.get("TTY_INTERACTIVE") or env.get("JUPYTER_COLUMNS"):
        return False
    enc = (getattr(stream, "encoding", None) or "").lower()
    return enc.startswith("utf")


def print_tree(root: Node | Label, stderr: bool = False) -> None:
    """Print a tree (or one label) as Rich would, without Rich where it would print no styles."""
    stream = sys.stderr if stderr else sys.stdout
    if plain_ok(stream):
        lines = plain_lines(root if isinstance(root, Node) else Node(root))
        if lines is not None:
            stream.write("\n".join(lines) + "\n")
            stream.flush()  # as Rich does after each print: a tree shows before the next frame decodes
            return
    from kwire_cli.render.console import print_renderable  # imports Rich: only when it prints
    print_renderable(root.to_rich(), stderr=stderr)
