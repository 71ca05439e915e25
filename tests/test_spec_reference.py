"""kwire's bundled specs agree with Apache Kafka's own message definitions, field by field and
version by version: Kafka 4.3.0's for every version 4.3.0 defines, the October 2024 folder's for the
versions 4.x removed (the bundled set is the union of both). Skips when the folders are not beside
the checkout."""
import json
import re
import sys

import pytest

from conftest import REFERENCE_SPECS, REFERENCE_SPECS_43, ROOT
from kwire_cli.spec import build_message_spec
from kwire_cli.spec.jsonc import loads_jsonc

sys.path.insert(0, str(ROOT / "scripts"))
from spec_union import RENAMED, layout

pytestmark = pytest.mark.skipif(not (REFERENCE_SPECS.is_dir() and REFERENCE_SPECS_43.is_dir()),
                                reason="reference specs not present")
BUNDLED = ROOT / "specs"
# what the bundled specs may say beyond Kafka's own keys (scripts/spec_union.py)
KWIRE_KEYS = {"removedVersions", "removedIn", "unstableVersions", "formerNames"}


def _files(folder):
    return sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []


def _drop_about(node):
    if isinstance(node, dict):
        return {k: _drop_about(v) for k, v in node.items() if k != "about"}
    if isinstance(node, list):
        return [_drop_about(v) for v in node]
    return node


def _ours(name):
    path = BUNDLED / name
    assert path.is_file(), f"{name} is not bundled"
    return json.loads(path.read_text())


def test_every_api_key_0_to_92_is_bundled_with_request_and_response():
    keys = {}
    for p in BUNDLED.glob("*.json"):
        raw = json.loads(p.read_text())
        if raw["type"] in ("request", "response"):
            keys.setdefault(raw["apiKey"], set()).add(raw["type"])
    assert sorted(keys) == list(range(93))
    assert all(v == {"request", "response"} for v in keys.values())
    for name in ("RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"):
        assert (BUNDLED / f"{name}.json").is_file()


def test_bundled_specs_carry_no_comments_or_about_sentences():
    for p in BUNDLED.glob("*.json"):
        text = p.read_text()
        json.loads(text)  # plain JSON: no comments
        assert '"about"' not in text, p.name


@pytest.mark.parametrize("name", _files(REFERENCE_SPECS_43))
def test_bundled_matches_kafka_4_3_in_every_version_it_defines(name):
    ref_raw = _drop_about(loads_jsonc((REFERENCE_SPECS_43 / name).read_text(), source=name))
    ours_raw = _ours(name)
    ref, ours = build_message_spec(ref_raw, name), build_message_spec(ours_raw, name)
    assert (ours.name, ours.api_key, ours.type) == (ref.name, ref.api_key, ref.type)
    assert ours.latest_version_unstable == ref.latest_version_unstable
    if not ref.valid_versions.empty:
        assert ref.valid_versions.issubset(ours.valid_versions) and ours.valid_versions.hi == ref.valid_versions.hi
    if "removedVersions" not in ours_raw:
        # nothing removed: the file is Kafka 4.3.0's facts as written, key for key
        assert {k: v for k, v in ours_raw.items() if k not in KWIRE_KEYS} == ref_raw
    for v in range(ref.valid_versions.lo, ref.valid_versions.hi + 1):
        assert ours.flexible(v) == ref.flexible(v), f"v{v}"
        assert layout(ours.fields, v) == layout(ref.fields, v), f"v{v}"


@pytest.mark.parametrize("name", _files(REFERENCE_SPECS))
def test_bundled_keeps_the_versions_4_x_removed_as_kafka_defined_them(name):
    ref_raw = _drop_about(loads_jsonc((REFERENCE_SPECS / name).read_text(), source=name))
    stem = name[:-5]
    newer = RENAMED.get(stem, stem) + ".json"
    ours_raw = _ours(newer)
    ref, ours = build_message_spec(ref_raw, name), build_message_spec(ours_raw, newer)
    assert (ours.api_key, ours.type) == (ref.api_key, ref.type)
    assert ref.valid_versions.issubset(ours.valid_versions)  # no version any release shipped is lost
    removed = ours.removed_versions
    for v in range(ref.valid_versions.lo, ref.valid_versions.hi + 1):
        if v not in removed:
            continue  # 4.3.0's layout (the test above)
        assert ours.flexible(v) == ref.flexible(v), f"v{v}"
        assert layout(ours.fields, v, hints=False) == layout(ref.fields, v, hints=False), f"v{v}"
    if stem in RENAMED:
        assert ours_raw["formerNames"] == [ref.name]


def test_removed_versions_name_the_release_that_removed_them():
    text = {p.name: p.read_text() for p in REFERENCE_SPECS_43.glob("*.json")}
    for p in BUNDLED.glob("*.json"):
        raw = json.loads(p.read_text())
        assert set(raw) - KWIRE_KEYS - {"apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions",
                                        "deprecatedVersions", "latestVersionUnstable", "fields",
                                        "commonStructs"} == set(), p.name
        if "removedVersions" not in raw:
            continue
        said = re.search(r"removed in Apache Kafka (\d+\.\d+)", text[p.name])
        assert said and raw["removedIn"] == said.group(1), p.name
    produce = json.loads((BUNDLED / "ProduceRequest.json").read_text())
    assert (produce["validVersions"], produce["removedVersions"], produce["removedIn"]) == ("0-13", "0-2", "4.0")
    share = json.loads((BUNDLED / "ShareFetchRequest.json").read_text())
    assert (share["validVersions"], share["removedVersions"], share["removedIn"], share["unstableVersions"]) == \
        ("0-2", "0", "4.1", "0")
