"""kwire proxy (issue 17, part 2): real clients (kafka-python, confluent-kafka/librdkafka, kafkajs)
produce and consume through the proxy to a real broker (tansu); every later connection comes
through the proxy (the broker addresses in the answers are rewritten), the rows are kwire pcap's,
and --write-pcap writes a capture kwire pcap reads back to the same frames. The pieces (the relay
that forwards bytes and cuts frames, the address rewriting) are tested on real bytes too."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kwire_cli.codec import decode_response, encode_response
from kwire_cli.proxy import AddressBook, FrameRelay, rewrite_response

ROOT = Path(__file__).resolve().parents[1]
HEX = ROOT / "fixtures" / "hex"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------
# the relay, on the bytes of a real conversation

def conversation_bytes() -> list[bytes]:
    return [bytes.fromhex((HEX / n).read_text().strip()) for n in
            ("metadata-response-v12.hex", "produce-response-v9.hex", "fetch-response-v13.hex")]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 100, 10_000])
def test_the_relay_forwards_every_byte_and_cuts_every_frame(step):
    frames = conversation_bytes()
    stream = b"".join(frames)
    relay = FrameRelay(1 << 20)
    forwarded, seen = bytearray(), []
    for i in range(0, len(stream), step):
        for act in relay.feed(stream[i:i + step]):
            if act[0] == "bytes":
                forwarded += act[1]
            else:
                seen.append(act[1])
                assert act[2] is False
    assert bytes(forwarded) == stream and seen == frames and relay.pending == 0


@pytest.mark.parametrize("step", [1, 5, 64, 10_000])
def test_the_relay_holds_the_frames_it_is_told_to_and_keeps_the_order(step):
    frames = conversation_bytes()
    metadata = frames[0]
    relay = FrameRelay(1 << 20, hold=lambda head: head == metadata[:8])
    out: list[bytes] = []
    for i in range(0, len(b"".join(frames)), step):
        for act in relay.feed(b"".join(frames)[i:i + step]):
            if act[0] == "bytes":
                out.append(act[1])
            elif act[2]:
                out.append(b"<" + act[1] + b">")  # the caller forwards a held frame where it completes
    assert b"".join(out) == b"<" + metadata + b">" + b"".join(frames[1:])


def test_the_relay_refuses_what_is_not_a_kafka_stream():
    from kwire_cli.errors import DecodeError
    with pytest.raises(DecodeError, match="frame size 1195725856 at stream offset 0 is not a Kafka frame"):
        FrameRelay(100 << 20).feed(b"GET / HTTP/1.1\r\n")


def test_rewriting_changes_the_addresses_and_nothing_else():
    raw = bytes.fromhex((HEX / "metadata-response-v12.hex").read_text().strip())
    bound = []
    book = AddressBook(lambda h, p: bound.append((h, p)) or ("127.0.0.1", 40000 + len(bound)))
    r = rewrite_response(raw, 3, 12, book)
    assert r is not None and r.changes[0].startswith("Metadata v12: broker addresses rewritten: ")
    before = decode_response(raw, 3, 12).body
    after = decode_response(r.data, 3, 12).body
    assert [(b["Host"], b["Port"]) for b in after["Brokers"]] == [("127.0.0.1", 40001 + i)
                                                                  for i in range(len(before["Brokers"]))]
    for b in after["Brokers"]:
        b["Host"], b["Port"] = next((h, p) for (h, p), loc in book.local.items() if loc == (b["Host"], b["Port"]))
    assert after == before  # the rest as it came
    again = rewrite_response(raw, 3, 12, book)
    assert again is not None and again.data == r.data and len(bound) == len(before["Brokers"])  # bound once each
    # an answer whose addresses are the proxy's already is forwarded unchanged
    assert rewrite_response(r.data, 3, 12, AddressBook(lambda h, p: (h, p))) is None


def test_apiversions_are_capped_where_the_proxy_could_not_rewrite():
    body = {"ErrorCode": 0, "ApiKeys": [{"ApiKey": 3, "MinVersion": 0, "MaxVersion": 99},
                                        {"ApiKey": 0, "MinVersion": 3, "MaxVersion": 99},
                                        {"ApiKey": 19, "MinVersion": 0, "MaxVersion": 99}],
            "ThrottleTimeMs": 0}
    raw = encode_response("ApiVersions", 3, {"CorrelationId": 1}, body)
    r = rewrite_response(raw, 18, 3, AddressBook(lambda h, p: (h, p)))
    assert r is not None
    keys = {k["ApiKey"]: k["MaxVersion"] for k in decode_response(r.data, 18, 3).body["ApiKeys"]}
    from kwire_cli.spec.registry import registry
    assert keys == {3: registry().api(3).request.valid_versions.hi, 0: registry().api(0).request.valid_versions.hi,
                    19: 99}  # CreateTopics carries no broker address: left as advertised
    assert "Metadata 99 -> " in r.changes[0]


def test_the_pcap_checksums_are_right_with_and_without_the_native_sum():
    import io
    import random
    import struct

    from kwire_cli.proxy import pcapout
    rng = random.Random(7)
    for n in [*range(12), 64999, 65000, 65001]:
        data = bytes(rng.choice((0, 255, rng.randrange(256))) for _ in range(n))
        for d in (data, b"\0" * n, b"\xff" * n):
            assert pcapout._sum(d) == pcapout._py_sum(d) == pcapout._py_sum(memoryview(d))
    for summer in {pcapout._sum, pcapout._py_sum}:
        f = io.BytesIO()
        old, pcapout._sum = pcapout._sum, summer
        try:
            out = pcapout.PcapOut(f)
            for ends in ((("127.0.0.1", 40000), ("127.0.0.1", 9092)), (("::1", 40001), ("::1", 9092))):
                c = out.connection(*ends)
                c.data(0, bytes(rng.randrange(256) for _ in range(70001)))
                c.data(1, b"\0" * 3)
                c.close()
            out.close()
        finally:
            pcapout._sum = old
        raw, pos, packets = f.getvalue(), 24, 0
        while pos < len(raw):
            (n,) = struct.unpack_from("<I", raw, pos + 8)
            pkt = raw[pos + 16:pos + 16 + n]
            pos += 16 + n
            packets += 1
            if pkt[0] >> 4 == 4:
                assert pcapout._csum(pkt[:20]) == 0
                pseudo = pkt[12:20] + struct.pack("!BBH", 0, 6, n - 20)
                seg = pkt[20:]
            else:
                pseudo = pkt[8:40] + struct.pack("!I3xB", n - 40, 6)
                seg = pkt[40:]
            assert pcapout._csum(pseudo + seg) == 0  # a right checksum sums to all ones
        assert packets == 2 * (3 + 2 + 1 + 3)


def test_a_listen_port_in_use_is_an_error_at_once(tmp_path):
    """The decoding process is already running when the listener fails: it is stopped too, and the
    proxy exits 1 at once (it once hung at exit, waiting for it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "kwire_cli", "proxy", "--broker", "127.0.0.1:9", "--listen",
                            f"127.0.0.1:{port}", "--write-pcap", str(tmp_path / "x.pcap")], capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert r.returncode == 1 and "address already in use" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------------
# real clients through the proxy to tansu

class Running:
    def __init__(self, broker: int, tmp: Path, *args: str):
        self.port = free_port()
        self.pcap = tmp / f"proxy-{self.port}.pcap"
        self.out, self.err = tmp / f"proxy-{self.port}.out", tmp / f"proxy-{self.port}.err"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kwire_cli", "proxy", "--broker", f"127.0.0.1:{broker}", "--listen",
             f"127.0.0.1:{self.port}", "--node-ports", f"{self.port + 1}-{self.port + 50}", "--format", "jsonl",
             "--summary", "--write-pcap", str(self.pcap), *args],
            stdout=open(self.out, "wb"), stderr=open(self.err, "wb"), env=env, cwd=ROOT)
        deadline = time.monotonic() + 20
        while b"listening on" not in self.err.read_bytes():
            assert self.proc.poll() is None and time.monotonic() < deadline, self.err.read_text()
            time.sleep(0.1)

    def stop(self) -> tuple[list[dict], dict]:
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=30) == 0, self.err.read_text()
        lines = self.out.read_text().splitlines()
        rows = [json.loads(x) for x in lines[:-1]]
        return rows, json.loads(lines[-1])


def check_through_proxy(rows: list[dict], summary: dict, px: Running) -> None:
    assert rows and all(r["error"] is None for r in rows), [r["error"] for r in rows if r["error"]][:3]
    assert summary["reconciled"] and summary["proxy"]["upstream_failures"] == 0
    (real, local), = summary["proxy"]["brokers"].items()
    assert local.endswith(f":{px.port + 1}")
    # every Metadata answer the client got named the proxy, and its connections came through it
    md = [r for r in rows if r["api_name"] == "Metadata" and r["kind"] == "response"]
    assert md and all(any("broker addresses rewritten" in n for n in r.get("notes") or []) for r in md)
    assert {r["api_name"] for r in rows} >= {"Produce", "Fetch"}
    assert summary["proxy"]["connections"] >= 2
    # the pcap it wrote is the client's side of the same conversations: kwire pcap reads the same frames
    r = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(px.pcap), "--port", str(px.port),
                        "--port", str(px.port + 1), "--format", "jsonl"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    again = [json.loads(x) for x in r.stdout.splitlines()]
    def key(x: dict) -> tuple:
        rewritten = x["api_name"] in ("Metadata", "FindCoordinator", "DescribeCluster", "ApiVersions")
        return x["api_name"], x["kind"], x["correlation_id"], None if rewritten else x["size"]

    assert Counter(map(key, again)) == Counter(map(key, rows))
    assert all(x["error"] is None for x in again)


def test_kafka_python_produces_and_consumes_in_a_group_through_the_proxy(tansu_port, tmp_path):
    from kafka import KafkaConsumer, KafkaProducer
    px = Running(tansu_port, tmp_path)
    try:
        boot = f"127.0.0.1:{px.port}"
        p = KafkaProducer(bootstrap_servers=boot, client_id="kwire-proxy-kp", acks=1)
        sent = [(b"k%d" % i, b"v%d" % i) for i in range(20)]
        for k, v in sent:
            p.send("proxy-kp", key=k, value=v)
        p.flush()
        p.close()
        c = KafkaConsumer("proxy-kp", bootstrap_servers=boot, group_id="kwire-proxy-group", client_id="kwire-proxy-kc",
                          auto_offset_reset="earliest", enable_auto_commit=False)
        got, deadline = [], time.monotonic() + 90  # tansu delays a group's first rebalance (~20 s)
        while len(got) < len(sent) and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=1000).values():
                got += [(m.key, m.value) for m in msgs]
        got.sort()
        c.commit()
        c.close()
    finally:
        rows, summary = px.stop()
    assert got == sorted(sent)
    check_through_proxy(rows, summary, px)
    fc = [r for r in rows if r["api_name"] == "FindCoordinator" and r["kind"] == "response"]
    assert fc and all(any("broker addresses rewritten" in n for n in r["notes"]) for r in fc)
    produced = sum(len(b.get("Records") or []) for r in rows if r["api_name"] == "Produce" and r["kind"] == "request"
                   for t in r["body"]["TopicData"] for pd in t["PartitionData"] for b in pd["Records"]["batches"])
    assert produced == len(sent)
    assert {"JoinGroup", "SyncGroup", "OffsetCommit"} <= {r["api_name"] for r in rows}


def test_confluent_kafka_through_the_proxy(tansu_port, tmp_path):
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra (pip install 'kwire[test]')")
    px = Running(tansu_port, tmp_path)
    try:
        boot = f"127.0.0.1:{px.port}"
        p = ck.Producer({"bootstrap.servers": boot, "client.id": "kwire-proxy-ck", "acks": "all"})
        for i in range(10):
            p.produce("proxy-ck", key=b"k%d" % i, value=b"v%d" % i)
        assert p.flush(20) == 0
        c = ck.Consumer({"bootstrap.servers": boot, "group.id": "kwire-proxy-ck-group", "auto.offset.reset": "earliest",
                         "client.id": "kwire-proxy-ckc"})
        c.subscribe(["proxy-ck"])
        got, deadline = [], time.monotonic() + 90  # tansu delays a group's first rebalance (~20 s)
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.key(), m.value()))
        c.close()
    finally:
        rows, summary = px.stop()
    assert sorted(got) == sorted((b"k%d" % i, b"v%d" % i) for i in range(10))
    check_through_proxy(rows, summary, px)


KAFKAJS = ROOT / "scripts" / "record" / "node_modules" / "kafkajs"


def test_kafkajs_through_the_proxy(tansu_port, tmp_path):
    if shutil.which("node") is None or not KAFKAJS.is_dir():
        pytest.skip("node and kafkajs are needed (scripts/setup.sh --test runs npm install in scripts/record)")
    px = Running(tansu_port, tmp_path)
    script = tmp_path / "kjs.js"
    script.write_text(f"""
const {{ Kafka, logLevel }} = require({json.dumps(str(KAFKAJS))});
(async () => {{
  const kafka = new Kafka({{ clientId: 'kwire-proxy-kjs', brokers: ['127.0.0.1:{px.port}'], logLevel: logLevel.NOTHING }});
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({{ topic: 'proxy-kjs', messages: [...Array(10).keys()].map(i => ({{ key: 'k' + i, value: 'v' + i }})) }});
  await producer.disconnect();
  const consumer = kafka.consumer({{ groupId: 'kwire-proxy-kjs-group' }});
  await consumer.connect();
  await consumer.subscribe({{ topic: 'proxy-kjs', fromBeginning: true }});
  const got = [];
  await new Promise((resolve) => {{
    consumer.run({{ eachMessage: async ({{ message }}) => {{ got.push(message.key.toString()); if (got.length >= 10) resolve(); }} }});
    setTimeout(resolve, 90000);
  }});
  await consumer.disconnect();
  console.log(JSON.stringify(got.sort()));
}})().catch((e) => {{ console.error(e); process.exit(1); }});
""")
    try:
        r = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=180)
    finally:
        rows, summary = px.stop()
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == sorted(f"k{i}" for i in range(10))
    check_through_proxy(rows, summary, px)
