"""The spec loader: comments, version syntax, the generator's rules, errors naming file and field."""
import json
import subprocess
import sys

import pytest

from kwire_cli.errors import SpecError
from kwire_cli.spec import Versions, build_message_spec, load_folder
from kwire_cli.spec.jsonc import loads_jsonc, strip_comments
from kwire_cli.spec.versions import OPEN


def test_comments_are_stripped_but_not_inside_strings():
    text = '{\n // a comment\n "a": "http://x//y", /* block */ "b": 1 // tail\n}'
    assert loads_jsonc(text) == {"a": "http://x//y", "b": 1}
    assert strip_comments('"a\\"//b" // c') == '"a\\"//b" '


def test_json_errors_name_the_source_and_line():
    with pytest.raises(SpecError, match=r"^x.json: line 3 column 1"):
        loads_jsonc('{\n "a": 1,\n}', source="x.json")


@pytest.mark.parametrize("text,lo,hi", [("3", 3, 3), ("1-4", 1, 4), ("2+", 2, OPEN), ("none", 1, 0)])
def test_version_syntax(text, lo, hi):
    v = Versions.parse(text)
    assert (v.lo, v.hi) == (lo, hi)
    assert str(v) == text


def test_bad_versions():
    with pytest.raises(SpecError, match="not N, N-M, N\\+ or none"):
        Versions.parse("x-")
    with pytest.raises(SpecError, match="runs backwards"):
        Versions.parse("5-2")


def _spec(fields, flexible="0+", **top):
    raw = {"apiKey": 99, "type": "request", "name": "TestRequest", "validVersions": "0-3",
           "flexibleVersions": flexible, "fields": fields}
    raw.update(top)
    return build_message_spec(raw, source="Test.json")


@pytest.mark.parametrize("field,message", [
    ({"name": "A", "type": "int32", "versions": "0+", "tag": 0},
     "Test.json: TestRequest.A: has a tag but no taggedVersions"),
    ({"name": "A", "type": "int32", "versions": "0+", "tag": 0, "taggedVersions": "1-2"},
     "Test.json: TestRequest.A: taggedVersions 1-2 must be open-ended (N+)"),
    ({"name": "A", "type": "int32", "versions": "2+", "tag": 0, "taggedVersions": "1+"},
     "Test.json: TestRequest.A: taggedVersions 1+ are not within versions 2+"),
    ({"name": "A", "type": "int32", "versions": "0+", "nullableVersions": "0+"},
     "Test.json: TestRequest.A: type int32 cannot be nullable (nullableVersions 0+)"),
    ({"name": "A", "type": "int32", "versions": "0+", "taggedVersions": "0+"},
     "Test.json: TestRequest.A: has taggedVersions but no tag"),
    ({"name": "A", "type": "int32", "versions": "0+", "flexibleVersions": "none"},
     "Test.json: TestRequest.A: flexibleVersions can only be set on string or bytes fields"),
    ({"name": "A", "type": "blob", "versions": "0+"}, "Test.json: TestRequest.A: unknown type 'blob'"),
    ({"name": "A", "type": "int8", "versions": "0+", "default": "300"},
     "Test.json: TestRequest.A: default '300' is out of range for int8"),
    ({"name": "A", "type": "[]Thing", "versions": "0+"},
     "Test.json: TestRequest.A: struct type Thing has no fields and is not a common struct"),
    ({"name": "A", "type": "int32"}, "Test.json: TestRequest.A: missing versions"),
])
def test_generator_rules(field, message):
    with pytest.raises(SpecError) as e:
        _spec([field])
    assert str(e.value) == message


def test_tags_unique_per_struct_and_tagged_fields_need_flexible_versions():
    with pytest.raises(SpecError, match=r"TestRequest.B: tag 1 is already used by A"):
        _spec([{"name": "A", "type": "int32", "versions": "0+", "tag": 1, "taggedVersions": "0+"},
               {"name": "B", "type": "int32", "versions": "0+", "tag": 1, "taggedVersions": "0+"}])
    with pytest.raises(SpecError, match="not within the flexible versions 2\\+"):
        _spec([{"name": "A", "type": "int32", "versions": "0+", "tag": 1, "taggedVersions": "0+"}], flexible="2+")


def test_common_structs_and_field_level_flexible_versions():
    s = _spec([{"name": "X", "type": "[]Shared", "versions": "0+"},
               {"name": "C", "type": "string", "versions": "0+", "flexibleVersions": "none"}],
              commonStructs=[{"name": "Shared", "versions": "0+", "fields": [
                  {"name": "Y", "type": "int8", "versions": "0+"}]}])
    assert s.fields[0].struct.name == "Shared" and s.fields[0].struct.fields[0].name == "Y"
    assert 2 not in s.fields[1].flexible_versions


def test_specs_folder_override_via_flag_and_env(tmp_path):
    folder = tmp_path / "specs"
    folder.mkdir()
    for kind in ("Request", "Response"):
        (folder / f"Ping{kind}.json").write_text(json.dumps({
            "apiKey": 0, "type": kind.lower(), "name": f"Ping{kind}", "validVersions": "0",
            "flexibleVersions": "none", "fields": [{"name": "Nonce", "type": "int32", "versions": "0+"}]}))
    for name in ("RequestHeader", "ResponseHeader"):
        (folder / f"{name}.json").write_text((__import__("pathlib").Path(__file__).parents[1] / "specs" / f"{name}.json").read_text())
    reg = load_folder(folder)
    assert reg.api(0).name == "Ping"
    code = ("from kwire_cli.codec import encode_request, decode_request;"
            "print(decode_request(encode_request(0, 0, {}, {'Nonce': 7})).body)")
    env = dict(__import__("os").environ, KWIRE_SPECS=str(folder))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "{'Nonce': 7}", out.stderr


def test_broken_spec_file_error_names_the_file(tmp_path):
    (tmp_path / "BadRequest.json").write_text('{"apiKey": 1, "type": "request", "name": "BadRequest", '
                                             '"validVersions": "0", "fields": [{"name": "Q", "type": "int32"}]}')
    with pytest.raises(SpecError, match=r"BadRequest.json: BadRequest.Q: missing versions"):
        load_folder(tmp_path)
