"""A fake broker and the proxy in one event loop, for the proxy's fault tests (tests/test_proxy_faults.py):
the broker answers as each test scripts it (hostile answers, late answers, none), the clients are
raw streams that misbehave, and the proxy runs in-process (its decoding side a thread, with a sink
that counts) so that its connections, its open requests and the loop's exceptions can be looked at."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from kwire_cli.codec import decode_response, encode_request, encode_response
from kwire_cli.proxy import Proxy, ProxyConfig

Answer = Callable[[asyncio.StreamWriter, int, int, int], Awaitable[None]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_range(n: int) -> int:
    """The first of ``n + 1`` consecutive ports that are free now: below the kernel's ephemeral range
    (where the machine's own outgoing connections take ports, and a range found free there is soon
    taken), probed with SO_REUSEADDR as the proxy binds them (a port in TIME_WAIT is free to it)."""
    rng = random.Random()
    for _ in range(500):
        first = rng.randrange(20000, 32000 - n)
        socks = []
        try:
            for p in range(first, first + n + 1):
                s = socket.socket()
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def metadata_request(corr: int) -> bytes:
    return encode_request(3, 12, {"CorrelationId": corr, "ClientId": "t"},
                          {"Topics": None, "AllowAutoTopicCreation": False, "IncludeTopicAuthorizedOperations": False})


def metadata_answer(corr: int, brokers: list[tuple[str, int]]) -> bytes:
    return encode_response(3, 12, {"CorrelationId": corr},
                           {"ThrottleTimeMs": 0, "ClusterId": None, "ControllerId": 0, "Topics": [],
                            "Brokers": [{"NodeId": i, "Host": h, "Port": p, "Rack": None}
                                        for i, (h, p) in enumerate(brokers)]})


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def metadata_answer_fast(corr: int, host: str, port: int, times: int) -> bytes:
    """A Metadata v12 answer listing one broker ``times`` times, built as bytes (a million entries
    through the encoder would take the test's time)."""
    h = host.encode()
    entry = b"\0\0\0\0" + _uvarint(len(h) + 1) + h + struct.pack(">i", port) + b"\0\0"
    body = (struct.pack(">i", corr) + b"\0" + b"\0\0\0\0" + _uvarint(times + 1) + entry * times
            + b"\0" + b"\0\0\0\0" + b"\x01" + b"\0")
    return struct.pack(">i", len(body)) + body


def api_versions_request(corr: int) -> bytes:
    return encode_request(18, 3, {"CorrelationId": corr, "ClientId": "t"},
                          {"ClientSoftwareName": "t", "ClientSoftwareVersion": "1"})


def api_versions_answer_fast(corr: int, entries: int) -> bytes:
    """An ApiVersions v3 answer listing ``entries`` api keys (7 bytes each: ten million make a 70 MB
    frame), built as bytes."""
    body = (struct.pack(">ih", corr, 0) + _uvarint(entries + 1) + struct.pack(">hhhb", 18, 0, 3, 0) * entries
            + struct.pack(">i", 0) + b"\0")
    return struct.pack(">i", len(body)) + body


def heartbeat_request(corr: int) -> bytes:
    return encode_request(12, 4, {"CorrelationId": corr, "ClientId": "t"},
                          {"GroupId": "g", "GenerationId": 1, "MemberId": "m", "GroupInstanceId": None})


def heartbeat_answer(corr: int) -> bytes:
    return encode_response(12, 4, {"CorrelationId": corr}, {"ThrottleTimeMs": 0, "ErrorCode": 0})


def brokers_in(answer: bytes) -> list[tuple[str, int]]:
    body = decode_response(answer, 3, 12, size_prefixed=True).body
    return [(b["Host"], b["Port"]) for b in body["Brokers"]]


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readexactly(4)
    return head + await reader.readexactly(int.from_bytes(head, "big"))


class FakeBroker:
    """Reads size-prefixed requests and calls ``answer(writer, api_key, version, corr)`` for each, one at
    a time (as a Kafka broker does); at the client's end it closes."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests = 0
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self, port: int = 0) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame = await read_frame(reader)
                key, version, corr = struct.unpack_from(">hhi", frame, 4)
                self.requests += 1
                await self.answer(writer, key, version, corr)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)


class CountSink:
    def __init__(self) -> None:
        self.frames = 0
        self.notes: list[str] = []

    def frame(self, frame: Any, notes: list[str]) -> None:  # noqa: ARG002 (counted, not read)
        self.frames += 1
        self.notes += notes

    def result(self) -> tuple[int, list[str]]:
        return self.frames, self.notes


@contextlib.asynccontextmanager
async def running(answer: Answer, **config: Any) -> AsyncIterator[tuple[Proxy, FakeBroker, list[str]]]:
    """The fake broker and a proxy in front of it (its notes in the list); on the way out the
    proxy closes and the loop's unhandled exceptions are asserted to be none."""
    loop = asyncio.get_running_loop()
    unhandled: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: unhandled.append(ctx))
    broker = await FakeBroker(answer).start()
    listen = config.pop("listen_port", None) or free_range(20)
    config.setdefault("node_ports", (listen + 1, listen + 20))
    notes: list[str] = []
    sink = config.pop("sink", None) or CountSink()
    px = Proxy(ProxyConfig(brokers=[("127.0.0.1", broker.port)], listen=("127.0.0.1", listen),
                           decode_process=False, **config), sink, notes.append)
    await px.start()
    try:
        yield px, broker, notes
    finally:
        await px.close()
        await broker.stop()
        gc.collect()
        await asyncio.sleep(0)
        assert not unhandled, [c.get("message") for c in unhandled] + [repr(c.get("exception")) for c in unhandled]


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


def run(coro: Awaitable[Any], timeout: float = 10) -> Any:
    """The scenario, within ``timeout`` seconds."""
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())
