"""The proxy under a misbehaving broker and hostile clients: a fake broker (tests/proxy_faults.py)
and the proxy in one event loop, each scenario within 10 seconds. Answers are never lost to a
half-close nor to bad bytes after them, an address no socket takes closes the client cleanly,
open requests and local ports are capped with a note, an answer that cannot be rewritten is
never forwarded as it came, and SIGTERM or SIGINT to the process group prints the whole summary."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kwire_cli.proxy.server import HOLD_FIRST, MAX_OPEN
from proxy_faults import (
    FakeBroker,
    api_versions_answer_fast,
    api_versions_request,
    brokers_in,
    connect,
    free_port,
    heartbeat_answer,
    heartbeat_request,
    metadata_answer,
    metadata_answer_fast,
    metadata_request,
    read_frame,
    run,
    running,
)

ROOT = Path(__file__).resolve().parents[1]


async def ended(reader: asyncio.StreamReader) -> bool:
    """The proxy ended the connection within 5 s, with no byte first (a FIN, or a reset: the proxy
    closed with the request it had not read)."""
    try:
        return await asyncio.wait_for(reader.read(), 5) == b""
    except ConnectionResetError:
        return True


def test_a_half_closed_client_still_gets_its_answer():
    """The client sends a request and shuts its sending side (``nc -N``); the broker answers after
    that: the answer reaches the client, then the end."""
    async def answer(w, key, version, corr):
        await asyncio.sleep(0.3)  # the client's end reaches the proxy first
        w.write(heartbeat_answer(corr))

    async def scenario():
        async with running(answer) as (px, broker, _):
            r, w = await connect(px.bootstrap[1])
            w.write(heartbeat_request(7))
            w.write_eof()
            got = await asyncio.wait_for(r.read(), 5)
            assert got == heartbeat_answer(7)
            w.close()
            assert broker.requests == 1
    run(scenario())


def test_a_half_closing_broker_ends_after_its_answer():
    """The broker answers and half-closes: the client gets the answer and the end, and may still send."""
    async def answer(w, key, version, corr):
        w.write(heartbeat_answer(corr))
        w.write_eof()

    async def scenario():
        async with running(answer) as (px, _, _):
            r, w = await connect(px.bootstrap[1])
            w.write(heartbeat_request(1))
            assert await asyncio.wait_for(r.read(), 5) == heartbeat_answer(1)
            w.close()
    run(scenario())


def test_a_client_is_held_before_its_close_while_the_broker_is_down():
    """A refused connect makes a Kafka client back off; a close after connecting does not. So while
    no broker answers, the proxy holds each client for a time that doubles (from HOLD_FIRST up to
    HOLD_MAX) before closing it, instead of letting it reconnect hundreds of times a second; once
    the broker answers again a client is served at once and the hold starts over."""
    async def answer(w, key, version, corr):
        w.write(heartbeat_answer(corr))

    async def held(port: int) -> float:
        r, w = await connect(port)
        t0 = time.monotonic()
        assert await ended(r)
        w.close()
        return time.monotonic() - t0

    async def scenario():
        async with running(answer) as (px, broker, notes):
            await broker.stop()
            holds = [await held(px.bootstrap[1]) for _ in range(4)]
            for got, want in zip(holds, [HOLD_FIRST * 2 ** i for i in range(4)]):
                assert want * 0.9 <= got < want + 1.0, holds
            again = await FakeBroker(answer).start(broker.port)
            r, w = await connect(px.bootstrap[1])
            t0 = time.monotonic()
            w.write(heartbeat_request(3))
            assert await read_frame(r) == heartbeat_answer(3)
            assert time.monotonic() - t0 < HOLD_FIRST * 8
            w.close()
            await again.stop()
            assert await held(px.bootstrap[1]) < HOLD_FIRST * 2 + 1.0
            assert px.stats.upstream_failures == 5
            said = [n for n in notes if "no broker answered" in n]
            assert len(said) == 5 and said[0].endswith(f"in {HOLD_FIRST:g} s")
    run(scenario())


@pytest.mark.parametrize("host,port", [("127.0.0.1", 70000), ("a" * 64 + ".example", 9092), ("bad\0host", 9092)],
                         ids=["port-70000", "label-64", "nul"])
def test_an_advertised_address_no_socket_takes_closes_the_client_cleanly(host, port):
    """The client is told the proxy's port for that broker; connecting there, it gets a close (not
    a wait for ever), the proxy says why in one note, counts it, and keeps no socket of it."""
    async def answer(w, key, version, corr):
        w.write(metadata_answer(corr, [(host, port)]))

    async def scenario():
        async with running(answer) as (px, _, notes):
            r, w = await connect(px.bootstrap[1])
            w.write(metadata_request(1))
            (lhost, lport), = brokers_in(await read_frame(r))
            assert lport != port
            r2, w2 = await connect(lport)
            w2.write(metadata_request(2))
            assert await ended(r2)
            w2.close()
            w.close()
            for _ in range(100):
                if not px.conns:
                    break
                await asyncio.sleep(0.02)
            assert not px.conns and px.stats.open_connections == 0
            assert px.stats.upstream_failures == 1
            said = [n for n in notes if "no broker answered" in n]
            assert len(said) == 1 and "\n" not in said[0]
    run(scenario())


def test_a_held_answer_followed_by_bad_bytes_reaches_the_client_first():
    """A Metadata answer (held to be rewritten) and bytes that are not a Kafka frame in one write:
    the answer goes out rewritten, then the connection ends with a note."""
    async def answer(w, key, version, corr):
        w.write(metadata_answer(corr, [("10.0.0.1", 9092)]) + b"GET / HTTP/1.1\r\n\r\n")

    async def scenario():
        async with running(answer) as (px, _, notes):
            r, w = await connect(px.bootstrap[1])
            w.write(metadata_request(1))
            got = await asyncio.wait_for(r.read(), 5)
            first = got[:4 + int.from_bytes(got[:4], "big")]
            assert brokers_in(first) == [("127.0.0.1", px.config.node_ports[0])]
            assert got == first  # nothing after it: the bad bytes end the connection
            assert any("is not a Kafka frame" in n for n in notes)
            w.close()
    run(scenario())


def test_a_client_that_pipelines_and_never_reads_is_held_at_the_cap_and_loses_nothing():
    """Three clients each send 5,000 requests and read nothing while the broker does not answer:
    the proxy stops reading each at the cap of open requests (one note each), then, when the broker
    answers, every request reaches it and every answer reaches its client."""
    gate = asyncio.Event()
    n, clients = 5000, 3

    async def answer(w, key, version, corr):
        await gate.wait()
        w.write(heartbeat_answer(corr))

    async def scenario():
        async with running(answer) as (px, broker, notes):
            conns = [await connect(px.bootstrap[1]) for _ in range(clients)]
            for _, w in conns:
                w.write(b"".join(heartbeat_request(i) for i in range(n)))
            await asyncio.sleep(1.0)
            most = max(len(c.pending) for c in px.conns)
            assert MAX_OPEN <= most <= 4 * MAX_OPEN, most
            assert sum(len(c.pending) for c in px.conns) <= clients * 4 * MAX_OPEN
            assert len([x for x in notes if "requests without an answer" in x]) == clients
            gate.set()
            for r, w in conns:
                for i in range(n):
                    assert await read_frame(r) == heartbeat_answer(i)
                w.close()
            assert broker.requests == n * clients
    run(scenario(), timeout=20)


def test_too_many_brokers_for_the_local_ports_closes_the_connection_not_bypassing():
    """An answer naming more brokers than local ports: the answer is not forwarded as it came (the
    client would connect to the brokers past the proxy): the connection ends with one note, and
    the proxy keeps serving (the ports it bound stay)."""
    async def answer(w, key, version, corr):
        w.write(metadata_answer(corr, [("10.0.0.1", 1000 + i) for i in range(100)]))

    async def scenario():
        async with running(answer) as (px, _, notes):
            r, w = await connect(px.bootstrap[1])
            w.write(metadata_request(1))
            assert await ended(r)
            w.close()
            assert len(px.book.local) == 20
            said = [x for x in notes if "answer not forwarded" in x]
            assert len(said) == 1 and "all taken" in said[0]
    run(scenario())


def test_a_port_in_use_is_skipped_without_node_ports():
    """Without --node-ports, a local port in use is skipped (before: the answers went out unrewritten)."""
    async def answer(w, key, version, corr):
        w.write(metadata_answer(corr, [("10.0.0.1", 9092), ("10.0.0.2", 9092)]))

    async def scenario():
        from proxy_faults import free_range
        listen = free_range(5)
        taken = socket.socket()
        taken.bind(("127.0.0.1", listen + 1))
        taken.listen(1)
        try:
            async with running(answer, listen_port=listen, node_ports=None) as (px, _, _):
                r, w = await connect(listen)
                w.write(metadata_request(1))
                assert brokers_in(await read_frame(r)) == [("127.0.0.1", listen + 2), ("127.0.0.1", listen + 3)]
                w.close()
        finally:
            taken.close()
    run(scenario())


def test_a_huge_broker_list_is_refused_fast_and_other_clients_are_not_stalled():
    """A 20 MB Metadata answer naming one broker a million times: not walked a million times on the
    event loop (past 10,000 addresses it is refused, the connection ends); another client's
    request and answer meanwhile are not held up (~0.1 s; the walk of a million took ~15 s)."""
    async def answer(w, key, version, corr):
        if key == 3:
            w.write(metadata_answer_fast(corr, "broker-1.example", 9092, 1_000_000))
        else:
            w.write(heartbeat_answer(corr))

    async def scenario():
        async with running(answer) as (px, _, notes):
            r, w = await connect(px.bootstrap[1])
            r2, w2 = await connect(px.bootstrap[1])
            t = time.monotonic()
            w.write(metadata_request(1))
            w2.write(heartbeat_request(5))
            assert await asyncio.wait_for(read_frame(r2), 5) == heartbeat_answer(5)
            assert await ended(r)
            assert time.monotonic() - t < 5  # (a shared machine's margin: it was ~15 s, it is ~0.1 s)
            assert any("more than 10,000 broker addresses" in x for x in notes)
            w.close()
            w2.close()
    run(scenario())


# ------------------------------------------------------------------------------------- the command
def _broker_thread(stop: threading.Event, answer=None) -> int:
    """A broker in a thread answering Heartbeat requests (for the proxy in another process), or
    answering each request with ``answer(api_key, corr)``."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)

    def serve() -> None:
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except TimeoutError:
                continue
            with c:
                c.settimeout(5)
                buf = b""
                while True:
                    try:
                        data = c.recv(65536)
                    except OSError:
                        break
                    if not data:
                        break
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                        size = int.from_bytes(buf[:4], "big")
                        key, corr = int.from_bytes(buf[4:6], "big"), int.from_bytes(buf[8:12], "big")
                        buf = buf[4 + size:]
                        c.sendall(heartbeat_answer(corr) if answer is None else answer(key, corr))
        srv.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_process_group_prints_the_whole_summary(sig, tmp_path):
    """``timeout``, systemd and ``docker stop`` signal the whole process group: the decoding process
    waits for the proxy, and the summary counts every frame proxied."""
    stop = threading.Event()
    bport = _broker_thread(stop)
    port = free_port()
    out, err = tmp_path / "out", tmp_path / "err"
    proc = subprocess.Popen([sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{bport}",
                             "--listen", f"127.0.0.1:{port}", "--format", "jsonl", "--summary"],
                            stdout=open(out, "wb"), stderr=open(err, "wb"), cwd=ROOT, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.monotonic() + 8
        while b"listening on" not in err.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            for i in range(3):
                c.sendall(heartbeat_request(i))
                got = b""
                while len(got) < len(heartbeat_answer(i)):
                    got += c.recv(100)
                assert got == heartbeat_answer(i)
        time.sleep(0.3)
        os.killpg(proc.pid, sig)
        assert proc.wait(timeout=8) == 0, err.read_text()
    finally:
        stop.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = out.read_text().splitlines()
    rows, summary = [json.loads(x) for x in lines[:-1]], json.loads(lines[-1])
    assert len(rows) == 6 and summary["frames"] == 6 and summary["proxy"]["frames"] == 6
    assert summary["reconciled"]


def test_a_decoding_process_that_dies_is_said_at_once_and_forwarding_goes_on(tmp_path):
    """The decoding process killed: the proxy says so within seconds (not only when it stops),
    clients are still answered, and the stop line counts their frames as not shown."""
    stop = threading.Event()
    bport = _broker_thread(stop)
    port = free_port()
    err = tmp_path / "err"
    proc = subprocess.Popen([sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{bport}",
                             "--listen", f"127.0.0.1:{port}", "--format", "jsonl"],
                            stdout=subprocess.DEVNULL, stderr=open(err, "wb"), cwd=ROOT, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.monotonic() + 8
        while b"listening on" not in err.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        (decoder,) = (int(x) for x in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split())
        os.kill(decoder, signal.SIGKILL)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
            for i in range(3):
                c.sendall(heartbeat_request(i))
                got = b""
                while len(got) < len(heartbeat_answer(i)):
                    got += c.recv(100)
                assert got == heartbeat_answer(i)
                time.sleep(0.1)
        deadline = time.monotonic() + 8
        while b"the decoding side is gone" not in err.read_bytes():
            assert time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=8) == 0, err.read_text()
    finally:
        stop.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = err.read_text()
    assert text.count("the decoding side is gone") == 2  # at once, and with the stop line's notes
    assert "6 frames, 0 answers rewritten, 0 upstream failures, 6 frames not shown" in text


def test_write_pcap_to_a_fifo_with_no_reader_is_one_line_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "proxy", "--broker", "127.0.0.1:9", "--listen",
                        f"127.0.0.1:{free_port()}", "--write-pcap", str(fifo)], capture_output=True, text=True,
                       cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=8)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no reader" in r.stderr, r.stderr


def _fetch_answer(records: bytes, partitions: int, endpoints: bool) -> bytes:
    from kwire_cli.codec import encode_response
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0, "Responses": [
        {"TopicId": "AAAAAAAAAAAAAAAAAAAAAQ", "Partitions": [
            {"PartitionIndex": i, "ErrorCode": 0, "HighWatermark": 1, "LastStableOffset": 1, "LogStartOffset": 0,
             "AbortedTransactions": None, "PreferredReadReplica": -1, "Records": records}
            for i in range(partitions)]}]}
    if endpoints:
        body["NodeEndpoints"] = [{"NodeId": 1, "Host": "10.0.0.9", "Port": 9092, "Rack": None}]
    return encode_response(1, 16, {"CorrelationId": 3}, body)


def test_a_big_fetch_answer_without_endpoints_is_walked_not_decoded():
    """Every Fetch v16+ answer is held (it may carry NodeEndpoints); one of 20 MB without them is
    walked by the spec (records skipped by length) and forwarded as it came, allocating nothing
    of its size (decoding it took 38 MB and 90 ms of the event loop); with them it is rewritten."""
    import tracemalloc

    from kwire_cli.proxy.rewrite import AddressBook, rewrite_response
    seg = (ROOT / "fixtures" / "logs" / "kwire-produce-none-0" / "00000000000000000000.log").read_bytes()
    records = seg * (400_000 // len(seg))
    book = AddressBook(lambda _h, _p: ("127.0.0.1", 30001))
    big = _fetch_answer(records, 50, endpoints=False)
    assert len(big) > 19_000_000
    tracemalloc.start()
    try:
        assert rewrite_response(big, 1, 16, book) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    with_endpoints = _fetch_answer(records[:len(seg)], 2, endpoints=True)
    r = rewrite_response(with_endpoints, 1, 16, book)
    assert r is not None and r.changes == ["Fetch v16: broker addresses rewritten: 10.0.0.9:9092 -> 127.0.0.1:30001"]


def _spliced_versions() -> list[tuple[int, int]]:
    from kwire_cli.proxy.rewrite import SPLICED, carries_addresses
    from kwire_cli.spec.registry import registry
    out = []
    for k in sorted(SPLICED):
        vs = registry().apis[k].response.valid_versions
        out += [(k, v) for v in range(vs.lo, vs.hi + 1) if carries_addresses(k, v)]
    return out


@pytest.mark.parametrize("key,version", _spliced_versions())
def test_spliced_answers_of_every_address_api_equal_the_decoded_and_encoded_ones(key, version):
    """Answers generated from the specs (every field, random values, addresses where the spec has
    them): the walk that splices gives the bytes of the full decode and re-encode path, or leaves
    the answer to it; so DescribeCluster, DescribeQuorum, ShareFetch and ShareAcknowledge answers
    of any size are walked (records skipped by length), never decoded on the event loop."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kwire_cli.codec import encode_response
    from kwire_cli.errors import KwireError
    from kwire_cli.proxy.rewrite import AddressBook, NotSpliced, reencode_addresses, splice_addresses
    from kwire_cli.spec.registry import registry
    from spec_strategies import message_strategy

    spec = registry().apis[key].response

    @settings(max_examples=12, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(body=message_strategy(spec, version), host=st.sampled_from(["p", "proxy.a-longer-name.example"]))
    def check(body, host):
        try:
            frame = encode_response(key, version, {"CorrelationId": 9}, body)
        except KwireError:
            return
        ports: dict = {}

        def bind(h: str, p: int) -> tuple[str, int]:
            return ports.setdefault((h, p), (host, 30000 + len(ports)))
        try:
            spliced = splice_addresses(frame, key, version, AddressBook(bind))
        except NotSpliced:
            return
        full = reencode_addresses(frame, key, version, AddressBook(bind))
        if spliced is None or full is None:
            assert spliced is None and full is None
        else:
            assert (spliced.data, spliced.changes) == (full.data, full.changes)
    check()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux: /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").iterdir():
            todo.extend(int(c) for c in (task / "children").read_text().split())
    return out


def _peak_kb(pid: int) -> int:
    """A process's peak RSS since its exec (VmHWM, kB): ru_maxrss would also count the memory of the
    test process it was forked from, which earlier tests in the same worker may have grown."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def test_a_70_mb_api_versions_answer_is_forwarded_whole_and_its_decoding_stops_at_the_item_cap(tmp_path):
    """A broker answering ApiVersions with ten million api keys (70 MB): the client gets the answer
    byte for byte through ``kwire proxy``; the decoding process stops at the frame's item cap (the
    row names it) instead of building a tree of ten million entries (~2 GB); both processes stay
    under 1 GiB and the whole exchange within 10 s (it took ~45 s)."""
    big = api_versions_answer_fast(9, 10_000_000)
    assert len(big) > 70_000_000
    stop = threading.Event()
    bport = _broker_thread(stop, lambda _key, _corr: big)
    port = free_port()
    out, err = tmp_path / "out", tmp_path / "err"
    t = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{bport}",
                             "--listen", f"127.0.0.1:{port}", "--format", "jsonl"],
                            stdout=open(out, "wb"), stderr=open(err, "wb"), cwd=ROOT, start_new_session=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        deadline = time.monotonic() + 8
        while b"listening on" not in err.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(api_versions_request(9))
            got = bytearray()
            while len(got) < len(big):
                chunk = c.recv(1 << 20)
                assert chunk, len(got)
                got += chunk
        assert got == big  # forwarded as the broker sent it
        deadline = time.monotonic() + 8
        while out.read_bytes().count(b"\n") < 2:  # the decoding process wrote both rows
            assert time.monotonic() < deadline, out.read_text()[-2000:]
            time.sleep(0.05)
        peak_kb = max(_peak_kb(pid) for pid in _tree(proc.pid))  # the proxy's and its decoding process's
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, err.read_text()
    finally:
        stop.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.monotonic() - t
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    answer = next(r for r in rows if r["kind"] == "response")
    assert answer["size"] == len(big) - 4 and answer["body"] is None, answer
    assert "ApiKeys: more than 400,000 array items in one frame" in answer["error"], answer
    assert "(--max-records raises it)" in answer["error"]
    assert peak_kb * 1024 < 1 << 30, f"peak RSS {peak_kb >> 10} MiB"
    assert seconds < 10, f"{seconds:.1f} s"
