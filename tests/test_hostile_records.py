"""Hostile records fields: decompression bombs per batch and per frame, corrupt bombs, over-long
varints, lying counts, minimal batches. Decompression is capped per batch and per frame (all the
batches of all the records fields of one message together); a batch that is cut keeps its bytes
(RawHex), and the batches after it still decode."""
from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
import textwrap
import time

import cramjam
import pytest
from crc32c import crc32c

import kwire_cli.records.v2 as records_decode
from kwire_cli.codec import decode_request, encode_request
from kwire_cli.codec.partial import walk_message
from kwire_cli.records import RecordsError, decode_records, encode_records
from kwire_cli.records.limits import current_budget, frame_budget

MiB = 1 << 20


def v2_batch(codec: int, payload: bytes, count: int = 1, base_offset: int = 0) -> bytes:
    """A magic 2 batch around ``payload`` (its records section, compressed with ``codec``)."""
    head = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", head, 0, base_offset, 0, -1, 2, 0, codec, 0, 0, 0, -1, -1, -1, count)
    b = head + payload
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


_BOMBS: dict = {}


def zstd_zeros(n: int) -> bytes:
    """zstd of n zero bytes (a few KB for hundreds of MB)."""
    if n not in _BOMBS:
        _BOMBS[n] = bytes(cramjam.zstd.compress(bytes(n), level=3))
    return _BOMBS[n]


def good_batch(base_offset: int = 100, codec: str = "none") -> bytes:
    return encode_records({"batches": [{"BaseOffset": base_offset, "Compression": codec, "BaseTimestamp": 1,
                                        "Records": [{"Key": "k", "Value": "still here"}]}]})


def test_many_batches_each_under_the_batch_cap_stop_at_the_frame_cap_and_lose_nothing():
    bomb = v2_batch(4, zstd_zeros(3 * MiB))          # 3 MiB of zeros each: under the 4 MiB batch cap
    data = bomb * 10 + good_batch(100, "zstd") + good_batch(101)
    t = time.perf_counter()
    out = decode_records(data, max_decompressed=4 * MiB, max_frame_decompressed=10 * MiB)
    assert time.perf_counter() - t < 5
    b = out["batches"]
    assert len(b) == 12
    # three decompress (9 MiB), then the frame budget has 1 MiB left: the rest are cut
    for x in b[:3]:
        assert x["DecompressedSize"] == 3 * MiB and "record length 0 is below" in x["error"]
    for x in b[3:10]:
        assert "zstd: decompressed size exceeds the" in x["error"]
        assert "of the frame's cap of 10485760 bytes (all batches together; --max-decompressed raises it)" in x["error"]
    # nothing lost: every cut batch carries its bytes, and the uncompressed batch after them decodes
    assert b"".join(bytes.fromhex(x["RawHex"]) for x in b[:10]) == bomb * 10
    assert "error" in b[10]   # compressed, after the budget ran out
    assert bytes.fromhex(b[10]["RawHex"]) == good_batch(100, "zstd")
    assert b[11]["Records"][0]["Value"] == {"text": "still here"} and "error" not in b[11]


def test_batches_over_the_batch_cap_are_charged_to_the_frame():
    """Fixed bug: a batch refused for exceeding the per-batch cap cost a cap's worth of work but was
    not charged, so a frame of such batches decompressed without bound."""
    bomb = v2_batch(4, zstd_zeros(8 * MiB))
    out = decode_records(bomb * 12, max_decompressed=1 * MiB, max_frame_decompressed=4 * MiB)
    errs = [x["error"] for x in out["batches"]]
    assert all(e.endswith("zstd: decompressed size exceeds the cap of 1048576 bytes") for e in errs[:4])
    assert all("of the frame's cap of 4194304 bytes" in e for e in errs[4:])


@pytest.mark.parametrize("codec", ["zstd", "gzip", "snappy", "lz4"])
def test_corrupt_bombs_are_charged_to_the_frame(codec):
    """Fixed bug: a valid stream of many MiB with a broken checksum or tail was decompressed in full
    and then refused as corrupt, uncharged: ten 6 KB zstd batches cost 5 s."""
    zeros = bytes(16 * MiB)
    if codec == "zstd":
        payload, cid = bytearray(cramjam.zstd.compress(zeros, level=3)), 4
        payload[-3] ^= 0xFF                                   # content checksum
    elif codec == "gzip":
        payload, cid = bytearray(gzip.compress(zeros, 6)), 1
        payload[-5] ^= 0xFF                                   # CRC-32
    elif codec == "snappy":                                   # xerial blocks, the last one cut
        payload, cid = bytearray(cramjam.snappy.compress_raw(bytes(32 * 1024))), 2
        block = bytes(payload)
        payload = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
                            + (struct.pack(">i", len(block)) + block) * 512 + struct.pack(">i", 999))
    else:
        from kwire_cli.records.compression import compress
        payload, cid = bytearray(compress(3, zeros)), 3
        del payload[-4:]                                      # no end mark
    bomb = v2_batch(cid, bytes(payload))
    t = time.perf_counter()
    out = decode_records(bomb * 10, max_frame_decompressed=40 * MiB)
    assert time.perf_counter() - t < 10
    errs = [x["error"] for x in out["batches"]]
    assert "corrupt" in errs[0]
    assert "of the frame's cap of 41943040 bytes" in errs[-1], errs


def _spy_budgets(monkeypatch):
    """Record the frame budget each decompression runs under."""
    seen = []
    real = records_decode.decompress

    def spy(codec, payload, cap):
        seen.append(current_budget())
        return real(codec, payload, cap)

    monkeypatch.setattr(records_decode, "decompress", spy)
    return seen


def _produce_request(records_per_partition: list[bytes]) -> bytes:
    body = {"TransactionalId": None, "Acks": 1, "TimeoutMs": 1000,
            "TopicData": [{"Name": "t", "PartitionData": [{"Index": i, "Records": r}
                                                          for i, r in enumerate(records_per_partition)]}]}
    return encode_request(0, 9, {"CorrelationId": 1, "ClientId": "c"}, body, size_prefix=False)


def test_all_records_fields_of_one_message_share_one_frame_budget(monkeypatch):
    """Fixed bug: each records field of a Produce request / Fetch response had its own budget, so
    a frame of many partitions decompressed without a per-frame bound."""
    seen = _spy_budgets(monkeypatch)
    data = _produce_request([good_batch(i, "zstd") for i in range(5)])
    decode_request(data, size_prefixed=False)
    assert len(seen) == 5 and seen[0] is not None and all(b is seen[0] for b in seen)
    first = seen[0]
    decode_request(data, size_prefixed=False)
    assert seen[5] is not first                     # a new message, a new budget
    # a caller's own scope is shared, not replaced
    with frame_budget(3 * MiB) as mine:
        decode_request(data, size_prefixed=False)
    assert all(b is mine for b in seen[10:15])


def test_a_produce_request_with_a_bomb_in_every_partition_stops_at_the_frame_cap():
    bomb = v2_batch(4, zstd_zeros(3 * MiB))
    data = _produce_request([bomb] * 20 + [good_batch(7)])
    with frame_budget(10 * MiB):
        m = decode_request(data, size_prefixed=False)
    parts = m.body["TopicData"][0]["PartitionData"]
    errs = [p["Records"]["batches"][0].get("error") for p in parts]
    assert all("record length 0" in e for e in errs[:3])
    assert all("of the frame's cap of 10485760 bytes" in e for e in errs[3:20])
    assert errs[20] is None and parts[20]["Records"]["batches"][0]["Records"][0]["Value"] == {"text": "still here"}


def test_the_partial_walker_shares_one_frame_budget_per_message(monkeypatch):
    """Fixed bug: `kwire decode --partial` re-decoded every records field under a budget of its own."""
    seen = _spy_budgets(monkeypatch)
    data = _produce_request([good_batch(i, "gzip") for i in range(4)])[:-2]   # fails at the end
    pm = walk_message(data, "request", size_prefixed=False)
    assert pm.error is not None
    assert len(seen) == 4 and seen[0] is not None and all(b is seen[0] for b in seen)


def test_frame_of_bombs_under_a_1_gib_address_space_limit():
    """40 partitions, each a zstd bomb of 256 MiB of zeros (a 330 KB request claiming 10 GiB):
    decoded with the default caps in a process limited to its start size + 1.5 GiB of address
    space, it finishes (no MemoryError), quickly, and the batches past 256 MiB in total are cut."""
    script = textwrap.dedent("""
        import resource, struct, sys, time
        import cramjam
        from crc32c import crc32c
        from kwire_cli.codec import decode_request, encode_request
        payload = bytes(cramjam.zstd.compress(bytes(256 << 20), level=1))
        head = bytearray(61)
        struct.pack_into(">qiibIhiqqqhii", head, 0, 0, 0, -1, 2, 0, 4, 0, 0, 0, -1, -1, -1, 1)
        b = head + payload
        struct.pack_into(">i", b, 8, len(b) - 12)
        struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
        body = {"TransactionalId": None, "Acks": 1, "TimeoutMs": 1,
                "TopicData": [{"Name": "t", "PartitionData": [{"Index": i, "Records": bytes(b)}
                                                              for i in range(40)]}]}
        data = encode_request(0, 9, {"CorrelationId": 1, "ClientId": "c"}, body)
        decode_request(encode_request(0, 9, {"CorrelationId": 1, "ClientId": "c"},
                                      {"TransactionalId": None, "Acks": 1, "TimeoutMs": 1, "TopicData": []}))
        vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        limit = vm + (1536 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        t = time.perf_counter()
        m = decode_request(data)
        errs = [p["Records"]["batches"][0]["error"] for p in m.body["TopicData"][0]["PartitionData"]]
        print(len(data), round(time.perf_counter() - t, 2),
              sum("record length 0" in e for e in errs), sum("frame's cap" in e for e in errs))
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert p.returncode == 0, p.stderr[-2000:]
    size, seconds, decompressed, cut = p.stdout.split()
    assert int(size) < 400_000
    assert (int(decompressed), int(cut)) == (1, 39)   # 256 MiB is the whole frame budget
    assert float(seconds) < 20


# ------------------------------------------------------------------ varints, counts, minimal batches

def _record_batch(record_fields: list[bytes]) -> bytes:
    """An uncompressed v2 batch of one record built from raw field bytes (length prepended)."""
    from kwire_cli.codec.primitives import write_varint
    inner = b"".join(record_fields)
    ln = bytearray()
    write_varint(ln, len(inner))
    return v2_batch(0, bytes(ln) + inner)


# attributes, timestampDelta (varlong), offsetDelta, key length, value length + value, header count
RECORD = [b"\x00", b"\x00", b"\x00", b"\x01", b"\x02v", b"\x00"]


@pytest.mark.parametrize("site,index", [("offset delta", 2), ("key length", 3), ("value length", 4),
                                        ("header count", 5)])
def test_a_record_varint_longer_than_5_bytes_is_a_batch_error(site, index):
    """Fixed bug: 32-bit record varints of 6 to 10 bytes were accepted (Kafka's readVarint refuses
    them); the batch is now an error naming the byte, and decoding goes on."""
    fields = list(RECORD)
    first = fields[index][0]
    fields[index] = bytes([first | 0x80]) + b"\x80\x80\x80\x80\x00" + fields[index][1:]
    out = decode_records(_record_batch(fields) + good_batch())
    b = out["batches"]
    at = 61 + 1 + sum(len(f) for f in fields[:index])
    assert b[0]["error"].endswith(f"record 0 at byte 61: varint longer than 5 bytes at byte {at}"), b[0]["error"]
    assert b[1]["Records"][0]["Value"] == {"text": "still here"}


def test_the_timestamp_delta_is_a_varlong_of_up_to_10_bytes():
    ok = list(RECORD)
    ok[1] = b"\x80" * 9 + b"\x00"                       # 10 bytes: a varlong may be that long
    assert "error" not in decode_records(_record_batch(ok))["batches"][0]
    bad = list(RECORD)
    bad[1] = b"\x80" * 10 + b"\x00"
    assert "varint longer than 10 bytes at byte 63" in decode_records(_record_batch(bad))["batches"][0]["error"]


def test_lying_counts_fail_fast():
    t = time.perf_counter()
    huge = v2_batch(0, b"\x0e\x00\x00\x00\x01\x02v\x00", count=0x7FFFFFFF)   # 2^31-1 records, 1 there
    assert "batch says 2147483647 records but the records end after 1" in decode_records(huge)["batches"][0]["error"]
    headers = [b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\xfe\xff\xff\xff\x0f"]  # 2^31-1 headers
    assert "error" in decode_records(_record_batch(headers))["batches"][0]
    assert time.perf_counter() - t < 1


def test_minimal_and_zero_length_structures_do_not_loop():
    # 100,000 minimal legacy messages (26 bytes each, empty key and value)
    one = struct.pack(">qiIbbii", 0, 14, 0, 0, 0, -1, -1)
    one = one[:12] + struct.pack(">I", __import__("zlib").crc32(one[16:])) + one[16:]
    t = time.perf_counter()
    out = decode_records(one * 100_000)
    assert len(out["batches"]) == 100_000 and all(x["CrcValid"] for x in out["batches"][:10])
    # 50,000 empty v2 batches (count 0, no records)
    empty = v2_batch(0, b"", count=0)
    assert len(decode_records(empty * 50_000)["batches"]) == 50_000
    assert time.perf_counter() - t < 10
    # a length below the minimum cannot be stepped over: one line, naming batch and byte
    with pytest.raises(RecordsError, match=r"^records: batch 1 at byte 26: length 0 is below the minimum"):
        decode_records(one + struct.pack(">qi", 0, 0) + b"\x00" * 20)


# ------------------------------------------------------------------ the value tree's size

def _record(fields: bytes) -> bytes:
    from kwire_cli.codec.primitives import write_varint
    ln = bytearray()
    write_varint(ln, len(fields))
    return bytes(ln) + fields


def _batch_of(record: bytes, n: int, compressed: bool = True) -> bytes:
    """A v2 batch of ``n`` copies of one raw record (zstd-compressed unless told otherwise)."""
    section = record * n
    return v2_batch(4, bytes(cramjam.zstd.compress(section, level=1)), n) if compressed else v2_batch(0, section, n)


# attributes, timestamp delta, offset delta, null key, null value
BARE = b"\x00\x00\x00\x01\x01"


def test_a_header_bomb_is_refused_by_the_default_frame_item_cap():
    """Fixed bug: 2 bytes per header made a value tree ~190x the decompressed size, so a batch of a
    few KB could build gigabytes under the byte caps. The frame also caps decoded records +
    headers (default 400,000, a batch counting 2): here one record claims 5,000,000 empty headers."""
    import tracemalloc

    from kwire_cli.codec.primitives import write_varint
    hc = bytearray()
    write_varint(hc, 5_000_000)
    bomb = _batch_of(_record(BARE + bytes(hc) + b"\x00\x00" * 5_000_000), 1)
    assert len(bomb) < 2000
    tracemalloc.start()
    try:
        out = decode_records(bomb + good_batch())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    first, second = out["batches"]
    assert first["error"].endswith("record 0 at byte 0 of the decompressed payload: 5000000 headers are more "
                                   "than the 399998 records and headers left of the frame's cap (--max-records raises it)")
    assert second["Records"][0]["Value"] == {"text": "still here"}
    assert peak < 64 * MiB, peak     # the 10 MB payload, never a tree of 5M headers


def test_records_and_headers_beyond_the_frame_item_cap_are_cut_and_kept_as_bytes():
    one_header = _batch_of(_record(BARE + b"\x02\x02h\x02x"), 40_000)
    plain = _batch_of(_record(BARE + b"\x00"), 30_000, compressed=False)
    data = plain + one_header + one_header + good_batch()
    with frame_budget(max_items=100_000) as budget:
        out = decode_records(data)
    b = out["batches"]
    assert "error" not in b[0] and len(b[0]["Records"]) == 30_000
    # a batch counts 2: 69,996 items left for the first one-header batch's records, which stops at
    # record 34,998 (34,998 records + headers)
    assert b[1]["error"].endswith("record 34998 at byte 384978 of the decompressed payload: the 69996 records "
                                  "and headers left of the frame's cap are used up (--max-records raises it)"), \
        b[1]["error"]
    assert len(b[1]["Records"]) == 34_998
    # the frame is spent: the batches after it are one entry holding all their bytes
    assert len(b) == 3
    assert b[2]["error"] == (f"batch 2 at byte {len(plain) + len(one_header)} and the {len(good_batch())} bytes "
                             "after it: not decoded: the frame's cap of 100000 records and headers is reached "
                             "(--max-records raises it)")
    assert budget.items_left == 0
    assert [bytes.fromhex(x["RawHex"]) for x in b[1:]] == [one_header, one_header + good_batch()]
    assert encode_records(out) == data


def test_a_frame_of_many_empty_batches_is_cut_at_the_cap_into_one_entry():
    """Each v2 batch counts 2 against the frame's cap (its dict is ~1 KB, two records' worth): a
    frame of 61-byte empty batches cannot build a tree 16 times its size; past the cap, the rest
    of the field is one entry, not one per batch."""
    empty = _batch_of(b"", 0, compressed=False)
    with frame_budget(max_items=1000):
        out = decode_records(empty * 10_000)
    b = out["batches"]
    assert len(b) == 501 and all("error" not in x for x in b[:500])
    assert b[500]["error"].startswith(f"batch 500 at byte {500 * len(empty)} and the {9499 * len(empty)} bytes "
                                      "after it: not decoded: the frame's cap of 1000 records and headers")
    assert encode_records(out) == empty * 10_000


def test_legacy_messages_count_against_the_frame_item_cap():
    inner = [{"Key": "k", "Value": "v", "Offset": i} for i in range(5000)]
    wrapper = encode_records({"batches": [{"Magic": 1, "Compression": "gzip", "Timestamp": 1, "Messages": inner}]})
    with frame_budget(max_items=3000):
        out = decode_records(wrapper + wrapper)
    first, second = out["batches"]
    assert len(first["Messages"]) == 2999      # the wrapper itself is one item
    assert "inner message 2999 at byte" in first["error"] and "cap of 3000 records and headers is reached" in first["error"]
    assert second["error"].endswith("the frame's cap of 3000 records and headers is reached (--max-records raises it)")
