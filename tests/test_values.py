"""kwire_cli.values on real bytes: values Confluent's serializers wrote (fixtures/values/), their
schemas from saved registry answers, from a small server speaking the registry's REST API, and
hostile schemas and values."""
from __future__ import annotations

import base64
import importlib.util
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kwire_cli.values import DirectoryAnswers, SavedAnswers, Schemas, ValueDecoder
from kwire_cli.values.framing import FramingError, message_indexes, read_header, read_prefix
from kwire_cli.values.registry import RegistryAnswers
from registry_server import Registry

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "fixtures" / "values"
SCHEMAS = VALUES / "schemas"
MANIFEST = json.loads((VALUES / "manifest.json").read_text())


def raw(form):
    if form is None:
        return None
    return bytes.fromhex(form["hex"]) if "hex" in form else form["text"].encode()


@pytest.fixture(scope="module")
def rows():
    """Every record of the capture, as kwire pcap --format records --record-format json lists it."""
    out = subprocess.run([sys.executable, "-m", "kwire_cli", "pcap", str(VALUES / "values.pcap"), "--format",
                          "records", "--record-format", "json"], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    found = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["api"] for r in found} == {"Produce", "Fetch"}
    return found


def by_topic(rows, api):
    """The rows of one API in produce order (topic by topic, offsets ascending)."""
    out = []
    for topic in dict.fromkeys(r["topic"] for r in MANIFEST["records"]):
        out += sorted((r for r in rows if r["api"] == api and r["topic"] == topic), key=lambda r: r["offset"])
    return out


def headers_of(row):
    return [(h["key"] if isinstance(h["key"], str) else h["key"]["text"], raw(h["value"])) for h in row["headers"]]


def expected_schema(record):
    """The subject whose schema wrote the record's value."""
    return {"AVRO": "kwire-avro-value", "PROTOBUF": "kwire-protobuf-value", "JSON": "kwire-json-value"}[record["type"]]


def check_all(decoder, rows, api):
    sent = MANIFEST["records"]
    got = by_topic(rows, api)
    assert len(got) == len(sent) == 12
    for record, row in zip(sent, got):
        headers = headers_of(row)
        value = decoder.decode("value", raw(row["value"]), headers)
        key = decoder.decode("key", raw(row["key"]), headers)
        if record["named_by"] == "none":
            assert value is None and key is None  # plain text: nothing claims a schema
            continue
        if record["named_by"] == "prefix-unsaved":
            assert not value.decoded and value.value is None
            assert value.note.startswith("schema id 4 not found in ")
            continue
        assert value.decoded, value.note
        assert value.value == record["value"], record
        assert value.note is None
        subject = MANIFEST["subjects"][expected_schema(record)]
        assert value.schema["type"] == record["type"]
        if record["named_by"] == "header":
            assert value.schema["guid"] == subject["guid"] and "id" not in value.schema
        else:
            assert value.schema["id"] == subject["id"] and value.schema["subject"] == expected_schema(record)
        if record["key"] is not None:
            assert key.value == record["key"] and key.schema["subject"] == "kwire-avro-key"
        else:
            assert key is None
    return got


def test_saved_answers_decode_every_value_to_the_object_sent(rows):
    decoder = ValueDecoder(Schemas(DirectoryAnswers(SCHEMAS)))
    check_all(decoder, rows, "Produce")
    check_all(decoder, rows, "Fetch")


def test_protobuf_messages_chosen_by_their_indexes(rows):
    decoder = ValueDecoder(Schemas(DirectoryAnswers(SCHEMAS)))
    got = [decoder.decode("value", raw(r["value"]), headers_of(r)) for r in by_topic(rows, "Produce")
           if r["topic"] == "kwire-protobuf"]
    assert [d.schema["message"] for d in got] == ["kwire.orders.Order", "kwire.orders.Envelope",
                                                  "kwire.orders.Order.Line", "kwire.orders.Order"]
    order = got[0].value
    assert order["lines"][0]["price"] == {"currency": "EUR", "units": "12", "nanos": 500000000}
    assert order["codes"] == [-1, 0, 150, -300] and order["created"] == "2023-11-14T22:13:20.005Z"


def load_recorder():
    spec = importlib.util.spec_from_file_location("record_values", ROOT / "scripts" / "record_values.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_avro_logical_types_are_the_python_objects_sent(rows):
    """Decimal, datetime (millis and micros), UUID, date: fastavro's objects equal the sent ones."""
    sent = load_recorder().avro_orders()
    decoder = ValueDecoder(Schemas(DirectoryAnswers(SCHEMAS)))
    avro = [r for r in by_topic(rows, "Fetch") if r["topic"] == "kwire-avro"][:3]
    assert [decoder.native("value", raw(r["value"]), headers_of(r)) for r in avro] == sent


def test_forced_formats_and_mismatches(rows):
    row = by_topic(rows, "Produce")[0]  # an Avro order
    schemas = Schemas(DirectoryAnswers(SCHEMAS))
    data = raw(row["value"])
    assert ValueDecoder(schemas, value_format="protobuf").decode("value", data).note == \
        "schema id 3 is AVRO, not protobuf"
    assert ValueDecoder(schemas, value_format="hex").decode("value", data).value == data.hex()
    assert ValueDecoder(None, value_format="avro").decode("value", data).note == \
        "value names schema id 3: no --schema-registry or --schemas to find it"
    assert ValueDecoder(None).decode("value", data) is None  # no schemas, not forced: left as it was
    assert ValueDecoder(schemas, value_format="avro").decode("value", b"plain").note.startswith("no schema id")
    assert ValueDecoder(None, value_format="json").decode("value", b'{"a": [1]}').value == {"a": [1]}


def test_json_values_validated_on_request():
    schemas = Schemas(DirectoryAnswers(SCHEMAS))
    sid = MANIFEST["subjects"]["kwire-json-value"]["id"]
    bad = b"\0" + sid.to_bytes(4, "big") + b'{"id": 5, "amount": 1}'
    assert ValueDecoder(schemas).decode("value", bad).note is None
    checked = ValueDecoder(schemas, validate=True).decode("value", bad)
    assert checked.value == {"id": 5, "amount": 1}
    assert checked.note == "does not validate at id: 5 is not of type 'string'"


# --------------------------------------------------------------------------- the registry over HTTP
@pytest.fixture
def registry():
    def start(auth):
        server = Registry(auth)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    servers: list[Registry] = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_registry_over_http_with_basic_auth_one_lookup_per_schema(rows, registry):
    server = registry("Basic " + base64.b64encode(b"kwire:s3cret").decode())
    answers = RegistryAnswers(server.url, env={"KWIRE_SCHEMA_REGISTRY_USER_INFO": "kwire:s3cret"})
    decoder = ValueDecoder(Schemas(answers))
    check_all(decoder, rows, "Produce")
    check_all(decoder, rows, "Fetch")
    assert len(server.requests) == len(set(server.requests))  # each answer asked once for the run
    assert "/schemas/ids/4" in server.requests  # the unknown id: asked once, 404
    assert "/subjects/kwire%2Fcommon.proto/versions/1" in server.requests  # a reference followed
    assert "s3cret" not in repr(answers.__dict__.get("url"))


def test_registry_bearer_token_and_refusals(rows, registry):
    server = registry("Bearer t0ken")
    row = by_topic(rows, "Produce")[0]
    good = ValueDecoder(Schemas(RegistryAnswers(server.url, env={"KWIRE_SCHEMA_REGISTRY_TOKEN": "t0ken"})))
    assert good.decode("value", raw(row["value"])).value == MANIFEST["records"][0]["value"]
    refused = ValueDecoder(Schemas(RegistryAnswers(server.url, env={"KWIRE_SCHEMA_REGISTRY_TOKEN": "wrong"})))
    note = refused.decode("value", raw(row["value"])).note
    assert note == f"schema registry {server.url} answered 401 to GET /schemas/ids/3: Unauthorized"
    assert "wrong" not in note and "t0ken" not in note


def test_unreachable_registry_costs_one_attempt_per_schema(rows):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    decoder = ValueDecoder(Schemas(RegistryAnswers(f"http://127.0.0.1:{port}", timeout=2)))
    row = by_topic(rows, "Produce")[0]
    t0 = time.monotonic()
    notes = [decoder.decode("value", raw(row["value"])).note for _ in range(50)]
    assert time.monotonic() - t0 < 5
    assert set(notes) == {f"schema registry http://127.0.0.1:{port} unreachable ([Errno 111] Connection refused)"}


def test_registry_url_refuses_credentials_in_it():
    with pytest.raises(ValueError, match="KWIRE_SCHEMA_REGISTRY_USER_INFO"):
        RegistryAnswers("http://user:pw@127.0.0.1:1")
    with pytest.raises(ValueError, match="not http"):
        RegistryAnswers("ftp://127.0.0.1")


# --------------------------------------------------------------------------- framing
def test_framing_of_ids_guids_and_message_indexes():
    ref = read_prefix(b"\0\0\0\0\x07rest")
    assert (ref.schema_id, ref.guid, ref.rest) == (7, None, b"rest")
    guid = bytes(range(16))
    ref = read_header(b"\x01" + guid + b"\x00")
    assert ref.guid == "00010203-0405-0607-0809-0a0b0c0d0e0f" and ref.in_header and ref.rest == b"\0"
    assert read_prefix(b"\x02abcdefgh") is None and read_prefix(b"\0\0\0") is None
    assert message_indexes(b"\x00xyz") == ([0], 1)  # the single 0: the first message
    assert message_indexes(b"\x04\x02\x02z") == ([1, 1], 3)  # zig-zag: count 2, indexes 1, 1
    with pytest.raises(FramingError, match="count"):
        message_indexes(b"\x03")  # zig-zag -2
    with pytest.raises(FramingError, match="at most 64"):
        message_indexes(b"\xfe\x01")  # 127 indexes
    with pytest.raises(FramingError, match="inside a varint"):
        message_indexes(b"\x04\x02\x82")
    with pytest.raises(FramingError, match="does not start"):
        read_header(b"\x07abc")


# --------------------------------------------------------------------------- hostile schemas and values
def saved(schema, schema_type="AVRO", sid=9):
    answer = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if schema_type != "AVRO":
        answer["schemaType"] = schema_type
    return Schemas(SavedAnswers({f"/schemas/ids/{sid}": answer}))


def zigzag(n):
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


PREFIX = b"\0\0\0\0\x09"


def test_avro_values_claiming_huge_counts_and_lengths_end_in_a_note():
    ints = saved({"type": "array", "items": "long"})
    got = ValueDecoder(ints).decode("value", PREFIX + zigzag(2**31) + b"\x02\x04")
    assert got.note.startswith("schema id 9: Avro value ends early")
    text = saved('"string"')
    assert "ends early" in ValueDecoder(text).decode("value", PREFIX + zigzag(2**40) + b"ab").note
    assert ValueDecoder(text).decode("value", PREFIX + zigzag(2) + b"ab!").note == \
        "schema id 9: 1 bytes left after the Avro value"


def test_avro_array_of_zero_byte_items_is_refused_not_looped():
    nulls = saved({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}}]})
    t0 = time.monotonic()
    got = ValueDecoder(nulls).decode("value", PREFIX + zigzag(2**31) + b"\0")
    assert time.monotonic() - t0 < 1
    assert "array of zero-byte items" in got.note


def test_recursive_avro_schema_and_deep_value_are_bounded():
    tree = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    decoder = ValueDecoder(saved(tree))
    shallow = decoder.decode("value", PREFIX + zigzag(1) + b"\x02" + zigzag(2) + b"\x00")
    assert shallow.value == {"v": 1, "next": {"v": 2, "next": None}}
    deep = PREFIX + (zigzag(1) + b"\x02") * 200_000 + zigzag(1) + b"\x00"  # nesting deeper than Python's stack
    got = decoder.decode("value", deep)
    assert not got.decoded and got.note == "schema id 9: Avro value nests deeper than Python's recursion limit"


def test_avro_schema_of_a_few_megabytes():
    symbols = [f"S{i:07d}" for i in range(300_000)]
    schema = {"type": "enum", "name": "Big", "symbols": symbols}
    assert len(json.dumps(schema)) > 3_000_000
    t0 = time.monotonic()
    assert ValueDecoder(saved(schema)).decode("value", PREFIX + zigzag(299_999)).value == "S0299999"
    assert time.monotonic() - t0 < 10


def test_protobuf_schema_that_does_not_compile_gets_protocs_reason():
    decoder = ValueDecoder(saved('syntax = "proto3";\nmessage M { strin x = 1; }\n', "PROTOBUF"))
    note = decoder.decode("value", PREFIX + b"\0").note
    assert note.startswith("schema id 9: .proto does not compile: ") and "strin" in note


def test_protobuf_message_index_out_of_range_and_deep_nesting():
    proto = 'syntax = "proto3";\nmessage Tree { Tree child = 1; int32 v = 2; }\n'
    decoder = ValueDecoder(saved(proto, "PROTOBUF"))
    assert decoder.decode("value", PREFIX + b"\x02\x02").note == \
        "schema id 9: message index 1 out of range: 1 message(s) top-level"
    value = b"\x10\x05"
    for _ in range(300):  # 300 levels: over protobuf's nesting limit of 100
        value = b"\x0a" + varint(len(value)) + value  # field 1 (child), length-delimited
    got = decoder.decode("value", PREFIX + b"\0" + value)
    assert not got.decoded and "does not parse" in got.note


def varint(n):
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def test_protobuf_serialized_schema_as_confluents_registry_keeps_it(rows):
    """Confluent's Python serializer registers base64 FileDescriptorProtos (what the in-memory
    registry answers): the same values decode from that form."""
    from google.protobuf import descriptor_pb2

    from kwire_cli.values.protobuf import compile_protobuf
    from kwire_cli.values.schemas import Reference, Schema

    text = Schemas(DirectoryAnswers(SCHEMAS)).find(read_prefix(b"\0\0\0\0\x06"))
    compiled = compile_protobuf(text)
    def b64(name):
        fd = descriptor_pb2.FileDescriptorProto()
        compiled.pool.FindFileByName(name).CopyToProto(fd)
        return base64.standard_b64encode(fd.SerializeToString()).decode()
    common = Schema("PROTOBUF", b64("kwire/common.proto"))
    main_name = compiled.file.name
    serialized = Schema("PROTOBUF", b64(main_name).strip(), (Reference("kwire/common.proto", "c", 1, common),),
                        schema_id=6)
    decoder = ValueDecoder(Schemas(SavedAnswers({})))
    decoder.schemas.find = lambda ref: serialized  # the same schema, serialized
    order = [r for r in by_topic(rows, "Produce") if r["topic"] == "kwire-protobuf"][0]
    sent = [r for r in MANIFEST["records"] if r["topic"] == "kwire-protobuf"][0]
    assert decoder.decode("value", raw(order["value"])).value == sent["value"]


def test_unknown_ids_stop_being_looked_up_past_a_bound():
    """Binary values that start with byte 0 name a different "schema id" each: past MAX_MISSES
    distinct misses no new one is asked for."""
    from kwire_cli.values.schemas import MAX_MISSES

    asked = []

    class Counting(SavedAnswers):
        def get(self, path):
            asked.append(path)
            return super().get(path)

    decoder = ValueDecoder(Schemas(Counting({})))
    notes = [decoder.decode("value", b"\0" + i.to_bytes(4, "big") + b"x").note for i in range(MAX_MISSES + 50)]
    assert len(asked) == MAX_MISSES
    assert notes[-1] == f"schema id {MAX_MISSES + 49} not looked up: {MAX_MISSES} schemas already were not found " \
                        "in the schemas looked up before the run"
    assert len(decoder.notes) <= 100


def test_a_shipped_decoder_is_put_in_force_per_task_and_taken_off_by_the_next():
    import pickle

    from kwire_cli.values.records import current
    from kwire_cli.values.shipping import ship, within

    shipped = pickle.loads(pickle.dumps(ship(ValueDecoder(Schemas(DirectoryAnswers(SCHEMAS))))))
    assert "/schemas/ids/3" in shipped.answers and "/subjects/kwire%2Fcommon.proto/versions/1" in shipped.answers
    seen = list(within(shipped, iter([current])))
    assert seen[0]() is not None and seen[0]().decode("value", b"\0\0\0\0\x07{}").value == {}
    assert [f() for f in within(None, iter([current]))] == [None]
