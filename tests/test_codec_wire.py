"""Wire rules from KIP-482 and the message format, checked on exact bytes."""
import pytest

from kwire_cli.codec import (
    DecodeError,
    EncodeError,
    compile_plan,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
)
from kwire_cli.codec.primitives import (
    read_uvarint,
    read_varint,
    read_varlong,
    uvarint_bytes,
    write_varint,
    write_varlong,
)
from kwire_cli.spec import build_message_spec, registry


def test_kip482_varint_layouts():
    assert uvarint_bytes(300) == bytes.fromhex("ac02")
    assert uvarint_bytes(0) == b"\x00"
    assert uvarint_bytes(127) == b"\x7f" and uvarint_bytes(128) == b"\x80\x01"
    assert read_uvarint(bytes.fromhex("ac02"), 0, 2) == (300, 2)
    out = bytearray()
    write_varint(out, -1)
    assert out == b"\x01" and read_varint(bytes(out), 0, 1) == (-1, 1)
    out = bytearray()
    write_varlong(out, -(2**63))
    assert read_varlong(bytes(out), 0, len(out))[0] == -(2**63)


def test_varint_longer_than_five_bytes_is_an_error():
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0, 6)


def test_empty_tag_section_is_one_zero_byte_and_compact_null_string_is_00():
    # ApiVersionsRequest v3: ClientSoftwareName, ClientSoftwareVersion (compact strings) + tags
    body = encode_body("ApiVersions", 3, "request", {"ClientSoftwareName": "a", "ClientSoftwareVersion": "b"})
    assert body == bytes.fromhex("0261" "0262" "00")
    # FindCoordinator v3 response: ErrorMessage is a nullable compact string; null is 00
    spec = registry().api("FindCoordinator").response
    out = bytearray()
    compile_plan(spec, 3).encode({"ThrottleTimeMs": 0, "ErrorCode": 0, "ErrorMessage": None,
                                  "NodeId": 1, "Host": "h", "Port": 9092}, out)
    assert out.hex() == "00000000" "0000" "00" "00000001" "0268" "00002384" "00"


def test_request_header_versions():
    # v0 for ControlledShutdown v0: no client id
    b = encode_request("ControlledShutdown", 0, {"CorrelationId": 5}, {"BrokerId": 1}, size_prefix=False)
    assert b.hex() == "0007" "0000" "00000005" "00000001"
    # v1: a non-compact nullable client id
    b = encode_request("Metadata", 1, {"CorrelationId": 1, "ClientId": None}, {"Topics": None}, size_prefix=False)
    assert b.hex() == "0003" "0001" "00000001" "ffff" "ffffffff"
    # v2 (flexible): ClientId stays a non-compact string, then a tag section
    b = encode_request("ApiVersions", 3, {"CorrelationId": 1, "ClientId": "c"},
                       {"ClientSoftwareName": "", "ClientSoftwareVersion": ""}, size_prefix=False)
    assert b.hex() == "0012" "0003" "00000001" "000163" "00" "01" "01" "00"


def test_apiversions_response_header_is_always_v0_and_others_follow_flexible_versions():
    b = encode_response("ApiVersions", 3, {"CorrelationId": 9}, {}, size_prefix=False)
    assert b[:4] == b"\x00\x00\x00\x09" and b[4:6] == b"\x00\x00"  # no header tag section
    b = encode_response("Metadata", 9, {"CorrelationId": 9}, {}, size_prefix=False)
    assert b[:5] == b"\x00\x00\x00\x09\x00"  # header v1: tag section after the correlation id


def test_size_prefix_detected_or_not():
    framed = encode_request("Metadata", 4, {"CorrelationId": 3, "ClientId": "x"}, {"Topics": []})
    assert decode_request(framed).size == len(framed) - 4
    assert decode_request(framed[4:]).header["CorrelationId"] == 3
    with pytest.raises(DecodeError, match="size prefix says"):
        decode_request(framed[:-1], size_prefixed=True)


def test_unknown_tags_are_kept_and_written_back():
    # a MetadataRequest v12 with tag 7 (unknown) carrying 3 bytes in the body's tag section
    body = encode_body("Metadata", 12, "request", {"Topics": [], "_unknown_tags": {"7": "aabbcc"}})
    assert body.endswith(bytes.fromhex("01" "07" "03" "aabbcc"))
    msg = decode_body(body, "Metadata", 12, "request")
    assert msg.body["_unknown_tags"] == {"7": "aabbcc"}
    assert encode_body("Metadata", 12, "request", msg.body) == body


def test_tagged_field_written_only_when_not_default():
    # ApiVersionsResponse v3: SupportedFeatures (tag 0), FinalizedFeaturesEpoch (tag 1, default -1),
    # FinalizedFeatures (tag 2), ZkMigrationReady (tag 3, default false)
    plain = encode_body("ApiVersions", 3, "response", {"ErrorCode": 0, "ApiKeys": [], "ThrottleTimeMs": 0})
    assert plain.hex() == "0000" "01" "00000000" "00"
    with_tag = encode_body("ApiVersions", 3, "response", {"FinalizedFeaturesEpoch": 5})
    assert with_tag.hex().endswith("01" "01" "08" "0000000000000005")
    same = encode_body("ApiVersions", 3, "response", {"FinalizedFeaturesEpoch": -1})
    assert same == plain
    decoded = decode_body(plain, "ApiVersions", 3, "response").body
    assert decoded["FinalizedFeaturesEpoch"] == -1 and decoded["SupportedFeatures"] == []


def test_nullable_struct_has_a_presence_byte():
    spec = build_message_spec({
        "type": "data", "name": "Holder", "validVersions": "0", "flexibleVersions": "none",
        "fields": [{"name": "Inner", "type": "Thing", "versions": "0+", "nullableVersions": "0+",
                    "fields": [{"name": "X", "type": "int8", "versions": "0+"}]}]})
    plan = compile_plan(spec, 0)
    out = bytearray()
    plan.encode({"Inner": None}, out)
    assert out == b"\xff"
    out = bytearray()
    plan.encode({"Inner": {"X": 4}}, out)
    assert out == b"\x01\x04"
    assert plan.decode(b"\x01\x04", 0, 2)[0] == {"Inner": {"X": 4}}


def test_array_count_checked_before_allocation_with_path_and_offset():
    # MetadataResponse v1: Brokers[], ControllerId, Topics[ErrorCode, Name, IsInternal, Partitions[...]]
    body = bytearray()
    body += b"\x00\x00\x00\x00"                       # Brokers: 0
    body += b"\x00\x00\x00\x01"                       # ControllerId
    body += b"\x00\x00\x00\x01"                       # Topics: 1
    body += b"\x00\x00" + b"\x00\x01t" + b"\x00"      # ErrorCode, Name "t", IsInternal
    body += b"\x00\x00\x00\x01"                       # Partitions: 1
    body += b"\x00\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01"  # ErrorCode, PartitionIndex, LeaderId
    body += b"\x7f\xff\xff\xff"                       # ReplicaNodes: 2147483647 elements
    body += b"\x00" * 12
    with pytest.raises(DecodeError) as e:
        decode_body(bytes(body), "Metadata", 1, "response")
    assert str(e.value) == ("Metadata v1 response: Topics[0].Partitions[0].ReplicaNodes: array of "
                            "2147483647 elements needs at least 8589934588 bytes, 12 left at offset 36")


def test_trailing_bytes_are_an_error_that_says_how_many():
    b = encode_request("Metadata", 4, {"CorrelationId": 1, "ClientId": "x"}, {"Topics": []}, size_prefix=False)
    with pytest.raises(DecodeError, match=r"^Metadata v4 request: 3 trailing bytes after a complete message at offset 16$"):
        decode_request(b + b"abc", size_prefixed=False)


def test_invalid_utf8_negative_length_and_bad_version():
    good = encode_request("Metadata", 1, {"CorrelationId": 1, "ClientId": "x"}, {"Topics": [{"Name": "ab"}]},
                          size_prefix=False)
    bad = good.replace(b"ab", b"\xff\xfe")
    with pytest.raises(DecodeError, match=r"Topics\[0\]\.Name: invalid UTF-8 at offset 17"):
        decode_request(bad, size_prefixed=False)
    neg = good.replace(b"\x00\x02ab", b"\xff\xfeab")
    with pytest.raises(DecodeError, match=r"Topics\[0\]\.Name: negative length -2 at offset 15 \(only -1 means null\)"):
        decode_request(neg, size_prefixed=False)
    nonnull = good.replace(b"\x00\x02ab", b"\xff\xffab")
    with pytest.raises(DecodeError, match="not nullable in this version"):
        decode_request(nonnull, size_prefixed=False)
    with pytest.raises(DecodeError, match=r"Metadata v99 is newer than the specs in use \(Metadata 0-13 in "):
        decode_response(b"\x00\x00\x00\x01", "Metadata", 99)
    with pytest.raises(DecodeError, match=r"Metadata v-1 is not a valid version \(valid: 0-13; api key 3\)"):
        decode_response(b"\x00\x00\x00\x01", "Metadata", -1)
    with pytest.raises(DecodeError, match="unknown API key 999"):
        decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x01\xff\xff", size_prefixed=False)


def test_truncation_anywhere_gives_a_decode_error_never_another_exception():
    b = encode_request("Metadata", 12, {"CorrelationId": 1, "ClientId": "client"},
                       {"Topics": [{"Name": "topic", "TopicId": "AAAAAAAAAAAAAAAAAAAAAA"}]}, size_prefix=False)
    for cut in range(len(b)):
        with pytest.raises(DecodeError):
            decode_request(b[:cut], size_prefixed=False)


def test_encode_refuses_fields_the_version_lacks_and_names_versions():
    with pytest.raises(EncodeError) as e:
        encode_request("Metadata", 3, {}, {"Topics": [], "IncludeClusterAuthorizedOperations": True})
    assert str(e.value) == ("Metadata v3 request has no field "
                            "IncludeClusterAuthorizedOperations (versions 8-10)")
    with pytest.raises(EncodeError, match=r"^Metadata v3 request Topics\[0\] has no field TopicId \(versions 10\+\)$"):
        encode_request("Metadata", 3, {}, {"Topics": [{"Name": "a", "TopicId": "AAAAAAAAAAAAAAAAAAAAAA"}]})
    with pytest.raises(EncodeError, match="has no field Nope in any version"):
        encode_request("Metadata", 3, {}, {"Nope": 1})


def test_encode_type_and_range_errors_name_the_field():
    with pytest.raises(EncodeError, match=r"Topics\[0\]\.Partitions\[1\]\.PartitionIndex: 4294967296 is out of range for int32"):
        encode_request("DeleteRecords", 1, {}, {"Topics": [{"Name": "t", "Partitions": [
            {"PartitionIndex": 0, "Offset": 1}, {"PartitionIndex": 2**32, "Offset": 1}]}], "TimeoutMs": 1})
    with pytest.raises(EncodeError, match="AllowAutoTopicCreation: expected true or false, got 'yes'"):
        encode_request("Metadata", 4, {}, {"Topics": [], "AllowAutoTopicCreation": "yes"})
    with pytest.raises(EncodeError, match=r"Topics\[0\]\.Name: null is not allowed here"):
        encode_request("Metadata", 4, {}, {"Topics": [{"Name": None}]})


def test_defaults_fill_absent_fields():
    msg = decode_request(encode_request("Metadata", 4, {"CorrelationId": 1}, {}))
    assert msg.body == {"Topics": [], "AllowAutoTopicCreation": True}
    assert msg.header["ClientId"] == ""


def test_uuid_text_forms():
    a = encode_body("Metadata", 12, "request", {"Topics": [{"TopicId": "00112233-4455-6677-8899-aabbccddeeff", "Name": None}]})
    decoded = decode_body(a, "Metadata", 12, "request").body
    tid = decoded["Topics"][0]["TopicId"]
    assert len(tid) == 22 and encode_body("Metadata", 12, "request", decoded) == a
    assert bytes.fromhex("00112233445566778899aabbccddeeff") in a


def test_plans_are_compiled_once_and_reused():
    spec = registry().api("Fetch").request
    assert compile_plan(spec, 12) is compile_plan(spec, 12)
