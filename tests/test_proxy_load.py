"""kwire proxy under load, in its own process: 2,000 connections held at once (each with a request
answered, left open, to a broker that holds them too: every client answered, the proxy's resident
memory grows by a bounded amount per connection), and 20,000 records produced with acks=all
through it to a real broker, all consumed back equal and all in the pcap it wrote."""
from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from proxy_faults import free_port, heartbeat_answer, heartbeat_request

ROOT = Path(__file__).resolve().parents[1]
N = 2000

BROKER = """
import socket, selectors, struct, sys
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(4096); srv.setblocking(False)
print(srv.getsockname()[1], flush=True)
sel = selectors.DefaultSelector(); sel.register(srv, selectors.EVENT_READ)
bufs = {}
ans = bytes.fromhex(sys.argv[1])
while True:
    for key, _ in sel.select():
        s = key.fileobj
        if s is srv:
            c, _ = srv.accept(); c.setblocking(False); sel.register(c, selectors.EVENT_READ); bufs[c] = b""
            continue
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s); s.close(); bufs.pop(s, None); continue
        b = bufs[s] + data
        while len(b) >= 4 and len(b) >= 4 + int.from_bytes(b[:4], "big"):
            corr = b[8:12]
            b = b[4 + int.from_bytes(b[:4], "big"):]
            s.sendall(ans[:8 - 4] + corr + ans[8:])
        bufs[s] = b
"""


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_two_thousand_held_connections_stay_small(tmp_path):
    answer = heartbeat_answer(0)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    broker = subprocess.Popen([sys.executable, "-c", BROKER, answer.hex()], stdout=subprocess.PIPE, text=True)
    port = free_port()
    err = tmp_path / "err"
    proxy = subprocess.Popen([sys.executable, "-m", "kwire_cli", "proxy", "--broker",
                              f"127.0.0.1:{broker.stdout.readline().strip()}", "--listen", f"127.0.0.1:{port}",
                              "--format", "jsonl", "--summary"], stdout=subprocess.DEVNULL,
                             stderr=open(err, "wb"), cwd=ROOT, env=env)
    clients: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 8
        while b"listening on" not in err.read_bytes():
            assert proxy.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.05)
        time.sleep(0.3)
        before = rss_mb(proxy.pid)
        sel = selectors.DefaultSelector()
        for i in range(N):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(heartbeat_request(i))
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ, [i, b""])
            clients.append(c)
        answered = 0
        deadline = time.monotonic() + 20
        while answered < N and time.monotonic() < deadline:
            for key, _ in sel.select(1):
                want, got = key.data
                got += key.fileobj.recv(100)
                key.data[1] = got
                if len(got) == len(answer):
                    assert got == heartbeat_answer(want)
                    answered += 1
                    sel.unregister(key.fileobj)
        assert answered == N
        grown = rss_mb(proxy.pid) - before
        assert grown < 100, grown  # about 26 KB a connection: both its sockets, buffers, relays
    finally:
        for c in clients:
            c.close()
        proxy.send_signal(signal.SIGINT)
        try:
            proxy.wait(timeout=20)
        finally:
            broker.kill()
            broker.wait()
    print(f"{N} held connections: proxy RSS +{grown:.1f} MB")


def test_twenty_thousand_records_with_acks_all_through_the_proxy_come_back_equal(tansu_port, tmp_path):
    """kafka-python produces 20,000 records with keys, values and headers, acks=all, through the
    proxy; they are all consumed back equal, and all of them are in the proxy's rows and in the pcap
    it wrote (kwire pcap reads them back)."""
    import json

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from test_proxy import Running
    n = 20_000
    px = Running(tansu_port, tmp_path)
    try:
        boot = f"127.0.0.1:{px.port}"
        p = KafkaProducer(bootstrap_servers=boot, client_id="kwire-load", acks="all", linger_ms=5)
        sent = [(b"k%d" % i, b"v%d" % i * (1 + i % 7), [("h", b"%d" % i)]) for i in range(n)]
        futures = [p.send("proxy-load", key=k, value=v, headers=h, partition=0) for k, v, h in sent]
        p.flush()
        assert all(f.get(timeout=30) is not None for f in futures)  # every one acknowledged
        p.close()
        c = KafkaConsumer(bootstrap_servers=boot, client_id="kwire-load-c", enable_auto_commit=False)
        tp = TopicPartition("proxy-load", 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got, deadline = [], time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=1000).values():
                got += [(m.key, m.value, [(hk, hv) for hk, hv in m.headers]) for m in msgs]
        c.close()
    finally:
        rows, summary = px.stop()
    assert got == sent
    def produced(rs: list[dict]) -> int:
        return sum(len(b.get("Records") or []) for r in rs if r["api_name"] == "Produce" and r["kind"] == "request"
                   for t in r["body"]["TopicData"] for pd in t["PartitionData"] for b in pd["Records"]["batches"])
    assert produced(rows) == n and summary["proxy"]["upstream_failures"] == 0
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(px.pcap), "--port", str(px.port),
                        "--port", str(px.port + 1), "--format", "jsonl"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert produced([json.loads(x) for x in r.stdout.splitlines()]) == n
