"""Bounded, deterministic fuzzing of the records codec and of every decompressor (the long runs are
fuzz/fuzz_all.py and fuzz/fuzz_atheris.py). Only kwire's own errors may come out: `RecordsError`
from decode_records (unusable framing), `CompressionError` from a decompressor (which
decode_records turns into a per-batch "error"). Nothing decompresses past its cap."""
from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzzlib


def fuzz(n):
    return settings(max_examples=n, derandomize=True, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _check(target, data, rnd, **kw):
    bug = fuzzlib.run_one(fuzzlib.TARGETS[target], data, rnd, **kw)
    assert bug is None, f"{target}: {bug} on {data.hex()[:400]} {kw}"


@fuzz(500)
@given(seed=st.sampled_from(fuzzlib.seeds_for("records")), rnd=st.randoms(use_true_random=False))
def test_mutated_real_and_every_codec_records_fields(seed, rnd):
    data, _ = seed
    _check("records", fuzzlib.mutate(rnd, data), rnd)


@fuzz(300)
@given(data=st.binary(max_size=256), rnd=st.randoms(use_true_random=False))
def test_random_bytes_as_records(data, rnd):
    _check("records", data, rnd)


@fuzz(150)
@given(head=st.binary(min_size=12, max_size=12), magic=st.sampled_from([0, 1, 2, 3, 0xFF]),
       attrs=st.integers(0, 0xFFFF), tail=st.binary(max_size=120), rnd=st.randoms(use_true_random=False))
def test_random_batches_with_a_plausible_header(head, magic, attrs, tail, rnd):
    """Random bytes rarely get past the length check; these do: a length that fits, a real magic,
    any attributes (every codec bit pattern), then random content."""
    import struct
    body = bytearray(head[:8]) + struct.pack(">i", 9 + 4 + len(tail)) + b"\x00\x00\x00\x00" \
        + bytes([magic]) + b"\x00\x00\x00\x00" + struct.pack(">H", attrs) + tail
    struct.pack_into(">i", body, 8, len(body) - 12)
    _check("records", bytes(body), rnd)


@fuzz(400)
@given(seed=st.sampled_from(fuzzlib.seeds_for("decompress")), rnd=st.randoms(use_true_random=False))
def test_mutated_payloads_of_every_codec_and_framing(seed, rnd):
    data, kw = seed
    _check("decompress", fuzzlib.mutate(rnd, data), rnd, **kw)


@fuzz(200)
@given(codec=st.sampled_from([1, 2, 3, 4]), data=st.binary(max_size=128), rnd=st.randoms(use_true_random=False))
def test_random_payloads_for_every_codec(codec, data, rnd):
    # give each codec its magic often enough that the parser behind it is reached
    magic = {1: b"\x1f\x8b\x08\x00", 2: b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01",
             3: b"\x04\x22\x4d\x18", 4: b"\x28\xb5\x2f\xfd"}[codec]
    if rnd.random() < 0.6:
        data = magic + data
    _check("decompress", data, rnd, codec=codec)


def test_seed_corpus_reaches_every_codec_and_magic():
    from kwire_cli.records import decode_records
    seen = set()
    for data, _ in fuzzlib.seeds_for("records"):
        for b in decode_records(data)["batches"]:
            assert "error" not in b
            seen.add((b["Magic"], b.get("Compression")))
    assert {(2, c) for c in ("none", "gzip", "snappy", "lz4", "zstd")} <= seen
    assert {(m, c) for m in (0, 1) for c in ("none", "gzip", "snappy", "lz4")} <= seen


@fuzz(150)
@given(seed=st.sampled_from(fuzzlib.seeds_for("records_long")), rnd=st.randoms(use_true_random=False))
def test_the_long_value_paths_give_the_same_trees_and_bytes(seed, rnd):
    """Issue 15: keys and values taken as long ones (memoryviews, looked at in pieces, costed first)
    decode as the short path does; strings written in pieces are the same bytes."""
    data, _ = seed
    _check("records_long", fuzzlib.mutate(rnd, data), rnd)


@fuzz(20)
@given(seed=st.sampled_from(fuzzlib.seeds_for("records_big")), rnd=st.randoms(use_true_random=False))
def test_long_batches_decode_the_same_native_and_python(seed, rnd):
    """Issue 15: batches and values of a megabyte (read in place, handed over as memoryviews, charged
    to the frame) decode the same in C and in Python, under any frame cap."""
    data, _ = seed
    _check("records_big", data, rnd)
