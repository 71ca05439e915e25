"""Bounded, deterministic fuzzing of the capture pipeline (reader, reassembly, framing, pairing,
per-frame decode, summary) on mutated real captures. The only failure allowed is a one-line
CaptureError for a file that is not a capture at all; everything else is damage or an undecodable
frame in the summary, whose counts reconcile."""
from __future__ import annotations

import io
import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzzlib

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMALL = sorted((p.read_bytes() for p in (FIXTURES / "captures").glob("*.pcap")), key=len)[:4]


def fuzz(n):
    return settings(max_examples=n, derandomize=True, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _check(data, rnd):
    bug = fuzzlib.run_one(fuzzlib.t_capture, data, rnd)
    assert bug is None, bug


@fuzz(150)
@given(seed=st.sampled_from(SMALL), rnd=st.randoms(use_true_random=False))
def test_mutated_real_captures(seed, rnd):
    _check(fuzzlib.mutate(rnd, seed, rounds=rnd.choice((1, 3, 10, 30))), rnd)


@fuzz(60)
@given(data=st.binary(max_size=200), rnd=st.randoms(use_true_random=False))
def test_random_bytes_behind_a_real_pcap_header(data, rnd):
    _check(SMALL[0][:24] + data, rnd)


def test_a_real_capture_cut_at_every_64th_byte():
    data = SMALL[0]
    rnd = random.Random(0)
    for cut in range(0, len(data), 64):
        _check(data[:cut], rnd)


def test_payload_bytes_replaced_with_random_bytes_throughout():
    """Every TCP payload of a real capture overwritten in place with random bytes (the headers
    stay valid): every frame the garbage forms decodes or is undecodable, nothing else."""
    from kwire_cli.capture import Packet, iter_packets
    data = bytearray(SMALL[-1])
    rnd = random.Random(1)
    pos, offsets = 24, []
    while pos + 16 <= len(data):
        caplen = int.from_bytes(data[pos + 8:pos + 12], "little")
        offsets.append((pos + 16, caplen))
        pos += 16 + caplen
    for p in iter_packets(io.BytesIO(bytes(data)), "x"):
        if p.__class__ is Packet and p.payload:
            start, caplen = offsets[p.packet - 1]
            end = start + caplen
            data[end - len(p.payload):end] = bytes(rnd.randrange(256) for _ in p.payload)
    _check(bytes(data), rnd)


@settings(max_examples=200, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rnd=st.randoms(use_true_random=False))
def test_proxy_relay_forwards_exactly_what_it_takes_in(rnd):
    """kwire proxy's relay, fed mutated real frames in random chunks, forwards exactly the bytes it
    took in, in order, and only ever refuses with a DecodeError."""
    ((data, kw),) = fuzzlib.seeds_for("relay")
    bug = fuzzlib.run_one(fuzzlib.TARGETS["relay"], fuzzlib.mutate(rnd, data), rnd, **kw)
    assert bug is None, bug


@settings(max_examples=200, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.sampled_from(fuzzlib.seeds_for("segment")), rnd=st.randoms(use_true_random=False))
def test_dump_log_reads_mutated_segments(seed, rnd):
    data, kw = seed
    bug = fuzzlib.run_one(fuzzlib.TARGETS["segment"], fuzzlib.mutate(rnd, data), rnd, **kw)
    assert bug is None, bug


@settings(max_examples=200, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.sampled_from(fuzzlib.seeds_for("rewrite")), rnd=st.randoms(use_true_random=False))
def test_proxy_rewrites_mutated_broker_answers_or_refuses_them(seed, rnd):
    """Hostile broker answers to the proxy's rewriting: only KwireErrors (CannotRewrite when the
    address book runs out of ports), and the spliced answer is the decoded and re-encoded one."""
    data, kw = seed
    bug = fuzzlib.run_one(fuzzlib.TARGETS["rewrite"], fuzzlib.mutate(rnd, data), rnd, **kw)
    assert bug is None, bug


@settings(max_examples=200, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.sampled_from(fuzzlib.seeds_for("index") + fuzzlib.seeds_for("state")),
       rnd=st.randoms(use_true_random=False))
def test_dump_log_reads_mutated_index_and_state_files(seed, rnd):
    data, kw = seed
    target = fuzzlib.TARGETS["state" if kw["kind"] in ("producer-snapshot", "txn-index") else "index"]
    bug = fuzzlib.run_one(target, fuzzlib.mutate(rnd, data), rnd, **kw)
    assert bug is None, bug


@fuzz(60)
@given(seed=st.sampled_from(fuzzlib.seeds_for("tls_native_agrees")), rnd=st.randoms(use_true_random=False))
def test_mutated_tls_captures_read_the_same_with_the_native_tls13_path_or_without(seed, rnd):
    """The TLS 1.3 records opened through OpenSSL's libcrypto (tls/_records13.c) and through
    cryptography: the same frames, damage, notes and stats on mutated TLS recordings."""
    data, kw = seed
    bug = fuzzlib.run_one(fuzzlib.TARGETS["tls_native_agrees"], fuzzlib.mutate(rnd, data, rounds=rnd.choice((1, 3))),
                          rnd, **kw)
    assert bug is None, bug
