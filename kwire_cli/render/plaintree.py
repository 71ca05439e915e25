"""Labels and trees as plain data, and their lines as Rich lays them out with no styles.

``kwire decode`` prints one tree per message. Building it from Rich's ``Text`` and ``Tree`` costs
Rich's import (about a fifth of a one-message decode's start-up) and about 250 us and 3 KB per line
when printed, and Rich holds the whole page until it is printed. Here a tree is a ``Node`` of
``Label`` s (text in styled spans, the subset of ``rich.text.Text`` the tree code uses), walked a
line at a time (``walk``: the guides Rich draws, ``├── ``, ``│   ``, ``└── ``, before each
label). ``stream_lines`` gives the lines Rich prints where it prints no styles (a pipe or a file),
without Rich but for a label too wide for its line, which Rich alone lays out (folds);
render/styledtree.py gives them with styles, render/printtree.py prints either. The output never
depends on which path was taken (tests/test_plaintree.py and tests/test_styledtree.py compare them
with Rich's own on real messages).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
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
        return "".join([t for t, _ in self.spans])

    def to_rich(self) -> Any:
        from rich.text import Text
        t = Text()
        for text, style in self.spans:
            t.append(text, style=style or "")
        return t


class Node:
    """A tree node: a label and its children, in order: those added (``add``), then those ``fill``
    makes when the tree is printed (a big array's items are made one at a time as they print, and
    let go of after, so that a tree of millions of lines never exists whole)."""

    __slots__ = ("label", "children", "fill")

    def __init__(self, label: Label, fill: Callable[[], Iterable[Node]] | None = None) -> None:
        self.label = label
        self.children: list[Node] = []
        self.fill = fill

    def add(self, label: Label) -> Node:
        node = Node(label)
        self.children.append(node)
        return node

    def kids(self) -> Iterator[Node]:
        """The children: those added, then those ``fill`` makes (made again on each call)."""
        yield from self.children
        if self.fill is not None:
            yield from self.fill()

    def to_rich(self) -> Any:
        from rich.tree import Tree
        root = Tree(self.label.to_rich())
        todo = [(root, self)]
        while todo:
            rich_node, node = todo.pop()
            for child in node.kids():
                todo.append((rich_node.add(child.label.to_rich()), child))
        return root


def walk(root: Node) -> Iterator[tuple[str, str, Label]]:
    """Each label of the tree in print order, with the guides before its first line and before its
    other lines (Rich's layout); children are made (``Node.fill``) as the walk reaches them."""
    yield "", "", root.label
    # per level: the children left (one looked at ahead, to know the last one) and their guides
    todo: list[tuple[Iterator[Node], Node | None, str]] = [(root.kids(), None, "")]
    while todo:
        it, ahead, inner = todo[-1]
        node = ahead if ahead is not None else next(it, None)
        if node is None:
            todo.pop()
            continue
        following = next(it, None)
        todo[-1] = (it, following, inner)
        last = following is None
        yield inner + (END if last else FORK), inner + (SPACE if last else CONTINUE), node.label
        if node.children or node.fill is not None:
            todo.append((node.kids(), None, inner + (SPACE if last else CONTINUE)))


def fits(text: str, room: int) -> bool:
    return len(text) <= room and (text.isascii() or len(text) * 2 <= room or cells(text) <= room)


def plain_lines(root: Node) -> list[str] | None:
    """The lines Rich prints for ``root`` on a page of ``width`` cells with no styles; None when a
    label would not fit its line (Rich would fold it) and Rich must lay the tree out."""
    width = page_width()
    out: list[str] = []
    for lead, inner, label in walk(root):
        for i, text in enumerate(label.plain.split("\n")):
            guides = inner if i else lead
            if not fits(text, width - len(guides)):
                return None
            out.append(guides + text)
    return out


def _folded(label: Label, lead: str, inner: str, width: int) -> list[str]:
    """The lines Rich prints for a label that does not fit its line: laid out by Rich (folded) on
    the room the guides leave, the first line after ``lead``, the others after ``inner``, as Rich's
    ``Tree`` does."""
    from kwire_cli.render.console import make_console
    console = make_console()
    room = width - len(inner)
    lines = console.render_lines(label.to_rich(), console.options.update(width=room, highlight=False, height=None),
                                 pad=False)
    return [(inner if i else lead) + "".join(seg.text for seg in line if not seg.control)
            for i, line in enumerate(lines)]


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


def stream_lines(root: Node, width: int) -> Iterator[str]:
    """The lines Rich prints for ``root`` with no styles, made as the tree is walked."""
    for lead, inner, label in walk(root):
        plain = "".join([t for t, _ in label.spans])
        if "\n" not in plain and fits(plain, width - len(lead)):  # the common label: one line that fits
            yield lead + plain
            continue
        texts = plain.split("\n")
        if all(fits(text, width - len(inner if i else lead)) for i, text in enumerate(texts)):
            for i, text in enumerate(texts):
                yield (inner if i else lead) + text
        else:
            yield from _folded(label, lead, inner, width)
