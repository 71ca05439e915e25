#!/usr/bin/env python3
"""The clients of scripts/record_analysis.py, one per process, each writing what it saw itself.

    consumer BOOTSTRAP GROUP TOPIC OUT [--max-records N] [--fetch-one]
        a kafka-python group member: writes a JSON line to OUT each time its generation or
        assignment changes (``group_metadata()``, ``assignment()``); with --max-records it stops
        after N records, commits, and writes its ``highwater()``, ``position()`` and ``committed()``
        per partition; SIGTERM closes it (LeaveGroup), SIGKILL leaves it to time out.
    idempotent BOOTSTRAP TOPIC OUT N       confluent-kafka, enable.idempotence: N records over the
        topic's partitions; writes the last statistics callback's eos and per-partition figures.
    transactional BOOTSTRAP TOPIC OUT      confluent-kafka, transactional.id: commit, abort, commit.
"""
from __future__ import annotations

import json
import signal
import sys
import time

SESSION_MS = 6000


def emit(out, **kv) -> None:
    out.write(json.dumps(kv) + "\n")
    out.flush()


def consumer(bootstrap: str, group: str, topic: str, path: str, max_records: int | None,
             fetch_one: bool) -> None:
    from kafka import KafkaConsumer, TopicPartition
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    extra = {"max_partition_fetch_bytes": 1, "max_poll_records": 1} if fetch_one else {}
    from kafka import ConsumerRebalanceListener
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=f"an-{path.rsplit('/', 1)[-1]}",
                      session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000, max_poll_interval_ms=20000,
                      auto_offset_reset="earliest", enable_auto_commit=False, **extra)
    out = open(path, "w")  # noqa: SIM115 (closed at the end)
    asg: dict = {}

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):  # after SyncGroup: this generation's assignment
            md = c.group_metadata()
            asg.clear()
            for tp in assigned:
                asg.setdefault(tp.topic, []).append(tp.partition)
            emit(out, event="generation", generation_id=md.generation_id, member_id=md.member_id,
                 assignment={t: sorted(p) for t, p in sorted(asg.items())}, ts=time.time())

    c.subscribe([topic], listener=Listener())
    got = 0
    first: dict = {}  # the first record received: its offset and the highwater then
    with out:
        deadline = time.monotonic() + 120
        while not stop and time.monotonic() < deadline:
            recs = c.poll(timeout_ms=200, max_records=1 if fetch_one else None)
            for batch in recs.values():
                if batch and got == 0:
                    tp0 = TopicPartition(topic, batch[0].partition)
                    first.update(offset=batch[0].offset, highwater=c.highwater(tp0))
                got += len(batch)
            if max_records is not None and got >= max_records:
                c.commit()
                tps = [TopicPartition(topic, p) for p in sorted(asg.get(topic, []))]
                emit(out, event="offsets", records=got, first=first, partitions=[
                    {"topic": tp.topic, "partition": tp.partition, "highwater": c.highwater(tp),
                     "position": c.position(tp), "committed": c.committed(tp)} for tp in tps])
                break
        c.close()
        emit(out, event="closed")


def rdconsumer(bootstrap: str, group: str, topic: str, path: str, n: int) -> None:
    """A confluent-kafka group member: reads N records, commits, and writes the statistics
    callback's figures for its partitions once the commit is in them."""
    from confluent_kafka import Consumer
    last: dict = {}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "an-rdkafka-consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "statistics.interval.ms": 100,
                  "stats_cb": lambda s: last.update(json.loads(s))})
    c.subscribe([topic])
    got, first = 0, None
    deadline = time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            first = m.offset() if first is None else first
            got += 1
    c.commit(asynchronous=False)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.5:
        c.poll(0.1)
    parts = {}
    for pid, part in ((last.get("topics") or {}).get(topic) or {}).get("partitions", {}).items():
        if int(pid) >= 0:
            parts[pid] = {k: part.get(k) for k in ("hi_offset", "committed_offset", "consumer_lag", "app_offset",
                                                   "next_offset", "fetch_state")}
    c.close()
    with open(path, "w") as out:
        json.dump({"records": got, "first_offset": first, "partitions": parts}, out, indent=1)


def idempotent(bootstrap: str, topic: str, path: str, n: int) -> None:
    from confluent_kafka import Producer
    last = {}
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "client.id": "an-idempotent",
                  "statistics.interval.ms": 100, "linger.ms": 5,
                  "stats_cb": lambda s: last.update(json.loads(s))})
    for i in range(n):
        p.produce(topic, value=f"idem-{i}".encode(), partition=i % 2)
        if i % 5 == 4:
            p.flush(10)
    p.flush(10)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        p.poll(0.1)
    write_stats(path, last, topic, {"records_sent": n})


def write_stats(path: str, st: dict, topic: str, more: dict) -> None:
    parts = {}
    for pid, part in ((st.get("topics") or {}).get(topic) or {}).get("partitions", {}).items():
        if int(pid) >= 0:
            parts[pid] = {k: part.get(k) for k in ("txmsgs", "txbytes", "msgs", "next_ack_seq", "next_err_seq",
                                                   "acked_msgid")}
    with open(path, "w") as out:
        json.dump(dict(more, eos=st.get("eos"), partitions=parts), out, indent=1)


def transactional(bootstrap: str, topic: str, path: str) -> None:
    from confluent_kafka import Producer
    last = {}
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "an-tx", "client.id": "an-transactional",
                  "statistics.interval.ms": 100, "stats_cb": lambda s: last.update(json.loads(s))})
    p.init_transactions(10)
    done = []
    for k, (n, commit) in enumerate([(3, True), (2, False), (1, True)]):
        p.begin_transaction()
        for i in range(n):
            p.produce(topic, value=f"tx{k}-{i}".encode(), partition=0)
        p.flush(10)
        if commit:
            p.commit_transaction(10)
        else:
            p.abort_transaction(10)
        done.append("commit" if commit else "abort")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        p.poll(0.1)
    write_stats(path, last, topic, {"transactions": done})


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "consumer":
        mx = int(a[a.index("--max-records") + 1]) if "--max-records" in a else None
        consumer(a[1], a[2], a[3], a[4], mx, "--fetch-one" in a)
    elif a[0] == "rdconsumer":
        rdconsumer(a[1], a[2], a[3], a[4], int(a[5]))
    elif a[0] == "idempotent":
        idempotent(a[1], a[2], a[3], int(a[4]))
    elif a[0] == "transactional":
        transactional(a[1], a[2], a[3])
