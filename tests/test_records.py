"""kwire_cli.records against kafka-python's own record builders and readers (independent bytes)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka", reason="kafka-python (the independent record builder/reader) is not installed")

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from kwire_cli.records import (
    DEFAULT_MAX_DECOMPRESSED,
    RecordsError,
    decode_records,
    encode_records,
    show_bytes,
    to_bytes,
)
from kwire_cli.records.compression import xxh32

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TS0 = 1_700_000_000_000


def _records_input(n=40):
    """A mix of keys, values and headers: null keys, tombstones, binary, duplicate/null headers."""
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else (b"key-%d" % i if i % 4 else bytes([0, 1, 2, i & 0xFF]))
        if i % 9 == 5:
            value = None  # tombstone
        elif i % 6 == 1:
            value = "héllo wörld ✓ %d\n\ttabbed" % i
            value = value.encode()
        elif i % 6 == 2:
            value = b"\xff\xfe binary \x00" * (i % 5 + 1)
        else:
            value = b"value %d " % i * (1 + i % 11)
        headers = []
        if i % 2 == 0:
            headers = [("trace", b"abc"), ("trace", b"def"), ("nil", None), ("trace", b""),
                       ("bin", b"\x00\x9f")]
        out.append((i, TS0 + 3 * i, key, value, headers))
    return out


def _v2_batch(codec, records=None, *, base_offset=None, transactional=False, producer=(-1, -1, -1)):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=producer[0], producer_epoch=producer[1],
                                  base_sequence=producer[2], batch_size=1 << 24)
    for offset, ts, key, value, headers in records or _records_input():
        assert b.append(offset, ts, key, value, headers) is not None
    data = bytearray(b.build())
    if base_offset is not None:  # what a broker does: assign the base offset (outside the CRC)
        struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def _kp_records(data):
    """kafka-python's reading of a records buffer: per batch, list of (offset, ts, key, value, headers)."""
    out = []
    for batch in MemoryRecords(data):
        out.append([(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch])
    return out


def _ours(decoded):
    """Our reading, in kafka-python's tuple form."""
    out = []
    for b in decoded["batches"]:
        assert "error" not in b, b.get("error")
        if b["Magic"] == 2:
            out.append([(r["Offset"], r["Timestamp"], to_bytes(r["Key"], "k"), to_bytes(r["Value"], "v"),
                         [(h["Key"], to_bytes(h["Value"], "h")) for h in r["Headers"]])
                        for r in b["Records"]])
        elif "Messages" in b:
            out.append([(m["AbsoluteOffset"], m.get("Timestamp"), to_bytes(m["Key"], "k"),
                         to_bytes(m["Value"], "v"), []) for m in b["Messages"]])
        else:
            out.append([(b["Offset"], b.get("Timestamp"), to_bytes(b["Key"], "k"),
                         to_bytes(b["Value"], "v"), [])])
    return out


# ---------------------------------------------------------------------------------------------
# magic 2

@pytest.mark.parametrize("codec", sorted(CODECS))
def test_v2_every_codec_matches_kafka_python(codec):
    data = _v2_batch(codec, base_offset=1000)
    decoded = decode_records(data)
    assert decoded["partial_trailing_batch"] is None
    (batch,) = decoded["batches"]
    assert batch["Compression"] == CODECS[codec]
    assert batch["Magic"] == 2 and batch["ByteOffset"] == 0
    assert batch["CrcValid"] is True and batch["Crc"] == batch["CrcComputed"]
    assert batch["RecordCount"] == 40 == len(batch["Records"])
    assert batch["BatchLength"] == len(data) - 12
    assert batch["BaseOffset"] == 1000 and batch["LastOffsetDelta"] == 39
    assert batch["BaseTimestamp"] == TS0 and batch["MaxTimestamp"] == TS0 + 3 * 39
    assert batch["ProducerId"] == -1 and batch["ProducerEpoch"] == -1 and batch["BaseSequence"] == -1
    assert batch["Attributes"] == codec
    # kafka-python's own reader sees exactly the same records, headers in the same order
    kp = _kp_records(data)
    assert _ours(decoded) == kp
    # and those are what was appended
    expected = [(1000 + o, ts, k, v, h) for o, ts, k, v, h in _records_input()]
    assert kp == [expected]
    # kafka-python's batch fields agree
    kb = next(iter(MemoryRecords(data)))
    assert kb.crc == batch["Crc"] and kb.validate_crc()


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_v2_roundtrip(codec):
    data = _v2_batch(codec, base_offset=77)
    decoded = decode_records(data)
    again = encode_records(json.loads(json.dumps(decoded)))  # through JSON: nothing lost
    if codec == 0:
        assert again == data
    redecoded = decode_records(again)
    strip = ("Crc", "CrcComputed", "BatchLength", "CompressedSize")
    assert [{k: v for k, v in b.items() if k not in strip} for b in redecoded["batches"]] == \
        [{k: v for k, v in b.items() if k not in strip} for b in decoded["batches"]]
    assert _kp_records(again) == _kp_records(data)


def test_v2_record_fields_and_text_hex_forms():
    data = _v2_batch(0)
    recs = decode_records(data)["batches"][0]["Records"]
    r0, r1, r2, r3 = recs[:4]
    assert r0["Key"] == {"hex": "00010200"}
    assert r1["Key"] == {"text": "key-1"}
    assert r1["Value"] == {"text": "héllo wörld ✓ 1\n\ttabbed"}
    assert r2["Value"]["hex"].startswith("fffe2062696e61727920")
    assert r3["Key"] is None
    assert recs[5]["Value"] is None  # tombstone
    assert r0["Headers"] == [
        {"Key": "trace", "Value": {"text": "abc"}}, {"Key": "trace", "Value": {"text": "def"}},
        {"Key": "nil", "Value": None}, {"Key": "trace", "Value": {"text": ""}},
        {"Key": "bin", "Value": {"hex": "009f"}}]
    assert r1["Headers"] == []
    for i, r in enumerate(recs):
        assert r["OffsetDelta"] == i and r["Offset"] == i
        assert r["TimestampDelta"] == 3 * i and r["Timestamp"] == TS0 + 3 * i
        assert r["Attributes"] == 0
    # Length is the varint-prefixed size of each record: they tile the batch exactly
    total = sum(r["Length"] + len(_zigzag(r["Length"])) for r in recs)
    assert 61 + total == len(data)


def _zigzag(n):
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def test_show_bytes_forms():
    assert show_bytes(b"plain") == {"text": "plain"}
    assert show_bytes(b"") == {"text": ""}
    assert show_bytes(b"a\x07b") == {"hex": "610762"}          # BEL is not printable
    assert show_bytes(b"\xc3\x28") == {"hex": "c328"}          # invalid UTF-8
    assert show_bytes("日本".encode()) == {"text": "日本"}
    for form in (show_bytes(b"a\x07b"), show_bytes(b"\xc3\x28"), show_bytes("日本".encode())):
        assert to_bytes(form, "x") in (b"a\x07b", b"\xc3\x28", "日本".encode())


def test_v2_transactional_producer_fields():
    data = _v2_batch(3, transactional=True, producer=(4242, 7, 1000), base_offset=5)
    batch = decode_records(data)["batches"][0]
    assert batch["IsTransactional"] is True and batch["IsControlBatch"] is False
    assert batch["Attributes"] == 0x10 | 3
    assert (batch["ProducerId"], batch["ProducerEpoch"], batch["BaseSequence"]) == (4242, 7, 1000)
    kb = next(iter(MemoryRecords(data)))
    assert kb.producer_id == 4242 and kb.producer_epoch == 7 and kb.base_sequence == 1000
    assert kb.is_transactional


def test_v2_log_append_time_timestamps():
    data = bytearray(_v2_batch(0))
    # a broker with LogAppendTime sets bit 3 and MaxTimestamp; clients then report MaxTimestamp
    attrs = struct.unpack_from(">h", data, 21)[0] | 0x08
    struct.pack_into(">h", data, 21, attrs)
    struct.pack_into(">q", data, 35, TS0 + 999_999)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    data = bytes(data)
    batch = decode_records(data)["batches"][0]
    assert batch["TimestampType"] == "LogAppendTime" and batch["CrcValid"]
    assert {r["Timestamp"] for r in batch["Records"]} == {TS0 + 999_999}
    assert [r.timestamp for r in next(iter(MemoryRecords(data)))][:3] == [TS0 + 999_999] * 3
    assert encode_records(decode_records(data)) == data


def test_v2_bad_crc_is_reported_and_decoding_goes_on():
    good = _v2_batch(0, base_offset=0)
    bad = bytearray(_v2_batch(1, base_offset=40))
    bad[-1] ^= 0x01  # flips a bit in the gzip trailer: CRC wrong, and gzip now fails its own check
    bad2 = bytearray(_v2_batch(0, base_offset=80))
    bad2[67] ^= 0x20  # inside record 0's key: still decodable, only the CRC is wrong
    data = good + bytes(bad) + bytes(bad2)
    decoded = decode_records(data)
    b0, b1, b2 = decoded["batches"]
    assert b0["CrcValid"] and not b1["CrcValid"] and not b2["CrcValid"]
    assert b2["Crc"] != b2["CrcComputed"] and b2["Crc"] == struct.unpack_from(">I", bad2, 17)[0]
    assert "error" not in b2 and len(b2["Records"]) == 40
    assert b1["error"].startswith(f"batch 1 at byte {len(good)} (offset 40): corrupt gzip payload")
    assert b1["RawHex"] == bytes(bad).hex()
    assert b2["ByteOffset"] == len(good) + len(bad)
    # decode -> encode keeps the stored (wrong) CRC, byte for byte
    assert encode_records(decoded) == data
    # kafka-python agrees the CRC is wrong
    kb = next(iter(MemoryRecords(bytes(bad2))))
    assert not kb.validate_crc()


def test_control_batch_commit_and_abort_markers():
    value = {"batches": [
        {"BaseOffset": 10, "IsTransactional": True, "IsControlBatch": True, "ProducerId": 99,
         "ProducerEpoch": 3, "BaseTimestamp": TS0,
         "Records": [{"Key": {"hex": "00000001"}, "Value": {"hex": "00000000002a"}}]},
        {"BaseOffset": 11, "IsTransactional": True, "IsControlBatch": True, "ProducerId": 99,
         "ProducerEpoch": 3, "BaseTimestamp": TS0,
         "Records": [{"Key": {"hex": "00000000"}, "Value": {"hex": "000000000007"}}]},
    ]}
    data = encode_records(value)
    decoded = decode_records(data)
    c0 = decoded["batches"][0]["Records"][0]["Control"]
    c1 = decoded["batches"][1]["Records"][0]["Control"]
    assert c0 == {"Version": 0, "Type": "COMMIT", "TypeId": 1, "MarkerVersion": 0, "CoordinatorEpoch": 42}
    assert c1 == {"Version": 0, "Type": "ABORT", "TypeId": 0, "MarkerVersion": 0, "CoordinatorEpoch": 7}
    assert decoded["batches"][0]["Attributes"] == 0x30
    # kafka-python reads the same markers from our bytes
    kp = [r for batch in MemoryRecords(data) for r in batch]
    assert kp[0].commit and kp[0].version == 0 and not kp[1].commit and kp[1].abort
    assert all(b.is_control_batch for b in MemoryRecords(data))
    assert encode_records(decoded) == data


# ---------------------------------------------------------------------------------------------
# legacy message sets

def _legacy(magic, codec, n=6, offset0=0):
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 24)
    for i in range(n):
        key = None if i == 2 else b"k%d" % i
        value = None if i == 4 else (b"\x00\x01\x02" if i == 3 else b"legacy value %d" % i)
        assert b.append(offset0 + i, TS0 + i, key, value) is not None
    return bytes(b.build())


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_legacy_every_codec_matches_kafka_python(magic, codec):
    if magic == 0 and codec == 3:
        pytest.importorskip("xxhash", reason="kafka-python needs xxhash to write the old Kafka lz4 framing")
    data = _legacy(magic, codec)
    decoded = decode_records(data)
    assert decoded["partial_trailing_batch"] is None
    kp = _kp_records(data)
    ours = _ours(decoded)
    assert [m for batch in ours for m in batch] == [m for batch in kp for m in batch]
    for b in decoded["batches"]:
        assert b["Magic"] == magic and b["CrcValid"] is True
        start, end = b["ByteOffset"], b["ByteOffset"] + 12 + b["MessageSize"]
        assert b["Crc"] == b["CrcComputed"] == zlib.crc32(data[start + 16:end])
    if codec:
        (wrapper,) = decoded["batches"]
        assert wrapper["Compression"] == CODECS[codec]
        assert len(wrapper["Messages"]) == 6
        assert wrapper["Messages"][4]["Value"] is None and wrapper["Messages"][2]["Key"] is None
        assert wrapper["Messages"][3]["Value"] == {"hex": "000102"}
        if codec == 3:
            assert wrapper["CompressionFraming"] == ("frame-kafka-legacy-hc" if magic == 0 else "frame")
    else:
        assert len(decoded["batches"]) == 6
        assert encode_records(decoded) == data
    if magic == 1:
        stamps = [m.get("Timestamp") for b in decoded["batches"] for m in b.get("Messages", [b])]
        assert stamps == [TS0 + i for i in range(6)]
    # re-encode: kafka-python reads the same messages back
    again = encode_records(json.loads(json.dumps(decoded)))
    assert _kp_records(again) == kp


def test_legacy_magic1_relative_inner_offsets_resolved():
    # a broker-assigned magic 1 wrapper: offset = absolute offset of the last inner message
    data = bytearray(_legacy(1, 1))
    struct.pack_into(">q", data, 0, 505)
    data = bytes(data)
    wrapper = decode_records(data)["batches"][0]
    assert [m["Offset"] for m in wrapper["Messages"]] == [0, 1, 2, 3, 4, 5]
    assert [m["AbsoluteOffset"] for m in wrapper["Messages"]] == [500, 501, 502, 503, 504, 505]
    assert [r.offset for b in MemoryRecords(data) for r in b] == [500, 501, 502, 503, 504, 505]


def test_legacy_magic0_lz4_old_kafka_header_checksum():
    """KAFKA-1493: early Kafka computed the lz4 frame HC over the magic bytes too (magic 0)."""
    import lz4.frame
    inner = _legacy(0, 0)
    frame = bytearray(lz4.frame.compress(inner, block_linked=False, store_size=False))
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[6] == (xxh32(bytes(frame[4:6])) >> 8) & 0xFF  # our xxh32 agrees with liblz4
    frame[6] = (xxh32(bytes(frame[0:6])) >> 8) & 0xFF  # the broken checksum
    wrapper = encode_records([{"Magic": 0, "Offset": 5, "Key": None, "Value": {"hex": frame.hex()}}])
    # flip on the lz4 codec bit by hand so the value stays exactly these frame bytes
    wrapper = bytearray(wrapper)
    wrapper[17] = 3
    struct.pack_into(">I", wrapper, 12, zlib.crc32(bytes(wrapper[16:])))
    decoded = decode_records(bytes(wrapper))["batches"][0]
    assert "error" not in decoded, decoded.get("error")
    assert decoded["CompressionFraming"] == "frame-kafka-legacy-hc"
    assert [to_bytes(m["Value"], "v") for m in decoded["Messages"]] == \
        [to_bytes(b["Value"], "v") for b in decode_records(inner)["batches"]]


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    xxhash = pytest.importorskip("xxhash")
    for n in range(70):
        blob = bytes(range(n))
        assert xxh32(blob) == xxhash.xxh32(blob).intdigest()
        assert xxh32(blob, 7) == xxhash.xxh32(blob, seed=7).intdigest()


# ---------------------------------------------------------------------------------------------
# framings written by other clients

def _recompress_v2(codec, compressor):
    """A v2 batch whose records are compressed by ``compressor`` (an independent library)."""
    plain = bytearray(_v2_batch(0))
    payload = compressor(bytes(plain[61:]))
    out = bytearray(plain[:61]) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, 17, calc_crc32c(bytes(out[21:])))
    return bytes(out)


def test_snappy_raw_framing_as_librdkafka_writes():
    snappy = pytest.importorskip("snappy")
    data = _recompress_v2(2, snappy.compress)
    batch = decode_records(data)["batches"][0]
    assert batch["CompressionFraming"] == "raw" and batch["CrcValid"]
    assert _ours(decode_records(data)) == _kp_records(data)
    # re-encode keeps the raw framing
    again = encode_records(decode_records(data))
    assert decode_records(again)["batches"][0]["CompressionFraming"] == "raw"
    assert _kp_records(again) == _kp_records(data)


def test_snappy_xerial_multi_block():
    big = [(i, TS0, b"k", b"x%06d" % i * 200, []) for i in range(60)]  # ~84 KB: three 32 KiB blocks
    data = _v2_batch(2, big)
    assert data[61:69] == b"\x82SNAPPY\x00"
    decoded = decode_records(data)
    assert decoded["batches"][0]["CompressionFraming"] == "xerial"
    assert _ours(decoded) == _kp_records(data)


@pytest.mark.parametrize("opts", [
    dict(block_linked=False, content_checksum=True, store_size=True),
    dict(block_linked=False, block_checksum=True, store_size=False, block_size=0),
    dict(block_linked=True, store_size=False),
])
def test_lz4_frame_options(opts):
    lz4frame = pytest.importorskip("lz4.frame")
    data = _recompress_v2(3, lambda raw: lz4frame.compress(raw, **opts))
    decoded = decode_records(data)
    assert decoded["batches"][0]["CompressionFraming"] == "frame"
    assert _ours(decoded) == _kp_records(data)


def test_zstd_multi_frame():
    zstandard = pytest.importorskip("zstandard")

    def two_frames(raw):
        c = zstandard.ZstdCompressor()
        return c.compress(raw[:1000]) + c.compress(raw[1000:])
    data = _recompress_v2(4, two_frames)
    assert _ours(decode_records(data)) == _kp_records(data)


# ---------------------------------------------------------------------------------------------
# fetch responses: several batches, partial trailing batch

def test_partial_trailing_batch_like_clients():
    b0 = _v2_batch(0, base_offset=0)
    b1 = _v2_batch(0, base_offset=40)
    b2 = _v2_batch(4, base_offset=80)
    for cut in (1, 11, 12, 30, len(b2) - 1):
        data = b0 + b1 + b2[:cut]
        decoded = decode_records(data)
        assert len(decoded["batches"]) == 2
        assert decoded["partial_trailing_batch"] == {
            "offset": len(b0) + len(b1), "bytes": cut, "hex": b2[:cut].hex()}
        assert len(list(MemoryRecords(data))) == 2  # kafka-python stops at the same place
        assert encode_records(decoded) == data
    assert decode_records(b"") == {"batches": [], "partial_trailing_batch": None}


def test_mixed_magics_in_one_buffer():
    data = _legacy(0, 0, n=2) + _legacy(1, 2, n=3, offset0=2) + _v2_batch(1, base_offset=5)
    decoded = decode_records(data)
    assert [b["Magic"] for b in decoded["batches"]] == [0, 0, 1, 2]
    assert _ours(decoded) == _kp_records(data)


# ---------------------------------------------------------------------------------------------
# encoding from the YAML authoring shape

@pytest.mark.parametrize("codec", sorted(CODECS))
def test_encode_authoring_shape_read_by_kafka_python(codec):
    value = {"batches": [{
        "Compression": CODECS[codec], "BaseOffset": 0, "BaseTimestamp": TS0,
        "Records": [
            {"Key": "k", "Value": "v", "Headers": [{"Key": "h", "Value": "x"}, {"Key": "h", "Value": None}]},
            {"Key": None, "Value": None, "Timestamp": TS0 + 50},
            {"Key": {"hex": "00ff"}, "Value": {"json": {"a": [1, 2]}}, "Headers": [["z", {"text": "1"}]]},
            {"Value": "ünïcode", "Headers": {"only": {"base64": "AAE="}}},
        ]}]}
    data = encode_records(value)
    kp = _kp_records(data)
    assert kp == [[
        (0, TS0, b"k", b"v", [("h", b"x"), ("h", None)]),
        (1, TS0 + 50, None, None, []),
        (2, TS0, b"\x00\xff", b'{"a":[1,2]}', [("z", b"1")]),
        (3, TS0, None, "ünïcode".encode(), [("only", b"\x00\x01")]),
    ]]
    kb = next(iter(MemoryRecords(data)))
    assert kb.compression_type == codec and kb.validate_crc()
    assert kb.max_timestamp == TS0 + 50 and kb.last_offset_delta == 3
    assert kb.producer_id == -1 and kb.base_sequence == -1
    batch = decode_records(data)["batches"][0]
    assert batch["CrcValid"] and batch["PartitionLeaderEpoch"] == -1


def test_encode_legacy_authoring_shape():
    value = [
        {"Magic": 1, "Timestamp": TS0, "Key": "a", "Value": "1"},
        {"Magic": 1, "Compression": "gzip", "Timestamp": TS0 + 1, "Offset": 3,
         "Messages": [{"Key": "b", "Value": "2"}, {"Key": "c", "Value": None}]},
        {"Magic": 0, "Offset": 4, "Key": None, "Value": {"hex": "ff"}},
    ]
    data = encode_records(value)
    kp = _kp_records(data)
    assert [m for b in kp for m in b] == [
        (0, TS0, b"a", b"1", []), (2, TS0 + 1, b"b", b"2", []), (3, TS0 + 1, b"c", None, []),
        (4, None, None, b"\xff", [])]


def test_encode_errors_name_the_path():
    with pytest.raises(RecordsError, match=r"batches\[0\]\.Records\[1\]\.Key"):
        encode_records({"batches": [{"Records": [{"Key": "a"}, {"Key": [1, 2]}]}]})
    with pytest.raises(RecordsError, match=r"batches\[0\]\.Compression"):
        encode_records({"batches": [{"Compression": "brotli", "Records": []}]})
    with pytest.raises(RecordsError, match=r"batches\[0\]\.BaseOffset: .*out of range"):
        encode_records({"batches": [{"BaseOffset": 1 << 64}]})
    with pytest.raises(RecordsError, match=r"batches\[0\]\.Records\[0\]\.Headers\[0\]"):
        encode_records({"batches": [{"Records": [{"Headers": [{"Value": "x"}]}]}]})
    with pytest.raises(RecordsError, match=r"zstd is not available for magic 1"):
        encode_records([{"Magic": 1, "Compression": "zstd", "Messages": []}])
    with pytest.raises(RecordsError, match=r"\.hex: "):
        encode_records([{"Records": [{"Value": {"hex": "zz"}}]}])


def test_default_cap_is_generous_and_finite():
    assert 64 * 1024 * 1024 <= DEFAULT_MAX_DECOMPRESSED < 1 << 40


def test_multi_byte_varints_large_deltas_and_sizes():
    records = [
        (0, TS0, b"a", b"small", []),
        (70, TS0 - 5, None, b"x" * 200, [("k" * 70, b"v" * 300)]),          # negative ts delta, 2-byte varints
        (20_000, TS0 + 10**9, b"k" * 20_000, b"y" * 70_000, []),               # 3-byte varints
        (2**31 - 1, TS0 + 2**40, b"", b"", [("", b"")] * 3),                  # 5-byte / 6-byte varints
    ]
    for codec in (0, 4):
        data = _v2_batch(codec, records, base_offset=2**40)
        decoded = decode_records(data)
        assert _ours(decoded) == _kp_records(data)
        recs = decoded["batches"][0]["Records"]
        assert [r["TimestampDelta"] for r in recs] == [0, -5, 10**9, 2**40]
        assert [r["OffsetDelta"] for r in recs] == [0, 70, 20_000, 2**31 - 1]
        if codec == 0:
            assert encode_records(decoded) == data


def test_encode_from_yaml_text_including_control_markers():
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load("""
batches:
  - Compression: snappy
    BaseOffset: 100
    BaseTimestamp: 1700000000000
    ProducerId: 5
    ProducerEpoch: 0
    BaseSequence: 0
    IsTransactional: true
    Records:
      - {Key: order-1, Value: '{"qty": 2}', Headers: [{Key: src, Value: web}, {Key: src, Value: null}]}
      - {Key: null, Value: null}
  - IsTransactional: true
    ProducerId: 5
    ProducerEpoch: 0
    BaseOffset: 102
    BaseTimestamp: 1700000000100
    Records:
      - Control: {Type: COMMIT, CoordinatorEpoch: 3}
""")
    data = encode_records(doc)
    batches = list(MemoryRecords(data))
    assert batches[0].compression_type == 2 and batches[0].is_transactional
    assert not batches[0].is_control_batch and batches[1].is_control_batch
    recs = [[(r.offset, r.key, r.value, list(r.headers)) for r in b] for b in MemoryRecords(data)]
    assert recs[0] == [(100, b"order-1", b'{"qty": 2}', [("src", b"web"), ("src", None)]),
                       (101, None, None, [])]
    (marker,) = [r for r in list(MemoryRecords(data))[1]]
    assert marker.commit and marker.offset == 102
    decoded = decode_records(data)
    assert decoded["batches"][1]["Records"][0]["Control"]["CoordinatorEpoch"] == 3
    control = decoded["batches"][1]
    assert encode_records([control]) == data[control["ByteOffset"]:]  # uncompressed: byte-exact


_bytes_or_none = st.one_of(st.none(), st.binary(max_size=80), st.text(max_size=30).map(str.encode))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(_bytes_or_none, _bytes_or_none,
                          st.lists(st.tuples(st.text(max_size=10), _bytes_or_none), max_size=4),
                          st.integers(-10**6, 10**12)),
                min_size=1, max_size=12),
       st.sampled_from(sorted(CODECS)), st.integers(0, 2**40))
def test_property_encode_decode_and_kafka_python_agree(records, codec, base_offset):
    """Any records, any codec: our bytes are read by kafka-python as the same records, and our
    decode of kafka-python's bytes for the same input gives them back."""
    value = {"batches": [{"Compression": CODECS[codec], "BaseOffset": base_offset, "BaseTimestamp": TS0,
                          "Records": [{"Key": k if k is None else {"hex": k.hex()},
                                       "Value": v if v is None else {"hex": v.hex()},
                                       "Timestamp": TS0 + ts,
                                       "Headers": [{"Key": hk, "Value": hv if hv is None else {"hex": hv.hex()}}
                                                   for hk, hv in hs]}
                                      for k, v, hs, ts in records]}]}
    ours = encode_records(value)
    expected = [[(base_offset + i, TS0 + ts, k, v, hs) for i, (k, v, hs, ts) in enumerate(records)]]
    assert _kp_records(ours) == expected
    assert _ours(decode_records(ours)) == expected
    theirs = _v2_batch(codec, [(i, TS0 + ts, k, v, hs) for i, (k, v, hs, ts) in enumerate(records)],
                       base_offset=base_offset)
    decoded = decode_records(theirs)
    assert _ours(decoded) == expected
    if codec == 0 or decoded["batches"][0]["Compression"] == "none":
        assert encode_records(decoded) == theirs


def test_through_the_message_codec_fetch_response_with_partial_batch():
    codec = pytest.importorskip("kwire_cli.codec")
    from kwire_cli.errors import KwireError
    b0, b1 = _v2_batch(0, base_offset=0), _v2_batch(3, base_offset=40)
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0, "Responses": [{"Topic": "t", "Partitions": [{
        "PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 80, "LastStableOffset": 80, "LogStartOffset": 0,
        "AbortedTransactions": [], "PreferredReadReplica": -1, "Records": (b0 + b1[:100]).hex()}]}]}
    frame = codec.encode_response(1, 11, {"CorrelationId": 9}, body)
    msg = codec.decode_response(frame, api_key=1, api_version=11)
    records = msg.body["Responses"][0]["Partitions"][0]["Records"]
    assert len(records["batches"]) == 1 and len(records["batches"][0]["Records"]) == 40
    assert records["partial_trailing_batch"] == {"offset": len(b0), "bytes": 100, "hex": b1[:100].hex()}
    assert codec.encode_response(1, 11, {"CorrelationId": 9}, msg.body) == frame
    # unusable framing inside a records field: one line naming the field path, batch and byte
    body["Responses"][0]["Partitions"][0]["Records"] = (b0 + b0[:8] + b"\x00\x00\x00\x02" + b"\x00" * 20).hex()
    frame = codec.encode_response(1, 11, {"CorrelationId": 9}, body)
    with pytest.raises(KwireError, match=rf"Records: records: batch 1 at byte {len(b0)}: length 2 is below"):
        codec.decode_response(frame, api_key=1, api_version=11)
