"""The proxy itself (asyncio): listeners, one upstream connection per client connection, forwarding,
and a decoding thread.

Clients bootstrap against the listen address, which forwards to the first ``--broker`` that
answers. Every client connection gets exactly one upstream connection (no pooling: SASL state,
ordering and correlation ids stay the client's own). Answers that tell clients where brokers are
are rewritten (``rewrite``): each broker gets a local port, bound when it first appears (the
listen port + 1, + 2, ... in order of appearance, or ``--node-ports FIRST-LAST``), so every later
connection also goes through the proxy. Requests are forwarded byte for byte as they arrive;
answers too, except those to rewrite, which are held until whole. Every frame is also handed,
whole, to one decoding thread (a bounded queue: past it frames are counted as not shown, never
waited for), which makes the rows of `kwire pcap` (``Conversation.row``) and writes them; so a slow
decode never stalls a client. A Produce request with acks=0 expects no answer and none is waited for.
"""
from __future__ import annotations

import asyncio
import contextlib
import queue
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kwire_cli.capture.events import KafkaFrame, endpoint
from kwire_cli.capture.kafka import produce_acks
from kwire_cli.errors import KwireError
from kwire_cli.proxy.pcapout import PcapConnection, PcapOut
from kwire_cli.proxy.relay import FrameRelay
from kwire_cli.proxy.rewrite import AddressBook, may_rewrite, rewrite_response

_REQ_HEAD = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_CORR = struct.Struct(">i")
READ = 256 * 1024
QUEUE_MAX = 10_000  # frames waiting for the decoding thread; past it they are counted, not shown


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


@dataclass
class Stats:
    connections: int = 0
    open_connections: int = 0
    upstream_failures: int = 0
    frames: int = 0
    not_shown: int = 0                      # frames the decoding thread could not keep up with
    rewritten: int = 0
    errors: list[str] = field(default_factory=list)


class Proxy:
    def __init__(self, config: ProxyConfig, on_frame: Callable[[KafkaFrame, list[str]], None],
                 on_note: Callable[[str], None]) -> None:
        self.config = config
        self.on_frame = on_frame
        self.on_note = on_note
        self.stats = Stats()
        self.book = AddressBook(self._bind_node)
        self.servers: list[asyncio.base_events.Server] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._next_port = config.node_ports[0] if config.node_ports else config.listen[1] + 1
        self._seq = 0
        self._q: queue.Queue = queue.Queue(QUEUE_MAX)
        self._decoder = threading.Thread(target=self._decode_loop, name="kwire-decode", daemon=True)
        self._pcap = PcapOut(config.pcap) if config.pcap is not None else None
        self.bootstrap: tuple[str, int] | None = None

    # ------------------------------------------------------------------ listeners
    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._decoder.start()
        host, port = self.config.listen
        srv = await asyncio.start_server(lambda r, w: self._client(r, w, None), host, port,
                                         ssl=self.config.listen_ssl, limit=READ, reuse_address=True)
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
            sock.listen(128)
            sock.setblocking(False)
            break
        target = (host, port)
        self.loop.create_task(self._serve_node(sock, target))
        adv = self.config.advertise or lhost
        self.on_note(f"broker {endpoint(host, port)} -> {endpoint(adv, lport)}")
        return adv, lport

    async def _serve_node(self, sock: socket.socket, target: tuple[str, int]) -> None:
        srv = await asyncio.start_server(lambda r, w: self._client(r, w, target), sock=sock,
                                         ssl=self.config.listen_ssl, limit=READ)
        self.servers.append(srv)

    async def close(self) -> None:
        for s in self.servers:
            s.close()
        for s in self.servers:
            with contextlib.suppress(Exception):
                await s.wait_closed()
        self._q.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._decoder.join, 30)

    # ------------------------------------------------------------------ connections
    async def _upstream(self, target: tuple[str, int] | None):
        targets = [target] if target is not None else list(self.config.brokers)
        last: Exception | None = None
        for host, port in targets:
            try:
                ctx = self.config.broker_ssl
                r, w = await asyncio.wait_for(
                    asyncio.open_connection(host, port, ssl=ctx, server_hostname=host if ctx else None, limit=READ),
                    timeout=15)
                return (host, port), r, w
            except (OSError, asyncio.TimeoutError, ssl.SSLError) as e:
                last = e
        self.stats.upstream_failures += 1
        raise ConnectionError(f"no broker answered ({', '.join(endpoint(h, p) for h, p in targets)}): {last}")

    async def _client(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter,
                      target: tuple[str, int] | None) -> None:
        self.stats.connections += 1
        self.stats.open_connections += 1
        peer = cwriter.get_extra_info("peername")[:2]
        local = cwriter.get_extra_info("sockname")[:2]
        try:
            broker, breader, bwriter = await self._upstream(target)
        except ConnectionError as e:
            self.on_note(f"{endpoint(*peer)}: {e}; closing the client's connection")
            cwriter.close()
            self.stats.open_connections -= 1
            return
        client_ep, broker_ep = endpoint(*peer), endpoint(*broker)
        conn = f"{client_ep}<->{broker_ep}"
        pending: dict[int, tuple[int, int, float, int]] = {}  # corr -> (api key, version, ts, frame number)
        pc: PcapConnection | None = self._pcap.connection(peer, local) if self._pcap else None

        def hold(head: bytes) -> bool:
            want = pending.get(_CORR.unpack_from(head, 4)[0])
            return want is not None and may_rewrite(want[0], want[1])

        up = FrameRelay(self.config.max_frame)
        down = FrameRelay(self.config.max_frame, hold)

        async def client_to_broker() -> None:
            while data := await creader.read(READ):
                for act in up.feed(data):
                    if act[0] == "bytes":
                        bwriter.write(act[1])
                        if pc:
                            pc.data(0, act[1])
                    else:
                        self._request(act[1], pending, conn, client_ep, broker_ep)
                await bwriter.drain()

        async def broker_to_client() -> None:
            while data := await breader.read(READ):
                for act in down.feed(data):
                    if act[0] == "bytes":
                        cwriter.write(act[1])
                        if pc:
                            pc.data(1, act[1])
                        continue
                    frame, held = act[1], act[2]
                    out = self._response(frame, pending, conn, broker_ep, client_ep)
                    if held:
                        cwriter.write(out)
                        if pc:
                            pc.data(1, out)
                await cwriter.drain()

        tasks = [asyncio.ensure_future(client_to_broker()), asyncio.ensure_future(broker_to_client())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                exc = t.exception()
                if exc is not None and not isinstance(exc, (ConnectionError, OSError)):
                    self.on_note(f"{conn}: {exc}; closing the connection")
        finally:
            for t in tasks:
                t.cancel()
            for w in (cwriter, bwriter):
                with contextlib.suppress(Exception):
                    w.close()
            if pc:
                pc.close()
            self.stats.open_connections -= 1

    # ------------------------------------------------------------------ frames
    def _number(self) -> int:
        self._seq += 1
        return self._seq

    def _request(self, frame: bytes, pending: dict, conn: str, src: str, dst: str) -> None:
        _, key, version, corr = _REQ_HEAD.unpack_from(frame)
        n, ts = self._number(), time.time()
        acks = produce_acks(frame[4:], version) if key == 0 else None
        if acks != 0:
            pending[corr] = (key, version, ts, n)
            if len(pending) > 100_000:  # a client that never reads its answers: forget the oldest
                pending.pop(next(iter(pending)))
        self._emit(KafkaFrame("proxy", n, ts, src, dst, conn, "request", frame[4:], len(frame) - 4, key, version,
                              corr, acks=acks), [])

    def _response(self, frame: bytes, pending: dict, conn: str, src: str, dst: str) -> bytes:
        """The answer to forward (rewritten when it names brokers), handed to the decoder as it came."""
        corr = _CORR.unpack_from(frame, 4)[0]
        req = pending.pop(corr, None)
        n, ts = self._number(), time.time()
        out, notes = frame, []
        if req is not None and may_rewrite(req[0], req[1]):
            try:
                r = rewrite_response(frame, req[0], req[1], self.book)
            except KwireError as e:
                r = None
                notes.append(f"not rewritten (forwarded as it came): {e}")
            if r is not None:
                out, notes = r.data, r.changes
                self.stats.rewritten += 1
        key, version, rts, rn = req if req is not None else (None, None, None, None)
        self._emit(KafkaFrame("proxy", n, ts, src, dst, conn, "response", frame[4:], len(frame) - 4, key, version,
                              corr, rts, rn), notes)
        return out

    def _emit(self, f: KafkaFrame, notes: list[str]) -> None:
        self.stats.frames += 1
        try:
            self._q.put_nowait((f, notes))
        except queue.Full:
            self.stats.not_shown += 1

    def _decode_loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                self.on_frame(*item)
            except Exception as e:  # the proxy goes on whatever one frame's output does
                self.stats.errors.append(f"{type(e).__name__}: {e}")
