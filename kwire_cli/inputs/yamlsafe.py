"""YAML input without anchors and aliases.

Messages and broker answers are trees; YAML aliases would only let a small file expand into a
huge one ("billion laughs"), so they are refused with the line they are on.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent


class NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise ComposerError(None, None, "YAML aliases (*name) are not accepted", event.start_mark)
        return super().compose_node(parent, index)


def safe_load_all(text: str) -> Iterator[Any]:
    return yaml.load_all(text, Loader=NoAliasLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=NoAliasLoader)
