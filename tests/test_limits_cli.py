"""The decoding limits set from the command line: --max-frame-size (kwire pcap: the capture
reassembler's largest frame), --max-decompressed and --max-records (per frame, kwire pcap and kwire
decode), on the recorded captures and pairs. Each is shown to bite just below a real frame's value
and to let it through at that value, to name the option that raises it, to reject bad values as a
one-line usage error, and to leave the process's settings as they were when the command ends."""
from __future__ import annotations

import json

import pytest

from cli_run import kwire
from conftest import FIXTURES
from kwire_cli.capture import DEFAULT_MAX_FRAME
from kwire_cli.cli.app import KwireUsageError
from kwire_cli.cli.options import DecodeLimits, parse_count, parse_size
from kwire_cli.records import limits
from kwire_cli.records.limits import (
    DEFAULT_MAX_FRAME_DECOMPRESSED,
    DEFAULT_MAX_FRAME_ITEMS,
    FrameLimits,
    frame_budget,
    frame_limits,
    set_frame_limits,
)

CAPS = FIXTURES / "captures"
# librdkafka's consumer: the largest frame is the Fetch response of packet 92, 2033 bytes
CONSUME_BIG = CAPS / "confluent-kafka-consume.pcap"
BIG_FRAME, BIG_SIZE = 92, 2033
# kafka-python's consumer, packet 49: a Fetch response of 10 batches, 4 of them compressed (gzip,
# snappy, lz4, zstd: 358 + 362 + 358 + 356 = 1434 bytes decompressed) and 65 records + headers
FETCH = CAPS / "kafka-python-consume.pcap"
FETCH_FRAME, FETCH_DECOMPRESSED, FETCH_ITEMS = 49, 1434, 65
# what the frame costs of --max-records: its records and headers, and 2 (BATCH_ITEMS) per batch
FETCH_COST = FETCH_ITEMS + 2 * 10
# kafka-python's Produce v9 request to the gzip topic: a gzip batch of 358 bytes decompressed
PRODUCE_GZIP = json.loads((FIXTURES / "pairs" / "kafka-python" / "009-0-v9.json").read_text())["request"]

DEFAULTS = FrameLimits(DEFAULT_MAX_FRAME_DECOMPRESSED, DEFAULT_MAX_FRAME_ITEMS)


@pytest.fixture(autouse=True)
def _limits_restored():
    """Every test starts from the defaults and must leave them so (a leak fails the test)."""
    assert frame_limits() == DEFAULTS
    yield
    leaked = frame_limits()
    set_frame_limits(*DEFAULTS)
    assert leaked == DEFAULTS, f"the limits leaked out of the command: {leaked}"


def pcap_records(*args: str) -> tuple[list[dict], str]:
    r = kwire("pcap", *args, "--format", "jsonl")
    assert r.code == 0, r
    return [json.loads(line) for line in r.out.splitlines()], r.err


def pcap_summary(*args: str) -> dict:
    r = kwire("pcap", *args, "--summary", "--format", "json")
    assert r.code == 0, r
    return r.json()


def batches(node) -> list[dict]:
    """Every record batch (or legacy message) in a value tree, in order."""
    out: list[dict] = []

    def walk(v):
        if isinstance(v, dict):
            if "batches" in v and "partial_trailing_batch" in v:
                out.extend(v["batches"])
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(node)
    return out


def frame(recs: list[dict], n: int) -> dict:
    (r,) = [r for r in recs if r["frame"] == n]
    return r


def one_line_usage_error(r, option: str) -> None:
    assert r.code == 2, r
    assert r.out == "", r
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kwire: error: {option}: "), r.err


# ------------------------------------------------------------------------ --max-frame-size

def test_the_default_frame_cap_decodes_the_largest_frame():
    recs, err = pcap_records(str(CONSUME_BIG))
    assert max(r["size"] for r in recs) == BIG_SIZE
    big = frame(recs, BIG_FRAME)
    assert big["size"] == BIG_SIZE and big["api_name"] == "Fetch" and big["error"] is None
    assert len(batches(big["body"])) > 0
    assert "oversize-frame" not in pcap_summary(str(CONSUME_BIG)).get("damage", {})


@pytest.mark.parametrize("cap", [str(BIG_SIZE - 1), "1K", "1KiB", "2000B"])
def test_a_frame_over_max_frame_size_is_oversize_damage_that_names_the_option(cap):
    recs, err = pcap_records(str(CONSUME_BIG), "--max-frame-size", cap)
    assert BIG_FRAME not in [r["frame"] for r in recs]         # the big Fetch response is gone...
    assert all(r["size"] <= BIG_SIZE - 1 for r in recs)
    s = pcap_summary(str(CONSUME_BIG), "--max-frame-size", cap)
    assert s["damage"]["oversize-frame"]["events"] == 1         # ...reported as damage
    (ev,) = [d for d in s["damage_events"] if d["kind"] == "oversize-frame"]
    assert ev["frame"] == BIG_FRAME
    limit = parse_size(cap, "--max-frame-size")
    assert f"frame size {BIG_SIZE} is over the frame cap of {limit} bytes (--max-frame-size raises it)" \
        in ev["detail"], ev
    assert "damage events" in err   # the usual warning on stderr


@pytest.mark.parametrize("cap", [str(BIG_SIZE), "2K", "1MiB"])
def test_a_frame_at_or_under_max_frame_size_decodes(cap):
    recs, _ = pcap_records(str(CONSUME_BIG), "--max-frame-size", cap)
    big = frame(recs, BIG_FRAME)
    assert big["size"] == BIG_SIZE and big["error"] is None
    assert "oversize-frame" not in pcap_summary(str(CONSUME_BIG), "--max-frame-size", cap).get("damage", {})


def test_max_frame_size_counts_every_frame_of_a_capture():
    """At 500 bytes every frame of 602 bytes in librdkafka's consumer capture is cut, the rest stay."""
    full, _ = pcap_records(str(CONSUME_BIG))
    cut, _ = pcap_records(str(CONSUME_BIG), "--max-frame-size", "500")
    over = sorted(r["frame"] for r in full if r["size"] > 500)
    assert over and all(r["size"] <= 500 for r in cut)
    s = pcap_summary(str(CONSUME_BIG), "--max-frame-size", "500")
    assert sorted(d["frame"] for d in s["damage_events"] if d["kind"] == "oversize-frame") == over


# ------------------------------------------------------------------------ --max-decompressed

def test_max_decompressed_cuts_the_fetch_frame_at_its_decompressed_size():
    recs, _ = pcap_records(str(FETCH), "--max-decompressed", str(FETCH_DECOMPRESSED - 1))
    b = batches(frame(recs, FETCH_FRAME)["body"])
    compressed = [x for x in b if "CompressedSize" in x]
    assert len(b) == 10 and len(compressed) == 4
    assert all("error" not in x for x in compressed[:3])        # 358 + 362 + 358 bytes fit...
    err = compressed[3]["error"]                                # ...the last (lz4, 356) do not
    assert ("lz4: decompressed size exceeds the 355 bytes left of the frame's cap of 1433 bytes "
            "(all batches together; --max-decompressed raises it)") in err, err
    assert compressed[3]["Records"] == [] and compressed[3]["RawHex"]
    # uncompressed batches are not charged: every one still decodes
    assert all("error" not in x for x in b if "CompressedSize" not in x)


@pytest.mark.parametrize("cap", [str(FETCH_DECOMPRESSED), "2K", None])
def test_max_decompressed_at_the_frames_size_or_above_decodes_it_all(cap):
    recs, _ = pcap_records(str(FETCH), *(["--max-decompressed", cap] if cap else []))
    b = batches(frame(recs, FETCH_FRAME)["body"])
    assert len(b) == 10 and all("error" not in x for x in b)
    assert sum(x.get("DecompressedSize", 0) for x in b) == FETCH_DECOMPRESSED


def test_max_decompressed_is_per_frame_not_per_capture():
    """Every Fetch / Produce frame of the capture has its own budget: 400 bytes lets each single
    compressed batch (at most 362 bytes) through, only a frame holding several is cut."""
    recs, _ = pcap_records(str(FETCH), "--max-decompressed", "400")
    cut = [r["frame"] for r in recs if any("error" in x for x in batches(r["body"]))]
    assert cut == [FETCH_FRAME]
    b = [x for x in batches(frame(recs, FETCH_FRAME)["body"]) if "CompressedSize" in x]
    assert "error" not in b[0] and all("--max-decompressed raises it" in x["error"] for x in b[1:])


def test_decode_max_decompressed_names_the_option_and_raising_it_decodes():
    r = kwire("decode", PRODUCE_GZIP, "--format", "json", "--max-decompressed", "300")
    assert r.code == 0, r
    (gz,) = [x for x in batches(r.json()["body"]) if "CompressedSize" in x]
    assert gz["error"].endswith("gzip: decompressed size exceeds the frame's cap of 300 bytes "
                                "(all batches together; --max-decompressed raises it)"), gz
    for ok in ("358", "1KiB", None):
        r = kwire("decode", PRODUCE_GZIP, "--format", "json", *(["--max-decompressed", ok] if ok else []))
        (gz,) = [x for x in batches(r.json()["body"]) if "CompressedSize" in x]
        assert "error" not in gz and gz["DecompressedSize"] == 358 and len(gz["Records"]) == 3


def test_decode_shows_the_limit_in_the_tree():
    r = kwire("decode", PRODUCE_GZIP, "--max-decompressed", "300")
    assert r.code == 0, r
    assert "--max-decompressed raises it" in r.out


def test_decode_partial_walk_uses_the_limits_too():
    """--partial's walker opens its own frame budget: it takes the limits of the command too."""
    data = bytes.fromhex(PRODUCE_GZIP)[4:-1]  # the request's last tagged-field count cut off
    r = kwire("decode", data.hex(), "--no-size-prefix", "--partial", "--format", "json", "--strict",
              "--max-decompressed", "300")
    assert r.code == 1, r
    out = r.json()
    assert out["partial"] is True
    (gz,) = [x for x in batches(out["body"]) if "CompressedSize" in x]
    assert "gzip: decompressed size exceeds the frame's cap of 300 bytes" in gz["error"], gz
    r = kwire("decode", data.hex(), "--no-size-prefix", "--partial", "--format", "json", "--strict")
    (gz,) = [x for x in batches(r.json()["body"]) if "CompressedSize" in x]
    assert r.code == 1 and "error" not in gz and len(gz["Records"]) == 3
    # leniently the missing tag section at the end is a violation, and the lenient walk takes the limits too
    r = kwire("decode", data.hex(), "--no-size-prefix", "--format", "json", "--max-decompressed", "300")
    assert r.code == 0 and [v["rule"] for v in r.json()["violations"]] == ["missing-tags"]
    (gz,) = [x for x in batches(r.json()["body"]) if "CompressedSize" in x]
    assert "gzip: decompressed size exceeds the frame's cap of 300 bytes" in gz["error"], gz


# ------------------------------------------------------------------------ --max-records

def test_max_records_cuts_the_fetch_frame_at_its_record_count():
    recs, _ = pcap_records(str(FETCH), "--max-records", str(FETCH_COST - 1))
    b = batches(frame(recs, FETCH_FRAME)["body"])
    assert all("error" not in x for x in b[:-1])
    assert "records and headers" in b[-1]["error"] and "(--max-records raises it)" in b[-1]["error"], b[-1]
    assert sum(len(x["Records"]) + sum(len(rec["Headers"]) for rec in x["Records"]) for x in b[:-1]) \
        <= FETCH_ITEMS - 1


@pytest.mark.parametrize("n", [str(FETCH_COST), "1000", None])
def test_max_records_at_the_frames_count_or_above_decodes_it_all(n):
    recs, _ = pcap_records(str(FETCH), *(["--max-records", n] if n else []))
    b = batches(frame(recs, FETCH_FRAME)["body"])
    assert all("error" not in x for x in b)
    assert sum(len(x["Records"]) + sum(len(rec["Headers"]) for rec in x["Records"]) for x in b) == FETCH_ITEMS


def test_decode_max_records():
    # an uncompressed batch of 1 record (2 + 1), then a gzip one of 3 records and 9 headers (2 + 12)
    r = kwire("decode", PRODUCE_GZIP, "--format", "json", "--max-records", "5")
    bad = [x for x in batches(r.json()["body"]) if "error" in x]
    assert r.code == 0 and len(bad) == 1 and "records and headers" in bad[0]["error"], r
    assert r.err == "kwire: warning: 1 record batch(es) cut at a frame's cap of records and headers " \
                    "(--max-records raises it)\n"
    r = kwire("decode", PRODUCE_GZIP, "--format", "json", "--max-records", "100")
    assert all("error" not in x for x in batches(r.json()["body"]))


# ------------------------------------------------------------------------ bad values

@pytest.mark.parametrize("cmd,option,value", [
    ("pcap", "--max-frame-size", "12X"),
    ("pcap", "--max-frame-size", "0"),
    ("pcap", "--max-frame-size", "-1"),
    ("pcap", "--max-frame-size", "1.5"),
    ("pcap", "--max-decompressed", "lots"),
    ("pcap", "--max-decompressed", "0MiB"),
    ("pcap", "--max-decompressed", "5 PB"),
    ("pcap", "--max-records", "1.5"),
    ("pcap", "--max-records", "0"),
    ("pcap", "--max-records", "10K"),
    ("decode", "--max-decompressed", ""),
    ("decode", "--max-decompressed", "1G1"),
    ("decode", "--max-records", "-3"),
    ("decode", "--max-records", "many"),
])
def test_a_bad_value_is_a_one_line_usage_error(cmd, option, value):
    target = str(FETCH) if cmd == "pcap" else PRODUCE_GZIP
    r = kwire(cmd, target, option, value)
    one_line_usage_error(r, option)
    assert repr(value) in r.err


def test_decode_has_no_frame_size_option():
    r = kwire("decode", PRODUCE_GZIP, "--max-frame-size", "1M")
    assert r.code == 2 and "--max-frame-size" in r.err


@pytest.mark.parametrize("text,n", [
    ("300000", 300000), ("300000B", 300000), ("1K", 1024), ("1k", 1024), ("1KB", 1024), ("1KiB", 1024),
    ("512MiB", 512 << 20), ("512mib", 512 << 20), ("1G", 1 << 30), ("1GB", 1 << 30), ("2 GiB", 2 << 30),
    ("1.5K", 1536), ("0.5MiB", 512 << 10), ("1T", 1 << 40), (4096, 4096),
])
def test_parse_size(text, n):
    assert parse_size(text, "--x") == n


@pytest.mark.parametrize("text", ["", "K", "1.5", "1.5B", "1KK", "1Ki", "1 M B", "0", "0.0001K", "-1", "1e6", "0x10"])
def test_parse_size_refuses(text):
    with pytest.raises(KwireUsageError, match=r"^--x: "):
        parse_size(text, "--x")


def test_parse_count():
    assert parse_count("4000000", "--n") == 4_000_000
    assert parse_count("4_000_000", "--n") == parse_count("4,000,000", "--n") == 4_000_000
    for bad in ("", "0", "-1", "1.0", "1K", "x", "1__0"):
        with pytest.raises(KwireUsageError, match=r"^--n: "):
            parse_count(bad, "--n")


# ------------------------------------------------------------------------ settings and restoring

def test_set_frame_limits_returns_the_previous_values_and_validates():
    prev = set_frame_limits(decompressed=1000)
    try:
        assert prev == DEFAULTS
        assert frame_limits() == FrameLimits(1000, DEFAULT_MAX_FRAME_ITEMS)
        assert set_frame_limits(items=7) == FrameLimits(1000, DEFAULT_MAX_FRAME_ITEMS)
        assert frame_limits() == FrameLimits(1000, 7)
        with frame_budget() as b:                       # a scope without explicit limits takes them
            assert (b.limit, b.max_items) == (1000, 7)
        with frame_budget(5, 6) as b:                   # explicit ones win
            assert (b.limit, b.max_items) == (5, 6)
        for bad in (0, -1, 1.5, "100", True):
            with pytest.raises(ValueError) as e:
                set_frame_limits(decompressed=bad)
            assert "\n" not in str(e.value) and "above 0" in str(e.value)
            with pytest.raises(ValueError):
                set_frame_limits(items=bad)
        assert frame_limits() == FrameLimits(1000, 7)    # a refused value changes nothing
    finally:
        set_frame_limits(*prev)
    assert frame_limits() == DEFAULTS


def test_the_compiled_codec_reads_the_limits_at_call_time():
    """Plans are compiled once and cached: a limit set after the plan was built must still apply."""
    from kwire_cli.codec import decode_request
    data = bytes.fromhex(PRODUCE_GZIP)

    def gz_error():
        (gz,) = [x for x in batches(decode_request(data, records="decode").body) if "CompressedSize" in x]
        return gz.get("error")
    assert gz_error() is None                    # compiles (or reuses) the plan at the defaults
    prev = set_frame_limits(decompressed=300)
    try:
        assert "frame's cap of 300 bytes" in gz_error()
        set_frame_limits(decompressed=358, items=5)
        assert "records and headers" in gz_error()
    finally:
        set_frame_limits(*prev)
    assert gz_error() is None


def test_limits_do_not_leak_between_invocations():
    """A low limit in one run is gone in the next one of the same process (CliRunner)."""
    r = kwire("decode", PRODUCE_GZIP, "--format", "json", "--max-decompressed", "300", "--max-records", "2")
    assert "error" in json.dumps(r.json())
    assert frame_limits() == DEFAULTS
    r = kwire("decode", PRODUCE_GZIP, "--format", "json")
    assert all("error" not in x for x in batches(r.json()["body"]))
    recs, _ = pcap_records(str(FETCH), "--max-decompressed", "400", "--max-records", "3", "--max-frame-size", "1K")
    assert frame_limits() == DEFAULTS
    recs, _ = pcap_records(str(FETCH))
    assert all("error" not in x for r in recs for x in batches(r["body"]))
    assert frame(recs, FETCH_FRAME)["size"] > 1024


def test_limits_are_restored_when_the_command_fails():
    r = kwire("decode", "00000001", "--max-decompressed", "300", "--max-records", "2")
    assert r.code == 1, r                        # a decode error (exit 1) inside the limits' scope
    assert frame_limits() == DEFAULTS
    r = kwire("pcap", str(FIXTURES / "README.md"), "--max-decompressed", "300")
    assert r.code == 1, r                        # not a capture
    assert frame_limits() == DEFAULTS


def test_decode_limits_apply_restores_what_was_there_before():
    prev = set_frame_limits(decompressed=12345)
    try:
        with DecodeLimits(None, 1000, None).apply():
            assert frame_limits() == FrameLimits(1000, DEFAULT_MAX_FRAME_ITEMS)
            with DecodeLimits(decompressed=None, items=9).apply():
                assert frame_limits() == FrameLimits(1000, 9)
            assert frame_limits() == FrameLimits(1000, DEFAULT_MAX_FRAME_ITEMS)
        with pytest.raises(RuntimeError), DecodeLimits(items=5).apply():
            raise RuntimeError("boom")
        assert frame_limits() == FrameLimits(12345, DEFAULT_MAX_FRAME_ITEMS)
    finally:
        set_frame_limits(*prev)
    assert DecodeLimits().frame_size() == DEFAULT_MAX_FRAME and DecodeLimits(max_frame=7).frame_size() == 7


# ------------------------------------------------------------------------ help and options

def test_help_states_the_real_defaults():
    """The option help writes the defaults out (no heavy imports at start-up): keep them true."""
    from kwire_cli.cli.options import DecodeLimits
    from kwire_cli.records.limits import CAPTURE_MAX_FRAME_DECOMPRESSED
    r = kwire("pcap", "--help")
    text = " ".join(r.out.split())
    assert f"(default {DEFAULT_MAX_FRAME >> 20}MiB)" in text
    assert f"(default {CAPTURE_MAX_FRAME_DECOMPRESSED >> 20}MiB)" in text
    assert f"(default {DEFAULT_MAX_FRAME_ITEMS})" in text
    text = " ".join(kwire("decode", "--help").out.split())
    assert f"(default {DEFAULT_MAX_FRAME_DECOMPRESSED >> 20}MiB)" in text
    assert DEFAULT_MAX_FRAME % (1 << 20) == 0 and DEFAULT_MAX_FRAME_DECOMPRESSED % (1 << 20) == 0
    assert CAPTURE_MAX_FRAME_DECOMPRESSED % (1 << 20) == 0
    assert DecodeLimits() == (None, None, None)  # the commands fill in their defaults


def test_which_commands_have_the_options():
    import click

    from kwire_cli.cli import cli
    ctx = click.Context(cli)
    names = {}
    for cmd in ("decode", "pcap", "encode", "diff", "describe"):
        names[cmd] = {o for p in cli.get_command(ctx, cmd).params for o in p.opts if o.startswith("--max-")}
    assert names["pcap"] == {"--max-frame-size", "--max-decompressed", "--max-records"}
    assert names["decode"] == {"--max-decompressed", "--max-records"}
    assert not names["encode"] and not names["diff"] and not names["describe"]   # they decode no records


def test_the_module_settings_object_is_what_the_codec_reads():
    assert limits._limits is frame_limits()


def test_raising_the_frame_cap_raises_each_batchs_cap_too(monkeypatch):
    """Each batch may decompress as much as the frame may: with --max-decompressed 1G the gzip
    batch of a real Produce request is decompressed under a 1 GiB cap, not the 256 MiB default
    (so a single 300 MiB batch would get through)."""
    from kwire_cli.codec.message import decode_request
    from kwire_cli.records import v2 as rdecode
    caps = []
    real = rdecode.decompress
    monkeypatch.setattr(rdecode, "decompress", lambda codec, payload, cap: caps.append(cap) or real(codec, payload, cap))
    frame = bytes.fromhex(PRODUCE_GZIP)
    decode_request(frame, records="decode")
    prev = set_frame_limits(decompressed=1 << 30)
    try:
        decode_request(frame, records="decode")
    finally:
        set_frame_limits(*prev)
    n = len(caps) // 2
    assert n >= 1 and caps == [DEFAULT_MAX_FRAME_DECOMPRESSED] * n + [1 << 30] * n
