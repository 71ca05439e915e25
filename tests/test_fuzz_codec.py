"""Bounded, deterministic fuzzing of the message codec (the long runs are fuzz/fuzz_all.py and
fuzz/fuzz_atheris.py). Inputs: real client frames (kafka-python, librdkafka, kafkajs against tansu)
mutated by bit flips, truncation, inflated lengths, huge varints, bogus tag counts, inserted,
deleted and duplicated runs; and random bytes for every (api, version, kind). The only failure
allowed is kwire's own one-line KwireError."""
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


def seeds(name):
    return st.sampled_from(fuzzlib.seeds_for(name))


def _check(target, data, rnd, **kw):
    bug = fuzzlib.run_one(fuzzlib.TARGETS[target], data, rnd, **kw)
    assert bug is None, f"{target}: {bug} on {data.hex()} {kw}"


@fuzz(400)
@given(seed=seeds("request"), rnd=st.randoms(use_true_random=False))
def test_mutated_real_requests(seed, rnd):
    data, kw = seed
    _check("request", fuzzlib.mutate(rnd, data), rnd, **kw)


@fuzz(400)
@given(seed=seeds("response"), rnd=st.randoms(use_true_random=False))
def test_mutated_real_responses_with_their_own_api_and_version(seed, rnd):
    data, kw = seed
    _check("response", fuzzlib.mutate(rnd, data), rnd, **kw)


@fuzz(600)
@given(plan=st.sampled_from(fuzzlib.api_versions()), data=st.binary(max_size=96),
       rnd=st.randoms(use_true_random=False))
def test_random_bodies_for_every_api_version_and_kind(plan, data, rnd):
    key, version, kind = plan
    _check("body", data, rnd, key=key, version=version, kind=kind)


@fuzz(300)
@given(seed=seeds("partial_agrees"), rnd=st.randoms(use_true_random=False))
def test_partial_walker_agrees_with_the_codec_on_mutated_frames(seed, rnd):
    """`kwire decode --partial` runs a second (interpreted) decoder: on hostile bytes it must fail
    exactly where and how the codec fails, and decode the same tree when the codec decodes."""
    data, kw = seed
    _check("partial_agrees", fuzzlib.mutate(rnd, data), rnd, **kw)


@fuzz(200)
@given(seed=seeds("embedded"), rnd=st.randoms(use_true_random=False))
def test_mutated_consumer_protocol_metadata_and_assignments(seed, rnd):
    data, kw = seed
    _check("embedded", fuzzlib.mutate(rnd, data), rnd, **kw)


@fuzz(200)
@given(data=st.binary(max_size=64), rnd=st.randoms(use_true_random=False))
def test_random_bytes_as_requests_and_embedded_schemas(data, rnd):
    _check("request", data, rnd)
    _check("embedded", data, rnd)


def test_seed_corpora_cover_every_client_and_records():
    """The corpora the fuzzing starts from are the real recorded bytes (not empty by accident)."""
    assert len(fuzzlib.pairs()) >= 60
    assert {k for k, *_ in fuzzlib.pairs()} >= {0, 1, 3, 8, 9, 10, 11, 12, 14, 18, 19}
    assert len(fuzzlib.seeds_for("response")) >= 50
    assert len(fuzzlib.embedded_seeds()) >= 2


@fuzz(300)
@given(seed=seeds("native_agrees"), rnd=st.randoms(use_true_random=False))
def test_native_decoder_agrees_with_the_generated_one_on_mutated_frames(seed, rnd):
    """The optional C decoder (codec/_speedups.c) on hostile bytes: the same value as the generated
    Python decoder, or the same refusal (skipped for plans without a native program)."""
    data, kw = seed
    _check("native_agrees", fuzzlib.mutate(rnd, data), rnd, **kw)


@fuzz(300)
@given(seed=seeds("lenient"), rnd=st.randoms(use_true_random=False))
def test_lenient_decoding_of_mutated_frames(seed, rnd):
    """Lenient decoding agrees with the codec where it decodes; where it refuses, every violation
    names a known rule at an offset inside the input, and nothing but a DecodeError escapes."""
    data, kw = seed
    _check("lenient", fuzzlib.mutate(rnd, data), rnd, **kw)
