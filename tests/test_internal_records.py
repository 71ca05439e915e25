"""Records of Kafka's internal topics (kwire_cli.codec.internal), decoded from kwire's record specs.

Every vector of fixtures/vectors/internal (peers' test bytes, each with its source) decodes to what
its source asserts; every record type of the record specs decodes bytes built from its own layout;
secrets of metadata records are redacted; the codec reads a nullable struct in a tagged field with
its varint presence marker.
"""
import json
import re
import struct

import pytest

from conftest import FIXTURES
from kwire_cli.codec.compiler import compile_plan
from kwire_cli.codec.internal import decode_coordinator_value, decode_internal, decode_metadata
from kwire_cli.spec.records import CLUSTER_METADATA, CONTROL_TYPES, record_specs
from kwire_cli.spec.registry import registry
from kwire_cli.wire import write_uvarint

VECTORS = FIXTURES / "vectors" / "internal"
MANIFEST = json.loads((VECTORS / "manifest.json").read_text())

# what Kafka's own message says, and the words of kwire's error that carry the same meaning
KAFKA_MESSAGES = {
    "Could not deserialize metadata record due to unknown frame version": "unknown frame version",
    "Error while reading frame version": "value: frame version:",
    "Error while reading type": "value: apiKey:",
    "Error while reading version": "value: version:",
    "Value for version was too large": "too large for an int16",
    "Unknown metadata id ": "unknown metadata record type (apiKey) 16383",
    "Failed to deserialize record with type": "RegisterBrokerRecord v0",
    "Could not read version from key's buffer.": "key: needs an int16 key type, 0 byte(s) given",
    "Could not read record with version 3 from key's buffer due to": "key: ConsumerGroupMetadataKey (type 3)",
    "Could not read record with version 0 from key's buffer due to": "key: ShareSnapshotKey (type 0)",
    "Failed to decode message at offset 0 using the specified decoder (message had a missing key)":
        "a coordinator record needs a key",
}


def _bytes(h):
    return None if h is None else bytes.fromhex(h)


def _decode(v):
    key, value = _bytes(v["key_hex"]), _bytes(v["value_hex"])
    rec = v["record"] or {}
    if v["key_form"] == "body":
        key = struct.pack(">h", rec["key_type"]) + key
    if v["value_form"] == "body":
        value = struct.pack(">h", rec["value_version"]) + value
    if v["value_form"] == "control":
        return decode_internal(v["topic"], key, value, control=True)
    if v["parts"] == ["value"] and v["topic"] != CLUSTER_METADATA:
        return decode_coordinator_value(v["topic"], rec["key_type"], value)
    return decode_internal(v["topic"], key, value)


def _match(got, want, where):
    """Objects partial (the keys listed), lists whole."""
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {got!r}"
        for k, w in want.items():
            assert k in got, f"{where}.{k} missing in {sorted(got)}"
            _match(got[k], w, f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _match(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _data(result, part):
    if result.get("family") == "coordinator" or part == "key" or "key" in result or "value" in result:
        node = result.get(part)
        return node.get("data") if isinstance(node, dict) else None
    return result.get("data")


def _at(data, path):
    """`AssignedPartitions[0]` below a decoded struct."""
    node = data
    for name, idx in re.findall(r"([A-Za-z]+)(?:\[(\d+)\])?", path):
        node = node[name]
        if idx:
            node = node[int(idx)]
    return node


@pytest.mark.parametrize("v", MANIFEST["vectors"], ids=lambda v: v["id"])
def test_vector_decodes_as_its_source_asserts(v):
    result = _decode(v)
    assert result is not None
    a = v["asserts"]
    if v["valid"]:
        assert "error" not in result, result["error"]
    else:
        assert "error" in result, f"{v['id']} should not decode: {v['violation']}"
    for part in ("key", "value"):
        if part in a:
            _match(_data(result, part), a[part], part)
        if f"{part}_prefix" in a:
            node = result.get(part) if v["value_form"] != "framed" else result
            assert node.get("partial") is True
            _match(node["data"], a[f"{part}_prefix"], f"{part}_prefix")
    err = a.get("error")
    if err is not None:
        msg = result["error"]
        if "part" in err:
            assert msg.startswith(err["part"] + ":"), msg
        if "field" in err:
            assert {"tagged fields": "tagged field count"}.get(err["field"], err["field"]) in msg, msg
        if err.get("kind") == "truncated":
            assert re.search(r"needs \d+ bytes?|byte\(s\) given|cut short", msg), msg
        if err.get("kind") == "trailing-bytes":
            assert f"{err['bytes_left']} bytes left over" in msg, msg
        if "unknown_record_type" in err:
            assert f"unknown record type {err['unknown_record_type']}" in msg, msg
        text = err.get("message") or err.get("message_starts_with")
        if text is not None:
            assert KAFKA_MESSAGES[text] in msg, msg
    for e in a.get("embedded", []):
        path = e["path"].removeprefix("value.")
        found = [x for x in result.get("embedded", []) if x["path"] == path]
        assert len(found) == 1, (path, result.get("embedded"))
        assert "error" not in found[0], found[0]
        assert (found[0]["schema"], found[0]["version"]) == (e["schema"], e["version"])
        _match(found[0]["value"], e["asserts"], path)
    for where, tags in a.get("unknown_tags", {}).items():
        part, _, rest = where.partition(".")
        node = _data(result, part)
        if rest:
            node = _at(node, rest)
        assert node.get("_unknown_tags") == tags


def test_every_vector_is_tested_and_the_counts_agree():
    vs = MANIFEST["vectors"]
    assert len(vs) == 66
    assert sum(v["valid"] for v in vs) == 43


# ----------------------------------------------------------------- every record type, built from its layout
def _every_coordinator_record():
    specs = record_specs()
    for topic, table in sorted(specs.coordinator.items()):
        for key_type, rec in sorted(table.items()):
            for vv in range(rec.value.valid_versions.lo, rec.value.valid_versions.hi + 1):
                yield pytest.param(topic, key_type, vv, id=f"{topic}-{rec.key.name}-{key_type}-v{vv}")


@pytest.mark.parametrize("topic, key_type, vv", _every_coordinator_record())
def test_every_coordinator_record_type_decodes_bytes_built_from_its_layout(topic, key_type, vv):
    rec = record_specs().coordinator_record(topic, key_type)
    kplan = compile_plan(rec.key, rec.key_version)
    kval = kplan.default()
    for f in rec.key.fields:
        if f.type.kind == "string":
            kval[f.name] = f"{f.name}-x"
    key = bytearray(struct.pack(">h", key_type))
    kplan.encode(kval, key)
    vplan = compile_plan(rec.value, vv)
    vval = vplan.default()
    value = bytearray(struct.pack(">h", vv))
    vplan.encode(vval, value)
    out = decode_internal(topic, bytes(key), bytes(value))
    assert "error" not in out, out["error"]
    assert out["key"]["schema"] == rec.key.name and out["key"]["data"] == kval
    assert out["value"]["schema"] == rec.value.name and out["value"]["version"] == vv
    assert out["value"]["data"] == vplan.decode(bytes(value), 2, len(value))[0]
    # and a null value is a tombstone
    assert decode_internal(topic, bytes(key), None)["tombstone"] is True


def _every_metadata_record():
    for api_key, spec in sorted(record_specs().metadata.items()):
        for v in range(spec.valid_versions.lo, spec.valid_versions.hi + 1):
            yield pytest.param(api_key, v, id=f"{spec.name}-v{v}")


def _frame(api_key, version, body):
    out = bytearray()
    write_uvarint(out, 1)
    write_uvarint(out, api_key)
    write_uvarint(out, version)
    return bytes(out) + body


@pytest.mark.parametrize("api_key, version", _every_metadata_record())
def test_every_metadata_record_type_decodes_bytes_built_from_its_layout(api_key, version):
    spec = record_specs().metadata_record(api_key)
    plan = compile_plan(spec, version)
    body = bytearray()
    plan.encode(plan.default(), body)
    out = decode_internal(CLUSTER_METADATA, None, _frame(api_key, version, bytes(body)), show_secrets=True)
    assert "error" not in out, out["error"]
    assert (out["schema"], out["api_key"], out["version"]) == (spec.name, api_key, version)
    assert out["data"] == plan.decode(bytes(body), 0, len(body))[0]
    # nothing left over: one more byte is an error
    bad = decode_internal(CLUSTER_METADATA, None, _frame(api_key, version, bytes(body) + b"\0"))
    assert "1 bytes left over" in bad["error"]


@pytest.mark.parametrize("ctype", sorted(CONTROL_TYPES))
def test_every_kraft_control_record_decodes_bytes_built_from_its_layout(ctype):
    spec = registry().schema(CONTROL_TYPES[ctype])
    plan = compile_plan(spec, 0)
    body = bytearray()
    plan.encode(plan.default(), body)
    out = decode_internal(CLUSTER_METADATA, struct.pack(">hh", 0, ctype), bytes(body), control=True)
    assert out["schema"] == spec.name and "error" not in out
    assert out["data"] == plan.decode(bytes(body), 0, len(body))[0]
    # transaction markers are the records layer's: nothing added
    assert decode_internal(CLUSTER_METADATA, struct.pack(">hh", 0, 1), b"\0\0\0\0\0\0", control=True) is None


def test_the_same_key_type_means_different_records_in_different_topics():
    key = struct.pack(">h", 0) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    offsets = decode_internal("__consumer_offsets", key, None)
    assert offsets["key"]["schema"] == "OffsetCommitKey"
    assert offsets["key"]["data"] == {"group": "g", "topic": "t", "partition": 3}
    txn = decode_internal("__transaction_state", key, None)
    assert txn["key"]["schema"] == "TransactionLogKey" and "error" in txn  # 7 bytes left over
    assert decode_internal("orders", key, None) is None


def test_a_newer_value_version_is_read_with_the_newest_known():
    # OffsetCommitValue v3 is known (0-4 in the specs); pretend v9: read as v4, the tail kept
    spec = record_specs().coordinator_record("__consumer_offsets", 1).value
    plan = compile_plan(spec, spec.valid_versions.hi)
    body = bytearray()
    plan.encode(plan.default(), body)
    key = struct.pack(">h", 1) + struct.pack(">h", 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    out = decode_internal("__consumer_offsets", key, struct.pack(">h", 9) + bytes(body) + b"\x01\x02")
    assert out["value"]["version"] == 9 and out["value"]["read_as"] == spec.valid_versions.hi
    assert out["value"]["unknown_tail"] == "0102" and "error" not in out


# ------------------------------------------------------------------------------------------- secrets
def _metadata(name, value, show=False):
    spec = record_specs().by_name[name]
    plan = compile_plan(spec, spec.valid_versions.hi)
    full = plan.default()
    full.update(value)
    body = bytearray()
    plan.encode(full, body)
    return decode_metadata(_frame(spec.api_key, spec.valid_versions.hi, bytes(body)), show_secrets=show)


def test_scram_credential_record_secrets_are_redacted_unless_shown():
    rec = {"Name": "alice", "Mechanism": 1, "Salt": "0011", "StoredKey": "aabbcc", "ServerKey": "ddeeff",
           "Iterations": 4096}
    out = _metadata("UserScramCredentialRecord", rec)
    assert out["data"]["Name"] == "alice" and out["data"]["Iterations"] == 4096
    for k in ("Salt", "StoredKey", "ServerKey"):
        assert out["data"][k]["redacted"] and out["data"][k]["bytes"] == len(rec[k]) // 2
    shown = _metadata("UserScramCredentialRecord", rec, show=True)
    assert shown["data"]["StoredKey"] == "aabbcc"


def test_sensitive_config_record_values_are_redacted_unless_shown():
    out = _metadata("ConfigRecord", {"ResourceType": 4, "ResourceName": "0", "Name": "ssl.keystore.password",
                                     "Value": "hunter2"})
    assert out["data"]["Value"] == {"redacted": "sensitive-config", "bytes": 7}
    plain = _metadata("ConfigRecord", {"ResourceType": 2, "ResourceName": "t", "Name": "retention.ms", "Value": "1"})
    assert plain["data"]["Value"] == "1"
    shown = _metadata("ConfigRecord", {"ResourceType": 4, "ResourceName": "0", "Name": "ssl.keystore.password",
                                       "Value": "hunter2"}, show=True)
    assert shown["data"]["Value"] == "hunter2"


def test_delegation_token_record_goes_through_the_table_which_holds_no_secret_of_it():
    # the table (kwire_cli/codec/secrets.py) explains: DelegationTokenRecord carries no HMAC
    out = _metadata("DelegationTokenRecord", {"Owner": "User:alice", "TokenId": "tid"})
    assert out["data"]["TokenId"] == "tid" and "error" not in out


# ------------------------------------------------------------------- a nullable struct in a tagged field
def test_nullable_struct_in_a_tagged_field_has_a_varint_presence_marker():
    spec = record_specs().by_name["ConsumerGroupMemberMetadataValue"]
    plan = compile_plan(spec, 0)
    assert plan.default()["ClassicMemberMetadata"] is None  # "default": null
    value = plan.default()
    value.update(ClientId="c", ClientHost="h", SubscribedTopicNames=["t"])
    value["ClassicMemberMetadata"] = {"SessionTimeoutMs": 30000, "SupportedProtocols": [{"Name": "range", "Metadata": "0102"}]}
    out = bytearray()
    plan.encode(value, out)
    # tag 0, its size (the presence marker and the struct), presence 1, then the struct
    tagged = out[out.index(b"\x00\x00\x75\x30") - 3:]
    assert tagged[1:2] == bytes([len(tagged) - 2]) and tagged[2] == 1
    assert plan.decode(bytes(out), 0, len(out))[0]["ClassicMemberMetadata"] == value["ClassicMemberMetadata"]
    # the null written explicitly (tag 0, payload 00) reads as null and re-encodes byte for byte
    value["ClassicMemberMetadata"] = None
    value["_explicit_tags"] = [0]
    out = bytearray()
    plan.encode(value, out)
    assert out.endswith(b"\x01\x00\x01\x00")
    back = plan.decode(bytes(out), 0, len(out))[0]
    assert back["ClassicMemberMetadata"] is None and back["_explicit_tags"] == [0]
