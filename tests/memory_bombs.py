"""Tiny hostile inputs that decode into huge value trees (issue 15, item 1), built with kwire's own
request encoder, cramjam for compression and tests/capture_util for captures.

``python tests/memory_bombs.py OUTDIR`` writes each bomb (``NAME.bin``, a size-prefixed request)
and a capture around it (``NAME.pcap``) at the sizes of the issue, for measuring by hand:

    /usr/bin/time -v kwire decode @OUTDIR/zstd-records.bin --format json > /dev/null
"""
from __future__ import annotations

import gzip
import os
import struct
import sys
import zlib

import cramjam
from crc32c import crc32c

# the sizes of the issue's report
ISSUE_SIZES = {"zstd-records": 4_000_000, "gzip-legacy": 3_000_000, "zstd-headers": 3_900_000,
               "zstd-kv-records": 4_000_000}   # the last: the costliest item per byte (not in the issue)

# One record whose value is as big as the default limits let it be: a zstd batch decompressing to
# the frame's cap (--max-decompressed, 256 MiB), or an uncompressed frame of the capture
# reassembler's largest size (--max-frame-size, 100 MiB). The value's bytes are ``fill`` over and
# over: zeros (shown as hex, twice its size), ASCII text (its size), text with an emoji every
# 1,024 bytes (a str of 4 bytes a character: four times its size), or quotes (escaped in JSON).
BIG_VALUES = {"zstd-value-hex": (4, b"\x00"), "zstd-value-text": (4, b"a"),
              "zstd-value-wide": (4, b"a" * 1020 + "\U0001F600".encode()), "zstd-value-quotes": (4, b'"'),
              "frame-value-hex": (0, b"\x00"), "frame-value-wide": (0, b"a" * 1020 + "\U0001F600".encode())}


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _varint(n: int) -> bytes:
    return _uvarint((n << 1) ^ (n >> 63))


def v2_batch(codec: int, payload: bytes, count: int, base_offset: int = 0) -> bytes:
    """A magic 2 batch around ``payload`` (its records section, compressed with ``codec``)."""
    head = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", head, 0, base_offset, 0, -1, 2, 0, codec, max(count - 1, 0), 0, 0,
                     -1, -1, -1, count)
    b = head + payload
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def _record(fields: bytes) -> bytes:
    return _varint(len(fields)) + fields


EMPTY_RECORD = _record(b"\x00\x00\x00\x01\x01\x00")  # attributes, deltas 0, null key and value, 0 headers
KV_RECORD = _record(b"\x00\x00\x00\x02k\x02v\x00")     # a 1-byte text key and value
# a null key and a 1,000-byte ASCII value (1,009 bytes): 266,041 of them are the 256 MiB cap, and
# their values, made by the record loops (not charged), as many bytes again
ASCII_RECORD = _record(b"\x00\x00\x00\x01" + _varint(1000) + b"a" * 1000 + b"\x00")


def zstd_records_batch(n: int, record: bytes = EMPTY_RECORD) -> bytes:
    """One zstd batch of ``n`` copies of one record (empty: 7 bytes each), the same bytes over and
    over, so they compress to almost nothing."""
    return v2_batch(4, bytes(cramjam.zstd.compress(record * n, level=3)), n)


def zstd_headers_batch(n: int) -> bytes:
    """One zstd batch of one record with ``n`` empty headers (2 bytes each)."""
    rec = _record(b"\x00\x00\x00\x01\x01" + _varint(n) + b"\x00\x00" * n)
    return v2_batch(4, bytes(cramjam.zstd.compress(rec, level=3)), 1)


def _value_record(value: bytes) -> bytes:
    """A record of a null key, ``value`` and no headers."""
    return _record(b"\x00\x00\x00\x01" + _varint(len(value)) + value + b"\x00")


def big_value(shape: str, size: int | None = None) -> tuple[int, bytes]:
    """A ``BIG_VALUES`` shape: (its value's length, its records field of one batch of one record).
    A zstd one's record decompresses to ``size`` bytes (default: the frame's decompressed cap);
    an uncompressed one makes the Produce request around it (``produce_request``) a frame of
    ``size`` bytes after its size prefix (default: the capture reassembler's largest frame)."""
    from kwire_cli.capture import DEFAULT_MAX_FRAME
    from kwire_cli.records.limits import DEFAULT_MAX_FRAME_DECOMPRESSED
    codec, fill = BIG_VALUES[shape]
    target = (DEFAULT_MAX_FRAME_DECOMPRESSED if codec else DEFAULT_MAX_FRAME) if size is None else size
    n = target
    for _ in range(4):   # the varints' lengths settle after a step or two
        rec = _value_record((fill * (n // len(fill) + 1))[:n])
        made = len(rec) if codec else len(produce_request(v2_batch(0, rec, 1))) - 4
        if made == target:
            break
        n -= made - target
    assert made == target, (shape, made, target)
    return n, v2_batch(codec, bytes(cramjam.zstd.compress(rec, level=3)) if codec else rec, 1)


def bytes_field_frame(size: int | None = None) -> tuple[int, bytes]:
    """A size-prefixed PushTelemetry v0 request whose Metrics (a bytes field, not records: the
    codec's hex, twice the bytes) are zeros making a frame of ``size`` bytes after its size prefix
    (default: the capture reassembler's largest frame): (the field's length, the frame)."""
    from kwire_cli.capture import DEFAULT_MAX_FRAME
    from kwire_cli.codec import encode_request
    target = DEFAULT_MAX_FRAME if size is None else size

    def frame(n: int) -> bytes:
        body = {"ClientInstanceId": "00000000-0000-0000-0000-000000000001", "SubscriptionId": 1,
                "Terminating": False, "CompressionType": 0, "Metrics": bytes(n)}
        return encode_request(72, 0, {"CorrelationId": 1, "ClientId": "bomb"}, body)
    n = target
    for _ in range(4):
        f = frame(n)
        if len(f) - 4 == target:
            return n, f
        n -= len(f) - 4 - target
    raise AssertionError("no frame of that size")


def _legacy(offset: int, attrs: int, key: bytes | None, value: bytes | None) -> bytes:
    """A magic 0 message."""
    body = struct.pack(">bb", 0, attrs)
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def gzip_legacy_wrapper(n: int) -> bytes:
    """One gzip magic 0 wrapper of ``n`` copies of one empty magic 0 message (26 bytes each)."""
    inner = _legacy(0, 0, None, None) * n
    return _legacy(n - 1, 1, None, gzip.compress(inner, compresslevel=9, mtime=0))


def produce_request(records: bytes, corr: int = 1) -> bytes:
    """A size-prefixed Produce v9 request of one partition holding ``records``."""
    from kwire_cli.codec import encode_request
    body = {"TransactionalId": None, "Acks": 1, "TimeoutMs": 30000,
            "TopicData": [{"Name": "t", "PartitionData": [{"Index": 0, "Records": records}]}]}
    return encode_request(0, 9, {"CorrelationId": corr, "ClientId": "bomb"}, body)


def records_of(shape: str, n: int | None = None) -> bytes:
    """The records field of one bomb shape: ``ISSUE_SIZES``' keys (``n`` items) or ``BIG_VALUES``'
    (``n`` bytes, see ``big_value``)."""
    if shape in BIG_VALUES:
        return big_value(shape, n)[1]
    n = ISSUE_SIZES[shape] if n is None else n
    if shape == "zstd-records":
        return zstd_records_batch(n)
    if shape == "gzip-legacy":
        return gzip_legacy_wrapper(n)
    if shape == "zstd-headers":
        return zstd_headers_batch(n)
    if shape == "zstd-kv-records":
        return zstd_records_batch(n, KV_RECORD)
    raise ValueError(shape)


def bomb(shape: str, n: int | None = None) -> bytes:
    """The size-prefixed request of one bomb shape (``records_of``) in a Produce request."""
    return produce_request(records_of(shape, n))


def pcap_of(frame: bytes, mss: int = 1400) -> bytes:
    """A pcap of one TCP connection to port 9092 carrying ``frame`` from the client (``mss``-byte
    segments), acknowledged, then closed."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from capture_util import Conversation, write_pcap
    c = Conversation()
    segs = c.handshake() + c.send(0, frame, mss=mss) + [c.ack(1), c.fin(0), c.fin(1)]
    return write_pcap(segs)


def api_versions_answer(entries: int, corr: int = 7) -> bytes:
    """A size-prefixed ApiVersions v3 answer listing ``entries`` api keys, 7 bytes each (ten million:
    a 70 MB frame that decoded whole takes ~2 GB), built as bytes."""
    body = (struct.pack(">ih", corr, 0) + _uvarint(entries + 1) + struct.pack(">hhhb", 18, 0, 3, 0) * entries
            + struct.pack(">i", 0) + b"\0")
    return struct.pack(">i", len(body)) + body


def metadata_answer(topics: int, partitions: int, replicas: int, corr: int = 7) -> bytes:
    """A size-prefixed Metadata v12 answer of ``topics`` topics of ``partitions`` partitions, each with
    ``replicas`` replicas and as many in sync: (1 + 2 * replicas) array items a partition, in
    arrays of their own (a tree that grows array by array, not by one long one)."""
    reps = _uvarint(replicas + 1) + struct.pack(">i", 1) * replicas
    part = [b"\0\0" + struct.pack(">iii", i, 1, 0) + reps + reps + b"\x01\0" for i in range(partitions)]
    parts = _uvarint(partitions + 1) + b"".join(part)
    topic = [b"\0\0" + _uvarint(len(f"t{i}") + 1) + f"t{i}".encode() + bytes(16) + b"\0" + parts
             + struct.pack(">i", -2147483648) + b"\0" for i in range(topics)]
    body = (struct.pack(">i", corr) + b"\0" + struct.pack(">i", 0) + b"\x02" + struct.pack(">i", 1) + b"\x02b"
            + struct.pack(">i", 9092) + b"\0\0" + b"\0" + struct.pack(">i", 1) + _uvarint(topics + 1)
            + b"".join(topic) + b"\0")
    return struct.pack(">i", len(body)) + body


def answer_pcap(request: bytes, answer: bytes) -> bytes:
    """A pcap of one TCP connection to port 9092: ``request`` from the client, ``answer`` from the
    broker (60,000-byte segments), acknowledged, then closed."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from capture_util import Conversation, write_pcap
    c = Conversation()
    segs = c.handshake() + c.send(0, request) + c.send(1, answer, mss=60000) + [c.ack(0), c.fin(0), c.fin(1)]
    return write_pcap(segs)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    for shape in [*ISSUE_SIZES, *BIG_VALUES]:
        records = records_of(shape)
        frame = produce_request(records)
        with open(os.path.join(out, f"{shape}.bin"), "wb") as f:
            f.write(frame)
        with open(os.path.join(out, f"{shape}.log"), "wb") as f:   # a log segment of the batch
            f.write(records)
        cap = pcap_of(frame, mss=1400 if len(frame) < (1 << 20) else 60000)
        with open(os.path.join(out, f"{shape}.pcap"), "wb") as f:
            f.write(cap)
        print(f"{shape}: {len(frame)} bytes, pcap {len(cap)} bytes")
    frame = bytes_field_frame()[1]
    with open(os.path.join(out, "frame-bytes-field.bin"), "wb") as f:
        f.write(frame)
    with open(os.path.join(out, "frame-bytes-field.pcap"), "wb") as f:
        f.write(pcap_of(frame, mss=60000))


if __name__ == "__main__":
    main(sys.argv[1])
