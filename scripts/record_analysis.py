#!/usr/bin/env python3
"""Record the fixtures of kwire's analysis sections against tansu, with what the clients saw.

    python scripts/record_analysis.py [--out fixtures/analysis] [--only group,lag,producers]

Each scenario: a fresh in-memory tansu broker on a free loopback port, its topics created before
the capture starts, tcpdump on that port, the clients of scripts/record/analysis_clients.py in
their own processes. Each writes what it saw itself (kafka-python: generation, member id and
assignment after each rebalance, ``highwater()``, ``position()``, ``committed()``;
confluent-kafka: the statistics callback's ``eos`` and per-partition figures), gathered into
``analysis-<scenario>.json`` beside ``analysis-<scenario>.pcap``; tests/test_analysis_clients.py
checks kwire's sections against those.

* group: three kafka-python members of group an-group on a 4-partition topic join one by one,
  the second closes (LeaveGroup), the third is killed (SIGKILL: its session, 6 s, times out).
* lag: 30 records, one batch each; a kafka-python member reading one record per poll stops after 10
  and commits; a confluent-kafka member of another group reads 12, commits (its statistics after).
* producers: a confluent-kafka idempotent producer (20 records over 2 partitions) and a
  transactional one (commit 3 records, abort 2, commit 1).
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from record_fixtures import (  # noqa: E402
    RecordError,
    create_topics_uncaptured,
    find_tansu,
    free_port,
    log,
    tansu,
    tcpdump,
)

CLIENTS = HERE / "record" / "analysis_clients.py"


def client(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CLIENTS), *args], stdin=subprocess.DEVNULL)


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def wait_for(cond, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise RecordError(f"timed out waiting for {what}")


def generations(path: Path) -> list[int]:
    return [e["generation_id"] for e in lines(path) if e["event"] == "generation"]


def scenario_group(bootstrap: str, work: Path) -> dict:
    files = {n: work / n for n in ("member-a", "member-b", "member-c")}
    procs = {}

    def start(n: str) -> None:
        procs[n] = client("consumer", bootstrap, "an-group", "an-group-topic", str(files[n]))

    def settled(names: list[str]) -> bool:  # every named member saw the same, newest generation
        gs = [generations(files[n]) for n in names]
        return all(gs) and len({g[-1] for g in gs}) == 1 and gs[0][-1] == max(max(g) for g in gs)

    start("member-a")
    wait_for(lambda: settled(["member-a"]), "member-a's first generation")
    for n, members in (("member-b", ["member-a", "member-b"]), ("member-c", ["member-a", "member-b", "member-c"])):
        before = generations(files["member-a"])[-1]
        start(n)
        wait_for(lambda m=members, b=before: settled(m) and generations(files["member-a"])[-1] > b, f"{n} joining")
    before = generations(files["member-a"])[-1]
    procs["member-b"].send_signal(signal.SIGTERM)  # closes: LeaveGroup
    procs["member-b"].wait(30)
    wait_for(lambda: generations(files["member-a"])[-1] > before and settled(["member-a", "member-c"]),
             "the group without member-b")
    before = generations(files["member-a"])[-1]
    procs["member-c"].kill()  # no LeaveGroup: its session times out
    procs["member-c"].wait(30)
    wait_for(lambda: generations(files["member-a"])[-1] > before, "the group without member-c", timeout=60)
    time.sleep(1.5)
    procs["member-a"].send_signal(signal.SIGTERM)
    procs["member-a"].wait(30)
    return {"group_id": "an-group", "members": {n: lines(f) for n, f in files.items()},
            "killed": "member-c", "closed": ["member-b", "member-a"]}


def scenario_lag(bootstrap: str, work: Path) -> dict:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id="an-lag-producer", linger_ms=0)
    for i in range(30):
        p.send("an-lag-topic", value=f"lag-{i}".encode(), partition=0).get(10)  # one batch each
    p.close()
    f = work / "lagging"
    c = client("consumer", bootstrap, "an-lag-group", "an-lag-topic", str(f), "--max-records", "10", "--fetch-one")
    c.wait(90)
    rd = work / "rdkafka"
    c = client("rdconsumer", bootstrap, "an-rdlag-group", "an-lag-topic", str(rd), "12")
    if c.wait(90) != 0:
        raise RecordError("the confluent-kafka consumer failed")
    return {"group_id": "an-lag-group", "produced": 30, "consumer": lines(f),
            "rdkafka_group_id": "an-rdlag-group", "rdkafka_consumer": json.loads(rd.read_text())}


def scenario_producers(bootstrap: str, work: Path) -> dict:
    out = {}
    for kind, args in (("idempotent", ("an-idem-topic", str(work / "idempotent"), "20")),
                       ("transactional", ("an-tx-topic", str(work / "transactional")))):
        c = client(kind, bootstrap, *args)
        if c.wait(90) != 0:
            raise RecordError(f"the {kind} producer failed")
        out[kind] = json.loads(Path(args[1]).read_text())
    return out


SCENARIOS = {
    "group": (scenario_group, [("an-group-topic", 4)]),
    "lag": (scenario_lag, [("an-lag-topic", 1)]),
    "producers": (scenario_producers, [("an-idem-topic", 2), ("an-tx-topic", 1)]),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE.parent / "fixtures" / "analysis"))
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--tansu")
    args = ap.parse_args()
    binary = find_tansu(args.tansu)
    out = Path(args.out)
    for name in args.only.split(","):
        run, topics = SCENARIOS[name]
        port = free_port()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            with tansu(binary, port, port, work, name):
                bootstrap = f"127.0.0.1:{port}"
                create_topics_uncaptured(bootstrap, topics)
                pcap = out / f"analysis-{name}.pcap"
                with tcpdump(pcap, port) as stats:
                    seen = run(bootstrap, work)
            seen["port"] = port
            seen["tcpdump"] = stats
            (out / f"analysis-{name}.json").write_text(json.dumps(seen, indent=1) + "\n")
            log(f"{name}: {pcap} ({pcap.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RecordError as e:
        log(f"error: {e}")
        sys.exit(1)
