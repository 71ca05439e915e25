"""The capture layer's own small Kafka helpers: broker side, header plausibility, acks."""
from __future__ import annotations

import struct

import pytest

from capture_util import kafka_request, kafka_response, produce_body
from kwire_cli.capture import broker_side, looks_like_request, produce_acks, request_prefix
from kwire_cli.capture.kafka import find_request_start, find_response_start

C = ("10.0.0.1", 50000)
B = ("10.0.0.2", 9092)


def test_broker_side_by_port_either_order():
    assert broker_side(C, B) == (1, "port")
    assert broker_side(B, C) == (0, "port")
    assert broker_side(C, ("10.0.0.2", 19092), broker_ports={19092}) == (1, "port")


def test_broker_side_known_broker_beats_heuristics():
    a, b = ("10.0.0.1", 40000), ("10.0.0.2", 30000)
    assert broker_side(a, b, known_brokers={a}, syn_receiver=1) == (0, "known-broker")


def test_broker_side_request_header_then_syn_then_lower_port():
    a, b = ("10.0.0.1", 1000), ("10.0.0.2", 30000)
    # a request came from b: a is the broker even though b received the SYN and a's port is lower... and vice versa
    assert broker_side(a, b, request_from=1, syn_receiver=1) == (0, "request-header")
    assert broker_side(a, b, request_from=0) == (1, "request-header")
    assert broker_side(a, b, syn_receiver=1) == (1, "syn")
    assert broker_side(a, b) == (0, "lower-port")
    assert broker_side(b, a) == (1, "lower-port")


def test_broker_side_both_on_broker_ports_falls_through():
    a, b = ("10.0.0.1", 9092), ("10.0.0.2", 9093)
    assert broker_side(a, b, broker_ports={9092, 9093}, syn_receiver=0) == (0, "syn")


def test_looks_like_request():
    assert looks_like_request(kafka_request(18, 3, 0, "adminclient-1"))
    assert looks_like_request(kafka_request(0, 9, 12345, None))
    assert looks_like_request(kafka_request(3, 12, 5, ""))
    assert not looks_like_request(kafka_request(101, 3, 1, "x"))        # api key out of range
    assert not looks_like_request(kafka_request(3, 31, 1, "x"))         # api version out of range
    assert not looks_like_request(kafka_request(3, 1, -5, "x"))         # negative correlation id
    assert not looks_like_request(kafka_request(3, 1, 5, "bad\x01id"))  # client id not printable
    assert not looks_like_request(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not looks_like_request(struct.pack(">i", 200 << 20) + kafka_request(3, 1, 1, "x")[4:])  # too big
    assert not looks_like_request(kafka_request(3, 1, 1, "x")[:10])  # cannot tell yet: not confirmed
    # an api check can tighten it
    assert not looks_like_request(kafka_request(77, 0, 1, "x"), api_check=lambda k, v: k <= 70)


def test_find_request_start_in_noise():
    noise = bytes(range(256)) * 3
    req = kafka_request(1, 11, 42, "consumer-1", b"\x00" * 30)
    buf = bytearray(noise + req)
    assert find_request_start(buf) == (len(noise), True)
    # cut inside the client id: a candidate that needs more bytes
    i, ok = find_request_start(bytearray(noise + req[:16]))
    assert (i, ok) == (len(noise), False)
    # nothing at all: keep only a 13-byte tail
    assert find_request_start(bytearray(b"\xff" * 100)) == (87, False)


def test_find_response_start_needs_open_id():
    body = kafka_response(7, b"data") + kafka_response(8, b"more")
    buf = bytearray(b"\x01\x02\x03" + body)
    assert find_response_start(buf, [8]) == (3 + 12, True)
    assert find_response_start(buf, [7, 8]) == (3, True)
    assert find_response_start(buf, []) == (len(buf) - 7, False)
    assert find_response_start(buf, [9]) == (len(buf) - 7, False)


@pytest.mark.parametrize("version,txn", [(0, None), (2, None), (3, None), (3, "tx"), (8, "t" * 20),
                                         (9, None), (9, "my-tx"), (11, "x")])
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_produce_acks_all_header_and_body_layouts(version, txn, acks):
    if version <= 2 and txn:
        pytest.skip("no transactional id before v3")
    flexible = version >= 9
    req = kafka_request(0, version, 3, "producer-1", produce_body(acks, version, txn), flexible=flexible)
    assert produce_acks(req[4:]) == acks
    assert produce_acks(req[4:], version) == acks


def test_produce_acks_with_header_tags_and_null_client_id():
    tags = b"\x02" + b"\x00\x03abc" + b"\x05\x01z"  # two tagged fields
    req = kafka_request(0, 10, 1, None, produce_body(0, 10, "t"), flexible=True, tags=tags)
    assert produce_acks(req[4:]) == 0


def test_produce_acks_truncated_is_none():
    req = kafka_request(0, 9, 1, "p", produce_body(0, 9, "tx"), flexible=True)
    for cut in (4, 9, 12, 14, 16):  # acks sits at bytes 15..16
        assert produce_acks(req[4:4 + cut]) is None
    assert produce_acks(b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x00\xff") is None  # bad varint


def test_request_prefix():
    assert request_prefix(kafka_request(19, 7, 99, "x")[4:]) == (19, 7, 99)
    assert request_prefix(b"\x00\x01") is None
