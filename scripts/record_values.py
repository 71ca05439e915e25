#!/usr/bin/env python3
"""Record Schema Registry framed keys and values (Avro, Protobuf, JSON Schema) against tansu.

    python scripts/record_values.py [--out fixtures/values]

No Schema Registry server installs here (none is packaged for PyPI, Debian or npm), so the bytes
come from Confluent's own serializers (confluent-kafka's AvroSerializer, ProtobufSerializer and
JSONSerializer) registering their schemas in confluent-kafka's in-memory registry
(``mock://``).  librdkafka produces them to a fresh in-memory tansu broker and consumes them back
(Confluent's deserializers check each one), while tcpdump records the port: ``values.pcap``.

The registry's answers are saved as a real registry gives them, for ``--schemas DIR`` and for the
tests' small REST server: ``schemas/ID.json`` (``GET /schemas/ids/ID``), ``schemas/GUID.json``,
``schemas/ID.versions.json`` (the subject) and ``schemas/subjects/S/versions/V.json`` (references).
Protobuf schemas are saved as .proto text (what a registry answers; Confluent's Python serializer
registers a base64 FileDescriptorProto, which a registry turns into text): the .proto files under
scripts/record/values/.  One Avro schema (subject ``kwire-unsaved-value``) is registered and used
but deliberately not saved: its values stand for an id the registry does not know.

``manifest.json`` lists every record sent, in order, with the object each key and value held
(Avro's logical types in kwire's JSON form; Protobuf per its JSON mapping, field names as in the
.proto) and how its schema was named (prefix id or GUID header).
"""
from __future__ import annotations

import argparse
import base64
import datetime
import decimal
import importlib
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PROTOS = HERE / "record" / "values"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from record_fixtures import find_tansu, free_port, log, tansu, tcpdump  # noqa: E402

TIMESTAMP = 1_700_000_000_000
CUSTOMER = {"type": "record", "name": "Customer", "namespace": "kwire",
            "fields": [{"name": "name", "type": "string"}, {"name": "tier", "type": "int"}]}
ORDER = {"type": "record", "name": "Order", "namespace": "kwire", "fields": [
    {"name": "id", "type": "string"},
    {"name": "customer", "type": "kwire.Customer"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "shipped", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}], "default": None},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["PLACED", "SHIPPED"]}},
    {"name": "checksum", "type": {"type": "fixed", "name": "Checksum", "size": 4}},
]}
ORDER_KEY = {"type": "record", "name": "OrderKey", "namespace": "kwire",
             "fields": [{"name": "id", "type": "string"}]}
UNSAVED = {"type": "record", "name": "Unsaved", "namespace": "kwire", "fields": [{"name": "n", "type": "int"}]}
PAYMENT = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Payment", "type": "object",
           "properties": {"id": {"type": "string"}, "amount": {"type": "number"},
                          "items": {"type": "array", "items": {"type": "object", "properties": {
                              "sku": {"type": "string"}, "qty": {"type": "integer"}}}}},
           "required": ["id", "amount"]}
UTC = datetime.timezone.utc


def avro_orders() -> list[dict]:
    return [
        {"id": "A-1", "customer": {"name": "c1", "tier": 2}, "amount": decimal.Decimal("1234.50"),
         "created": datetime.datetime(2023, 11, 14, 22, 13, 20, 125000, tzinfo=UTC), "shipped": None,
         "ref": uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"), "day": datetime.date(2023, 11, 14),
         "tags": ["new", "priority"], "counts": {"views": 3, "clicks": -1}, "status": "PLACED",
         "checksum": b"\x00\x01\xfe\xff"},
        {"id": "A-2", "customer": {"name": "c2", "tier": 0}, "amount": decimal.Decimal("-0.07"),
         "created": datetime.datetime(2024, 2, 29, 0, 0, 0, tzinfo=UTC),
         "shipped": datetime.datetime(2024, 3, 1, 8, 30, 0, 123456, tzinfo=UTC),
         "ref": uuid.UUID("7c9e6679-7425-40de-944b-e07fc1f90ae7"), "day": datetime.date(1969, 12, 31),
         "tags": [], "counts": {}, "status": "SHIPPED", "checksum": b"kw\x00!"},
        {"id": "B-3", "customer": {"name": "Zoë ✓", "tier": 1}, "amount": decimal.Decimal("99999999.99"),
         "created": datetime.datetime(2025, 6, 1, 12, 0, 0, 1000, tzinfo=UTC), "shipped": None,
         "ref": uuid.UUID("00000000-0000-4000-8000-000000000000"), "day": datetime.date(2025, 6, 1),
         "tags": ["header-guid"], "counts": {"n": 2**40}, "status": "PLACED", "checksum": b"\xff" * 4},
    ]


def proto_modules(work: Path):
    """orders_pb2 / common_pb2 compiled from scripts/record/values/ by grpcio-tools' protoc."""
    out = work / "pb"
    out.mkdir()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTOS}", f"--python_out={out}",
                    "kwire/common.proto", "kwire/orders.proto"], check=True)
    sys.path.insert(0, str(out))
    return importlib.import_module("kwire.orders_pb2"), importlib.import_module("kwire.common_pb2")


def proto_messages(orders, common) -> list:
    ts = orders.google_dot_protobuf_dot_timestamp__pb2.Timestamp(seconds=1_700_000_000, nanos=5_000_000)
    money = common.Money
    order = orders.Order(
        id="P-1", customer=orders.Order.Customer(name="c1", email="c1@example.com"),
        lines=[orders.Order.Line(sku="sku-1", qty=2, price=money(currency="EUR", units=12, nanos=500_000_000),
                                 notes=["gift", "fragile"]),
               orders.Order.Line(sku="sku-2", qty=1, price=money(currency="EUR", units=3))],
        status=orders.Order.SHIPPED, created=ts, attributes={"channel": "web", "lang": "fr"},
        signature=b"\x00\xffsig", codes=[-1, 0, 150, -300])
    envelope = orders.Envelope(source="kwire-recorder", sequence=2**40 + 1)
    line = orders.Order.Line(sku="sku-9", qty=-4, notes=["alone"])
    guid_order = orders.Order(id="P-2", customer=orders.Order.Customer(name="c2"),
                              lines=[orders.Order.Line(sku="sku-3", qty=7)], status=orders.Order.PLACED)
    return [("prefix", order), ("prefix", envelope), ("prefix", line), ("header", guid_order)]


def payments() -> list[tuple[str, dict]]:
    return [("prefix", {"id": "J-1", "amount": 12.5, "items": [{"sku": "s1", "qty": 1}, {"sku": "s2", "qty": 3}]}),
            ("prefix", {"id": "J-2", "amount": 0}),
            ("header", {"id": "J-3", "amount": -1.25, "items": []})]


def jsonable(value):
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def build(work: Path):
    """The registry, the records (topic, key bytes, value bytes, headers) and the manifest."""
    from confluent_kafka.schema_registry import (
        Schema,
        SchemaReference,
        SchemaRegistryClient,
        header_schema_id_serializer,
    )
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import json_format

    registry = SchemaRegistryClient.new_client({"url": "mock://kwire-values"})
    registry.register_schema("kwire.Customer", Schema(json.dumps(CUSTOMER), "AVRO"))
    order_schema = Schema(json.dumps(ORDER), "AVRO", [SchemaReference("kwire.Customer", "kwire.Customer", 1)])
    guid_conf = {"schema.id.serializer": header_schema_id_serializer}
    avro_value = AvroSerializer(registry, order_schema)
    avro_value_guid = AvroSerializer(registry, order_schema, conf=guid_conf)
    avro_key = AvroSerializer(registry, json.dumps(ORDER_KEY))
    unsaved = AvroSerializer(registry, json.dumps(UNSAVED),
                             conf={"subject.name.strategy": lambda ctx, name: "kwire-unsaved-value"})
    orders_pb2, common_pb2 = proto_modules(work)
    json_value = JSONSerializer(json.dumps(PAYMENT), registry)
    json_value_guid = JSONSerializer(json.dumps(PAYMENT), registry, conf=guid_conf)

    records, manifest = [], []

    def add(topic, key, key_obj, value, value_obj, headers, how, schema_type, native=None):
        records.append((topic, key, value, headers, native))
        manifest.append({"topic": topic, "type": schema_type, "named_by": how, "key": key_obj, "value": value_obj,
                         "headers": [h for h, _ in headers]})

    for i, order in enumerate(avro_orders()):
        headers: list = []
        kctx = SerializationContext("kwire-avro", MessageField.KEY, headers)
        vctx = SerializationContext("kwire-avro", MessageField.VALUE, headers)
        key = avro_key({"id": order["id"]}, kctx)
        how = "header" if i == 2 else "prefix"
        value = (avro_value_guid if how == "header" else avro_value)(order, vctx)
        add("kwire-avro", key, {"id": order["id"]}, value, jsonable(order), headers, how, "AVRO", order)
    headers = []
    value = unsaved({"n": 7}, SerializationContext("kwire-avro", MessageField.VALUE, headers))
    add("kwire-avro", b"unsaved", None, value, {"n": 7}, headers, "prefix-unsaved", "AVRO")
    add("kwire-avro", b"plain", None, b"plain text value", None, [], "none", None)

    for i, (how, msg) in enumerate(proto_messages(orders_pb2, common_pb2)):
        headers = []
        ser = ProtobufSerializer(type(msg), registry, conf=guid_conf if how == "header" else None)
        value = ser(msg, SerializationContext("kwire-protobuf", MessageField.VALUE, headers))
        add("kwire-protobuf", f"{msg.DESCRIPTOR.full_name}#{i}".encode(), None, value,
            json_format.MessageToDict(msg, preserving_proto_field_name=True), headers, how, "PROTOBUF", msg)

    for how, payment in payments():
        headers = []
        ser = json_value_guid if how == "header" else json_value
        value = ser(payment, SerializationContext("kwire-json", MessageField.VALUE, headers))
        add("kwire-json", payment["id"].encode(), None, value, payment, headers, how, "JSON", payment)
    return registry, records, manifest, (orders_pb2, common_pb2)


def save_answers(registry, out: Path) -> dict:
    """The registry's answers as files (Protobuf's as .proto text); returns what was saved."""
    out.mkdir(parents=True, exist_ok=True)
    saved = {}
    for subject in sorted(registry.get_subjects()):
        for version in registry.get_versions(subject):
            rs = registry.get_version(subject, version)
            if subject == "kwire-unsaved-value":
                continue
            schema = rs.schema
            text = schema.schema_str
            if schema.schema_type == "PROTOBUF":
                name = subject if subject.endswith(".proto") else "kwire/orders.proto"
                text = (PROTOS / name).read_text()
            refs = [{"name": r.name, "subject": r.subject, "version": r.version} for r in schema.references or []]
            answer = {"schema": text}
            if schema.schema_type != "AVRO":
                answer = {"schemaType": schema.schema_type, **answer}
            if refs:
                answer["references"] = refs
            by_id = {**answer, "guid": rs.guid}
            write(out / f"{rs.schema_id}.json", by_id)
            write(out / f"{rs.guid}.json", {**answer, "guid": rs.guid})
            write(out / f"{rs.schema_id}.versions.json", [{"subject": subject, "version": version}])
            quoted = urllib.parse.quote(subject, safe="")
            write(out / "subjects" / quoted / "versions" / f"{version}.json",
                  {"subject": subject, "version": version, "id": rs.schema_id, "guid": rs.guid, **answer})
            saved[subject] = {"id": rs.schema_id, "guid": rs.guid, "version": version, "type": schema.schema_type}
    return saved


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


def produce_and_consume(bootstrap: str, records: list, registry, modules) -> int:
    """Produce every record (one partition per topic, in order), then fetch them back and check
    each with Confluent's deserializers; returns how many came back."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topics = sorted({r[0] for r in records})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        fut.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "kwire-values", "linger.ms": 50,
                         "enable.idempotence": False, "compression.type": "none"})
    for i, (topic, key, value, headers, _) in enumerate(records):
        producer.produce(topic, key=key, value=value, headers=headers or None, partition=0,
                         timestamp=TIMESTAMP + i)
    if producer.flush(30):
        raise SystemExit("records left unsent")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kwire-values", "client.id": "kwire-values",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 200})
    consumer.subscribe(topics)
    got = []
    deadline = time.monotonic() + 40
    while len(got) < len(records) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg)
    consumer.close()
    check_round_trip(got, records, registry, modules)
    return len(got)


def check_round_trip(got: list, records: list, registry, modules) -> None:
    """Each fetched record has the bytes produced, and Confluent's own deserializers read its value
    back to the object that was serialized."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    orders_pb2, _ = modules
    classes = {"kwire.orders.Order": orders_pb2.Order, "kwire.orders.Envelope": orders_pb2.Envelope,
               "kwire.orders.Order.Line": orders_pb2.Order.Line}
    for topic in sorted({r[0] for r in records}):
        sent = [r for r in records if r[0] == topic]
        fetched = sorted((m for m in got if m.topic() == topic), key=lambda m: m.offset())
        for (_, key, value, _headers, obj), msg in zip(sent, fetched, strict=False):
            if (key, value) != (msg.key(), msg.value()):
                raise SystemExit(f"{topic} offset {msg.offset()}: fetched bytes differ from the produced ones")
            ctx = SerializationContext(topic, MessageField.VALUE, msg.headers())
            if obj is None or key == b"unsaved":
                continue
            if topic == "kwire-json":
                back = JSONDeserializer(json.dumps(PAYMENT), schema_registry_client=registry)(value, ctx)
            elif topic == "kwire-protobuf":
                back = ProtobufDeserializer(classes[key.decode().split("#")[0]],
                                            {"use.deprecated.format": False}, registry)(value, ctx)
            else:
                back = AvroDeserializer(registry)(value, ctx)
            if back != obj:
                raise SystemExit(f"{topic} offset {msg.offset()}: deserialized {back!r}, sent {obj!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "fixtures" / "values")
    ap.add_argument("--tansu")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kwire-values-") as tmp:
        work = Path(tmp)
        registry, records, manifest, modules = build(work)
        saved = save_answers(registry, args.out / "schemas")
        port = free_port()
        with tansu(find_tansu(args.tansu), port, port, work, "values"), \
                tcpdump(args.out / "values.pcap", port) as stats:
            fetched = produce_and_consume(f"127.0.0.1:{port}", records, registry, modules)
        log(f"produced {len(records)}, fetched {fetched}, tcpdump {stats}")
        if fetched != len(records):
            raise SystemExit(f"fetched {fetched} of {len(records)} records")
        from confluent_kafka import version
        write(args.out / "manifest.json", {
            "serializers": f"confluent-kafka {version()[0]}", "subjects": saved, "records": manifest})
    return 0


if __name__ == "__main__":
    sys.exit(main())
