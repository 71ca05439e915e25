"""Every message version Kafka added since October 2024 (the bundled specs' older folder) decodes to
exactly the values a frame was built with: a value in every field, every tagged field set, the
frames built by tests/ref_encoder.py (its own encoder, written from the spec rules, reading Kafka
4.3.0's files when they are beside the checkout, else kwire's bundled JSON), not by kwire's codec.
"""
import json

import pytest

from conftest import REFERENCE_SPECS, REFERENCE_SPECS_43, ROOT
from kwire_cli.codec import decode_request, decode_response
from ref_encoder import Sample, in_range, read_spec, request_frame, response_frame

BUNDLED = ROOT / "specs"


def _newer(name):
    """A 4.3.0 spec file: Kafka's own when present, else kwire's (the same facts)."""
    path = REFERENCE_SPECS_43 / name
    return read_spec(path) if path.is_file() else json.loads((BUNDLED / name).read_text())


def _older(name):
    """The October 2024 spec of the same message (None when that folder or the message is absent)."""
    if not REFERENCE_SPECS.is_dir():
        return None
    old = REFERENCE_SPECS / name.replace("ListConfigResources", "ListClientMetricsResources")
    return read_spec(old) if old.is_file() else None


def _shape(spec, v):
    """A version's layout as the spec rules see it: each field's path, type, nullability and tag."""
    s = Sample(spec, v)

    def walk(fields, prefix):
        out = []
        for f in fields:
            if not s.present(f):
                continue
            out.append((prefix + f["name"], f["type"], in_range(f.get("nullableVersions"), v),
                        f.get("tag") if s.tagged(f) else None))
            if f["type"].removeprefix("[]") not in ("bool", "int8", "int16", "uint16", "int32", "uint32", "int64",
                                                    "float64", "string", "uuid", "bytes", "records"):
                out += walk(s.sub_fields(f), prefix + f["name"] + ".")
        return out
    return s.flexible, walk(s.fields, "")


# the versions Kafka added since October 2024, as kwire's bundled specs give them (4.3.0's facts)
_BUNDLED_43 = {p.name for p in BUNDLED.glob("*.json")}


def _cases():
    for name in sorted(_BUNDLED_43):
        raw = json.loads((BUNDLED / name).read_text())
        if raw.get("type") not in ("request", "response"):
            continue
        removed = raw.get("removedVersions", "none")
        valid = raw["validVersions"]
        lo, hi = (int(x) for x in (valid.split("-") if "-" in valid else (valid, valid)))
        for v in range(lo, hi + 1):
            if in_range(removed, v):
                continue
            yield name, v


def _added(name, v):
    """Whether version v of the message is new or laid out anew since October 2024."""
    old = _older(name)
    if old is None:
        return True
    if not in_range(old["validVersions"], v):
        return True
    return _shape(old, v) != _shape(_newer(name), v)


CASES = [pytest.param(n, v, id=f"{n[:-5]}-v{v}") for n, v in _cases() if _added(n, v)]


@pytest.mark.skipif(not REFERENCE_SPECS.is_dir(), reason="the October 2024 specs are not beside the checkout")
def test_the_versions_added_since_october_2024_are_the_ones_kafka_lists():
    apis = {(n.removesuffix("Request.json"), v) for n, v in (c.values for c in CASES) if n.endswith("Request.json")}
    for expected in [("Produce", 12), ("Produce", 13), ("Fetch", 18), ("ListOffsets", 11), ("Metadata", 13),
                     ("OffsetCommit", 10), ("OffsetFetch", 10), ("DescribeGroups", 6), ("WriteTxnMarkers", 2),
                     ("TxnOffsetCommit", 5), ("ShareFetch", 1), ("ShareFetch", 2), ("ShareAcknowledge", 2),
                     ("ShareGroupHeartbeat", 1), ("StreamsGroupHeartbeat", 0), ("StreamsGroupDescribe", 0),
                     ("DescribeShareGroupOffsets", 0), ("AlterShareGroupOffsets", 0), ("DeleteShareGroupOffsets", 0),
                     ("InitProducerId", 6), ("Vote", 2), ("ListConfigResources", 1)]:
        assert expected in apis


@pytest.mark.parametrize("name,version", CASES)
def test_a_frame_with_every_field_set_decodes_to_its_values(name, version):
    spec = _newer(name)
    sample = Sample(spec, version)
    body = sample.message()
    if name.endswith("Request.json"):
        frame = request_frame(spec, version, body, corr=0x01020304, client="kwire-test")
        msg = decode_request(frame, records="hex")
        assert (msg.header["CorrelationId"], msg.header["ClientId"]) == (0x01020304, "kwire-test")
    else:
        frame = response_frame(spec, version, body, corr=0x01020304)
        msg = decode_response(frame, spec["apiKey"], version, records="hex")
        assert msg.header["CorrelationId"] == 0x01020304
    assert msg.body == body


def test_tagged_fields_of_the_new_versions_carry_values():
    """Fetch 18's HighWatermark (tag 1) and Produce 13's topic ids: set, not left at their defaults."""
    spec = _newer("FetchRequest.json")
    body = Sample(spec, 18).message()
    assert body["Topics"][0]["Partitions"][0]["HighWatermark"] != 9223372036854775807
    msg = decode_request(request_frame(spec, 18, body, 7, "c"), records="hex")
    assert msg.body["Topics"][0]["Partitions"][0]["HighWatermark"] == body["Topics"][0]["Partitions"][0]["HighWatermark"]
    produce = _newer("ProduceRequest.json")
    body = Sample(produce, 13).message()
    msg = decode_request(request_frame(produce, 13, body, 7, "c"), records="hex")
    assert [t["TopicId"] for t in msg.body["TopicData"]] == [t["TopicId"] for t in body["TopicData"]]
    assert "Name" not in msg.body["TopicData"][0]
