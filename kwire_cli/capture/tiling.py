"""Responses to requests the capture never showed, found by tiling: frames that land exactly on
each other and on a confirmed response start (or on the end of the stream), each decoding as an
answer to one of the APIs the connection (or the capture) uses. Bytes before a confirmed start
that do not tile yet are set aside (``Tiler.stash``) and tiled again at the end of the capture,
when every API seen is known (``Tiler.resolve_pending``)."""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .framing import FrameDir
from .hunt import Hunter, drop, mark
from .kafka import FrameCheck
from .outbox import Outbox

_I32 = struct.Struct(">i").unpack_from
_I32P = struct.Struct(">i").pack
API_VERSIONS = 18


class Tiler:
    """Tiling for the connections of one assembler. ``other_apis(conn)``: the (api key, version)
    pairs of the requests of every other connection (open or closed)."""

    def __init__(self, box: Outbox, hunter: Hunter, *, check: FrameCheck,
                 other_apis: Callable[[Any], set[Any]], max_pending: int = 4 << 20) -> None:
        self.box = box
        self.hunter = hunter
        self.check = check
        self.other_apis = other_apis
        self.max_pending = max_pending   # bytes set aside to tile at the end (``stash``), at most
        self.pending: list[Any] = []
        self.pending_bytes = 0

    def tile(self, conn: Any, buf: bytearray, end: int, bound: int | None) -> list[Any]:
        """Responses to requests the capture never showed, before a confirmed start ``end``: frames
        (offset, end) that land exactly on each other and on ``end``, outermost first, each with a
        correlation id below the next one's (``bound``) and decoding as one of the APIs the
        connection uses."""
        out: list[Any] = []
        apis = None
        while end >= 8:
            if apis is None:
                apis = self.tile_apis(conn)
            s = self.landing(apis, buf, end, bound)
            if s is None:
                break
            out.append((s, end))
            bound = _I32(buf, s + 4)[0]
            end = s
        out.reverse()
        return out

    def tile_apis(self, conn: Any) -> list[Any]:
        """The (api key, version) pairs a response of unknown request may answer, likeliest first:
        the connection's own, those of the other connections, then ApiVersions (every connection's
        first request, so often the one a capture missed)."""
        seen = set(conn.apis)
        out = sorted(seen)
        others = self.other_apis(conn)
        out += sorted(others - seen)
        seen |= others
        check = self.check
        out += [(API_VERSIONS, v) for v in range(5) if (API_VERSIONS, v) not in seen and check.api_ok(API_VERSIONS, v)]
        return out

    def landing(self, apis: list[Any], buf: bytearray, end: int, bound: int | None) -> int | None:
        """The smallest offset s whose size prefix ends its frame exactly at ``end`` and whose frame
        decodes as an answer to one of ``apis`` (correlation id in 0..``bound``-1)."""
        check = self.check
        find = buf.find
        # the size at s is end - s - 4: its top three bytes are constant over blocks of 256 offsets
        for blk in range((end - 4) >> 8, -1, -1):
            vlo = blk << 8
            slo = max(0, end - 4 - vlo - 255)
            shi = end - 4 - vlo  # inclusive; a size is at least 4
            if shi > end - 8:
                shi = end - 8
            if slo > shi:
                continue
            pat = _I32P(vlo)[:3]
            j = find(pat, slo, shi + 3)
            while j != -1:
                if _I32(buf, j)[0] == end - j - 4:
                    c = _I32(buf, j + 4)[0]
                    if c >= 0 and (bound is None or c < bound):
                        data = bytes(buf[j + 4:end])
                        for ak, av in apis:
                            if check.response(data, ak, av) == 2:
                                return j
                        if bound is not None and c == bound - 1:
                            # the id right before the next one: any API of the specs may answer
                            for ak, av in check.layouts():
                                if (ak, av) not in apis and check.rare_response(data, ak, av) == 2:
                                    return j
                j = find(pat, j + 1, shi + 3)
        return None

    def tile_at_end(self, conn: Any, d: FrameDir, file: str) -> None:
        """The stream ends while hunting for a response: frames that land exactly on its end (and
        on each other) and decode as answers to the connection's APIs are responses all the same;
        the bytes before them wait for the end of the capture (``stash``)."""
        bound = min(conn.open) if conn.open else None
        tiles = self.tile(conn, d.buf, len(d.buf), bound)
        first = tiles[0][0] if tiles else len(d.buf)
        if not self.stash(conn, d, first, _I32(d.buf, first + 4)[0] if tiles else bound):
            drop(d, first)
        if not tiles:
            return
        self.hunter.framer.end_resync(conn, d, file, mark(d, 0)[1], conn.last_ts)
        for a, e in tiles:
            self.hunter.emit_marked(conn, d, a - first, e - first)
        drop(d, len(d.buf), skipped=False)

    def stash(self, conn: Any, d: FrameDir, nbytes: int, bound: int | None) -> bool:
        """Set ``d.buf[:nbytes]`` aside: responses the bytes before a confirmed start may hold, to
        requests whose API only later traffic (or another connection) shows. They are looked at
        again at the end of the capture (``resolve_pending``), when every API seen is known, and
        reported then (frames, or skipped bytes). False when there is nothing worth it or no room."""
        if nbytes < 8 or self.pending_bytes + nbytes > self.max_pending:
            return False
        hi = d.hoff + nbytes
        marks = [m for m in d.marks if m[0] < hi]
        self.pending.append((conn, d.src, d.dst, bytes(d.buf[:nbytes]), marks, d.hoff, bound, d.skip_from))
        self.pending_bytes += nbytes
        self.box.stats.buffered_bytes += nbytes
        drop(d, nbytes, skipped=False)
        return True

    def resolve_pending(self) -> None:
        """End of the capture: tile the bytes set aside with every API the capture showed; what
        does not tile is reported as skipped."""
        pending, self.pending = self.pending, []
        for conn, src, dst, region, marks, hoff, bound, skip_from in pending:
            t = FrameDir()
            t.src, t.dst = src, dst
            t.buf = bytearray(region)
            t.marks = marks
            t.hoff = hoff
            t.skip_from = skip_from if skip_from is not None else marks[0][1]
            self.box.stats.buffered_bytes -= len(region)
            self.pending_bytes -= len(region)
            tiles = self.tile(conn, t.buf, len(t.buf), bound)
            first = tiles[0][0] if tiles else len(t.buf)
            drop(t, first)
            _o, p, ts, file = mark(t, 0) if t.buf else marks[-1]
            self.hunter.framer.end_resync(conn, t, file, p, ts)
            for a, e in tiles:
                self.hunter.emit_marked(conn, t, a - first, e - first)
