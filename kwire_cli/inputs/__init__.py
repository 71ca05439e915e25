"""Readers of what people give kwire: one reader per input form, used by every command.

* ``source``: an input argument (inline text, ``@FILE``, ``-``, a path) -> its bytes; a missing
  file, a directory or a read error is one ``SourceError`` line.
* ``dump``: text -> ``Block``s of bytes with their provenance, through the recognisers of
  ``forms`` (``offsetdump``: xxd, hexdump -C, tshark -x / Wireshark hex dumps; ``plainhex``:
  hex with separators, ``0x`` / ``\\x`` prefixes and ``#`` comments); ``message_bytes`` picks the
  one message (a dumped Ethernet frame is cut to its TCP payload by ``kwire_cli.capture``'s link
  layer walk).
* ``messages``: YAML/JSON message documents (``kwire encode``, ``kwire diff``).
* ``yamlsafe``: YAML without aliases.

Only ``source`` and ``dump`` are imported here: reading hex stays cheap (no YAML, no Rich, no
capture reader).
"""
from __future__ import annotations

from kwire_cli.errors import InputError
from kwire_cli.inputs.dump import Block, NotADump, bytes_from_source, is_text, message_bytes, parse_hex, read_blocks
from kwire_cli.inputs.source import Source, SourceError, locate_source, read_file, read_source, read_stdin

__all__ = ["Block", "InputError", "NotADump", "Source", "SourceError", "bytes_from_source", "is_text",
           "locate_source", "message_bytes", "parse_hex", "read_blocks", "read_file", "read_source", "read_stdin"]
