"""The text of a dump as recognisers read it (numbered lines, tidied), the blocks of bytes they read
from it, and what a recogniser needs to tell a whole captured packet from a Kafka frame."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kwire_cli.capture.linklayer import Segment


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
