"""Hostile bytes against the message codec: lying lengths and counts, over-long varints, bogus tag
sections, nesting. Every refusal is a one-line DecodeError; nothing allocates from a claim the bytes
cannot back; no loop runs longer than the bytes allow."""
from __future__ import annotations

import struct
import time
import tracemalloc
from pathlib import Path

import pytest

from kwire_cli.codec import DecodeError, decode_body, decode_request, decode_response, encode_body, encode_request
from kwire_cli.codec.lenient import decode_lenient
from kwire_cli.errors import KwireError

CLAIMS = (b"\x7f\xff\xff\xff",          # int32 length / count 2^31-1 (about 2 GB, or 2G elements)
          b"\xff\xff\xff\xff\x0f",      # uvarint 2^32-1: compact length / count 2^32-2
          b"\xfe\xff\xff\xff\x07")      # uvarint 2^31-2


def _decode_quietly(data, key, version, kind):
    try:
        decode_body(data, key, version, kind)
    except DecodeError as e:
        assert "\n" not in str(e)


def _sample_plans():
    """Per API and kind: the oldest version, the first flexible one and the newest (the full sweep
    of every version is `python fuzz/fuzz_claims.py`)."""
    from kwire_cli.spec.registry import registry
    out = []
    for key, api in sorted(registry().apis.items()):
        for kind in ("request", "response"):
            spec = api.spec(kind)
            vv = spec.valid_versions
            versions = list(range(vv.lo, vv.hi + 1))
            flex = [v for v in versions if spec.flexible(v)]
            pick = {versions[0], versions[-1]}
            if flex:
                pick.add(flex[0])
            out += [(key, v, kind, spec.flexible(v)) for v in sorted(pick)]
    return out


def claim_peak(data, key, v, kind):
    """Peak traced allocation of one decode; the smaller of two runs, so that a one-off growth of
    some global cache is not taken for an allocation the input caused (that one repeats)."""
    peaks = []
    for _ in range(2):
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        _decode_quietly(data, key, v, kind)
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
        if peaks[0] < 64 * 1024:
            break
    return min(peaks)


def test_a_40_byte_body_claiming_2gb_allocates_under_64kb_for_every_api_and_kind():
    """At every offset of the default body of each sampled (api, version, kind), a 2 GB length or a
    2G element count (int32 or uvarint, as the version uses), the body cut to 40 bytes: the
    decoder refuses (or decodes) without allocating from the claim. Peak traced allocation per
    decode stays under 64 KiB (the issue asks < 1 MB)."""
    worst = (0, None)
    plans = _sample_plans()
    assert len(plans) > 200
    cases = []
    for key, v, kind, flexible in plans:
        base = encode_body(key, v, kind, {})
        _decode_quietly(base, key, v, kind)            # compile the plan outside the measurement
        _decode_quietly(b"\xff" * 8, key, v, kind)     # and take the first error path once
        claims = CLAIMS[1:] if flexible else CLAIMS[:1]
        for i in range(min(len(base), 28) + 1):
            for claim in claims:
                cases.append(((base[:i] + claim + base[i + len(claim):] + b"\x00" * 40)[:40], key, v, kind))
    tracemalloc.start()
    try:
        for data, key, v, kind in cases:
            peak = claim_peak(data, key, v, kind)
            if peak > worst[0]:
                worst = (peak, (key, v, kind, data.hex()))
    finally:
        tracemalloc.stop()
    assert worst[0] < 64 * 1024, worst


def test_a_2g_element_array_claim_is_refused_before_allocation_with_field_and_offset():
    # Metadata v12 request body: Topics is a compact nullable array; claim 2^32-2 topics in 6 bytes
    data = b"\xff\xff\xff\xff\x0f" + b"\x00"
    decode_body(b"\x00\x00\x00\x00", "Metadata", 12, "request")  # the plan compiled first, not measured
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError) as e:
            decode_body(data, "Metadata", 12, "request")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(e.value) == ("Metadata v12 request: Topics: array of 4294967294 elements needs at least "
                            "4294967294 bytes, 1 left at offset 5")
    assert peak < 64 * 1024


def test_a_string_claiming_more_bytes_than_the_frame_is_refused():
    # Metadata v1 request: Topics[1].Name int16 length 32767 with 3 bytes behind it
    data = b"\x00\x00\x00\x01" + b"\x7f\xff" + b"abc"
    with pytest.raises(DecodeError, match=r"^Metadata v1 request: Topics\[0\]\.Name: string of 32767 "
                                          r"bytes needs 32767 bytes, 3 left at offset 6$"):
        decode_body(data, "Metadata", 1, "request")


@pytest.mark.parametrize("varint,why", [
    (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),     # 6 bytes for a 32-bit value
    (b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
    (b"\xff\xff\xff\xff\x7f", "does not fit 32 bits"),        # 5 bytes, 35 bits
])
def test_overlong_varints_are_errors_at_every_varint_site(varint, why):
    # ApiVersions v3 request body: ClientSoftwareName (compact string), ClientSoftwareVersion, tags
    for where in range(3):
        parts = [b"\x02a", b"\x02b", b"\x00"]
        parts[where] = varint + b"\x00" * 8
        with pytest.raises(DecodeError, match=why) as e:
            decode_body(b"".join(parts), "ApiVersions", 3, "request")
        assert e.value.offset == (0, 2, 4)[where]


def test_tag_section_claiming_4_billion_tags_fails_at_once():
    # ApiVersions v3 request body with a tag count of 2^32-1 and four bytes behind it
    data = b"\x02a\x02b" + b"\xff\xff\xff\xff\x0f" + b"\x00\x00\x00\x00"
    t = time.perf_counter()
    with pytest.raises(DecodeError, match="4294967295 tagged fields need at least 8589934590 bytes, 4 left"):
        decode_body(data, "ApiVersions", 3, "request")
    assert time.perf_counter() - t < 0.1


def test_tagged_field_claiming_more_bytes_than_the_frame_and_a_bogus_tag_number():
    base = b"\x02a\x02b"
    with pytest.raises(DecodeError, match="tagged field 7 needs 4294967295 bytes"):
        decode_body(base + b"\x01\x07\xff\xff\xff\xff\x0f" + b"xx", "ApiVersions", 3, "request")
    with pytest.raises(DecodeError, match="longer than 5 bytes"):
        decode_body(base + b"\x01" + b"\xff" * 6 + b"\x01\x00", "ApiVersions", 3, "request")
    # tag 2^32-1 with an empty value is read as an unknown tag and kept
    m = decode_body(base + b"\x01\xff\xff\xff\xff\x0f\x00", "ApiVersions", 3, "request")
    assert m.body["_unknown_tags"] == {"4294967295": ""}


def test_many_small_tagged_fields_decode_in_linear_time():
    # 200,000 empty unknown tags (2 bytes each): bounded by the bytes, not by the claimed count
    n = 200_000
    from kwire_cli.codec.primitives import uvarint_bytes
    tags = uvarint_bytes(n) + b"".join(uvarint_bytes(1000 + i) + b"\x00" for i in range(n))
    t = time.perf_counter()
    m = decode_body(b"\x02a\x02b" + tags, "ApiVersions", 3, "request")
    assert len(m.body["_unknown_tags"]) == n
    assert time.perf_counter() - t < 5


def test_duplicate_tags_do_not_loop_or_crash():
    # the same unknown tag twice breaks the format (tags ascending, each once): strictly a named error
    # (C and Python paths alike); leniently the later value wins and the violation is listed
    body = b"\x02a\x02b" + b"\x02" + b"\x09\x01\xaa" + b"\x09\x01\xbb"
    with pytest.raises(DecodeError, match="tag 9 repeats tag 9: tagged fields must be in ascending tag order"):
        decode_body(body, "ApiVersions", 3, "request")
    m = decode_lenient(body, "request", "ApiVersions", 3, header=False)
    assert m.body["_unknown_tags"] == {"9": "bb"}
    assert [(v.rule, v.offset) for v in m.violations] == [("tag-order", 9)]


def test_an_array_of_empty_elements_is_bounded_by_the_bytes_left():
    """Elements that can be a single byte (a compact array of empty tag sections) cannot claim more
    elements than there are bytes: the count check comes before the loop."""
    # DescribeCluster v0 request body is IncludeClusterAuthorizedOperations + tags; use
    # FindCoordinator v4 request: Key type + CoordinatorKeys compact string array
    n = 390_000  # under the item budget (400,000 array items a message)
    from kwire_cli.codec.primitives import uvarint_bytes
    body = b"\x00" + uvarint_bytes(n + 1) + b"\x01" * n + b"\x00"   # n empty strings, then tags
    t = time.perf_counter()
    m = decode_body(body, "FindCoordinator", 4, "request")
    assert m.body["CoordinatorKeys"] == [""] * n
    assert time.perf_counter() - t < 5
    with pytest.raises(DecodeError, match=f"array of {n + 2} elements needs at least {n + 2} bytes, {n + 1} left"):
        decode_body(b"\x00" + uvarint_bytes(n + 3) + b"\x01" * n + b"\x00", "FindCoordinator", 4, "request")


def test_size_prefix_lies():
    req = encode_request("Metadata", 1, {"CorrelationId": 1, "ClientId": "c"}, {"Topics": []})
    for size in (0x7FFFFFFF, len(req) - 3, -1, -0x80000000):
        bad = struct.pack(">i", size) + req[4:]
        with pytest.raises(DecodeError) as e:
            decode_request(bad, size_prefixed=True)
        assert "\n" not in str(e.value)
    with pytest.raises(DecodeError, match="size prefix needs 4 bytes, 2 given"):
        decode_request(b"\x00\x00", size_prefixed=True)


def test_response_of_an_api_key_that_does_not_exist_is_a_kwire_error():
    with pytest.raises(KwireError, match="unknown API key 9999"):
        decode_response(b"\x00\x00\x00\x01", 9999, 0)


def test_nesting_is_bounded(tmp_path, monkeypatch):
    """A spec whose struct contains itself (Kafka's specs never do, but --specs reads any folder)
    cannot recurse without bound: 64 levels, then a one-line error."""
    import shutil

    from kwire_cli.spec.registry import registry, use_specs

    src = Path(registry().folder)
    for p in src.glob("*.json"):
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "DescribeClusterRequest.json").write_text("""{
      "apiKey": 60, "type": "request", "name": "DescribeClusterRequest",
      "validVersions": "0", "flexibleVersions": "0+",
      "fields": [ { "name": "Root", "type": "Node", "versions": "0+" } ],
      "commonStructs": [ { "name": "Node", "versions": "0+", "fields": [
          { "name": "Children", "type": "[]Node", "versions": "0+" } ] } ]
    }""")
    try:
        use_specs(str(tmp_path))
        try:
            registry()
        except KwireError as e:  # a loader that refuses self-reference is a bound too
            assert "\n" not in str(e)
            return
        deep = b"\x02" * 5000 + b"\x01" + b"\x00" * 5000   # 5000 levels of one child each
        with pytest.raises(DecodeError, match="nested deeper than 64 levels"):
            decode_body(deep, 60, 0, "request")
        ok = b"\x02" * 10 + b"\x01" + b"\x00" * 11 + b"\x00"   # 11 nodes' tags, then the message's
        assert decode_body(ok, 60, 0, "request").body["Root"]["Children"][0]["Children"]
    finally:
        use_specs(None)


# ------------------------------------------------------------------------ the item budget

def _api_versions_body(entries: int) -> bytes:
    """An ApiVersions v3 answer's body listing ``entries`` api keys (7 bytes each)."""
    from kwire_cli.codec.primitives import uvarint_bytes
    return (b"\x00\x00" + uvarint_bytes(entries + 1) + struct.pack(">hhhb", 18, 0, 3, 0) * entries
            + b"\x00\x00\x00\x00\x00")


@pytest.fixture(params=[True, False], ids=["native", "python"])
def speedups(request):
    from kwire_cli.codec.native import use_speedups
    before = use_speedups(request.param)
    yield request.param
    use_speedups(before)


def test_a_long_array_stops_at_the_item_budget_before_allocating(speedups):
    """A million api keys (7 MB) in one answer: past the 400,000 array items a message may hold,
    refused at the array's count, before an element is made (the 70 MB answer of ten million took
    ~2 GB); decoded leniently (kwire pcap), the walk stops there too."""
    body = _api_versions_body(1_000_000)
    decode_body(_api_versions_body(1), "ApiVersions", 3, "response")  # the plan compiled first
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError) as e:
            decode_body(body, "ApiVersions", 3, "response")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(e.value) == ("ApiVersions v3 response: ApiKeys: more than 400,000 array items in one frame at "
                            "offset 5 (--max-records raises it)")
    assert (e.value.rule, e.value.offset, e.value.field_path) == ("too-many-items", 5, "ApiKeys")
    assert peak < 64 * 1024, peak
    with pytest.raises(DecodeError) as lenient:
        decode_lenient(body, "response", "ApiVersions", 3, header=False)
    assert str(lenient.value) == str(e.value)
    assert lenient.value.partial.body == {"ErrorCode": 0}


@pytest.fixture
def budget_of_1000(speedups):
    """The item budget set to 1,000 where both decoders read it (the options never set it under
    400,000: this makes the counting quick to test)."""
    from kwire_cli.codec import native, runtime
    before = runtime.MAX_ITEMS[0]
    runtime.MAX_ITEMS[0] = 1000
    if native.extension is not None:
        native.extension.set_max_items(1000)
    yield
    runtime.MAX_ITEMS[0] = before
    if native.extension is not None:
        native.extension.set_max_items(before)


def test_a_metadata_answer_of_50000_partitions_decodes_whole():
    """350,010 array items (three replicas, three in sync: 7 a partition): under the default."""
    from memory_bombs import metadata_answer
    m = decode_response(metadata_answer(10, 5_000, 3), 3, 12)
    assert sum(len(t["Partitions"]) for t in m.body["Topics"]) == 50_000


def test_the_budget_is_the_messages_not_each_arrays(budget_of_1000):
    """Arrays each far under the budget add up: a Metadata answer of 3 topics of 50 partitions (7
    array items a partition, 4 more: 1,054 in all) stops where the 1,001st would be; of 3 topics of 47
    (991 items) it decodes whole. Leniently (kwire pcap) the walk stops at the same place."""
    from memory_bombs import metadata_answer
    m = decode_response(metadata_answer(3, 47, 3), 3, 12)
    assert [len(t["Partitions"]) for t in m.body["Topics"]] == [47, 47, 47]
    with pytest.raises(DecodeError) as e:
        decode_response(metadata_answer(3, 50, 3), 3, 12)
    assert e.value.field_path == "Topics[2].Partitions[41].ReplicaNodes"
    assert "more than 1,000 array items in one frame" in str(e.value)
    with pytest.raises(DecodeError) as lenient:
        decode_lenient(metadata_answer(3, 50, 3), "response", 3, 12)
    assert (lenient.value.field_path, lenient.value.offset) == (e.value.field_path, e.value.offset)


def test_exactly_the_budget_decodes_and_one_more_item_does_not(budget_of_1000):
    assert len(decode_body(_api_versions_body(1000), "ApiVersions", 3, "response").body["ApiKeys"]) == 1000
    with pytest.raises(DecodeError, match="ApiKeys: more than 1,000 array items"):
        decode_body(_api_versions_body(1001), "ApiVersions", 3, "response")
    # short numeric arrays (one byte of count, read by one unpack) count too
    req = encode_request("Metadata", 12, {"CorrelationId": 1, "ClientId": "c"}, {"Topics": []})
    assert decode_request(req).body["Topics"] == []


def test_unknown_tagged_fields_count_as_items(budget_of_1000):
    from kwire_cli.codec.primitives import uvarint_bytes

    def body(n: int) -> bytes:
        return b"\x02a\x02b" + uvarint_bytes(n) + b"".join(uvarint_bytes(1000 + i) + b"\x00" for i in range(n))
    assert len(decode_body(body(1000), "ApiVersions", 3, "request").body["_unknown_tags"]) == 1000
    with pytest.raises(DecodeError, match="more than 1,000 array items in one frame at offset"):
        decode_body(body(1001), "ApiVersions", 3, "request")


def test_max_records_raises_the_array_budget_and_a_low_one_leaves_it(speedups):
    """The records cap in force (--max-records) raises the budget above 400,000; set lower (to cut
    record batches short) it leaves a frame's arrays whole."""
    from kwire_cli.records.limits import set_frame_limits
    previous = set_frame_limits(items=400_010)
    try:
        assert len(decode_body(_api_versions_body(400_010), "ApiVersions", 3, "response").body["ApiKeys"]) == 400_010
        with pytest.raises(DecodeError, match="more than 400,010 array items"):
            decode_body(_api_versions_body(400_011), "ApiVersions", 3, "response")
        set_frame_limits(items=5)
        with pytest.raises(DecodeError, match="more than 400,000 array items"):
            decode_body(_api_versions_body(400_001), "ApiVersions", 3, "response")
    finally:
        set_frame_limits(*previous)
