#!/usr/bin/env python3
"""TLS and SASL client flows for scripts/record_secure_fixtures.py (kafka-python, confluent-kafka).

    python scripts/record/secure_scenarios.py < job.json

Run as a subprocess, so every socket of the client is closed when the flow ends.  job.json:

    {"client": "kafka-python" | "confluent-kafka", "flow": "full" | "bad-login" | "alter-scram",
     "bootstrap": "127.0.0.1:9093", "client_id": "...", "topic": "...", "records": [...],
     "group": "...", "hold_seconds": 0,
     "tls": null | {"ca": "ca.pem", "keylog": "client.keylog" | null, "version": "1.2" | "1.3" | null,
                    "ciphers": "OpenSSL TLS 1.2 cipher string" | null, "options": int},
     "sasl": null | {"mechanism": "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" | "OAUTHBEARER",
                     "user": "...", "password": "...", "token": "...", "legacy": false},
     "scram_upsert": {"user": "...", "password": "...", "mechanism": "SCRAM-SHA-256", "iterations": 4096,
                      "salt_hex": "..." | null}}

The full flow: an admin client creates the topic (1 partition), a producer sends the records
(with headers, fixed timestamps, acks=all), a consumer assigned to partition 0 reads them back
from the beginning (no group), keeps polling ``hold_seconds`` (so that KIP-368 re-authentication
has time to happen) and closes.  Prints one JSON object on stdout: what the client did.

TLS: kafka-python gets an ``ssl.SSLContext`` whose ``keylog_filename`` writes the client's NSS
key log.  librdkafka (confluent-kafka) links OpenSSL statically and has no key log option: the
recording uses the TLS terminator's server-side key log for it.
"""
from __future__ import annotations

import json
import ssl
import sys
import time
import traceback


def _b(s):
    return None if s is None else s.encode("utf-8")


def _s(b):
    return None if b is None else bytes(b).decode("utf-8")


# --------------------------------------------------------------------------- kafka-python
def kp_config(job) -> dict:
    kw = {"bootstrap_servers": job["bootstrap"], "client_id": job["client_id"], "request_timeout_ms": 15000}
    tls, sasl = job.get("tls"), job.get("sasl")
    if tls:
        ctx = ssl.create_default_context(cafile=tls["ca"])
        if tls.get("version"):
            v = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[tls["version"]]
            ctx.minimum_version = ctx.maximum_version = v
        if tls.get("ciphers"):
            ctx.set_ciphers(tls["ciphers"])
        if tls.get("options"):
            ctx.options |= tls["options"]
        if tls.get("keylog"):
            ctx.keylog_filename = tls["keylog"]
        kw.update(security_protocol="SASL_SSL" if sasl else "SSL", ssl_context=ctx)
    elif sasl:
        kw["security_protocol"] = "SASL_PLAINTEXT"
    if sasl:
        kw["sasl_mechanism"] = sasl["mechanism"]
        if sasl["mechanism"] == "OAUTHBEARER":
            from kafka.net.sasl.oauth import AbstractTokenProvider

            class Provider(AbstractTokenProvider):
                def token(self):
                    return sasl["token"]

            kw["sasl_oauth_token_provider"] = Provider()
        else:
            kw.update(sasl_plain_username=sasl["user"], sasl_plain_password=sasl["password"])
        if sasl.get("legacy"):
            # a pre-1.0 broker version: SaslHandshake v0, then KIP-43's raw SASL tokens
            kw["api_version"] = tuple(sasl["legacy"])
    return kw


def kp_full(job):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    kw = kp_config(job)
    out = {"calls": []}
    admin = KafkaAdminClient(**kw)
    res = admin.create_topics([NewTopic(job["topic"], 1, 1)], timeout_ms=10000)
    out["calls"].append({"call": "CreateTopics", "ok": True, "result": str(res)[:300]})
    admin.close()

    # old api_versions (the legacy SASL flows) get InitProducerId v0, which tansu 0.6.0 answers
    # with UNKNOWN_SERVER_ERROR: no idempotence there
    producer = KafkaProducer(acks="all", linger_ms=50, enable_idempotence="api_version" not in kw, **kw)
    futures = [(r, producer.send(job["topic"], key=_b(r["key"]), value=_b(r["value"]), partition=0,
                                 headers=[(k, _b(v)) for k, v in r["headers"]], timestamp_ms=r["timestamp"]))
               for r in job["records"]]
    producer.flush(timeout=20)
    out["sent"] = []
    for r, fut in futures:
        md = fut.get(timeout=20)
        out["sent"].append(dict(r, topic=job["topic"], partition=0, offset=md.offset))
    producer.close(timeout=10)

    consumer = KafkaConsumer(enable_auto_commit=False, fetch_max_wait_ms=200, **kw)
    tp = TopicPartition(job["topic"], 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(job["records"]) and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=500).values():
            got.extend({"topic": m.topic, "partition": m.partition, "offset": m.offset, "key": _s(m.key),
                        "value": _s(m.value), "headers": [[k, _s(v)] for k, v in m.headers],
                        "timestamp": m.timestamp} for m in msgs)
    end = time.monotonic() + job.get("hold_seconds", 0)
    while time.monotonic() < end:
        consumer.poll(timeout_ms=300)
    consumer.close()
    out["consumed"] = got
    return out


def kp_bad_login(job):
    from kafka import KafkaAdminClient

    try:  # give up after 1 s: a few failed logins, not dozens
        KafkaAdminClient(bootstrap_timeout_ms=1000, reconnect_backoff_ms=1000, reconnect_backoff_max_ms=1000,
                         **kp_config(job)).close()
        return {"login": "succeeded"}
    except Exception as exc:  # the failure is the point
        return {"login": "failed", "login_error": f"{type(exc).__name__}: {exc}"}


def kp_alter_scram(job):
    """AlterUserScramCredentials from kafka-python's admin client (Salt and SaltedPassword on the wire)."""
    from kafka import KafkaAdminClient
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    u = job["scram_upsert"]
    admin = KafkaAdminClient(**kp_config(job))
    mech = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    res = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        u["user"], mech[u["mechanism"]], u["password"], iterations=u["iterations"],
        salt=bytes.fromhex(u["salt_hex"]) if u.get("salt_hex") else None)])
    admin.close()
    return {"calls": [{"call": "AlterUserScramCredentials", "ok": True, "result": str(res)[:300]}]}


# --------------------------------------------------------------------------- confluent-kafka
def ck_config(job) -> dict:
    conf = {"bootstrap.servers": job["bootstrap"], "client.id": job["client_id"]}
    tls, sasl = job.get("tls"), job.get("sasl")
    if tls:
        conf.update({"security.protocol": "SASL_SSL" if sasl else "SSL", "ssl.ca.location": tls["ca"]})
        if tls.get("ciphers"):
            conf["ssl.cipher.suites"] = tls["ciphers"]
    elif sasl:
        conf["security.protocol"] = "SASL_PLAINTEXT"
    if sasl:
        conf["sasl.mechanism"] = sasl["mechanism"]
        if sasl["mechanism"] == "OAUTHBEARER":
            conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
            conf["sasl.oauthbearer.config"] = sasl["oauthbearer_config"]
        else:
            conf.update({"sasl.username": sasl["user"], "sasl.password": sasl["password"]})
        if sasl.get("legacy"):
            conf.update({"api.version.request": False, "broker.version.fallback": sasl["legacy"]})
    return conf


def ck_full(job):
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = ck_config(job)
    out = {"calls": []}
    admin = AdminClient(conf)
    futs = admin.create_topics([NewTopic(job["topic"], num_partitions=1, replication_factor=1)], operation_timeout=10)
    for t, f in futs.items():
        f.result(timeout=20)
        out["calls"].append({"call": "CreateTopics", "ok": True, "result": t})
    admin = None

    producer = Producer(dict(conf, **{"acks": "all", "linger.ms": 50, "enable.idempotence": False}))
    sent = []

    def report(err, msg, entry):
        if err is not None:
            raise KafkaException(err)
        entry["offset"] = msg.offset()

    for r in job["records"]:
        entry = dict(r, topic=job["topic"], partition=0)
        sent.append(entry)
        producer.produce(job["topic"], key=_b(r["key"]), value=_b(r["value"]), partition=0,
                         headers=[(k, _b(v)) for k, v in r["headers"]], timestamp=r["timestamp"],
                         on_delivery=lambda err, msg, entry=entry: report(err, msg, entry))
    if producer.flush(20):
        raise RuntimeError("records not delivered within 20 s")
    out["sent"] = sent
    del producer

    consumer = Consumer(dict(conf, **{"group.id": job["group"], "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200}))
    consumer.assign([TopicPartition(job["topic"], 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(job["records"]) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None or m.error():
            continue
        got.append({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(), "key": _s(m.key()),
                    "value": _s(m.value()), "headers": [[k, _s(v)] for k, v in (m.headers() or [])],
                    "timestamp": m.timestamp()[1]})
    end = time.monotonic() + job.get("hold_seconds", 0)
    while time.monotonic() < end:
        consumer.poll(0.3)
    consumer.close()
    out["consumed"] = got
    return out


def ck_bad_login(job):
    from confluent_kafka.admin import AdminClient

    errors = []
    # stop at the first error librdkafka reports: it reconnects at once after a failed login
    admin = AdminClient(dict(ck_config(job), error_cb=lambda e: errors.append(str(e))))
    result = {"login": "succeeded"}
    deadline = time.monotonic() + 5
    while not errors and time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.05)
            break
        except Exception as exc:
            result = {"login": "failed", "login_error": f"{type(exc).__name__}: {exc}"}
        admin.poll(0.01)
    if errors:
        result = {"login": "failed", "login_error": errors[0]}
    result["error_cb"] = errors[:3]
    del admin
    return result


FLOWS = {
    ("kafka-python", "full"): kp_full,
    ("kafka-python", "bad-login"): kp_bad_login,
    ("kafka-python", "alter-scram"): kp_alter_scram,
    ("confluent-kafka", "full"): ck_full,
    ("confluent-kafka", "bad-login"): ck_bad_login,
}


def main() -> int:
    job = json.load(sys.stdin)
    fn = FLOWS.get((job["client"], job["flow"]))
    if fn is None:
        print(json.dumps({"error": f"no flow {job['flow']!r} for client {job['client']!r}"}))
        return 2
    try:
        result = fn(job)
    except Exception as exc:
        traceback.print_exc()
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
