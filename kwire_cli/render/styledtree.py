"""A tree printed with styles (on a terminal, ``kwire --color always``) as it is walked.

Rich's ``Tree`` prints a tree only once it has laid out all of it: every line a list of
``Segment`` s, then the whole page's text in one string (a 6.6-million-line tree costs gigabytes).
Here the lines are made as ``plaintree.walk`` reaches them, each exactly as Rich's ``Tree`` and
``Console`` make it, and written 64 KB at a time:

* the guides (``├── ``, ``│   ``, ``└── ``) carry no codes (Rich's ``tree.line`` style is empty and
  the tree takes bold and double underline off its guides);
* a label that fits its line is its spans, each styled span the escape codes of its style as the
  console renders it (``Style.render``: the console's colour system, colours taken off when the
  console is ``no_color``), an unstyled one its text alone, a line per ``\\n``;
* a label too wide for its line is laid out by Rich (``Console.render_lines`` on the room the
  guides leave, as the ``Tree`` does) and its segments rendered as the console renders them.

``styled_lines`` declines (None) where Rich would print something else: a console that is not
UTF-8 (ASCII guides), a legacy Windows console, Jupyter. tests/test_styledtree.py compares the
bytes with Rich's own on every frame of the bundled captures and hex fixtures, at several widths
and colour systems.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from rich.console import COLOR_SYSTEMS, Console
from rich.segment import Segment

from kwire_cli.render.plaintree import Label, Node, fits, walk


class _Ansi:
    """The console's rendering of styles and segments (what ``Console.print`` writes for them)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        name = console.color_system
        self.system = COLOR_SYSTEMS[name] if name is not None else None
        self.strip = bool(console.no_color and self.system is not None)  # Rich's Segment.remove_color
        self.legacy = console.legacy_windows
        self.not_terminal = not console.is_terminal
        # a style name -> the codes before and after a span of that style ("" and "" when none)
        self.codes: dict[str, tuple[str, str]] = {}

    def style_codes(self, name: str) -> tuple[str, str]:
        codes = self.codes.get(name)
        if codes is None:
            style = self.console.get_style(name)
            if self.strip:
                style = style.without_color
            marked = style.render("\0", color_system=self.system, legacy_windows=self.legacy)
            before, _, after = marked.partition("\0")
            codes = self.codes[name] = (before, after)
        return codes

    def segments(self, segments: Iterable[Segment]) -> str:
        out: list[str] = []
        for text, style, control in segments:
            if style:
                if self.strip:
                    style = style.without_color
                out.append(style.render(text, color_system=self.system, legacy_windows=self.legacy))
            elif not (self.not_terminal and control):
                out.append(text)
        return "".join(out)


def _label_lines(label: Label, ansi: _Ansi) -> list[str]:
    """The label's lines with their codes (a label that fits its line)."""
    lines: list[str] = []
    line: list[str] = []
    codes = ansi.style_codes
    for text, style in label.spans:
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                lines.append("".join(line))
                line = []
            if piece:
                if style:
                    before, after = codes(style)
                    line.append(before + piece + after)
                else:
                    line.append(piece)
    lines.append("".join(line))
    return lines


def _folded(label: Label, lead: str, inner: str, width: int, ansi: _Ansi) -> list[str]:
    """A label too wide for its line, laid out as Rich's ``Tree`` does (folded on the room the
    guides leave) and cropped to the page as ``Console.print`` crops a line."""
    console = ansi.console
    rendered = console.render_lines(label.to_rich(), console.options.update(width=width - len(inner), highlight=False,
                                                                          height=None), pad=False)
    out = []
    for i, segments in enumerate(rendered):
        line = [Segment(inner if i else lead), *segments]
        if Segment.get_line_length(line) > width:
            line = Segment.adjust_line_length(line, width, pad=False)
        out.append(ansi.segments(line))
    return out


def styled_lines(root: Node, console: Console) -> Iterator[str] | None:
    """The lines ``console.print`` prints for ``root`` as Rich's ``Tree``, made as the tree is
    walked; None where Rich would print otherwise (see the module's note)."""
    if (console.legacy_windows or console.is_jupyter or console.options.ascii_only
            or not console.encoding.lower().startswith("utf")):
        return None
    return _lines(root, _Ansi(console), console.width)


def _lines(root: Node, ansi: _Ansi, width: int) -> Iterator[str]:
    known = ansi.codes
    codes = ansi.style_codes
    for lead, inner, label in walk(root):
        spans = label.spans
        plain = "".join([text for text, _ in spans])
        if "\n" not in plain and fits(plain, width - len(lead)):  # the common label: one line that fits
            parts = [lead]
            for text, style in spans:
                if style:
                    before, after = known.get(style) or codes(style)
                    parts.append(before + text + after)
                else:
                    parts.append(text)
            yield "".join(parts)
            continue
        texts = plain.split("\n")
        if all(fits(text, width - len(inner if i else lead)) for i, text in enumerate(texts)):
            for i, line in enumerate(_label_lines(label, ansi)):
                yield (inner if i else lead) + line
        else:
            yield from _folded(label, lead, inner, width, ansi)
