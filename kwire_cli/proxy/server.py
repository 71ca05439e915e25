"""The proxy itself (asyncio protocols): listeners, one upstream connection per client connection,
forwarding, and the frames handed to the decoding side (``decoding``).

Clients bootstrap against the listen address, which forwards to the first ``--broker`` that
answers. Every client connection gets exactly one upstream connection (no pooling: SASL state,
ordering and correlation ids stay the client's own). Answers that tell clients where brokers are
are rewritten (``rewrite``): each broker gets a local port, bound when it first appears (the
listen port + 1, + 2, ... in order of appearance, or ``--node-ports FIRST-LAST``), so every later
connection also goes through the proxy. Whatever arrives is written on at once, byte for byte,
in the same call (``FrameRelay`` only finds the frame boundaries), except the answers that may be
rewritten (ApiVersions and the address APIs), which are held until whole. Flow control is the
transports': a side whose write buffer is full pauses reading on the other. Every frame is also
handed, whole, to the decoding side (another process, bounded: past its backlog frames wait in a
spool file on disk, up to ``decode_spool`` bytes, and past that are counted as not shown, never
waited for), which makes the rows of `kwire pcap` (``Conversation.row``) and writes them; so a
slow decode never stalls a client. When the proxy stops, the spool is decoded before the summary
(``give_up``: not; its frames are counted as not shown). A Produce request with acks=0 expects no
answer and none is waited for.
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from kwire_cli.capture.events import endpoint
from kwire_cli.capture.kafka import produce_acks
from kwire_cli.errors import KwireError
from kwire_cli.memory import keep_malloc
from kwire_cli.proxy.decoding import DecodeChannel, FrameSink
from kwire_cli.proxy.pcapout import PcapConnection, PcapOut
from kwire_cli.proxy.relay import FrameRelay, RelayError
from kwire_cli.proxy.rewrite import AddressBook, CannotRewrite, may_rewrite, rewrite_response
from kwire_cli.proxy.spool import SPOOL

_REQ_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_CORR = struct.Struct(">i")
WRITE_HIGH = 4 << 20   # a side's write buffer above this pauses reading on the other side
BACKLOG = 64 << 20     # bytes of frames waiting for the decoding side; past it they are counted, not shown
CLIENT, BROKER = 0, 1
MAX_OPEN = 1000        # requests without an answer on a connection: past it, its requests wait (not read)
MAX_NODE_PORTS = 1000  # local ports bound for brokers, without --node-ports (with it: its range)
CLOSE = object()       # _response's answer when the connection must end instead (an answer that cannot be rewritten)
PCAP_GATHER = 0.005    # seconds the pcap thread's records gather before it is woken (unless 1 MiB waits)
LAG_CHECK = 1.0        # seconds between looks at how far behind the decoding side is
LAG_NOTE = 5.0         # seconds between notes that it is behind (at once when frames are first not shown)
BEHIND = 1.0           # seconds: decoding this far behind the forwarding is said
HOLD_FIRST = 0.05      # seconds a client is held before its close when no broker answered: doubling while
HOLD_MAX = 1.0         # the brokers stay down, up to this (a refused connect makes a client back off; a close
                       # after connecting does not, and it would reconnect hundreds of times a second)


@dataclass
class ProxyConfig:
    brokers: list[tuple[str, int]]
    listen: tuple[str, int]
    advertise: str | None = None            # the host written into rewritten answers (default: listen host)
    node_ports: tuple[int, int] | None = None
    listen_ssl: ssl.SSLContext | None = None
    broker_ssl: ssl.SSLContext | None = None
    max_frame: int = 100 * 1024 * 1024
    pcap: Any = None                        # a binary file to write the conversations to
    decode_backlog: int = BACKLOG
    decode_spool: int = SPOOL               # bytes of frames on disk past the backlog (0: none)
    decode_process: bool | None = None      # None: a process on Linux, a thread elsewhere
    decode_priority: str = "yield"          # the decoding process: "yield", "low" or "normal"


@dataclass
class Stats:
    connections: int = 0
    open_connections: int = 0
    upstream_failures: int = 0
    frames: int = 0
    not_shown: int = 0                      # frames the decoding side could not keep up with
    spooled: int = 0                        # frames that waited in the spool file (decoded late)
    spool_most: int = 0                     # the most bytes in the spool file at once
    rewritten: int = 0
    errors: list[str] = field(default_factory=list)


def _more_files() -> None:
    """Two descriptors per client connection: the soft limit on open files raised to the hard one."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):  # not on this system, or not allowed
        pass


def _reuse_freed_memory() -> None:
    """glibc's malloc in the forwarding process keeps what it frees for reuse: each chunk read from
    a socket is a fresh block of up to 256 KiB, freed once forwarded and written out, and glibc
    would give the heap's top back to the system at every such free (its threshold follows the
    largest block freed, 512 KiB here) and take it again for the next chunk: a page fault per page,
    27,000-38,000 a run of 200 MB, about half the event loop's system time. Kept: blocks under
    4 MiB from the heap, its top given back past 32 MiB free (the spark workers' 256 MiB took the
    forwarding process's peak to 99 MiB). Not glibc, or kwire's memory extension not built:
    nothing changes."""
    keep_malloc(mmap=4 << 20, trim=32 << 20, top_pad=None)


class Proxy:
    def __init__(self, config: ProxyConfig, sink: FrameSink, on_note: Any) -> None:
        self.config = config
        self.on_note = on_note
        self.stats = Stats()
        self.book = AddressBook(self._bind_node)
        self.servers: list[asyncio.base_events.Server] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._next_port = config.node_ports[0] if config.node_ports else config.listen[1] + 1
        self._seq = 0
        self.holds: dict[tuple[tuple[str, int], ...], float] = {}  # brokers that did not answer -> the hold now
        self.decoder = DecodeChannel(sink, config.decode_backlog, config.decode_process, config.decode_spool,
                                    config.decode_priority)
        self._pcap = PcapOut(config.pcap, later=self._soon) if config.pcap is not None else None
        self.bootstrap: tuple[str, int] | None = None
        self.decoded: Any = None            # the sink's result, when the proxy has stopped
        self.conns: set[_Conn] = set()      # the connections open now
        self._tasks: set[asyncio.Task] = set()
        self._lag_timer: asyncio.TimerHandle | None = None
        self._lag_told = (0.0, 0, False)     # when the last note was, the frames not shown then, whether behind

    # ------------------------------------------------------------------ listeners
    async def start(self) -> None:
        _more_files()
        self.loop = asyncio.get_running_loop()
        self.decoder.start(self.loop)  # first: the decoding process inherits no listener
        _reuse_freed_memory()  # (after the fork: the decoding process's malloc stays as it was)
        self._lag_timer = self.loop.call_later(LAG_CHECK, self._watch_lag)
        host, port = self.config.listen
        try:
            srv = await self.loop.create_server(lambda: _End(_Conn(self, None), CLIENT), host, port,
                                                ssl=self.config.listen_ssl, reuse_address=True, backlog=1024)
        except BaseException:
            await self.loop.run_in_executor(None, self.decoder.close, 10)
            if self._pcap is not None:
                self._pcap.close()
            raise
        self.servers.append(srv)
        self.bootstrap = srv.sockets[0].getsockname()[:2]
        self.on_note(f"listening on {endpoint(*self.bootstrap)} for brokers "
                     + ", ".join(endpoint(h, p) for h, p in self.config.brokers))

    def _soon(self, fn: Any) -> None:
        """``fn`` on the event loop in PCAP_GATHER seconds (the pcap thread's wake-up for what its
        records gathered meanwhile: one for many chunks, not one per chunk)."""
        assert self.loop is not None
        self.loop.call_later(PCAP_GATHER, fn)

    def _bind_node(self, host: str, port: int) -> tuple[str, int]:
        """A local port for broker host:port, bound now (the answer naming it is forwarded next)."""
        assert self.loop is not None
        lhost = self.config.listen[0]
        first, last = self.config.node_ports or (self.config.listen[1] + 1,
                                                  min(65535, self.config.listen[1] + MAX_NODE_PORTS))
        why = "no port left"
        while True:
            lport = self._next_port
            if lport > last:
                raise CannotRewrite(f"{why}: ports {first}-{last} (--node-ports FIRST-LAST) are all taken "
                                    f"({len(self.book.local)} brokers); broker {endpoint(host, port)} has none")
            self._next_port += 1
            sock = socket.socket(socket.AF_INET6 if ":" in lhost else socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((lhost, lport))
                sock.listen(1024)
            except OSError as e:  # in use: the next one (said once the range is spent)
                sock.close()
                why = f"{endpoint(lhost, lport)}: {e.strerror or e}"
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise CannotRewrite(f"cannot listen for broker {endpoint(host, port)}: {e.strerror or e}") from None
                continue
            sock.setblocking(False)
            break
        target = (host, port)
        self._tasks.add(task := self.loop.create_task(self._serve_node(sock, target)))
        task.add_done_callback(self._tasks.discard)
        adv = self.config.advertise or lhost
        self.on_note(f"broker {endpoint(host, port)} -> {endpoint(adv, lport)}")
        return adv, lport

    async def _serve_node(self, sock: socket.socket, target: tuple[str, int]) -> None:
        assert self.loop is not None
        srv = await self.loop.create_server(lambda: _End(_Conn(self, target), CLIENT), sock=sock,
                                            ssl=self.config.listen_ssl)
        self.servers.append(srv)

    def _watch_lag(self) -> None:
        """Says, at most every LAG_NOTE seconds, how far behind the decoding side is when it is
        (frames waiting for more than BEHIND seconds, or frames not shown), and when it caught up;
        and once, when it is gone, that it is."""
        assert self.loop is not None
        if self.decoder.broken is not None:  # said once: the decoding side does not come back
            self._lag_timer = None
            self.on_note(self.decoder.broken)
            return
        self._lag_timer = self.loop.call_later(LAG_CHECK, self._watch_lag)
        note = lag_note(self.decoder, self._lag_told, time.time(), self._pcap is not None)
        if note is not None:
            text, self._lag_told = note
            self.on_note(text)

    async def close(self) -> None:
        if self._lag_timer is not None:
            self._lag_timer.cancel()
        for s in self.servers:
            s.close()
        for c in list(self.conns):
            c.close()
        for s in self.servers:
            with contextlib.suppress(Exception):
                await s.wait_closed()
        loop = asyncio.get_running_loop()
        if self._pcap is not None:
            await loop.run_in_executor(None, self._pcap.close)
            if self._pcap.error is not None:
                self.on_note(f"--write-pcap: {self._pcap.error}; the capture stops there")
        self.decoder.flush()
        self.decoder.detach()  # on the loop: what close() does next runs on another thread
        frames, size = self.decoder.spooled()
        if frames:
            self.on_note(f"decoding the {frames:,} frames ({size / 1e6:,.1f} MB) spooled to disk before the "
                         f"summary (a second Ctrl-C or SIGTERM counts them as not shown instead)")
        await loop.run_in_executor(None, self.decoder.close)
        d = self.decoder
        self.decoded = d.result
        self.stats.not_shown = d.not_shown
        if d.spool is not None:
            self.stats.spooled, self.stats.spool_most = d.spool.frames_in, d.spool.most
        self.stats.errors += d.errors
        if d.broken:
            self.stats.errors.append(d.broken)

    def give_up(self) -> None:
        """Any time during ``close``: the frames still spooled are not decoded but counted as not shown."""
        self.decoder.give_up()

    # ------------------------------------------------------------------ frames
    def _number(self) -> int:
        self._seq += 1
        return self._seq

    def _request(self, frame: bytes | list, pending: dict, conn: str, src: str, dst: str) -> None:
        """``frame``: its bytes or its pieces (``FrameRelay`` with gather off)."""
        pieces = frame if isinstance(frame, list) else [frame]
        length = sum(len(p) for p in pieces)
        head = _prefix(pieces, PEEK)
        _, key, version, corr = _REQ_HEAD.unpack_from(head)
        n, ts = self._number(), time.time()
        acks = None
        if key == 0:  # the acks come early in the request: read them from its first bytes
            acks = produce_acks(head[4:], version)
            if acks is None and length > PEEK:
                acks = produce_acks(b"".join(pieces)[4:], version)
        if acks != 0:
            pending[corr] = (key, version, ts, n)
            if len(pending) > 4 * MAX_OPEN:  # (_Conn stops reading past MAX_OPEN; one chunk may hold more)
                pending.pop(next(iter(pending)))
        self._emit(("proxy", n, ts, src, dst, conn, "request", key, version, corr, None, None, None, acks), [],
                   pieces, length)

    def _response(self, frame: bytes | list, pending: dict, conn: str, src: str, dst: str) -> bytes | object | None:
        """The answer to forward (rewritten when it names brokers), handed to the decoder as it came.
        ``frame``: its bytes, or its pieces when it was not held (forwarded already: None)."""
        pieces = frame if isinstance(frame, list) else [frame]
        length = sum(len(p) for p in pieces)
        corr = _CORR.unpack_from(pieces[0], 4)[0]  # the first piece is the frame's 8-byte head at least
        req = pending.pop(corr, None)
        n, ts = self._number(), time.time()
        out = frame if isinstance(frame, bytes) else None
        notes: list[str] = []
        if req is not None and may_rewrite(req[0], req[1]):
            frame = b"".join(pieces)
            try:
                r = rewrite_response(frame, req[0], req[1], self.book)
            except CannotRewrite as e:  # never forwarded unrewritten: the client would leave the proxy
                self.on_note(f"{conn}: answer not forwarded, the connection closes: {e}")
                self._emit(("proxy", n, ts, src, dst, conn, "response", req[0], req[1], corr, req[2], req[3], None,
                            None), [f"not forwarded (the connection closed): {e}"], pieces, length)
                return CLOSE
            except KwireError as e:
                r = None
                notes.append(f"not rewritten (forwarded as it came): {e}")
                self.on_note(f"{conn}: an answer to {req[0]} v{req[1]} not rewritten (forwarded as it came): {e}")
            if r is not None:
                out, notes = r.data, r.changes
                self.stats.rewritten += 1
        key, version, rts, rn = req if req is not None else (None, None, None, None)
        self._emit(("proxy", n, ts, src, dst, conn, "response", key, version, corr, rts, rn, None, None), notes,
                   pieces, length)
        return out

    def _emit(self, fields: tuple, notes: list[str], pieces: list, length: int) -> None:
        """To the decoding side: ``KafkaFrame``'s fields but its data (``frame_fields``), and the frame."""
        self.stats.frames += 1
        self.decoder.put(fields, notes, pieces, length)


def lag_note(decoder: DecodeChannel, told: tuple[float, int, bool], now: float,
             pcap: bool) -> tuple[str, tuple[float, int, bool]] | None:
    """The note to give now on how far behind the decoding side is, if any, and what was told
    (``told``: when the last note was, the frames not shown then, whether it said behind)."""
    last, dropped_then, was_behind = told
    frames, size, ts = decoder.lag()
    age = now - ts if frames > 0 and ts is not None else 0.0
    dropped = decoder.not_shown
    behind = dropped > dropped_then or (frames > 0 and (ts is None or age >= BEHIND))
    if behind:
        first_loss = dropped > 0 and dropped_then == 0  # said at once
        if now - last < LAG_NOTE and not first_loss:
            return None
        where = " (forwarded and in the --write-pcap file, not decoded)" if pcap else " (forwarded, not decoded)"
        spooled = decoder.spooled()[1]
        text = (f"decoding is behind: {frames:,} frames ({size / 1e6:,.1f} MB) wait"
                + (f" ({spooled / 1e6:,.1f} MB of them in the spool file)" if spooled else "")
                + (f", the last one decoded was forwarded {age:.1f} s ago" if ts is not None and frames > 0 else "")
                + (f"; {dropped:,} frames not shown so far{where}" if dropped else ""))
        return text, (now, dropped, True)
    if was_behind:
        return (f"decoding caught up ({dropped:,} frames not shown in all)" if dropped else "decoding caught up"), \
            (now, dropped, False)
    return None


def _prefix(pieces: list, n: int) -> bytes:
    """The first ``n`` bytes of a frame given as pieces (all of it when shorter)."""
    out = bytes(pieces[0][:n])
    for p in pieces[1:]:
        if len(out) >= n:
            break
        out += bytes(p[:n - len(out)])
    return out


PEEK = 1024  # bytes of a Produce request that hold its acks unless its ids are very long


class _End(asyncio.Protocol):
    """One side's transport events, passed on to its connection."""

    def __init__(self, conn: _Conn, side: int) -> None:
        self.conn, self.side = conn, side

    def connection_made(self, transport: Any) -> None:
        self.conn.made(self.side, transport)

    def data_received(self, data: bytes) -> None:
        self.conn.received(self.side, data)

    def eof_received(self) -> bool:
        return self.conn.eof(self.side)

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 (either way the other side closes)
        self.conn.lost(self.side)

    def pause_writing(self) -> None:
        self.conn.flow(self.side, False)

    def resume_writing(self) -> None:
        self.conn.flow(self.side, True)


class _Conn:
    """A client connection and its own upstream connection: what one side sends is fed to its relay
    and written to the other side in the same call. A side that half-closes (sends its last byte
    and reads on) is half-closed towards the other side too, after what it sent; the connection
    ends when both have, or when either closes."""

    def __init__(self, proxy: Proxy, target: tuple[str, int] | None) -> None:
        self.proxy, self.target = proxy, target
        self.t: list[Any] = [None, None]       # transports: client, broker
        self.open = [False, False]
        self.ended = [False, False]            # the side sent its end (EOF)
        self.closing = False
        self.stalls: tuple[set[str], set[str]] = (set(), set())  # why reading a side is paused
        self.pending: dict[int, tuple[int, int, float, int]] = {}  # corr -> (api key, version, ts, frame number)
        # frames that are not held reach the decoding side as their pieces (never joined here)
        self.relays = (FrameRelay(proxy.config.max_frame, gather=False),
                       FrameRelay(proxy.config.max_frame, self._hold, gather=False))
        self.pc: PcapConnection | None = None
        self.name = self.client_ep = self.broker_ep = ""
        self.early: list[bytes] | None = []    # what the client sent before its broker side was there
        self.connecting: asyncio.Task | None = None
        self.told_open = False

    def _hold(self, head: bytes) -> bool:
        want = self.pending.get(_CORR.unpack_from(head, 4)[0])
        return want is not None and may_rewrite(want[0], want[1])

    def made(self, side: int, transport: Any) -> None:
        self.t[side], self.open[side] = transport, True
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        if side == BROKER:
            return
        st = self.proxy.stats
        st.connections += 1
        st.open_connections += 1
        self.proxy.conns.add(self)
        self._pause(CLIENT, "connecting")  # until the broker side is there
        assert self.proxy.loop is not None
        self.connecting = self.proxy.loop.create_task(self._connect())  # referenced: not collected midway

    async def _connect(self) -> None:
        px = self.proxy
        assert px.loop is not None
        client = self.t[CLIENT]
        peer = client.get_extra_info("peername")[:2]
        local = client.get_extra_info("sockname")[:2]
        targets = [self.target] if self.target is not None else list(px.config.brokers)
        last: BaseException | None = None
        for host, port in targets:
            ctx = px.config.broker_ssl
            try:
                await asyncio.wait_for(px.loop.create_connection(
                    lambda: _End(self, BROKER), host, port, ssl=ctx, server_hostname=host if ctx else None),
                    timeout=15)
            except Exception as e:  # unreachable, refused, and an address no socket takes (a port over
                last = e            # 65535, a label over 63 characters, a NUL in the host)
                continue
            px.holds.pop(tuple(targets), None)
            self.client_ep, self.broker_ep = endpoint(*peer), endpoint(host, port)
            self.name = f"{self.client_ep}<->{self.broker_ep}"
            if px._pcap is not None:
                self.pc = px._pcap.connection(peer, local)
            early, self.early = self.early or [], None
            for data in early:
                self.received(CLIENT, data)
            if self.ended[CLIENT]:
                self._pass_end(CLIENT)
            if not self.open[CLIENT]:  # the client left meanwhile
                self.close()
            elif not self.closing:
                self._resume(CLIENT, "connecting")
            return
        px.stats.upstream_failures += 1
        hold = min(max(px.holds.get(tuple(targets), 0.0) * 2, HOLD_FIRST), HOLD_MAX)
        px.holds[tuple(targets)] = hold
        px.on_note(f"{endpoint(*peer)}: no broker answered ({', '.join(endpoint(h, p) for h, p in targets)}): "
                   f"{type(last).__name__ if last is not None else ''}: {last}; closing the client's connection "
                   f"in {hold:g} s")
        await asyncio.sleep(hold)
        self.close()

    def received(self, side: int, data: bytes) -> None:
        if self.closing:
            return
        if self.early is not None and side == CLIENT:  # reading is paused until then, yet a loop may deliver some
            self.early.append(data)
            return
        px, pc, other = self.proxy, self.pc, self.t[1 - side]
        bad: Exception | None = None
        try:
            try:
                acts = self.relays[side].feed(data)
            except RelayError as e:  # not a Kafka stream: what came before it goes on, then the end
                acts, bad = e.actions, e
            for act in acts:
                if act[0] == "bytes":
                    other.write(act[1])
                    if pc:
                        pc.data(side, act[1])
                elif side == CLIENT:
                    px._request(act[1], self.pending, self.name, self.client_ep, self.broker_ep)
                else:
                    out = px._response(act[1], self.pending, self.name, self.broker_ep, self.client_ep)
                    if out is CLOSE:
                        self.close()
                        return
                    if act[2] and isinstance(out, bytes):
                        other.write(out)
                        if pc:
                            pc.data(side, out)
        except Exception as e:  # a bug: this connection ends, the proxy goes on
            bad = e
        if bad is not None:
            px.on_note(f"{self.name}: {bad}; closing the connection")
            self.close()
            return
        self._open_requests()

    def _open_requests(self) -> None:
        """A client with MAX_OPEN requests unanswered is not read until answers come (its memory here
        stays bounded: a client that sends and never reads waits instead)."""
        if len(self.pending) >= MAX_OPEN:
            if not self.told_open:
                self.told_open = True
                self.proxy.on_note(f"{self.name}: {len(self.pending)} requests without an answer (at most "
                                   f"{MAX_OPEN}): its next requests wait until answers come")
            self._pause(CLIENT, "open")
        elif "open" in self.stalls[CLIENT]:
            self._resume(CLIENT, "open")

    def _pause(self, side: int, why: str) -> None:
        t = self.t[side]
        if not self.stalls[side]:
            with contextlib.suppress(Exception):
                t.pause_reading()
        self.stalls[side].add(why)

    def _resume(self, side: int, why: str) -> None:
        st = self.stalls[side]
        if why in st:
            st.discard(why)
            if not st and self.open[side] and not self.closing:
                with contextlib.suppress(Exception):
                    self.t[side].resume_reading()

    def flow(self, side: int, go: bool) -> None:
        """``side``'s write buffer is full (``go`` False) or drained: pause or resume reading the other."""
        if self.t[1 - side] is not None and self.open[1 - side]:
            (self._resume if go else self._pause)(1 - side, "full")

    def eof(self, side: int) -> bool:
        """``side`` sent its last byte. True: its transport stays open for the answers (a plain TCP
        side); False: it closes (TLS: no half-close), and so does the connection."""
        self.ended[side] = True
        plain = self.t[side].get_extra_info("sslcontext") is None
        if self.early is None:
            self._pass_end(side)
        return plain and not self.closing

    def _pass_end(self, side: int) -> None:
        """What ``side``'s relay still holds is forwarded as it came, then the other side is half-closed
        (closed when it cannot be, or when it had ended already)."""
        other = self.t[1 - side]
        if self.closing or other is None:
            return
        rest = self.relays[side].tail()
        if rest:
            other.write(rest)
            if self.pc:
                self.pc.data(side, rest)
        if self.ended[1 - side] or not other.can_write_eof():
            self.close()
            return
        with contextlib.suppress(Exception):
            other.write_eof()

    def lost(self, side: int) -> None:
        self.open[side] = False
        self.close()

    def close(self) -> None:
        """Both sides (what a side still has to write is written first); counted once."""
        first = not self.closing
        self.closing = True
        for t in self.t:
            if t is not None and not t.is_closing():
                t.close()
        if first:
            if self.pc:
                self.pc.close()
            self.proxy.stats.open_connections -= 1
            self.proxy.conns.discard(self)
