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
handed, whole, to the decoding side (another process, bounded: past its backlog frames are counted
as not shown, never waited for), which makes the rows of `kwire pcap` (``Conversation.row``) and
writes them; so a slow decode never stalls a client. A Produce request with acks=0 expects no
answer and none is waited for.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from kwire_cli.capture.events import endpoint
from kwire_cli.capture.kafka import produce_acks
from kwire_cli.errors import KwireError
from kwire_cli.proxy.decoding import DecodeChannel, FrameSink
from kwire_cli.proxy.pcapout import PcapConnection, PcapOut
from kwire_cli.proxy.relay import FrameRelay
from kwire_cli.proxy.rewrite import AddressBook, may_rewrite, rewrite_response

_REQ_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_CORR = struct.Struct(">i")
WRITE_HIGH = 4 << 20   # a side's write buffer above this pauses reading on the other side
BACKLOG = 64 << 20     # bytes of frames waiting for the decoding side; past it they are counted, not shown
CLIENT, BROKER = 0, 1


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
    decode_process: bool | None = None      # None: a process on Linux, a thread elsewhere


@dataclass
class Stats:
    connections: int = 0
    open_connections: int = 0
    upstream_failures: int = 0
    frames: int = 0
    not_shown: int = 0                      # frames the decoding side could not keep up with
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
        self.decoder = DecodeChannel(sink, config.decode_backlog, config.decode_process)
        self._pcap = PcapOut(config.pcap) if config.pcap is not None else None
        self.bootstrap: tuple[str, int] | None = None
        self.decoded: Any = None            # the sink's result, when the proxy has stopped
        self.conns: set[_Conn] = set()      # the connections open now
        self._tasks: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ listeners
    async def start(self) -> None:
        _more_files()
        self.loop = asyncio.get_running_loop()
        self.decoder.start(self.loop)  # first: the decoding process inherits no listener
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

    def _bind_node(self, host: str, port: int) -> tuple[str, int]:
        """A local port for broker host:port, bound now (the answer naming it is forwarded next)."""
        assert self.loop is not None
        lhost = self.config.listen[0]
        while True:
            lport = self._next_port
            if self.config.node_ports and lport > self.config.node_ports[1]:
                raise KwireError(f"--node-ports {self.config.node_ports[0]}-{self.config.node_ports[1]}: no port "
                                 f"left for broker {endpoint(host, port)}")
            self._next_port += 1
            sock = socket.socket(socket.AF_INET6 if ":" in lhost else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((lhost, lport))
            except OSError as e:
                sock.close()
                if self.config.node_ports:
                    continue
                raise KwireError(f"cannot listen on {endpoint(lhost, lport)} for broker {endpoint(host, port)}: "
                                 f"{e.strerror} (--node-ports FIRST-LAST gives a range)") from None
            sock.listen(1024)
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

    async def close(self) -> None:
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
        await loop.run_in_executor(None, self.decoder.close)
        d = self.decoder
        self.decoded = d.result
        self.stats.not_shown = d.not_shown
        self.stats.errors += d.errors
        if d.broken:
            self.stats.errors.append(d.broken)

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
            if len(pending) > 100_000:  # a client that never reads its answers: forget the oldest
                pending.pop(next(iter(pending)))
        self._emit(("proxy", n, ts, src, dst, conn, "request", key, version, corr, None, None, None, acks), [],
                   pieces, length)

    def _response(self, frame: bytes | list, pending: dict, conn: str, src: str, dst: str) -> bytes | None:
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
            except KwireError as e:
                r = None
                notes.append(f"not rewritten (forwarded as it came): {e}")
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
        return False  # the transport closes; connection_lost closes the other side

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: ARG002 (either way the other side closes)
        self.conn.lost(self.side)

    def pause_writing(self) -> None:
        self.conn.flow(self.side, False)

    def resume_writing(self) -> None:
        self.conn.flow(self.side, True)


class _Conn:
    """A client connection and its own upstream connection: what one side sends is fed to its relay
    and written to the other side in the same call."""

    def __init__(self, proxy: Proxy, target: tuple[str, int] | None) -> None:
        self.proxy, self.target = proxy, target
        self.t: list[Any] = [None, None]       # transports: client, broker
        self.open = [False, False]
        self.closing = False
        self.pending: dict[int, tuple[int, int, float, int]] = {}  # corr -> (api key, version, ts, frame number)
        # frames that are not held reach the decoding side as their pieces (never joined here)
        self.relays = (FrameRelay(proxy.config.max_frame, gather=False),
                       FrameRelay(proxy.config.max_frame, self._hold, gather=False))
        self.pc: PcapConnection | None = None
        self.name = self.client_ep = self.broker_ep = ""
        self.early: list[bytes] | None = []    # what the client sent before its broker side was there
        self.connecting: asyncio.Task | None = None

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
        transport.pause_reading()  # until the broker side is there
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
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
                last = e
                continue
            self.client_ep, self.broker_ep = endpoint(*peer), endpoint(host, port)
            self.name = f"{self.client_ep}<->{self.broker_ep}"
            if px._pcap is not None:
                self.pc = px._pcap.connection(peer, local)
            early, self.early = self.early or [], None
            for data in early:
                self.received(CLIENT, data)
            if not self.open[CLIENT]:  # the client left meanwhile
                self.close()
            elif not self.closing:
                client.resume_reading()
            return
        px.stats.upstream_failures += 1
        px.on_note(f"{endpoint(*peer)}: no broker answered ({', '.join(endpoint(h, p) for h, p in targets)}): "
                   f"{last}; closing the client's connection")
        self.close()

    def received(self, side: int, data: bytes) -> None:
        if self.closing:
            return
        if self.early is not None and side == CLIENT:  # reading is paused until then, yet a loop may deliver some
            self.early.append(data)
            return
        px, pc, other = self.proxy, self.pc, self.t[1 - side]
        try:
            for act in self.relays[side].feed(data):
                if act[0] == "bytes":
                    other.write(act[1])
                    if pc:
                        pc.data(side, act[1])
                elif side == CLIENT:
                    px._request(act[1], self.pending, self.name, self.client_ep, self.broker_ep)
                else:
                    out = px._response(act[1], self.pending, self.name, self.broker_ep, self.client_ep)
                    if act[2] and out is not None:
                        other.write(out)
                        if pc:
                            pc.data(side, out)
        except Exception as e:  # not a Kafka stream, or a bug: this connection ends, the proxy goes on
            px.on_note(f"{self.name}: {e}; closing the connection")
            self.close()

    def flow(self, side: int, go: bool) -> None:
        """``side``'s write buffer is full (``go`` False) or drained: pause or resume reading the other."""
        other = self.t[1 - side]
        if other is not None and self.open[1 - side]:
            with contextlib.suppress(Exception):
                (other.resume_reading if go else other.pause_reading)()

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
