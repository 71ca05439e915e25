#!/usr/bin/env python3
"""Python-client scenarios for scripts/record_fixtures.py (kafka-python and confluent-kafka).

Run as a subprocess so that every socket of the client is closed when the scenario ends:

    python scripts/record/scenarios.py < job.json

job.json: {"client": "kafka-python" | "confluent-kafka", "scenario": "admin" | "produce" |
"consume" | "rotated" | "bulk-produce" | "bulk-consume", "bootstrap": "127.0.0.1:9092", "plan": {...}}
(the plan is built by record_fixtures.build_plan()).  Prints one JSON object on stdout: what the
client actually did (calls made, records sent with their delivery reports, records consumed).
"""
from __future__ import annotations

import json
import sys
import time
import traceback


def _b(s):
    return None if s is None else s.encode("utf-8")


def _s(b):
    return None if b is None else bytes(b).decode("utf-8")


def _call(calls, name, fn):
    """Run one admin call, noting whether it worked; never raise."""
    try:
        result = fn()
        try:
            shown = json.loads(json.dumps(result))
        except TypeError:
            shown = str(result)[:300]
        calls.append({"call": name, "ok": True, "result": shown})
        return result
    except Exception as exc:  # the point is to record what the broker does not support
        calls.append({"call": name, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return None


# --------------------------------------------------------------------------- kafka-python
def kp_admin(bootstrap, plan):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    calls = []
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=plan["client_ids"]["kafka-python"],
                             request_timeout_ms=10000)
    topics = plan["admin_topics"]
    _call(calls, "CreateTopics", lambda: str(admin.create_topics(
        [NewTopic(t["name"], t["partitions"], 1) for t in topics], timeout_ms=10000)))
    _call(calls, "Metadata(list_topics)", lambda: sorted(admin.list_topics()))
    _call(calls, "Metadata(describe_topics)", lambda: [
        {"topic": t["name"], "partitions": len(t["partitions"])}
        for t in admin.describe_topics([t["name"] for t in topics])])
    node_id = _call(calls, "DescribeCluster", lambda: admin.describe_cluster()["brokers"][0]["broker_id"])
    _call(calls, "DescribeConfigs(topic)", lambda: str(admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topics[0]["name"])]))[:300])
    if node_id is not None:
        _call(calls, "DescribeConfigs(broker)", lambda: str(admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(node_id))]))[:300])
    _call(calls, "ListGroups", lambda: [str(g) for g in admin.list_groups()])
    _call(calls, "DeleteTopics", lambda: str(admin.delete_topics([t["name"] for t in topics], timeout_ms=10000)))
    admin.close()
    return {"calls": calls}


def kp_produce(bootstrap, plan, batches=None):
    from kafka import KafkaProducer

    sent = []
    for batch in batches if batches is not None else plan["produce"]:
        codec = batch["compression"]
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, client_id=plan["client_ids"]["kafka-python"],
            compression_type=None if codec == "none" else codec, acks=batch["acks"], linger_ms=100,
            max_request_size=2_000_000)
        futures = []
        for r in batch["records"]:
            futures.append((r, producer.send(
                batch["topic"], key=_b(r["key"]), value=_b(r["value"]), partition=r["partition"],
                headers=[(k, _b(v)) for k, v in r["headers"]], timestamp_ms=r["timestamp"])))
        producer.flush(timeout=20)
        for r, fut in futures:
            entry = dict(r, topic=batch["topic"], compression=codec, acks=batch["acks"])
            try:
                md = fut.get(timeout=20)
                entry.update(delivered=True, offset=md.offset if batch["acks"] != 0 else None)
            except Exception as exc:
                entry.update(delivered=False, error=f"{type(exc).__name__}: {exc}")
            sent.append(entry)
        producer.close(timeout=10)
    return {"sent": sent}


def kp_consume(bootstrap, plan):
    from kafka import KafkaConsumer

    topics = plan["consume_topics"]["kafka-python"]
    expected = plan["consume_expected"]["kafka-python"]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id=plan["client_ids"]["kafka-python"], group_id=plan["group"],
        auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=500,
        session_timeout_ms=10000, fetch_max_wait_ms=200)
    consumer.subscribe(topics)
    got = []
    deadline = time.monotonic() + 40
    while len(got) < expected and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=500).values():
            for m in msgs:
                got.append({"topic": m.topic, "partition": m.partition, "offset": m.offset, "key": _s(m.key),
                            "value": _s(m.value), "headers": [[k, _s(v)] for k, v in m.headers],
                            "timestamp": m.timestamp})
    committed = None
    try:
        consumer.commit()
        committed = True
    except Exception as exc:
        committed = f"{type(exc).__name__}: {exc}"
    # keep the membership alive a little so that heartbeats go out
    end = time.monotonic() + plan["heartbeat_seconds"]
    while time.monotonic() < end:
        consumer.poll(timeout_ms=200)
    consumer.close()
    return {"group": plan["group"], "topics": topics, "consumed": got, "committed": committed}


# --------------------------------------------------------------------------- confluent-kafka
def ck_admin(bootstrap, plan):
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    calls = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": plan["client_ids"]["confluent-kafka"]})
    topics = plan["admin_topics"]

    def wait_all(futs):
        return {k: (None if f.result(timeout=15) is None else str(f.result())) for k, f in futs.items()}

    _call(calls, "CreateTopics", lambda: wait_all(admin.create_topics(
        [NewTopic(t["name"], num_partitions=t["partitions"], replication_factor=1) for t in topics],
        operation_timeout=10)))
    md = _call(calls, "Metadata(list_topics)", lambda: admin.list_topics(timeout=10))
    node_id = next(iter(md.brokers)) if md is not None and md.brokers else None
    _call(calls, "DescribeConfigs(topic)", lambda: {
        str(k): sorted(v.result(timeout=15))[:10]
        for k, v in admin.describe_configs([ConfigResource("topic", topics[0]["name"])]).items()})
    if node_id is not None:
        _call(calls, "DescribeConfigs(broker)", lambda: {
            str(k): sorted(v.result(timeout=15))[:10]
            for k, v in admin.describe_configs([ConfigResource("broker", str(node_id))]).items()})
    _call(calls, "DescribeCluster", lambda: str(admin.describe_cluster().result(timeout=15).nodes))
    _call(calls, "ListGroups", lambda: [g.group_id for g in admin.list_consumer_groups().result(timeout=15).valid])
    _call(calls, "DeleteTopics", lambda: wait_all(admin.delete_topics([t["name"] for t in topics],
                                                                         operation_timeout=10)))
    _call(calls, "Metadata(after delete)", lambda: sorted(admin.list_topics(timeout=10).topics))
    admin = None
    return {"calls": calls}


def ck_produce(bootstrap, plan, batches=None):
    from confluent_kafka import Producer

    sent = []
    for batch in batches if batches is not None else plan["produce"]:
        codec = batch["compression"]
        producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": plan["client_ids"]["confluent-kafka"],
            "compression.type": codec, "acks": str(batch["acks"]), "linger.ms": 100,
            "enable.idempotence": False})
        entries = []

        def report(err, msg, entry):
            if err is not None:
                entry.update(delivered=False, error=str(err))
            else:
                entry.update(delivered=True, offset=msg.offset() if entry["acks"] != 0 else None)

        for r in batch["records"]:
            entry = dict(r, topic=batch["topic"], compression=codec, acks=batch["acks"])
            entries.append(entry)
            producer.produce(batch["topic"], key=_b(r["key"]), value=_b(r["value"]), partition=r["partition"],
                             headers=[(k, _b(v)) for k, v in r["headers"]], timestamp=r["timestamp"],
                             on_delivery=lambda err, msg, entry=entry: report(err, msg, entry))
        left = producer.flush(20)
        if left:
            for e in entries:
                e.setdefault("delivered", False)
                e.setdefault("error", "not delivered within 20 s")
        sent.extend(entries)
        del producer
    return {"sent": sent}


def ck_consume(bootstrap, plan):
    from confluent_kafka import Consumer

    topics = plan["consume_topics"]["confluent-kafka"]
    expected = plan["consume_expected"]["confluent-kafka"]
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "client.id": plan["client_ids"]["confluent-kafka"],
        "group.id": plan["group"], "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "heartbeat.interval.ms": 500, "session.timeout.ms": 10000, "fetch.wait.max.ms": 200})
    consumer.subscribe(topics)
    got = []
    errors = []
    deadline = time.monotonic() + 40
    while len(got) < expected and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(str(m.error()))
            continue
        got.append({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(), "key": _s(m.key()),
                    "value": _s(m.value()), "headers": [[k, _s(v)] for k, v in (m.headers() or [])],
                    "timestamp": m.timestamp()[1]})
    committed = None
    try:
        consumer.commit(asynchronous=False)
        committed = True
    except Exception as exc:
        committed = f"{type(exc).__name__}: {exc}"
    end = time.monotonic() + plan["heartbeat_seconds"]
    while time.monotonic() < end:
        consumer.poll(0.2)
    consumer.close()
    return {"group": plan["group"], "topics": topics, "consumed": got, "committed": committed, "errors": errors}


def ck_feature_log(bootstrap, plan):
    """debug=feature: librdkafka prints its ApiVersions view (on stderr, captured by the caller)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": plan["client_ids"]["confluent-kafka"],
                         "debug": "feature"})
    md = admin.list_topics(timeout=10)
    time.sleep(0.5)
    del admin
    return {"brokers": sorted(md.brokers)}


# --------------------------------------------------------------------------- bulk (kafka-python)
def kp_bulk_produce(bootstrap, plan):
    from kafka import KafkaProducer

    bulk = plan["bulk"]
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=plan["client_ids"]["kafka-python"],
                             compression_type=None if bulk["compression"] == "none" else bulk["compression"],
                             acks=1, linger_ms=20, batch_size=256 * 1024, max_request_size=4_000_000)
    t0 = time.monotonic()
    for i in range(bulk["count"]):
        producer.send(bulk["topic"], key=b"k-%d" % i, value=b"bulk-value-%08d-" % i + b"x" * bulk["pad"],
                      partition=i % bulk["partitions"], headers=[("n", b"%d" % i)],
                      timestamp_ms=plan["base_timestamp"] + i)
    producer.flush(timeout=300)
    producer.close(timeout=30)
    return {"produced": bulk["count"], "seconds": round(time.monotonic() - t0, 2)}


def kp_bulk_consume(bootstrap, plan):
    from kafka import KafkaConsumer, TopicPartition

    bulk = plan["bulk"]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=plan["client_ids"]["kafka-python"],
                             group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                             max_partition_fetch_bytes=4 * 1024 * 1024, fetch_max_bytes=16 * 1024 * 1024)
    consumer.assign([TopicPartition(bulk["topic"], p) for p in range(bulk["partitions"])])
    consumer.seek_to_beginning()
    got = 0
    t0 = time.monotonic()
    deadline = t0 + 300
    while got < bulk["count"] and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=500, max_records=100000).values():
            got += len(msgs)
    consumer.close()
    return {"consumed": got, "seconds": round(time.monotonic() - t0, 2)}


def kp_rotated(bootstrap, plan):
    """One producer (so one connection to the broker) sending each batch and flushing in between."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=plan["client_ids"]["kafka-python"],
                             acks="all", linger_ms=0, max_request_size=2_000_000)
    sent = []
    for batch in plan["rotated"]:
        for r in batch["records"]:
            entry = dict(r, topic=batch["topic"], compression=batch["compression"], acks=batch["acks"])
            fut = producer.send(batch["topic"], key=_b(r["key"]), value=_b(r["value"]), partition=r["partition"],
                                headers=[(k, _b(v)) for k, v in r["headers"]], timestamp_ms=r["timestamp"])
            producer.flush(timeout=20)
            try:
                entry.update(delivered=True, offset=fut.get(timeout=20).offset)
            except Exception as exc:
                entry.update(delivered=False, error=f"{type(exc).__name__}: {exc}")
            sent.append(entry)
    producer.close(timeout=10)
    return {"sent": sent}


SCENARIOS = {
    ("kafka-python", "admin"): kp_admin,
    ("kafka-python", "produce"): kp_produce,
    ("kafka-python", "consume"): kp_consume,
    ("kafka-python", "rotated"): kp_rotated,
    ("kafka-python", "bulk-produce"): kp_bulk_produce,
    ("kafka-python", "bulk-consume"): kp_bulk_consume,
    ("confluent-kafka", "admin"): ck_admin,
    ("confluent-kafka", "produce"): ck_produce,
    ("confluent-kafka", "consume"): ck_consume,
    ("confluent-kafka", "feature-log"): ck_feature_log,
}


def main() -> int:
    job = json.load(sys.stdin)
    fn = SCENARIOS.get((job["client"], job["scenario"]))
    if fn is None:
        print(json.dumps({"error": f"no scenario {job['scenario']!r} for client {job['client']!r}"}))
        return 2
    try:
        result = fn(job["bootstrap"], job["plan"])
    except Exception as exc:
        traceback.print_exc()
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
