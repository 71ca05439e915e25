"""Resynchronisation confirmed by the codec ("hunting"): where a direction that lost sync (a gap
whose frame size is unknown, a mid-stream start, a size out of bounds) starts again.

With a ``check`` (``kafka.FrameCheck``, e.g. ``check.CodecCheck()``, as kwire pcap and spark-decode
use) a frame start is accepted only when the codec confirms it: client->broker, a request
(``Hunter.hunt_request``); broker->client, a response to a request still open on the connection
(``Hunter.hunt_response``), and before it the responses to requests the capture never showed that
tile the bytes exactly (``tiling.Tiler``). A candidate whose frame is not complete yet is waited
for while it is at most ``resync_window`` bytes (larger ones need stronger evidence: a client id
already seen, the oldest open request).
"""
from __future__ import annotations

import struct
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

from .events import OVERSIZE_FRAME
from .framing import FrameDir, oversize_why
from .kafka import REQUEST_CANDIDATE, FrameCheck, plausible_at
from .outbox import Outbox

if TYPE_CHECKING:
    from .framing import Framer

_I32 = struct.Struct(">i").unpack_from
_H16 = struct.Struct(">h").unpack_from
_I32P = struct.Struct(">i").pack
_INF = float("inf")


def _first(t: tuple[Any, ...]) -> Any:
    return t[0]


def mark(d: FrameDir, off: int) -> tuple[Any, ...]:
    """(offset, packet, ts, file) of the packet that delivered ``d.buf[off]``."""
    marks = d.marks
    i = bisect_right(marks, (d.hoff + off, _INF)) - 1
    found: tuple[Any, ...] = marks[i if i >= 0 else 0]
    return found


def drop(d: FrameDir, k: int, skipped: bool = True) -> None:
    """Forget ``d.buf[:k]`` while hunting (``skipped``: those bytes are resync-skip)."""
    if k <= 0:
        return
    del d.buf[:k]
    if skipped:
        d.skip_acc += k
    d.hoff += k
    d.scan = max(0, d.scan - k)
    if d.wait:
        d.wait = [(e - k, i - k, x, m) for e, i, x, m in d.wait if i >= k]
    marks = d.marks
    i = bisect_right(marks, (d.hoff, _INF)) - 1
    if i > 0:
        del marks[:i]


def _cover(wait: list[Any], i: int, plausible: _Plausible) -> int | None:
    """The end of the furthest-reaching candidate still waiting that starts before ``i`` and whose
    frame would hold it: a frame found inside a frame not yet judged waits for that judgement.
    Waiting candidates whose first bytes already contradict the spec (``plausible(offset, extra)``
    is False) are dropped from ``wait`` here (only a candidate that holds up another is examined)."""
    cover = None
    k = 0
    while k < len(wait):
        e, w, x, m = wait[k]
        if w < i < e:
            # examined again once it has twice the bytes it had at the last look (m < 0: -bytes then)
            if m >= 0 or plausible.bytes_at(w) >= -2 * m:
                if not plausible(w, x):
                    del wait[k]
                    continue
                wait[k] = (e, w, x, -max(1, plausible.bytes_at(w)))
            if cover is None or e > cover:
                cover = e
        k += 1
    return cover


class _Plausible:
    """``(offset, extra) -> bool``: could the waiting candidate at ``offset`` still be a frame? Its
    first bytes are decoded (zero-padded to its size) by ``test``; candidates larger than
    ``window`` are not examined (padding them would cost what waiting for them does)."""

    __slots__ = ("buf", "n", "window", "test")

    def __init__(self, buf: bytearray, n: int, window: int, test: Any) -> None:
        self.buf, self.n, self.window, self.test = buf, n, window, test

    def bytes_at(self, i: int) -> int:
        return self.n - i

    def __call__(self, i: int, x: Any) -> bool:
        size = _I32(self.buf, i)[0]
        if size > self.window:
            return True
        return bool(self.test(i, size, x))


class Hunter:
    """Hunting for each direction that lost sync (see the module docstring); the state is in the
    directions' ``FrameDir`` (``marks``, ``hoff``, ``scan``, ``wait``)."""

    def __init__(self, box: Outbox, framer: Framer, *, check: FrameCheck, max_frame: int, resync_window: int,
                 known_clients: set[Any]) -> None:
        self.box = box
        self.framer = framer
        self.emit = framer.emit
        self.check = check
        self.max_frame = max_frame
        self.resync_window = resync_window
        self.known_clients = known_clients  # client ids (bytes) of requests seen (pairing fills it)
        self.tiler: Any = None  # a ``tiling.Tiler`` (set by the assembler)

    def begin(self, d: FrameDir, file: str, packet: int | None, ts: float | None) -> None:
        """Enter hunting with what ``d.buf`` holds (the bytes of a frame that lost sync)."""
        if not d.marks:
            d.hoff = 0
            if d.buf:
                d.marks.append((0, d.start_packet if d.start_packet is not None else packet, ts, file))
        d.scan = 0
        d.wait = []
        d.scan_ver = -1
        d.need = 0
        if d.skip_from is None:
            d.skip_from = d.marks[0][1] if d.marks else packet

    def hunt(self, conn: Any, d: FrameDir, file: str, packet: int | None, ts: float | None,
             final: bool = False) -> None:
        """Resynchronise on confirmed frames only: find the first frame start the check confirms in
        ``d.buf``, report the bytes before it, emit it and the frames after it; until then wait.
        ``final``: the stream ends, candidates still waiting for bytes will never have them."""
        while True:
            if d.is_request:
                at, keep = self.hunt_request(d, final)
                tiles: list[Any] = []
            else:
                at, keep, tiles = self.hunt_response(conn, d, final)
            if at is None:
                drop(d, keep)
                if d.skip_from is None:
                    d.skip_from = packet
                return
            first = tiles[0][0] if tiles else at
            if d.is_request or not self.tiler.stash(conn, d, first, _I32(d.buf, first + 4)[0]):
                drop(d, first)
            self.framer.end_resync(conn, d, file, mark(d, 0)[1] if d.buf else packet, ts)
            d.resync = False
            d.verify = False
            for a, e in tiles:
                self.emit_marked(conn, d, a - first, e - first)
            drop(d, at - first, skipped=False)
            if not self.frames_marked(conn, d, packet):
                return

    @staticmethod
    def rejudge(wait: list[Any], n: int, judge: Any, plausible: _Plausible, final: bool) -> tuple[Any, ...]:
        """Judge again the candidates waiting for bytes (``(end, offset, extra, seen)``, by offset):
        those whose frame is all here, all of them at the end of the stream.
        Returns (the first confirmed ``(offset, extra)`` no earlier waiting candidate's frame holds,
        or None; the candidates still waiting)."""
        still: list[Any] = []
        for ent in wait:
            e, i, x, seen = ent
            if e <= n or final:
                r, e2 = judge(i, x)
                seen = n - i
                if r < 0 and final:
                    r = 0
            else:
                still.append(ent)
                continue
            if r == 1:
                cover = _cover(still, i, plausible)
                if cover is None:
                    return (i, x), still
                still.append((cover, i, x, seen))
            elif r < 0:
                still.append((e2, i, x, seen))
        return None, still

    def hunt_request(self, d: FrameDir, final: bool = False) -> tuple[Any, ...]:
        """(offset of the first confirmed request, 0) or (None, bytes that can never start one).

        Candidates whose frame has not fully arrived wait (``d.wait``); a later candidate that the
        check confirms wins over them unless one of them would hold it."""
        buf = d.buf
        n = len(buf)

        def judge(i: int, _x: Any) -> tuple[Any, ...]:
            return self.judge_request(buf, i, n)

        check = self.check
        plausible = _Plausible(buf, n, self.resync_window,
                               lambda i, size, _x: check.request_prefix(bytes(buf[i + 4:n]), size))
        if d.wait:
            won, d.wait = self.rejudge(d.wait, n, judge, plausible, final)
            if won is not None:
                d.wait = []
                return won[0], 0
        wait = d.wait
        i = d.scan
        search = REQUEST_CANDIDATE.search
        while True:
            m = search(buf, i)
            if m is None:
                break
            i = m.start()
            r, e = self.judge_request(buf, i, n)
            if r < 0 and final:
                r = 0
            if r == 1:
                cover = _cover(wait, i, plausible)
                if cover is None:
                    d.wait = []
                    return i, 0
                r, e = -1, cover
            if r < 0 and len(wait) < 64:
                wait.append((e, i, None, n - i))
            i += 1
        d.scan = max(i, n - 13)
        keep = d.scan
        if wait:
            keep = min(keep, wait[0][1])
        return None, keep

    def emit_marked(self, conn: Any, d: FrameDir, a: int, e: int) -> None:
        """Emit the frame at ``d.buf[a:e]`` (size prefix included), its packets from the marks."""
        sp = mark(d, a)[1]
        _o, ep, ets, efile = mark(d, e - 1)
        self.emit(conn, d, bytes(d.buf[a + 4:e]), efile, ep, ets, sp)

    def frames_marked(self, conn: Any, d: FrameDir, packet: int | None) -> bool:
        """In sync at ``d.buf[0]`` after hunting: emit the whole frames buffered (packets from the
        marks) and leave hunting. True: a size went out of bounds and hunting goes on."""
        buf = d.buf
        maxf = self.max_frame
        while len(buf) >= 4:
            size = _I32(buf, 0)[0]
            if size <= 0 or size > maxf:
                _o, p, t, f = mark(d, 0)
                self.box.damage(f, p, conn, OVERSIZE_FRAME, 0,
                                f"packet {p}: {d.src}->{d.dst} frame size {size} {oversize_why(size, maxf)}; "
                                "resynchronising", t)
                d.resync = True
                d.skip_from = p
                d.scan = 0
                d.wait = []
                drop(d, 1)
                return True
            total = 4 + size
            if len(buf) < total:
                d.need = total
                break
            self.emit_marked(conn, d, 0, total)
            drop(d, total, skipped=False)
            if d.divert:
                _o, p, t, f = mark(d, 0) if buf else (0, packet, None, "")
                rest = bytes(buf)
                buf.clear()
                d.forget_hunt()
                self.framer.hand_over(conn, d, rest, f, p, t)
                return False
        d.start_packet = mark(d, 0)[1] if buf else packet
        d.forget_hunt()
        return False

    def judge_request(self, buf: bytearray, i: int, n: int) -> tuple[int, int]:
        """(1, _): a confirmed request starts at ``buf[i]``; (0, _): none does; (-1, end): judge
        again when ``end`` bytes are here (its header or its frame is not all here yet)."""
        check = self.check
        p = plausible_at(buf, i, self.max_frame, check.api_ok)
        if p == 0:
            return 0, 0
        if p == -1:  # the header (size .. client id) is not all here
            return -1, i + 14 + (max(0, _H16(buf, i + 12)[0]) if n - i >= 14 else 0)
        size = _I32(buf, i)[0]
        e = i + 4 + size
        if e <= n:
            r = check.request(bytes(buf[i + 4:e]))
            if r != 1:
                return (1 if r else 0), 0
            # a complete request and bytes the spec does not explain: the stream must go on with
            # another plausible request right there (or end there, the client waiting for an answer)
            if e == n:
                return 1, 0
            q = plausible_at(buf, e, self.max_frame, check.api_ok)
            return (1, 0) if q == 1 else (0, 0) if q == 0 else (-1, e + 14)
        if size <= self.resync_window:
            return -1, e
        # larger: worth waiting for only with a client id already seen in the capture
        cl = _H16(buf, i + 12)[0]
        return (-1, e) if cl > 0 and bytes(buf[i + 14:i + 14 + cl]) in self.known_clients else (0, 0)

    def hunt_response(self, conn: Any, d: FrameDir, final: bool = False) -> tuple[Any, ...]:
        """(anchor, 0, tiles): the first response to a request still open on the connection,
        confirmed, and the frames (offset, end) that tile the bytes before it exactly; or
        (None, bytes to forget, ()) while none is confirmed (up to ``resync_window`` bytes are kept).
        Candidates whose frame has not fully arrived wait; a later confirmed one wins over them
        unless one of them would hold it."""
        buf = d.buf
        n = len(buf)
        window = self.resync_window
        keep = n - window if n > window else 0
        if not conn.open and not conn.noreply:
            d.wait = []
            return None, keep, ()
        if d.scan_ver != conn.opened:  # other requests are open now: look at everything again
            d.scan = 0
            d.wait = []
            d.scan_ver = conn.opened

        def judge(i: int, cr: tuple[Any, ...]) -> tuple[Any, ...]:
            r = self.judge_response(conn, d, i, n, cr[0], cr[1])
            return r, i + 4 + _I32(buf, i)[0]

        check = self.check
        plausible = _Plausible(buf, n, self.resync_window,
                               lambda i, size, cr: check.response_prefix(bytes(buf[i + 4:n]), size,
                                                                         cr[1][0], cr[1][1]))
        tile = self.tiler.tile
        if d.wait:
            won, d.wait = self.rejudge(d.wait, n, judge, plausible, final)
            if won is not None:
                d.wait = []
                return won[0], 0, tile(conn, buf, won[0], won[1][0])
        wait = d.wait
        start = d.scan
        cands = []
        find = buf.find
        for table in (conn.open, conn.noreply):
            for corr, req in table.items():
                pat = _I32P(corr)
                j = find(pat, start + 4)
                hits = 0
                while j != -1 and hits < 256:
                    cands.append((j - 4, corr, req))
                    hits += 1
                    j = find(pat, j + 1)
        cands.sort(key=_first)
        for i, corr, req in cands:
            r = self.judge_response(conn, d, i, n, corr, req)
            if r < 0 and final:
                r = 0
            if r == 1:
                cover = _cover(wait, i, plausible)
                if cover is None:
                    d.wait = []
                    return i, 0, tile(conn, buf, i, corr)
                if len(wait) < 64:
                    wait.append((cover, i, (corr, req), n - i))
            elif r < 0 and len(wait) < 64:
                wait.append((i + 4 + _I32(buf, i)[0], i, (corr, req), n - i))
        d.scan = max(0, n - 7)
        if wait:
            keep = min(keep, wait[0][1])
        return None, keep, ()

    def judge_response(self, conn: Any, d: FrameDir, i: int, n: int, corr: int, req: tuple[Any, ...]) -> int:
        """1: the answer to ``req`` starts at ``d.buf[i]``; 0: it does not; -2: wait for its bytes."""
        check = self.check
        buf = d.buf
        ak, av = req[0], req[1]
        size = _I32(buf, i)[0]
        if size < 4 + check.response_header_version(ak, av) or size > self.max_frame:
            return 0
        if mark(d, i)[2] < req[2]:
            return 0  # its first byte was captured before the request was complete: not its answer
        e = i + 4 + size
        if e <= n:
            r = check.response(bytes(buf[i + 4:e]), ak, av)
            if r != 1:
                return 1 if r else 0
            # complete, with bytes the spec does not explain: another sane size must follow
            if e == n:
                return 1
            if n - e < 4:
                return -2
            return 1 if 4 <= _I32(buf, e)[0] <= self.max_frame else 0
        if size <= self.resync_window:
            return -2
        # larger: worth waiting for only as the answer to the oldest request (brokers answer in order)
        return -2 if conn.open and corr == next(iter(conn.open)) else 0
