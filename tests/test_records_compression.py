"""The compression registry (kwire_cli.records.compression.Compression) on the compressed batches real
clients sent: kafka-python (snappy in xerial framing) and librdkafka (raw snappy) produce with every
codec in fixtures/captures/*-produce.pcap."""
import struct
from pathlib import Path

import pytest

from kwire_cli import capture
from kwire_cli.codec import decode_request
from kwire_cli.errors import CompressionError, DecompressedTooLarge
from kwire_cli.records import decode_records
from kwire_cli.records.compression import Compression, codec_label, codec_labels, compress, decompress

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "captures"
_V2 = struct.Struct(">qiibIhiqqqhii")


def _compressed_batches():
    """(client, codec, framing, payload, decompressed size) of every compressed batch produced."""
    out = []
    for client in ("kafka-python", "confluent-kafka"):
        for f in capture.iter_capture(str(CAPTURES / f"{client}-produce.pcap")):
            if not (isinstance(f, capture.KafkaFrame) and f.kind == "request" and f.api_key == 0):
                continue
            body = decode_request(f.data, size_prefixed=False, records="bytes").body
            for t in body["TopicData"]:
                for pd in t["PartitionData"]:
                    raw = pd["Records"]
                    for b in decode_records(raw)["batches"]:
                        end = b["ByteOffset"] + 12 + b["BatchLength"]
                        pos = b["ByteOffset"]
                        attrs = _V2.unpack_from(raw, pos)[5]
                        if attrs & 7:
                            out.append((client, attrs & 7, b.get("CompressionFraming"), raw[pos + _V2.size:end],
                                        b["DecompressedSize"], b["Compression"]))
    return out


BATCHES = _compressed_batches()


def test_the_captures_hold_every_codec():
    assert {(c, codec) for c, codec, *_ in BATCHES} == {(c, i) for c in ("kafka-python", "confluent-kafka")
                                                        for i in (1, 2, 3, 4)}


@pytest.mark.parametrize("batch", BATCHES, ids=[f"{b[0]}-{codec_label(b[1])}" for b in BATCHES])
def test_each_member_reads_and_writes_what_clients_sent(batch):
    _client, codec_id, framing, payload, size, label = batch
    codec = Compression.of(codec_id)
    assert codec is not None and codec.label == label == codec_label(codec_id)
    data, found = codec.decompress(payload, 1 << 20)
    assert len(data) == size and found == framing
    assert framing is None or framing in codec.framings
    assert decompress(codec_id, payload, 1 << 20) == (data, found)   # the id-level entry point agrees
    again = codec.compress(data, framing=framing)
    assert codec.decompress(again, 1 << 20) == (data, found)
    with pytest.raises(DecompressedTooLarge):
        codec.decompress(payload, size - 1)


def test_the_registry():
    assert [c.value for c in Compression] == [0, 1, 2, 3, 4]
    assert codec_labels() == ("none", "gzip", "snappy", "lz4", "zstd")
    assert [c for c in Compression if c.legacy] == [Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                                    Compression.LZ4]
    assert Compression.named("zstd") is Compression.ZSTD and Compression.named("brotli") is None
    assert [codec_label(i) for i in (5, 6, 7)] == ["unknown(5)", "unknown(6)", "unknown(7)"]
    assert Compression.of(5) is None
    for bad in (5, 7):
        with pytest.raises(CompressionError, match=f"unknown compression codec {bad}"):
            decompress(bad, b"", 10)
        with pytest.raises(CompressionError, match=f"unknown compression codec {bad}"):
            compress(bad, b"x")
    assert Compression.NONE.decompress(b"abc", 3) == (b"abc", None)


@pytest.mark.parametrize("codec", list(Compression))
def test_each_codec_reads_a_bytearray_as_it_reads_bytes(codec):
    """decompress takes what it hands back (a bytearray): lz4's descriptor cache once keyed a dict
    by a slice of the payload, which a bytearray's slice cannot be."""
    data = b"kwire " * 500
    packed = codec.compress(data)
    assert codec.decompress(bytes(packed), 1 << 20) == codec.decompress(bytearray(packed), 1 << 20)
    assert bytes(codec.decompress(bytearray(packed), 1 << 20)[0]) == data
