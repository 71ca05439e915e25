"""The Rich console kwire prints with: markup and auto-highlighting off (wire strings can hold
brackets), colour only on a terminal (``kwire --color always|never`` says otherwise; NO_COLOR is
honoured), and a wide page when writing to a pipe or a file so that long values are not folded."""
from __future__ import annotations

import os
import sys

from rich.console import Console

from kwire_cli.render.page import color_mode, page_width


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader went away (`| head`): stop writing and let the command end as a quiet success
        (Rich's own default exits 1)."""
        self.quiet = True
        raise BrokenPipeError


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    width = None if is_tty else page_width()
    mode = color_mode[0]
    if mode == "always":  # styles and colours whatever the output is (less -R, a file to cat later)
        return _Console(file=stream, markup=False, highlight=False, emoji=False, width=width,
                        force_terminal=True, soft_wrap=False)
    if mode == "never":  # no escape sequence at all, not even bold, also on a terminal
        return _Console(file=stream, markup=False, highlight=False, emoji=False, width=width,
                        color_system=None, no_color=True, soft_wrap=False)
    return _Console(file=stream, markup=False, highlight=False, emoji=False, width=width,
                    no_color=not is_tty or bool(os.environ.get("NO_COLOR")), soft_wrap=False)


def print_renderable(renderable, stderr: bool = False) -> None:
    make_console(stderr).print(renderable)
