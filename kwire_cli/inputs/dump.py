"""Bytes from text in any dump form kwire knows: the one reader of pasted bytes.

``kwire decode``, ``kwire diff`` and ``kwire negotiate`` read hex and byte dumps through here.
The text is tidied first (``normalize``: a UTF-8 byte-order mark, non-breaking and other Unicode
spaces from web pages, ``> `` reply quoting), then goes through a sequence of recognisers
(``kwire_cli.inputs.forms.RECOGNISERS``), each small and single-purpose: the first that claims
the text reads it into ``Block``s of bytes with their provenance (lines, label, form, the link
type of a dumped packet, the direction it went); a recogniser that claims the text but finds it
broken raises an ``InputError`` naming the line (and column). When none claims it, the text is
not a dump: ``NotADump`` names the first character that is not hex.

* ``read_blocks(text)``: every block of bytes in the text.
* ``message_bytes(blocks)``: the one Kafka message they hold (one block, cut to its TCP payload
  when it is a whole captured packet; or the "Reassembled TCP" block of a tshark dump).
  ``kwire_cli.inputs.frames`` reads several messages (Kafka frames) from the blocks instead.
* ``parse_hex(text)``: both at once; ``bytes_from_source(raw, binary=None)``: raw bytes or text.
* ``find_packet(data, linktypes)``: the link type and TCP segment of bytes that are a whole
  captured packet (through ``kwire_cli.capture.linklayer``, imported only then).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from kwire_cli.errors import InputError

if TYPE_CHECKING:
    from kwire_cli.capture.linklayer import Segment


class NotADump(InputError):
    """Text that no recogniser claims (the message names the first character that is not hex)."""


@dataclass(frozen=True)
class Block:
    """Bytes read from a dump, and where they came from."""

    data: bytes
    first_line: int                 # 1-based line numbers in the text
    last_line: int
    form: str                       # the recogniser that read it: "hex", "offset-dump", ...
    label: str | None = None        # the dump's own name for it ("Reassembled TCP (74 bytes)")
    #: the bytes may be a whole captured packet of this link type (pcap LINKTYPE_ value), to be
    #: cut down to its TCP payload; None: they are the message's bytes already
    linktype: int | None = None
    #: which way they went, when the dump says: ``"10.0.0.1:52206 > 10.0.0.2:9092"`` (a dumped
    #: packet's addresses, a Follow TCP Stream dump's nodes); blocks with the same direction are
    #: one TCP byte stream
    direction: str | None = None

    @property
    def lines(self) -> str:
        """Where the block is in the text: ``line 3`` or ``lines 3-7``."""
        if self.first_line == self.last_line:
            return f"line {self.first_line}"
        return f"lines {self.first_line}-{self.last_line}"


class Line(NamedTuple):
    number: int   # 1-based
    text: str


class Text:
    """A dump's text split into numbered lines (recognisers read ``lines``, the non-blank ones);
    the text is ``normalize``d."""

    def __init__(self, text: str):
        text = normalize(text)
        self.text = text
        self.all_lines = [Line(i, ln) for i, ln in enumerate(text.splitlines(), start=1)]
        self.lines = [ln for ln in self.all_lines if ln.text.strip()]


#: a recogniser: the blocks of a text in its form, None when the text is not in its form; it
#: raises ``InputError`` (naming line and column) when the text is in its form but broken
Recogniser = Callable[[Text], "list[Block] | None"]


#: Unicode spaces that web pages and word processors put where a space was meant (no-break,
#: narrow no-break, figure, ideographic, ...): read as a space
_WEB_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_BOM = "\ufeff"
_QUOTED = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)


def normalize(text: str) -> str:
    """``text`` as a dump reader wants it: without byte-order marks, with the Unicode spaces of
    web pages as plain spaces, and without ``> `` reply quoting when every non-blank line is
    quoted (e-mail, GitHub replies; nested quoting too). Characters are replaced one for one, so
    columns in errors still point at what the user sees."""
    if _BOM in text:
        text = text.replace(_BOM, "")
    if not text.isascii():
        text = _WEB_SPACES.sub(" ", text)
    while ">" in text and _all_quoted(text):
        unquoted = _QUOTED.sub("", text)
        if unquoted == text:  # (cannot happen with the lines split alike; never loop for ever)
            break
        text = unquoted
    return text


def _all_quoted(text: str) -> bool:
    # lines as _QUOTED's ^ sees them: split at newlines only (str.splitlines also splits at form
    # feeds, \x1c-\x1e, U+0085, U+2028...: a '>' after one of those looked quoted to this test but
    # was never removed, and the loop above went round for ever)
    lines = [ln.lstrip(" \t") for ln in text.split("\n")]
    return any(lines) and all(ln.startswith(">") for ln in lines if ln)


_PLAIN_HEX = re.compile(r"[0-9A-Fa-f]+")


def read_blocks(text: str) -> list[Block]:
    """Every block of bytes in ``text``, read by the first recogniser that claims it."""
    blocks, _ = recognise(text)
    return blocks


def recognise(text: str) -> tuple[list[Block], str]:
    """(the blocks of bytes in ``text``, the module name of the recogniser that read them)."""
    one = text.strip()
    if _PLAIN_HEX.fullmatch(one) and not len(one) % 2:  # the fast path: one run of hex digits
        first = len(text) - len(text.lstrip())
        line = text.count("\n", 0, first) + 1
        return [Block(bytes.fromhex(one), line, line, "hex")], "plainhex"
    from kwire_cli.inputs.forms import RECOGNISERS, not_hex

    t = Text(text)
    if not t.lines:
        raise InputError("empty input: no hex digits")
    for recogniser in RECOGNISERS:
        blocks = recogniser(t)
        if blocks is not None:
            return blocks, recogniser.__module__.rsplit(".", 1)[-1]
    raise NotADump(not_hex(t))


def message_bytes(blocks: list[Block]) -> bytes:
    """The one message that ``blocks`` hold.

    One block: its bytes, cut down to the TCP payload when the block may be a whole captured
    packet (a tshark ``-x`` frame: Ethernet, IP and TCP headers) and is not already a size-
    prefixed Kafka frame. Several blocks: the "Reassembled TCP" one of a tshark dump.
    """
    if len(blocks) == 1:
        b = blocks[0]
        return b.data if b.linktype is None else tcp_payload(b.data, b.linktype)
    reassembled = [b.data for b in blocks if b.label and "reassembled" in b.label.lower()]
    if len(reassembled) == 1:
        return reassembled[0]
    raise InputError(f"the dump holds {len(blocks)} separate blocks of bytes; give one message at a time")


def tcp_payload(data: bytes, linktype: int) -> bytes:
    """The TCP payload of ``data`` when it is a whole packet of ``linktype`` carrying TCP whose IP
    length fits the bytes; else ``data`` as it is (a Kafka frame whose size prefix fits is kept)."""
    from kwire_cli.codec.framing import has_size_prefix

    if has_size_prefix(data):
        return data
    from kwire_cli.capture.linklayer import tcp_segment

    seg = tcp_segment(linktype, data)
    if isinstance(seg, str) or not seg.payload or seg.wire_len > len(seg.payload):
        return data
    return seg.payload


#: pcap LINKTYPE_ values a dumped packet is tried as, in this order: Ethernet, Linux cooked v1
#: and v2, BSD loopback (host- and big-endian family), raw IP
PACKET_LINKTYPES = (1, 113, 276, 0, 108, 101)


def find_packet(data: bytes, linktypes: Sequence[int] = PACKET_LINKTYPES) -> tuple[int, Segment] | None:
    """(link type, TCP segment) of ``data`` read as a whole captured packet: the first of
    ``linktypes`` whose link, IP and TCP headers read and whose IP length matches the bytes
    (a packet cut short by the capture is taken when no link type reads it whole); None when
    the bytes are no TCP packet of any of them (or are a Kafka frame whose size prefix fits)."""
    from kwire_cli.codec.framing import has_size_prefix

    if len(data) < 20 or has_size_prefix(data):
        return None
    from kwire_cli.capture.linklayer import tcp_segment

    cut: tuple[int, Segment] | None = None
    for lt in linktypes:
        seg = tcp_segment(lt, data)
        if isinstance(seg, str):
            continue
        if seg.wire_len == len(seg.payload):
            return lt, seg
        if cut is None:
            cut = (lt, seg)
    return cut


def segment_direction(seg: Segment) -> str:
    """``"src:port > dst:port"`` of a TCP segment (IPv6 addresses in brackets)."""
    def end(ip: str, port: int) -> str:
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return f"{end(seg.src_ip, seg.src_port)} > {end(seg.dst_ip, seg.dst_port)}"


def parse_hex(text: str) -> bytes:
    """The message in hex text of any dump form (``read_blocks`` then ``message_bytes``)."""
    return message_bytes(read_blocks(text))


def bytes_from_source(raw: bytes, *, binary: bool | None = None) -> bytes:
    """Raw bytes when ``binary`` (or, when None, when ``raw`` is not text); else the message in
    the text (``parse_hex``)."""
    if binary is None:
        binary = not is_text(raw)
    if binary:
        if not raw:
            raise InputError("empty input")
        return raw
    return parse_hex(raw.decode("utf-8", errors="replace"))


_BINARY = re.compile(r"[^\t\n\v\f\r\x20-\x7e]")
#: not printable, but text all the same: a byte-order mark and the spaces of web pages
_TEXT_EXTRA = frozenset("\t\r\n\f\v\ufeff\u00a0\u1680\u202f\u205f\u3000"
                        + "".join(chr(c) for c in range(0x2000, 0x200B)))


def is_text(raw: bytes) -> bool:
    """True when ``raw`` is UTF-8 text of printable characters and white space (a byte-order
    mark and Unicode spaces such as the no-break space count as white space)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not _BINARY.search(text):
        return True  # plain ASCII: the common case, without a per-character loop
    return all(c.isprintable() or c in _TEXT_EXTRA for c in text)
