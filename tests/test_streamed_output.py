"""JSON and YAML written as they are made (render/json.py's write_json, write_yaml; issue 15,
item 1): the same text as dumps_json / dumps_yaml, except that YAML writes the items of a list
of more than 10,000 values (containers and list items) as flow-style JSON lines, which read back
as the same value."""
from __future__ import annotations

import json
import random

import pytest
import yaml

import kwire_cli.render.json as J
from cli_run import kwire
from kwire_cli.render.json import dumps_json, dumps_yaml, write_json, write_yaml
from memory_bombs import _record, produce_request, v2_batch

CHARS = [chr(i) for i in range(0x80)] + ["\u0085", "\u009b", "\u202e", "\u2028", "\u2066", "é", "😀", "\ufeff",
                                         "\u200b", ": ", "- ", "#", "'", '"', "\n"]


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(CHARS) for _ in range(rng.choice([0, 1, 3, 8, 130])))


def _tree(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 4 or r < 0.4:
        return rng.choice([None, True, False, rng.randint(-2 ** 63, 2 ** 63 - 1), 2 ** 64, -2 ** 70, 7,
                           _text(rng), "null", "1", "yes", "", "a\n", "\n"])
    if r < 0.7:
        return {rng.choice(["Key", "Value", "a b", "null", "1", _text(rng)[:10]]): _tree(rng, depth + 1)
                for _ in range(rng.randint(0, 5))}
    return [_tree(rng, depth + 1) for _ in range(rng.randint(0, 6))]


def _written(write, value, **kw) -> str:
    out: list[bytes] = []
    write(value, out.append, **kw)
    return b"".join(out).decode("utf-8", "surrogatepass")


@pytest.mark.parametrize("seed", range(3))
def test_write_json_is_dumps_json(seed, monkeypatch):
    rng = random.Random(seed)
    for _ in range(400):
        v = _tree(rng)
        for small in (256, 1):                      # a piece per subtree, or per container
            monkeypatch.setattr(J, "_SMALL", small)
            assert _written(write_json, v) == dumps_json(v) + "\n"
            assert _written(write_json, v, careful=True) == dumps_json(v) + "\n"


def test_write_json_writes_floats_as_dumps_json_when_careful():
    v = {"a": [float("nan"), float("inf"), 1e16, 1e-7, 0.1]}
    assert _written(write_json, v, careful=True) == dumps_json(v) + "\n"


@pytest.mark.parametrize("seed", range(3))
def test_write_yaml_is_dumps_yaml_or_reads_back_the_same(seed):
    rng = random.Random(seed)
    for _ in range(150):
        v = _tree(rng)
        if not isinstance(v, (dict, list)):
            continue
        ref = dumps_yaml(v)
        assert _written(write_yaml, v) == ref
        for big in (1, 3, 10):                     # flow lines for the items of larger lists
            assert yaml.safe_load(_written(write_yaml, v, big=big)) == yaml.safe_load(ref)


def test_a_large_records_list_in_yaml_is_flow_lines_and_encodes_back_byte_for_byte():
    # a header key holding U+202E (shown escaped), a value holding é (shown as is)
    rec = _record(b"\x00\x00\x00\x02k\x06v\xc3\xa9\x02\x08h\xe2\x80\xae\x02x")
    frame = produce_request(v2_batch(0, rec * 2_000, 2_000))
    r = kwire("decode", frame.hex(), "--format", "yaml")
    assert r.code == 0, r
    assert r.out.count('\n          - {"Length": ') == 2_000, r.out[:2000]     # one line per record
    assert "\u202e" not in r.out and r.out.count('{"Key": "h\\u202e", "Value": {"text": "x"}}') == 2_000
    assert r.out.count('"Value": {"text": "v\u00e9"}') == 2_000
    back = kwire("encode", "-", input=r.out)
    assert back.code == 0 and back.out.strip() == frame.hex(), back
    # the JSON output of the same frame is the same value
    j = kwire("decode", frame.hex(), "--format", "json")
    assert json.loads(j.out) == yaml.safe_load(r.out)
