"""Bad input for kwire_cli.records: truncation, bad lengths, corrupt payloads, bombs.

Every case ends in a RecordsError (framing unusable) or a per-batch "error" naming the batch and its
byte offset; never another exception, never a hang, and nothing is lost (decode -> encode gives the
same bytes back).
"""

from __future__ import annotations

import gzip
import json
import struct
import time
import tracemalloc

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("kafka", reason="kafka-python (the independent record builder/reader) is not installed")

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.util import calc_crc32c

from kwire_cli.records import RecordsError, decode_records, encode_records

TS0 = 1_700_000_000_000


def _v2(codec=0, n=3, value=b"value", base_offset=0):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 26)
    for i in range(n):
        b.append(i, TS0 + i, b"k%d" % i, value, [("h", b"1"), ("h", None)])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def _with_payload(header_source: bytes, payload: bytes, *, codec=None, count=None) -> bytes:
    """A v2 batch with the header of ``header_source`` and ``payload`` as its records section."""
    out = bytearray(header_source[:61]) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    if codec is not None:
        attrs = struct.unpack_from(">h", out, 21)[0]
        struct.pack_into(">h", out, 21, (attrs & ~7) | codec)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, calc_crc32c(bytes(out[21:])))
    return bytes(out)


def _legacy(magic=1, codec=0, n=2):
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        b.append(i, TS0, b"k", b"v%d" % i)
    return bytes(b.build())


def _check_total(data: bytes, **kw):
    """Decode must succeed or raise RecordsError; a result is JSON-safe and re-encodes exactly."""
    try:
        decoded = decode_records(data, **kw)
    except RecordsError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith("records: batch ") and " at byte " in msg
        return None
    json.dumps(decoded)
    again = encode_records(decoded)
    if all(b.get("Compression") == "none" or "RawHex" in b for b in decoded["batches"]):
        assert again == data
    else:  # compressed batches are re-compressed: same records, not the same bytes
        strip = ("Crc", "CrcComputed", "CrcValid", "BatchLength", "MessageSize", "CompressedSize",
                 "ByteOffset", "Value")
        def norm(d):
            return [{k: v for k, v in b.items() if k not in strip} for b in d["batches"]]
        assert norm(decode_records(again, **kw)) == norm(decoded)
    return decoded


# ---------------------------------------------------------------------------------------------
# truncation and lengths

@pytest.mark.parametrize("data", [_v2(), _v2(codec=3), _legacy(1, n=1), _legacy(0, codec=1)],
                         ids=["v2", "v2-lz4", "magic1", "magic0-gzip"])
def test_truncation_at_every_offset_is_a_partial_trailing_batch(data):
    good = _v2(base_offset=100)
    for cut in range(len(data)):
        decoded = decode_records(good + data[:cut])
        assert len(decoded["batches"]) == 1 and "error" not in decoded["batches"][0]
        if cut == 0:
            assert decoded["partial_trailing_batch"] is None
        else:
            assert decoded["partial_trailing_batch"]["offset"] == len(good)
            assert decoded["partial_trailing_batch"]["bytes"] == cut
        assert encode_records(decoded) == good + data[:cut]


@pytest.mark.parametrize("data", [_v2(), _v2(codec=1), _v2(codec=2), _v2(codec=4), _legacy(1, n=1),
                                  _legacy(0, codec=2)],
                         ids=["v2", "v2-gzip", "v2-snappy", "v2-zstd", "magic1", "magic0-snappy"])
def test_batch_length_too_small_at_every_value(data):
    """The length field says less than the batch really holds: the framing still works, the batch is
    reported broken (or, under 14 bytes, the framing is unusable), the next batch still decodes."""
    after = _v2(base_offset=500)
    for length in range(len(data) - 12):
        shrunk = data[:8] + struct.pack(">i", length) + data[12:12 + length]
        decoded = _check_total(shrunk + after)
        if length < 14:
            assert decoded is None
            continue
        assert decoded is not None
        first, second = decoded["batches"]
        assert first["error"].startswith("batch 0 at byte 0 (offset ")
        assert first["RawHex"] == shrunk.hex()
        assert "error" not in second and second["BaseOffset"] == 500 and second["ByteOffset"] == len(shrunk)


def test_negative_length_raises_naming_batch_and_offset():
    data = _v2() + _v2()[:8] + struct.pack(">i", -1) + b"\x00" * 80
    with pytest.raises(RecordsError, match=rf"^records: batch 1 at byte {len(_v2())}: length -1 "):
        decode_records(data)


def test_unknown_magic_is_a_batch_error_and_decoding_goes_on():
    bad = bytearray(_v2(base_offset=7))
    bad[16] = 3
    decoded = _check_total(bytes(bad) + _v2(base_offset=8))
    assert decoded["batches"][0]["error"] == "batch 0 at byte 0 (offset 7): unknown magic 3"
    assert decoded["batches"][1]["BaseOffset"] == 8 and "error" not in decoded["batches"][1]


def test_record_count_disagrees_with_records():
    base = _v2(n=3)
    more = _with_payload(base, base[61:], count=4)
    err = _check_total(more)["batches"][0]["error"]
    assert err == "batch 0 at byte 0 (offset 0): record 3 at byte %d: batch says 4 records but the records end after 3" % len(base)
    fewer = _with_payload(base, base[61:], count=2)
    err = _check_total(fewer)["batches"][0]["error"]
    assert "bytes left after the last of 2 records" in err
    negative = _with_payload(base, base[61:], count=-1)
    assert "record count -1 is negative" in _check_total(negative)["batches"][0]["error"]


def test_huge_header_count_and_overlong_varint_fail_fast():
    base = _v2(n=1)
    # record: length, attrs, tsDelta, offDelta, key len + key, value len + value, header count
    huge_headers = bytes([0x0E, 0, 0, 0, 0x02, 0x6B, 0x02, 0x76]) + b"\xfe\xff\xff\xff\x0f"  # count 2^31-1
    huge_headers = bytes([len(huge_headers) * 2 - 2]) + huge_headers[1:]
    t = time.perf_counter()
    d = _check_total(_with_payload(base, huge_headers, count=1))
    assert time.perf_counter() - t < 1
    assert "error" in d["batches"][0]
    overlong = b"\xff" * 11 + b"\x00" * 10
    d = _check_total(_with_payload(base, overlong, count=1))
    assert "varint longer than 5 bytes" in d["batches"][0]["error"]


def test_every_single_byte_corruption_of_a_small_batch():
    for data in (_v2(n=2), _v2(n=2, codec=3), _legacy(1, codec=1)):
        for i in range(len(data)):
            for mask in (0x01, 0x80, 0xFF):
                bad = bytearray(data)
                bad[i] ^= mask
                _check_total(bytes(bad))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_crash(blob):
    _check_total(blob)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200), st.binary(min_size=1, max_size=8), st.sampled_from([0, 1, 2, 3, 4]))
def test_random_splices_into_real_batches(at, junk, codec):
    data = _v2(n=3, codec=codec)
    at = min(at, len(data))
    _check_total(data[:at] + junk + data[at + len(junk):])


# ---------------------------------------------------------------------------------------------
# compressed payloads

@pytest.mark.parametrize("codec,name", [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_corrupt_and_truncated_compressed_payloads(codec, name):
    good = _v2(codec=codec, n=20, value=b"some compressible value " * 4, base_offset=30)
    payload = good[61:]
    after = _v2(base_offset=99)
    cases = {
        "truncated": payload[: len(payload) // 2],
        "garbage": bytes(range(256)) * 2,
        "empty": b"",
    }
    for label, broken in cases.items():
        batch = _with_payload(good, broken)
        decoded = _check_total(batch + after)
        first, second = decoded["batches"]
        assert first["CrcValid"] is True  # the CRC matches: the payload itself is bad
        assert first["error"].startswith(f"batch 0 at byte 0 (offset 30): corrupt {name} payload"), \
            (label, first["error"])
        assert first["RawHex"] == batch.hex()
        assert second["BaseOffset"] == 99 and "error" not in second


def test_decompresses_to_garbage_records():
    good = _v2(n=3)
    batch = _with_payload(good, gzip.compress(b"\x00\x7f" * 50), codec=1)
    first = _check_total(batch)["batches"][0]
    assert first["error"].startswith("batch 0 at byte 0 (offset 0): record ")
    assert " of the decompressed payload: " in first["error"]


def _bomb(codec):
    zeros = b"\x00" * (64 << 20)
    if codec == 1:
        return gzip.compress(zeros, 9)
    if codec == 2:
        return bytes(cramjam.snappy.compress_raw(zeros))
    if codec == 3:
        return bytes(cramjam.lz4.compress(zeros))
    return bytes(cramjam.zstd.compress(zeros, level=19))


@pytest.mark.parametrize("codec,name", [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_decompression_bomb_stops_at_the_cap(codec, name):
    cap = 1 << 20
    bomb = _with_payload(_v2(n=1, base_offset=12), _bomb(codec), codec=codec)
    after = _v2(base_offset=13)
    tracemalloc.start()
    t = time.perf_counter()
    try:
        decoded = decode_records(bomb + after, max_decompressed=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - t
    first, second = decoded["batches"]
    assert first["error"] == (f"batch 0 at byte 0 (offset 12): {name}: decompressed size exceeds "
                              f"the cap of {cap} bytes")
    assert second["BaseOffset"] == 13 and "error" not in second
    # the 64 MiB never materialise: peak Python allocation stays near cap + input + one lz4 block
    assert peak < cap * 2 + 2 * len(bomb) + (8 << 20), peak
    assert elapsed < 5
    # under a generous cap the same payload decompresses in full (and then, being zeros, is not a
    # valid record): the error above was the cap, not the data
    big = decode_records(bomb, max_decompressed=65 << 20)["batches"][0]
    assert big["DecompressedSize"] == 64 << 20
    assert "record length 0 is below the 6-byte minimum" in big["error"]


def test_legacy_wrapper_bomb_and_nested_compression():
    inner = _legacy(1, codec=0, n=3)
    wrapper = encode_records([{"Magic": 1, "Compression": "gzip", "Timestamp": TS0,
                               "Messages": [{"Key": "a", "Value": "x" * 5000}] * 50}])
    d = _check_total(wrapper + inner, max_decompressed=10_000)
    assert d["batches"][0]["error"].startswith("batch 0 at byte 0 (offset 49): gzip: decompressed size exceeds")
    assert len(d["batches"]) == 4
    # a compressed message inside a compressed message set
    nested_inner = _legacy(1, codec=1, n=2)
    outer = bytearray(encode_records([{"Magic": 1, "Compression": "gzip", "Timestamp": TS0,
                                       "Messages": [{"Key": "a", "Value": "b"}]}]))
    value = gzip.compress(nested_inner)
    msg = bytes([1, 1]) + struct.pack(">q", TS0) + b"\xff\xff\xff\xff" + struct.pack(">i", len(value)) + value
    import zlib
    outer = struct.pack(">qiI", 0, len(msg) + 4, zlib.crc32(msg)) + msg
    d = _check_total(outer)
    assert "compressed message inside a compressed message set" in d["batches"][0]["error"]


def test_bad_arguments_are_records_errors():
    with pytest.raises(RecordsError, match="max_decompressed"):
        decode_records(_v2(codec=1), max_decompressed=-1)
    with pytest.raises(RecordsError, match="a str must be hex"):
        decode_records("not hex")
    with pytest.raises(RecordsError, match="expected bytes, got int"):
        decode_records(5)
    assert decode_records(_v2().hex()) == decode_records(_v2())
    # a cap of 0 still decodes uncompressed batches and refuses any compressed output
    d = decode_records(_v2() + _v2(codec=4), max_decompressed=0)
    assert "error" not in d["batches"][0]
    assert "exceeds the cap of 0 bytes" in d["batches"][1]["error"]
