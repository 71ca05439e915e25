"""The CLI on hostile input: exit 1 and one line on stderr (`kwire: error: ...`), never a
traceback and never kwire's own "internal error" line (which means a bug); `--partial` shows what
decoded before the failure."""
from __future__ import annotations

import json
import random
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_run import kwire

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzzlib

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fuzz(n):
    return settings(max_examples=n, derandomize=True, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def one_line_error(r, code=1):
    assert r.code == code, r
    lines = r.err.strip("\n").splitlines()
    assert len(lines) == 1, r.err
    assert lines[0].startswith("kwire: error: "), r.err
    assert "internal error" not in r.err and "Traceback" not in r.err + r.out


def ok_or_one_line_error(r):
    if r.code == 0:
        assert "internal error" not in r.err and "Traceback" not in r.err + r.out
        return True
    one_line_error(r)
    return False


@fuzz(120)
@given(seed=st.sampled_from(fuzzlib.seeds_for("request")), rnd=st.randoms(use_true_random=False))
def test_decode_mutated_requests(seed, rnd):
    data = fuzzlib.mutate(rnd, seed[0])
    r = kwire("decode", data.hex() or "00", "--format", "json")
    if ok_or_one_line_error(r):
        assert r.json()["kind"] == "request"


@fuzz(80)
@given(seed=st.sampled_from(fuzzlib.seeds_for("response")), rnd=st.randoms(use_true_random=False))
def test_decode_mutated_responses_with_partial(seed, rnd):
    data, kw = seed
    data = fuzzlib.mutate(rnd, data)
    r = kwire("decode", data.hex() or "00", "--api", str(kw["key"]), "--version", str(kw["version"]),
              "--partial", "--format", "json")
    if not ok_or_one_line_error(r) and r.out:
        shown = r.json()
        assert shown["partial"] is True
        assert shown["error"]["message"] in r.err   # the same error, in the output and on stderr


@fuzz(60)
@given(data=st.binary(min_size=1, max_size=200))
def test_decode_random_raw_bytes_from_stdin(data):
    ok_or_one_line_error(kwire("decode", "-", "--binary", input=data))
    ok_or_one_line_error(kwire("decode", "-", "--binary", "--api", "Fetch", "--version", "12",
                               "--partial", input=data))


@pytest.mark.parametrize("text", [
    "zz", "0", "00 0", "0x", "\\x", "00000000: 0000 0000  ....\n00000004: zz", "#only a comment",
    "00000010: 00 01\n00000000: 02 03", "*", "\x00\x01\x02", "\ufeff00", "ff" * 3 + "g",
])
def test_decode_hostile_hex_text(text, tmp_path):
    f = tmp_path / "in.hex"
    f.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    ok_or_one_line_error(kwire("decode", "@" + str(f)))


def test_partial_shows_the_fields_before_a_lying_array_count():
    # Metadata v1 response with Topics claiming 2^31-1 elements: brokers and controller decoded
    body = (struct.pack(">i", 1) + struct.pack(">i", 1) + b"\x00\x01h" + struct.pack(">i", 9092) + b"\xff\xff"
            + struct.pack(">i", 1) + struct.pack(">i", 0x7FFFFFFF))
    frame = struct.pack(">i", 4 + len(body)) + struct.pack(">i", 7) + body
    r = kwire("decode", frame.hex(), "--api", "Metadata", "--version", "1", "--partial", "--format", "json")
    one_line_error(r)
    shown = r.json()
    assert shown["header"] == {"CorrelationId": 7}
    assert shown["body"]["Brokers"] == [{"NodeId": 1, "Host": "h", "Port": 9092, "Rack": None}]
    assert shown["body"]["ControllerId"] == 1
    assert shown["partial"] is True and shown["error"]["path"] == "Topics"
    assert "Topics: array of 2147483647 elements needs at least" in shown["error"]["message"]
    assert r.err.strip() == "kwire: error: " + shown["error"]["message"]
    # the tree form shows the same, then the one-line error
    t = kwire("decode", frame.hex(), "--api", "Metadata", "--version", "1", "--partial")
    one_line_error(t)
    assert "ControllerId" in t.out and "9092" in t.out


def test_decode_deeply_nested_yaml_for_encode_is_one_line(tmp_path):
    """Found by a hostile-input probe of `kwire encode`: YAML/JSON nested 1,000 deep raised RecursionError inside the
    YAML parser and came out as an internal error."""
    for name, text in (("deep.yaml", "api: Metadata\nversion: 1\nbody:\n  Topics: " + "[" * 1_000 + "]" * 1_000),
                       ("deep.json", '{"api": "Metadata", "version": 1, "body": {"Topics": '
                                     + "[" * 1_000 + "]" * 1_000 + "}}")):
        f = tmp_path / name
        f.write_text(text)
        r = kwire("encode", str(f))
        one_line_error(r)
        assert "nested too deep" in r.err


def test_negotiate_deeply_nested_yaml_is_one_line(tmp_path):
    """Found with the encode one: the same RecursionError in the broker-answer and
    --require YAML readers."""
    f = tmp_path / "deep.yaml"
    f.write_text("[" * 1_000 + "]" * 1_000)
    for args in (("negotiate", str(f)),
                 ("negotiate", str(FIXTURES / "negotiate" / "tansu-apiversions-v3.hex"), "--require", str(f))):
        r = kwire(*args)
        one_line_error(r)
        assert "nested too deep" in r.err


def test_negotiate_odd_number_of_hex_digits_is_one_line(tmp_path):
    """Found by fuzzing `kwire negotiate`: hex with an odd digit count raised ValueError from
    bytes.fromhex (an internal error)."""
    f = tmp_path / "odd.hex"
    f.write_text("0000001000" + "0\n")
    r = kwire("negotiate", str(f))
    one_line_error(r)
    assert "odd number of hex digits (11)" in r.err
    r = kwire("negotiate", "-", input=b"# a comment\n00 00 00 10 0\n")
    one_line_error(r)


@fuzz(60)
@given(seed=st.sampled_from(fuzzlib.seeds_for("negotiate")), rnd=st.randoms(use_true_random=False))
def test_negotiate_mutated_broker_answers(seed, rnd):
    data = fuzzlib.mutate(rnd, seed[0])
    if not data.strip():
        data = b"x"
    r = kwire("negotiate", "-", "--format", "json", input=data)
    if ok_or_one_line_error(r):
        json.loads(r.out)


@fuzz(40)
@given(seed=st.sampled_from(fuzzlib.seeds_for("yaml")), rnd=st.randoms(use_true_random=False))
def test_encode_mutated_yaml_documents(seed, rnd):
    data = fuzzlib.mutate(rnd, seed[0])
    ok_or_one_line_error(kwire("encode", "-", input=data))


# ------------------------------------------------------------------ kwire pcap
# run as a user does, in a process of its own (kwire pcap streams to stdout)

def kwire_process(*args):
    import subprocess
    p = subprocess.run([sys.executable, "-m", "kwire_cli", *args], capture_output=True, timeout=120,
                       env={**__import__("os").environ, "KWIRE_NO_PROGRESS": "1"})
    from cli_run import Result
    return Result(p.returncode, p.stdout, p.stderr)


def test_pcap_on_files_that_are_not_captures(tmp_path):
    for i, data in enumerate((b"", b"\x00", b"not a capture at all", b"\xd4\xc3\xb2\xa1\x02\x00",
                              b"\x0a\x0d\x0d\x0a" + b"\x00" * 8)):
        f = tmp_path / f"bad{i}.pcap"
        f.write_bytes(data)
        r = kwire_process("pcap", str(f), "--format", "jsonl")
        assert r.code == 1, r
        assert r.err.count("kwire: error: ") == 1 and str(f) in r.err
        assert "internal error" not in r.err and "Traceback" not in r.err


def test_pcap_truncated_and_mutated_captures_exit_0_with_a_warning_and_1_with_strict(tmp_path):
    clean = (FIXTURES / "captures" / "kafkajs-produce.pcap").read_bytes()
    rng = random.Random(11)
    for i in range(4):
        data = clean[:rng.randrange(24, len(clean))] if i % 2 else fuzzlib.mutate(rng, clean, rounds=20)
        f = tmp_path / f"m{i}.pcap"
        f.write_bytes(data)
        r = kwire_process("pcap", str(f), "--summary", "--format", "json")
        assert "internal error" not in r.err and "Traceback" not in r.err + r.out
        if r.code == 1:                      # the mutation broke the file header: one line
            one_line_error(r)
            continue
        assert r.code == 0, r
        s = json.loads(r.out)
        assert s["reconciled"] and s["capture"]["reconcile"]["ok"]
        assert s["frames"] == s["decoded"] + s["undecodable"]
        for line in r.err.splitlines():
            assert line.startswith(("kwire: warning: ", "kwire: note: "))  # one line each
        if s["undecodable"] or s.get("damage"):
            assert kwire_process("pcap", str(f), "--strict", "--summary", "--format", "json").code == 1


def test_pcap_one_bad_file_among_good_ones(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"garbage")
    good = FIXTURES / "captures" / "kafkajs-produce.pcap"
    r = kwire_process("pcap", str(good), str(bad), str(good), "--format", "jsonl")
    assert r.code == 1
    assert [ln for ln in r.err.splitlines() if ln.startswith("kwire: error:")] == \
        [f"kwire: error: {bad}: not a pcap or pcapng file: magic 0x{b'garb'.hex()} at offset 0"]
    alone = kwire_process("pcap", str(good), "--format", "jsonl")
    assert alone.code == 0 and len(alone.out.splitlines()) == 10
    assert r.out.splitlines() == alone.out.splitlines() * 2


def test_hexdump_repeat_marker_before_a_far_offset_is_refused_not_expanded(tmp_path):
    """Found by atheris: in a 31-byte hexdump -C style input, a '*' line followed by an offset
    8 GB further on was expanded by repeating the previous line: gigabytes allocated from a claim.
    Now the repeat may stand for at most a Kafka frame (100 MiB)."""
    f = tmp_path / "far.txt"
    f.write_bytes(b"0100082\t10010826\n*\n211600082\t11")
    r = kwire("decode", "@" + str(f))
    one_line_error(r)
    assert "the '*' before line 3 stands for 8880390140 bytes, more than a Kafka frame" in r.err
    # a real repeat still expands (hexdump -C of a Metadata request naming topic "t" * 80)
    g = tmp_path / "ok.txt"
    g.write_text("00000000  00 00 00 61 00 03 00 01  00 00 00 07 00 01 63 00  |...a..........c.|\n"
                 "00000010  00 00 01 00 50 74 74 74  74 74 74 74 74 74 74 74  |....Pttttttttttt|\n"
                 "00000020  74 74 74 74 74 74 74 74  74 74 74 74 74 74 74 74  |tttttttttttttttt|\n"
                 "*\n"
                 "00000060  74 74 74 74 74                                    |ttttt|\n"
                 "00000065\n")
    r = kwire("decode", "@" + str(g), "--format", "json")
    assert r.code == 0, r
    assert r.json()["body"]["Topics"] == [{"Name": "t" * 80}]


# issue 14: the dump recognisers on mutated real dumps (fixtures/hex/dumps): every input ends in
# blocks and frames or in a one-line error, never an internal error or a regular expression that
# backtracks for ever (an xxd -i array with a bracket inside its length line once did)
DUMP_TEXTS = sorted(p.read_text() for p in (Path(__file__).resolve().parents[1] / "fixtures" / "hex" / "dumps"
                                            ).glob("*.txt"))


@fuzz(300)
@given(text=st.sampled_from(DUMP_TEXTS), rnd=st.randoms(use_true_random=False))
def test_mutated_dumps_read_or_fail_in_one_line(text, rnd):
    from kwire_cli.errors import KwireError
    from kwire_cli.inputs import read_blocks
    from kwire_cli.inputs.frames import pair_frames, split_frames

    t = list(text)
    for _ in range(rnd.randint(1, 6)):
        pos = rnd.randrange(len(t) + 1)
        op = rnd.random()
        if op < 0.4 and t:
            del t[min(pos, len(t) - 1):min(pos, len(t) - 1) + rnd.randint(1, 20)]
        elif op < 0.8:
            t.insert(pos, rnd.choice("0123456789abcdefx:[]{}()'\"\\ \t\n*>-=,/#.<|"))
        else:
            t[pos:pos] = t[pos:pos + rnd.randint(1, 80)]
    error = None
    try:
        pair_frames(split_frames(read_blocks("".join(t))))
    except KwireError as e:
        error = str(e)
    assert error is None or "\n" not in error


def test_a_bracket_in_an_xxd_i_length_line_does_not_backtrack_for_ever():
    from kwire_cli.inputs import NotADump, read_blocks

    text = ("unsigned char a[] = {\n" + "  0x00, 0x00, 0x00, 0x46, 0x00, 0x03, 0x00, 0x0c,\n" * 8
            + "};\nunsigned int metadata_request_v]12_bin_len = 74;\n int metadata_request_v12_bin_len = 74;\n")
    with pytest.raises(NotADump):
        read_blocks(text)
