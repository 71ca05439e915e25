"""kwire's bundled specs agree with Apache Kafka's own message definitions, field by field and
version by version. Skips when ../shared/kafka-message-specs is not beside the checkout."""
import json

import pytest

from conftest import REFERENCE_SPECS, ROOT
from kwire_cli.spec import build_message_spec
from kwire_cli.spec.jsonc import loads_jsonc

pytestmark = pytest.mark.skipif(not REFERENCE_SPECS.is_dir(), reason="reference specs not present")
BUNDLED = ROOT / "specs"


def _reference_files():
    if not REFERENCE_SPECS.is_dir():
        return []
    return sorted(p.name for p in REFERENCE_SPECS.glob("*.json"))


def _drop_about(node):
    if isinstance(node, dict):
        return {k: _drop_about(v) for k, v in node.items() if k != "about"}
    if isinstance(node, list):
        return [_drop_about(v) for v in node]
    return node


def _at_version(fields, v, flexible):
    out = []
    for f in fields:
        if v not in f.versions:
            continue
        out.append((f.name, str(f.type), f.nullable_in(v), f.tag if f.tagged_in(v) else None,
                    f.flexible_versions is not None and v in f.flexible_versions,
                    repr(f.default), f.map_key, f.entity_type,
                    tuple(_at_version(f.struct.fields, v, flexible)) if f.struct else ()))
    return out


def test_every_api_key_0_to_87_is_bundled_with_request_and_response():
    keys = {}
    for p in BUNDLED.glob("*.json"):
        raw = json.loads(p.read_text())
        if raw["type"] in ("request", "response"):
            keys.setdefault(raw["apiKey"], set()).add(raw["type"])
    assert sorted(keys) == list(range(88))
    assert all(v == {"request", "response"} for v in keys.values())
    for name in ("RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"):
        assert (BUNDLED / f"{name}.json").is_file()


def test_bundled_specs_carry_no_comments_or_about_sentences():
    for p in BUNDLED.glob("*.json"):
        text = p.read_text()
        json.loads(text)  # plain JSON: no comments
        assert '"about"' not in text, p.name


@pytest.mark.parametrize("name", _reference_files())
def test_bundled_matches_reference(name):
    ref_raw = _drop_about(loads_jsonc((REFERENCE_SPECS / name).read_text(), source=name))
    ours_path = BUNDLED / name
    assert ours_path.is_file(), f"{name} is not bundled"
    ours_raw = json.loads(ours_path.read_text())
    # field by field, as written (facts only)
    assert ours_raw == ref_raw
    # and version by version, as the model reads them
    ref, ours = build_message_spec(ref_raw, name), build_message_spec(ours_raw, name)
    assert (ours.api_key, ours.type, ours.valid_versions, ours.flexible_versions) == \
           (ref.api_key, ref.type, ref.valid_versions, ref.flexible_versions)
    for v in range(ref.valid_versions.lo, ref.valid_versions.hi + 1):
        assert _at_version(ours.fields, v, ref.flexible(v)) == _at_version(ref.fields, v, ref.flexible(v)), f"v{v}"
