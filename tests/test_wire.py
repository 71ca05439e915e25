"""kwire_cli.wire: the varints and uuid text forms every layer shares, on exact bytes."""
import random

import pytest

from conftest import FIXTURES
from kwire_cli import wire
from kwire_cli.codec import decode_response
from kwire_cli.errors import DecodeError

# zig-zag boundaries (value, bytes): each width's largest and smallest value and the next one
ZIGZAG = [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
          (8191, "fe7f"), (-8192, "ff7f"), (8192, "808001"), (-8193, "818001"),
          (2**31 - 1, "feffffff0f"), (-2**31, "ffffffff0f")]


@pytest.mark.parametrize("value,hexed", ZIGZAG)
def test_zigzag_varints_both_ways(value, hexed):
    raw = bytes.fromhex(hexed)
    assert wire.varint_bytes(value) == raw == wire.varlong_bytes(value)
    out = bytearray()
    wire.write_varint(out, value)
    assert bytes(out) == raw
    assert wire.read_varint(raw, 0, len(raw)) == (value, len(raw))
    assert wire.read_varlong(raw, 0, len(raw)) == (value, len(raw))
    assert wire.unzigzag(wire.zigzag32(value)) == value == wire.unzigzag(wire.zigzag64(value))
    assert wire.uvarint_size(wire.zigzag32(value)) == len(raw)


def test_varlong_extremes_and_limits():
    for v in (2**63 - 1, -2**63):
        raw = wire.varlong_bytes(v)
        assert len(raw) == 10 and wire.read_varlong(raw, 0, 10) == (v, 10)
    with pytest.raises(DecodeError, match="varint at offset 0 is longer than 10 bytes"):
        wire.read_varlong(b"\xff" * 10 + b"\x01", 0, 11)
    with pytest.raises(DecodeError, match="does not fit 64 bits"):
        wire.read_varlong(b"\xff" * 9 + b"\x7f", 0, 10)


def test_unsigned_varint_errors_name_the_offset():
    with pytest.raises(DecodeError, match=r"varint cut short: 2 bytes left at offset 3"):
        wire.read_uvarint(b"\x00\x00\x00\x80\x80", 3, 5)
    with pytest.raises(DecodeError, match="varint at offset 1 is longer than 5 bytes"):
        wire.read_uvarint(b"\x00\xff\xff\xff\xff\xff\x01", 1, 7)
    with pytest.raises(DecodeError, match="unsigned varint at offset 0 does not fit 32 bits"):
        wire.read_uvarint(b"\xff\xff\xff\xff\x1f", 0, 5)
    # records read zig-zag varints as Kafka's ByteUtils does: five bytes, no 32-bit check
    assert wire.read_uvarint(b"\xff\xff\xff\xff\x1f", 0, 5, strict=False) == (2**33 - 1, 5)
    # the end given is where reading stops, not the end of the buffer
    with pytest.raises(DecodeError, match="cut short"):
        wire.read_uvarint(b"\x80\x01", 0, 1)


def test_uvarint_round_trip_random():
    rnd = random.Random(12)
    for _ in range(2000):
        n = rnd.randrange(0, 1 << rnd.choice((7, 14, 21, 28, 32)))
        raw = wire.uvarint_bytes(n)
        assert len(raw) == wire.uvarint_size(n)
        assert wire.read_uvarint(raw + b"\x99", 0, len(raw) + 1) == (n, len(raw))


def test_uuid_text_forms_on_real_topic_ids():
    # the topic ids a real broker (tansu) sent in a Metadata v12 response
    msg = decode_response(bytes.fromhex((FIXTURES / "hex" / "metadata-response-v12.hex").read_text().split()[0]),
                          3, 12)
    ids = [t["TopicId"] for t in msg.body["Topics"]]
    assert ids and all(len(t) == 22 for t in ids)
    for text in ids:
        raw = wire.uuid_from_text(text)
        assert len(raw) == 16 and wire.uuid_to_text(raw) == text
        dashed = "-".join((raw.hex()[:8], raw.hex()[8:12], raw.hex()[12:16], raw.hex()[16:20], raw.hex()[20:]))
        assert wire.uuid_from_text(dashed) == raw == wire.uuid_from_text(raw.hex())


def test_uuid_text_that_is_not_kafkas():
    assert wire.uuid_to_text(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    for bad in ("AAAAAAAAAAAAAAAAAAAAAB",   # the last character would carry bits past the 128
                "AAAAAAAAAAAAAAAAAAAA+A",   # standard base64, not Kafka's URL-safe alphabet
                "AAAAAAAAAAAAAAAAAAAA!A", "abc", ""):
        with pytest.raises(ValueError, match="uuid"):
            wire.uuid_from_text(bad)
    with pytest.raises(ValueError, match="must be text"):
        wire.uuid_from_text(5)
