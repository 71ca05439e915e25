"""YAML input without anchors and aliases.

Messages and broker answers are trees; YAML aliases would only let a small file expand into a
huge one ("billion laughs"), so they are refused with the line they are on. So is an integer of
more digits than Python converts (``sys.get_int_max_str_digits()``, 4300; far past any Kafka
field), which would otherwise escape as a bare ValueError.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent


class NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            event = self.peek_event()
            raise ComposerError(None, None, "YAML aliases (*name) are not accepted", event.start_mark)
        return super().compose_node(parent, index)

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # Python's int max str digits: the only ValueError of a resolved int
            raise ConstructorError(None, None, f"an integer of {len(node.value)} characters is too long",
                                   node.start_mark) from None


NoAliasLoader.add_constructor("tag:yaml.org,2002:int", NoAliasLoader.construct_yaml_int)


def safe_load_all(text: str) -> Iterator[Any]:
    return yaml.load_all(text, Loader=NoAliasLoader)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=NoAliasLoader)
