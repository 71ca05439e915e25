"""Input leniencies decided (issue 15, item 6; docs/cli.md, "What kwire encode refuses"):

* YAML/JSON booleans where an integer is expected are refused (struct packed true as 1);
* a dashed uuid must be 8-4-4-4-12 hex digits (uuid.UUID took dashes anywhere, braces,
  underscores, non-ASCII digits);
* NaN and infinities (YAML .nan, .inf) in record keys, values and header values are refused, as
  {"json": ...} and as bare numbers (Python wrote NaN, which is not JSON); the bare word NaN is the
  string "NaN" in kwire's documents (they are read as YAML), and stays text;
* decoded TimestampDelta / OffsetDelta outside int64 / int32 (a 10-byte varlong, a 5-byte varint)
  are shown by decode as they are, and encode refuses them with a named error.

Every refusal is one line, ``kwire: error: ...``, exit 1, no traceback.
"""
from __future__ import annotations

import json
import uuid

import pytest

from cli_run import kwire
from kwire_cli.codec import EncodeError, encode_request
from memory_bombs import _record, _uvarint, produce_request, v2_batch

PRODUCE = """api: Produce
version: 9
header: {{CorrelationId: {corr}, ClientId: c}}
body:
  TransactionalId: null
  Acks: {acks}
  TimeoutMs: 1000
  TopicData: [{{Name: t, PartitionData: [{{Index: {index}, Records: {records}}}]}}]
"""


def produce(corr="1", acks="1", index="0", records="null") -> str:
    return PRODUCE.format(corr=corr, acks=acks, index=index, records=records)


def refused(r, *says: str) -> None:
    assert r.code == 1, r
    assert r.out == "", r
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kwire: error: "), r
    assert "Traceback" not in r.err
    for s in says:
        assert s in lines[0], r


# ------------------------------------------------------------------ booleans are not integers

@pytest.mark.parametrize("doc,says", [
    (produce(corr="true"), "Produce v9 request header: CorrelationId: expected an int32, got True"),
    (produce(acks="false"), "Produce v9 request: Acks: expected an int16, got False"),
    (produce(index="true"), "TopicData[0].PartitionData[0].Index: expected an int32, got True"),
    (produce(acks="yes"), "Acks: expected an int16"),                     # YAML 1.1's yes: a string
    ("api: AlterReplicaLogDirs\nversion: 1\nbody: {Dirs: [{Path: /d, Topics: [{Name: t, Partitions: [0, 1, true]}]}]}\n",
     "Dirs[0].Topics[0].Partitions[2]: expected an int32, got True"),
    ("api: true\nversion: 9\nbody: {}\n", "api must be an API name or key, got True"),
    ("api: Produce\nversion: true\nbody: {}\n", "version must be a number, got True"),
])
def test_a_boolean_where_an_integer_is_expected_is_refused(doc, says):
    refused(kwire("encode", "-", input=doc), says)


def test_json_booleans_too_and_integers_still_encode():
    doc = {"api": "Produce", "version": 9, "header": {"CorrelationId": 1, "ClientId": "c"},
           "body": {"TransactionalId": None, "Acks": True, "TimeoutMs": 1, "TopicData": []}}
    refused(kwire("encode", "-", input=json.dumps(doc)), "Acks: expected an int16, got True")
    doc["body"]["Acks"] = 1
    r = kwire("encode", "-", input=json.dumps(doc))
    assert r.code == 0 and r.out.strip().endswith("0001000000010100"), r
    # bool fields still take booleans (and only them)
    assert kwire("encode", "-", input="api: Metadata\nversion: 12\nbody: {Topics: null, "
                                      "AllowAutoTopicCreation: true}\n").code == 0
    refused(kwire("encode", "-", input="api: Metadata\nversion: 12\nbody: {Topics: null, AllowAutoTopicCreation: 1}\n"),
            "AllowAutoTopicCreation: expected true or false, got 1")


def test_the_codec_refuses_booleans_for_integers():
    body = {"TransactionalId": None, "Acks": True, "TimeoutMs": 1, "TopicData": []}
    with pytest.raises(EncodeError, match=r"Acks: expected an int16, got True"):
        encode_request(0, 9, {"CorrelationId": 1, "ClientId": "c"}, body)
    with pytest.raises(EncodeError, match=r"CorrelationId: expected an int32, got False"):
        encode_request(0, 9, {"CorrelationId": False, "ClientId": "c"}, dict(body, Acks=1))


# ------------------------------------------------------------------ uuids

FETCH = "api: Fetch\nversion: 13\nbody: {{ReplicaId: -1, MaxWaitMs: 1, MinBytes: 1, Topics: [{{TopicId: '{u}', Partitions: []}}]}}\n"
U = uuid.UUID("0123456789abcdef0123456789abcdef")


@pytest.mark.parametrize("text", [str(U), str(U).upper(), U.hex, "ASNFZ4mrze8BI0VniavN7w"])
def test_the_uuid_forms_encode_takes(text):
    r = kwire("encode", "-", input=FETCH.format(u=text))
    assert r.code == 0 and U.bytes.hex() in r.out, r


@pytest.mark.parametrize("text", [
    "0123456-789ab-cdef-0123-456789abcdef",        # 36 characters, dashes misplaced
    "01234567-89abcdef-0123-4567-89abcdef",        # 36, one dash moved
    "{0123456789abcdef0123456789abcdef}",          # braces (34)
    "01234567-89ab-cdef-0123-456789abcde_",        # an underscore
    "0123456789abcdef0123456789abcd\u0661\u0662",  # Arabic-Indic digits
    "urn:uuid:01234567-89ab-cdef-0123-456789abcdef",
])
def test_a_uuid_with_misplaced_dashes_or_other_text_is_refused(text):
    refused(kwire("encode", "-", input=FETCH.format(u=text)), "Topics[0].TopicId:", "is not a uuid")


# ------------------------------------------------------------------ NaN in record values

RECORDS = "{{batches: [{{Records: [{{Key: k, Value: {value}, Headers: [{{Key: h, Value: {header}}}]}}]}}]}}"


@pytest.mark.parametrize("value,header,says", [
    ("{json: .nan}", "x", "Records[0].Value.json: NaN and infinities are not JSON"),
    ("{json: {a: [1, .inf]}}", "x", "Records[0].Value.json: NaN and infinities are not JSON"),
    ("x", "{json: -.inf}", "Records[0].Headers[0].Value.json: NaN and infinities are not JSON"),
    (".nan", "x", "Records[0].Value: nan is not a number a value can be written as"),
    ("x", ".inf", "Records[0].Headers[0].Value: inf is not a number a value can be written as"),
])
def test_nan_and_infinities_in_record_values_are_refused(value, header, says):
    refused(kwire("encode", "-", input=produce(records=RECORDS.format(value=value, header=header))), says)


def test_the_word_nan_is_a_string_and_finite_numbers_stay_accepted():
    r = kwire("encode", "-", input=produce(records=RECORDS.format(value="{json: NaN}", header="1.5")))
    assert r.code == 0, r
    raw = bytes.fromhex(r.out.strip())
    assert b'"NaN"' in raw and b"1.5" in raw


# ------------------------------------------------------------------ deltas past their wire types

def _delta_frame(ts_raw: int, off_raw: int) -> str:
    """A Produce request of one record whose timestamp and offset deltas are the zig-zag raw
    values given (a varlong of up to 10 bytes, a varint of up to 5: both can hold more than
    int64 / int32)."""
    rec = _record(b"\x00" + _uvarint(ts_raw) + _uvarint(off_raw) + b"\x01\x02v\x00")
    return produce_request(v2_batch(0, rec, 1)).hex()


@pytest.mark.parametrize("ts_raw,off_raw,field,value", [
    (1 << 64, 0, "TimestampDelta", 1 << 63),                 # past int64
    ((1 << 64) + 1, 0, "TimestampDelta", -(1 << 63) - 1),    # below int64
    (0, 1 << 33, "OffsetDelta", 1 << 32),                    # past int32
    (0, (1 << 33) - 1, "OffsetDelta", -(1 << 32)),           # below int32
])
def test_deltas_past_their_types_decode_as_they_are_and_do_not_encode(ts_raw, off_raw, field, value):
    r = kwire("decode", _delta_frame(ts_raw, off_raw), "--format", "json")
    assert r.code == 0, r
    (rec,) = r.json()["body"]["TopicData"][0]["PartitionData"][0]["Records"]["batches"][0]["Records"]
    assert rec[field] == value
    assert kwire("decode", _delta_frame(ts_raw, off_raw)).code == 0          # the tree too
    lo, hi = (-(1 << 63), (1 << 63) - 1) if field == "TimestampDelta" else (-(1 << 31), (1 << 31) - 1)
    refused(kwire("encode", "-", input=r.out), f"Records[0].{field}: {value} is out of range [{lo}, {hi}]")
