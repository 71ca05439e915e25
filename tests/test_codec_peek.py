"""codec.peek_request_field on the Produce requests real clients sent (fixtures/captures): the leading
fields of a request, read from as few bytes as they need, agree with the whole decode."""
from pathlib import Path

import pytest

from kwire_cli import capture
from kwire_cli.capture.kafka import produce_acks
from kwire_cli.codec import decode_request
from kwire_cli.codec.peek import peek_request_field
from kwire_cli.errors import DecodeError, KwireError, UnknownApiKey, UnknownVersion

CAPTURES = Path(__file__).resolve().parent.parent / "fixtures" / "captures"


def _produce_requests():
    out = []
    for p in sorted(CAPTURES.glob("*-produce.pcap")):
        for f in capture.iter_capture(str(p)):
            if isinstance(f, capture.KafkaFrame) and f.kind == "request" and f.api_key == 0:
                out.append((p.stem, f.data))
    return out


REQUESTS = _produce_requests()


def test_the_captures_have_produce_requests_of_several_versions():
    versions = {decode_request(d, size_prefixed=False, records="bytes").api_version for _, d in REQUESTS}
    assert len(REQUESTS) >= 10 and len(versions) >= 2, versions


@pytest.mark.parametrize("name,data", REQUESTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REQUESTS)])
def test_acks_from_the_shortest_prefix_on(name, data):
    msg = decode_request(data, size_prefixed=False, records="bytes")
    acks, txn = msg.body["Acks"], msg.body.get("TransactionalId")
    assert peek_request_field(data, "Acks") == acks
    assert peek_request_field(data, "Acks", api_version=msg.api_version) == acks
    if msg.api_version >= 3:
        assert peek_request_field(data, "TransactionalId") == txn
    # the acks sit in the two bytes before the first byte that is not needed: find them by cutting
    needed = next(cut for cut in range(len(data) + 1) if produce_acks(data[:cut]) is not None)
    assert data[needed - 2:needed] == acks.to_bytes(2, "big", signed=True)
    for cut in range(needed):
        with pytest.raises(DecodeError):
            peek_request_field(data[:cut], "Acks")
    assert produce_acks(data[:needed], msg.api_version) == acks


def test_what_cannot_be_peeked():
    _, data = REQUESTS[0]
    with pytest.raises(UnknownApiKey):
        peek_request_field(b"\x03\xe7" + data[2:], "Acks")
    with pytest.raises(UnknownVersion):
        peek_request_field(data, "Acks", api_version=99)
    with pytest.raises(KwireError, match="has no field Nope"):
        peek_request_field(data, "Nope")
    assert produce_acks(b"\x03\xe7" + data[2:]) is None
