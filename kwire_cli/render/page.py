"""The page kwire prints on: its width off a terminal and the colour mode (``kwire --color``)."""
from __future__ import annotations

import os


def page_width() -> int:
    """The page width kwire's Rich console uses off a terminal (render/console.py): COLUMNS, else 200."""
    try:
        return int(os.environ.get("COLUMNS", "")) or 200
    except ValueError:
        return 200


#: ``kwire --color``: "auto" (styles on a terminal, unless NO_COLOR), "always", "never"
COLOR_MODES = ("auto", "always", "never")
color_mode = ["auto"]


def set_color(mode: str) -> None:
    if mode not in COLOR_MODES:
        raise ValueError(mode)
    color_mode[0] = mode
