"""The error family (kwire_cli/errors.py): one base, EncodeError a sibling of DecodeError, and typed
decode kinds raised by the codec on real bytes (no matching on message text)."""
import json

import pytest

from conftest import FIXTURES
from kwire_cli import errors as E
from kwire_cli.codec import decode_body, decode_request, decode_response, encode_request
from kwire_cli.codec.embedded import decode_embedded
from kwire_cli.codec.partial import walk_message

METADATA = FIXTURES / "pairs" / "confluent-kafka" / "001-3-v12.json"


def _pair(path):
    pair = json.loads(path.read_text())
    return bytes.fromhex(pair["request"]), bytes.fromhex(pair.get("response") or "")


def _with_stray_bytes(req: bytes) -> bytes:
    """The request as librdkafka 2.x once sent its Metadata v12 request: 3 stray bytes (01 00 00)
    after the body, counted in the size prefix."""
    body = req[4:] + bytes.fromhex("010000")
    return len(body).to_bytes(4, "big") + body


def test_every_class_is_a_kwire_error_and_encode_is_not_a_decode_error():
    for name in ("SpecError", "CodecError", "DecodeError", "EncodeError", "UnknownApiKey", "UnknownVersion",
                 "TrailingBytes", "RecordsError", "CompressionError", "DecompressedTooLarge", "CaptureError",
                 "InputError", "NegotiationError", "FilterError", "SparkJobError"):
        assert issubclass(getattr(E, name), E.KwireError), name
    assert not issubclass(E.EncodeError, E.DecodeError)
    assert not issubclass(E.DecodeError, E.EncodeError)
    assert issubclass(E.DecompressedTooLarge, E.CompressionError)
    assert {c.kind for c in (E.DecodeError, E.UnknownApiKey, E.UnknownVersion, E.TrailingBytes)} == {
        "decode-error", "unknown-api-key", "unknown-version", "trailing-bytes"}


def test_the_classes_other_packages_use_are_the_ones_in_errors():
    from kwire_cli.capture import CaptureError
    from kwire_cli.capture.filter import FilterError
    from kwire_cli.inputs import InputError
    from kwire_cli.negotiation import NegotiationError
    from kwire_cli.records import RecordsError
    from kwire_cli.records.compression import CompressionError, DecompressedTooLarge
    assert (CaptureError, FilterError, InputError, NegotiationError, RecordsError, CompressionError,
            DecompressedTooLarge) == (E.CaptureError, E.FilterError, E.InputError, E.NegotiationError,
                                      E.RecordsError, E.CompressionError, E.DecompressedTooLarge)


def test_trailing_bytes_keep_the_complete_message():
    req, _ = _pair(METADATA)
    whole = decode_request(req, records="hex")
    with pytest.raises(E.TrailingBytes) as ei:
        decode_request(_with_stray_bytes(req), records="hex")
    e = ei.value
    assert e.kind == "trailing-bytes"
    assert str(e) == f"Metadata v12 request: 3 trailing bytes after a complete message at offset {len(req)}"
    assert e.decoded.api_name == "Metadata" and e.decoded.api_version == 12
    assert e.decoded.body == whole.body and e.decoded.header == whole.header
    # the walker of --partial says the same, with the same class
    pm = walk_message(_with_stray_bytes(req), "request")
    assert isinstance(pm.error, E.TrailingBytes) and str(pm.error) == str(e)


def test_unknown_api_key_and_version_are_typed():
    req, resp = _pair(METADATA)
    bad_key = req[:4] + (999).to_bytes(2, "big") + req[6:]
    with pytest.raises(E.UnknownApiKey) as ei:
        decode_request(bad_key)
    assert ei.value.kind == "unknown-api-key" and "unknown API key 999" in str(ei.value)
    with pytest.raises(E.UnknownApiKey):
        walk_message(bad_key, "request")
    with pytest.raises(E.UnknownApiKey):
        decode_response(resp, 999, 0)
    bad_version = req[:6] + (-3).to_bytes(2, "big", signed=True) + req[8:]
    with pytest.raises(E.UnknownVersion) as ei:
        decode_request(bad_version)
    assert ei.value.kind == "unknown-version" and "Metadata v-3 is not a valid version" in str(ei.value)
    # a version newer than the specs whose bytes do not read with the newest layout: typed the same,
    # and the error says which specs are in use and what reads newer ones
    newer = bytearray(encode_request("Metadata", 13, {"CorrelationId": 1, "ClientId": "c"}, {"Topics": []}))
    newer[6:8] = (99).to_bytes(2, "big")
    newer += b"\x00\x01"  # bytes the v13 layout does not account for
    newer[0:4] = (len(newer) - 4).to_bytes(4, "big")
    with pytest.raises(E.UnknownVersion) as ei:
        decode_request(bytes(newer))
    assert "Metadata v99 is newer than the specs in use (Metadata 0-13 in " in str(ei.value)
    assert "does not read with the v13 layout (2 bytes left over at offset" in str(ei.value)
    assert "--specs DIR reads a newer Kafka checkout's" in str(ei.value)


def test_plain_decode_errors_and_framing():
    req, _ = _pair(METADATA)
    with pytest.raises(E.DecodeError) as ei:
        decode_body(req[12:40], 3, 12, "request")  # the body cut short
    assert type(ei.value) is E.DecodeError and ei.value.kind == "decode-error"
    # a size prefix shorter than the bytes: trailing bytes after the frame
    with pytest.raises(E.TrailingBytes) as ei:
        decode_request(req + b"\x00", size_prefixed=True)
    assert ei.value.decoded is None and "trailing bytes after the" in str(ei.value)


def test_embedded_trailing_bytes():
    # ConsumerProtocolAssignment v0 of a real kind (one topic, partitions 0 and 1, no user data) + 2 bytes
    data = bytes.fromhex("0000" "00000001" "0006" + b"orders".hex() + "00000002" "00000000" "00000001"
                         "ffffffff" "abcd")
    with pytest.raises(E.TrailingBytes):
        decode_embedded("ConsumerProtocolAssignment", data)


def test_encode_errors_are_not_caught_as_decode_errors():
    with pytest.raises(E.EncodeError) as ei:
        encode_request("Metadata", 12, {}, {"Topics": [{"Name": 5}]})
    assert not isinstance(ei.value, E.DecodeError)  # an `except DecodeError` does not catch it
    assert ei.value.field_path == "Topics[0].Name"
    with pytest.raises(E.EncodeError) as ei:
        encode_request("Metadata", 99, {}, {})
    assert "Metadata v99 is not a valid version" in str(ei.value)
