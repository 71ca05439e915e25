"""kwire's bundled record specs (record-specs/: the records of internal topics) agree with Apache
Kafka's own definitions, field by field and version by version, and carry only facts. The
comparison skips when ../shared/kafka-record-specs is not beside the checkout."""
import json

import pytest

from conftest import REFERENCE_RECORD_SPECS, ROOT
from kwire_cli.spec import build_message_spec
from kwire_cli.spec.jsonc import loads_jsonc
from kwire_cli.spec.records import (
    CLUSTER_METADATA,
    CONSUMER_OFFSETS,
    SHARE_GROUP_STATE,
    TRANSACTION_STATE,
    load_record_folder,
    record_specs,
)
from test_spec_reference import _drop_about, layout

BUNDLED = ROOT / "record-specs"
FOLDERS = ("group-coordinator", "transaction-coordinator", "share-coordinator", "metadata")
needs_reference = pytest.mark.skipif(not REFERENCE_RECORD_SPECS.is_dir(), reason="reference record specs not present")


def _reference_files():
    if not REFERENCE_RECORD_SPECS.is_dir():
        return []
    return sorted(f"{folder}/{p.name}" for folder in FOLDERS for p in (REFERENCE_RECORD_SPECS / folder).glob("*.json"))


def test_bundled_record_specs_carry_no_comments_or_about_sentences():
    files = list(BUNDLED.rglob("*.json"))
    assert len(files) == 61
    for p in files:
        text = p.read_text()
        json.loads(text)  # plain JSON: no comments
        assert '"about"' not in text, p.name


def test_every_internal_topic_has_its_records():
    specs = record_specs()
    assert sorted(specs.coordinator[CONSUMER_OFFSETS]) == list(range(16))
    assert specs.coordinator[CONSUMER_OFFSETS][0].key.name == specs.coordinator[CONSUMER_OFFSETS][1].key.name == "OffsetCommitKey"
    assert specs.coordinator[CONSUMER_OFFSETS][2].value.name == "GroupMetadataValue"
    assert {k: r.key.name for k, r in specs.coordinator[TRANSACTION_STATE].items()} == {0: "TransactionLogKey"}
    assert {k: r.key.name for k, r in specs.coordinator[SHARE_GROUP_STATE].items()} == {0: "ShareSnapshotKey",
                                                                                      1: "ShareUpdateKey"}
    # the metadata records of __cluster_metadata, by apiKey (6, 13 and 16 are retired)
    assert sorted(specs.metadata) == [k for k in range(28) if k not in (6, 13, 16)]
    assert specs.metadata[11].name == "UserScramCredentialRecord"
    assert CLUSTER_METADATA not in specs.coordinator


@needs_reference
def test_reference_folder_loads_the_same_records():
    ours, ref = record_specs(), load_record_folder(REFERENCE_RECORD_SPECS)
    assert {t: {k: (r.key.name, r.value.name, r.key_version) for k, r in tab.items()} for t, tab in ours.coordinator.items()} == \
           {t: {k: (r.key.name, r.value.name, r.key_version) for k, r in tab.items()} for t, tab in ref.coordinator.items()}
    assert {k: s.name for k, s in ours.metadata.items()} == {k: s.name for k, s in ref.metadata.items()}


@needs_reference
@pytest.mark.parametrize("name", _reference_files())
def test_bundled_record_spec_matches_reference(name):
    ref_raw = _drop_about(loads_jsonc((REFERENCE_RECORD_SPECS / name).read_text(), source=name))
    ours_path = BUNDLED / name
    assert ours_path.is_file(), f"{name} is not bundled"
    ours_raw = json.loads(ours_path.read_text())
    assert ours_raw == ref_raw  # field by field, as written (facts only)
    ref, ours = build_message_spec(ref_raw, name), build_message_spec(ours_raw, name)
    assert (ours.api_key, ours.type, ours.valid_versions, ours.flexible_versions) == \
           (ref.api_key, ref.type, ref.valid_versions, ref.flexible_versions)
    for v in range(ref.valid_versions.lo, ref.valid_versions.hi + 1):
        assert layout(ours.fields, v) == layout(ref.fields, v), f"v{v}"
