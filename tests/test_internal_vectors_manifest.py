"""fixtures/vectors/internal/manifest.json is consistent with its files and with the byte layouts of
internal-topic records (../shared/kafka-record-specs/README.md): coordinator keys and values start
with an int16 type / version, metadata values with unsigned-varint frame version 1, apiKey and
version, KRaft control record keys are int16 version 0 and int16 type. This checks the
transcription, not a decoder."""
import json
import re
import struct
from pathlib import Path

import pytest

from kwire_cli.spec.jsonc import loads_jsonc

ROOT = Path(__file__).resolve().parents[1]
DIR = ROOT / "fixtures" / "vectors" / "internal"
MANIFEST = json.loads((DIR / "manifest.json").read_text())
VECTORS = MANIFEST["vectors"]
IDS = [v["id"] for v in VECTORS]

COORDINATOR_TOPICS = {"__consumer_offsets", "__transaction_state", "__share_group_state"}
TOPICS = COORDINATOR_TOPICS | {"__cluster_metadata"}
KEY_FORMS = {"prefixed", "body", "control", None}
VALUE_FORMS = {"prefixed", "body", "framed", "control", "tombstone", None}
# KRaft control record types (ControlRecordType) and the message spec of each value
CONTROL = {2: "LeaderChangeMessage", 3: "SnapshotHeaderRecord", 4: "SnapshotFooterRecord",
           5: "KRaftVersionRecord", 6: "VotersRecord"}
HEX = re.compile(r"(?:[0-9a-f]{2})*")
SHA = re.compile(r"[0-9a-f]{40}")
# the coordinator each topic's records are defined by, in the reference record specs
REFERENCE_FOLDER = {"__consumer_offsets": "group-coordinator", "__transaction_state": "transaction-coordinator",
                    "__share_group_state": "share-coordinator", "__cluster_metadata": "metadata"}


def _reference_records() -> Path | None:
    for parent in ROOT.parents:
        candidate = parent / "shared" / "kafka-record-specs"
        if candidate.is_dir():
            return candidate
    return None


REFERENCE = _reference_records()


def _uvarint(b: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        if pos >= len(b):
            raise ValueError("varint runs past the end")
        byte = b[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
    raise ValueError("varint longer than 5 bytes")


def _bytes(hex_text):
    return None if hex_text is None else bytes.fromhex(hex_text)


def _versions(text: str) -> set[int]:
    lo, _, hi = text.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


@pytest.fixture(scope="module")
def reference():
    """name -> (folder, spec) for every reference record spec, plus the KRaft control records."""
    if REFERENCE is None:
        pytest.skip("../shared/kafka-record-specs not present")
    specs = {}
    for path in sorted(REFERENCE.glob("*/*.json")):
        raw = loads_jsonc(path.read_text(), str(path))
        specs[raw["name"]] = (path.parent.name, raw)
    messages = REFERENCE.parent / "kafka-message-specs"
    for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment", *CONTROL.values()):
        raw = loads_jsonc((messages / f"{name}.json").read_text(), name)
        specs[name] = ("message", raw)
    return specs


def test_manifest_lists_vectors_and_outputs():
    assert len(VECTORS) >= 50
    assert len(IDS) == len(set(IDS)), "vector ids are unique"
    assert {v["topic"] for v in VECTORS} == TOPICS, "every internal topic has vectors"
    assert MANIFEST["conventions"] and MANIFEST["outputs"]


@pytest.mark.parametrize("v", VECTORS, ids=IDS)
def test_vector_fields(v):
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", v["id"])
    assert v["topic"] in TOPICS
    assert v["parts"] and set(v["parts"]) <= {"key", "value"}
    assert v["key_form"] in KEY_FORMS and v["value_form"] in VALUE_FORMS
    assert isinstance(v["valid"], bool)
    if not v["valid"]:
        assert v["violation"].strip(), "an invalid vector says what is wrong"
    assert isinstance(v["asserts"], dict)
    if not v["valid"] and v["record"] is None:
        assert "error" in v["asserts"], "a vector that names no record asserts an error"
    assert v["source_asserts"].strip()
    src = v["source"]
    for field in ("repo", "path", "test", "url"):
        assert src[field], field
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", src["repo"])
    assert src["url"].startswith("https://github.com/" + src["repo"] + "/")
    assert src["commit"] is None or SHA.fullmatch(src["commit"])


@pytest.mark.parametrize("v", VECTORS, ids=IDS)
def test_files_hold_the_manifest_bytes(v):
    for part in ("key", "value"):
        hex_text, rel = v[f"{part}_hex"], v[f"{part}_file"]
        if part not in v["parts"]:
            assert hex_text is None and rel is None, f"{part} is not given by the source"
            continue
        if hex_text is None:
            assert rel is None, f"a null {part} has no file"
            continue
        assert HEX.fullmatch(hex_text), f"{part}_hex is lowercase hex with whole bytes"
        path = DIR / rel
        assert path.is_file(), rel
        assert path.parent.parent == DIR, "files sit one folder deep, by source"
        assert path.read_text() == hex_text + "\n", f"{rel} holds exactly {part}_hex"
    listed = {v[f] for f in ("key_file", "value_file") if v[f]}
    on_disk = {str(p.relative_to(DIR)) for p in DIR.glob(f"*/{v['id']}.*.hex")}
    assert listed == on_disk


def test_no_stray_hex_files():
    listed = {v[f] for v in VECTORS for f in ("key_file", "value_file") if v[f]}
    assert {str(p.relative_to(DIR)) for p in DIR.glob("*/*.hex")} == listed


def _null_or_absent_key(v):
    return "key" not in v["parts"] or v["key_hex"] is None


@pytest.mark.parametrize("v", [v for v in VECTORS if v["topic"] in COORDINATOR_TOPICS],
                         ids=[v["id"] for v in VECTORS if v["topic"] in COORDINATOR_TOPICS])
def test_coordinator_layout(v):
    """int16 key type first in a prefixed key; int16 value version first in a prefixed value; a null
    value is a tombstone."""
    key, value, rec = _bytes(v["key_hex"]), _bytes(v["value_hex"]), v["record"]
    if v["key_form"] is None:
        assert _null_or_absent_key(v)
    if v["value_form"] == "tombstone":
        assert "value" in v["parts"] and value is None
    elif "value" in v["parts"]:
        assert value is not None and v["value_form"] in ("prefixed", "body")
    if rec is not None:
        assert {"key_type", "key_schema", "key_version", "value_schema", "value_version"} <= set(rec)
        assert rec["key_version"] == rec["key_type"], "a coordinator key's version is its record type"
        assert rec["key_schema"].endswith("Key")
        assert rec["value_schema"] is None or rec["value_schema"] == rec["key_schema"][:-3] + "Value"
    if v["key_form"] == "prefixed" and key is not None and len(key) >= 2 and rec is not None:
        assert struct.unpack(">h", key[:2])[0] == rec["key_type"]
    if v["value_form"] == "prefixed" and value is not None and len(value) >= 2 and rec is not None:
        assert struct.unpack(">h", value[:2])[0] == rec["value_version"]
    if v["valid"]:
        assert rec is not None, "a valid vector names its record"
        if v["key_form"] is not None:
            assert key is not None
        if v["key_form"] == "prefixed":
            assert len(key) > 2, "a valid key has a body after its type"
        if v["value_form"] == "prefixed":
            assert len(value) > 2, "a valid value has a body after its version"


@pytest.mark.parametrize("v", [v for v in VECTORS if v["topic"] == "__cluster_metadata"],
                         ids=[v["id"] for v in VECTORS if v["topic"] == "__cluster_metadata"])
def test_metadata_layout(v):
    """A metadata record has no key and a value of unsigned varints frame version 1, apiKey, version,
    then the record. A control record has a 4-byte key (int16 version 0, int16 type) and a value that
    is the control type's struct."""
    if v["key_form"] == "control":
        key, rec = bytes.fromhex(v["key_hex"]), v["record"]
        assert v["value_form"] == "control" and v["value_hex"], "a control record has a value"
        version, ctype = struct.unpack(">hh", key)
        assert version == 0 and CONTROL[ctype] == rec["schema"] and ctype == rec["control_type"]
        assert rec["version"] == 0
        return
    assert _null_or_absent_key(v) and v["key_form"] is None
    assert v["value_form"] == "framed" and v["value_hex"] is not None
    value = bytes.fromhex(v["value_hex"])
    if not v["valid"]:
        return
    rec = v["record"]
    frame, pos = _uvarint(value, 0)
    api_key, pos = _uvarint(value, pos)
    version, pos = _uvarint(value, pos)
    assert frame == 1 == rec["frame_version"] and value[0] == 0x01
    assert (api_key, version) == (rec["api_key"], rec["version"])
    assert pos < len(value), "a record follows the frame header (at least its tagged-fields count)"


def test_invalid_metadata_frames_fail_in_the_frame_header_or_the_record():
    """Each invalid __cluster_metadata vector is wrong where it says: an unknown frame version, an
    over-long varint, a version past int16, an unknown apiKey, or a broken record body."""
    seen = {}
    for v in VECTORS:
        if v["topic"] != "__cluster_metadata" or v["valid"]:
            continue
        value = bytes.fromhex(v["value_hex"])
        try:
            frame, pos = _uvarint(value, 0)
            if frame != 1:
                seen[v["id"]] = "frame"
                continue
            api_key, pos = _uvarint(value, pos)
            version, pos = _uvarint(value, pos)
        except ValueError:
            seen[v["id"]] = "varint"
            continue
        # metadata apiKeys are small numbers (0-27 in the reference specs); 16383 names none
        seen[v["id"]] = "version" if version > 0x7FFF else ("apiKey" if api_key > 1000 else "record")
    assert seen == {
        "kafka-metadata-unknown-frame-version": "frame",
        "kafka-metadata-bad-frame-version-varint": "varint",
        "kafka-metadata-bad-api-key-varint": "varint",
        "kafka-metadata-bad-version-varint": "varint",
        "kafka-metadata-version-too-large": "version",
        "kafka-metadata-unknown-api-key": "apiKey",
        "kafka-metadata-malformed-register-broker": "record",
        "kafka-dump-log-cluster-metadata-bogus-record": "frame",
    }


@pytest.mark.parametrize("v", [v for v in VECTORS if v["record"]], ids=[v["id"] for v in VECTORS if v["record"]])
def test_records_exist_in_the_reference_specs(v, reference):
    rec, folder = v["record"], REFERENCE_FOLDER[v["topic"]]
    if v["topic"] == "__cluster_metadata":
        where, raw = reference[rec["schema"]]
        if "control_type" in rec:
            assert where == "message" and rec["version"] in _versions(raw["validVersions"])
            return
        assert where == folder and raw["apiKey"] == rec["api_key"]
        assert rec["version"] in _versions(raw["validVersions"])
        return
    where, raw = reference[rec["key_schema"]]
    assert where == folder
    assert _versions(raw["validVersions"]) >= {rec["key_type"]}, "the key type is the key's valid version"
    if rec["value_schema"]:
        where, raw = reference[rec["value_schema"]]
        assert where == folder
        if v["valid"]:
            assert rec["value_version"] in _versions(raw["validVersions"])


@pytest.mark.parametrize("v", [v for v in VECTORS if v["asserts"].get("embedded")],
                         ids=[v["id"] for v in VECTORS if v["asserts"].get("embedded")])
def test_embedded_paths_point_at_member_bytes(v, reference):
    members = v["asserts"].get("value", {}).get("members")
    for emb in v["asserts"]["embedded"]:
        m = re.fullmatch(r"value\.members\[(\d+)\]\.(subscription|assignment)", emb["path"])
        assert m, emb["path"]
        expect = "ConsumerProtocolSubscription" if m.group(2) == "subscription" else "ConsumerProtocolAssignment"
        assert emb["schema"] == expect
        assert emb["version"] in _versions(reference[expect][1]["validVersions"])
        if members is not None:
            assert int(m.group(1)) < len(members)


def test_outputs_files_exist_and_sizes_are_given():
    for out in MANIFEST["outputs"]:
        path = DIR / out["file"]
        assert path.is_file(), out["file"]
        assert out["source"]["url"].startswith("https://github.com/apache/kafka/")
        text = path.read_text()
        for rec in out.get("records", []):
            assert isinstance(rec["keySize"], int) and isinstance(rec["valueSize"], int)
            assert f"keySize: {rec['keySize']} valueSize: {rec['valueSize']}" in text
            if rec.get("kafka_prints_value"):
                assert rec["kafka_prints_value"] in text
            if rec.get("kafka_prints_key"):
                assert rec["kafka_prints_key"] in text
    parse = json.loads((DIR / "kafka-dump-log" / "DumpLogSegmentsTest-parse-results.json").read_text())
    assert {r["topic"] for r in parse["results"]} == COORDINATOR_TOPICS


def test_readme_lists_every_file():
    readme = (DIR / "README.md").read_text()
    for v in VECTORS:
        for f in ("key_file", "value_file"):
            if v[f]:
                assert f"`{v[f]}`" in readme, v[f]
    for out in MANIFEST["outputs"]:
        assert f"`{out['file']}`" in readme
