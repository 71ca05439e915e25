"""A legitimate big Fetch answer: the fixture's Fetch v13 answer with its partition repeated
100,000 times (3.7 MB, 100,000 array items: a quarter of the array cap), decoded by `kwire decode`
in every output form and by `kwire pcap`, in a process of its own whose peak memory is measured.
Each output is complete (its first and last partition), and the peak stays a bounded multiple of
the frame: the tree of a partition is what costs, not the printing of it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kwire_cli.codec import decode_response, encode_response
from kwire_cli.inputs.dump import parse_hex

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peak_rss
from memory_bombs import answer_pcap

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 100_000


def big_fetch_answer(partitions: int) -> bytes:
    """The fixture's Fetch v13 answer (one topic, one partition) with ``partitions`` partitions,
    each the fixture's without its records and with its leader at the default (37 bytes each),
    made by kwire's encoder."""
    m = decode_response(parse_hex((ROOT / "fixtures" / "hex" / "fetch-response-v13.hex").read_text()), "Fetch", 13)
    part = m.body["Responses"][0]["Partitions"][0]
    m.body["Responses"][0]["Partitions"] = [
        {**part, "PartitionIndex": i, "Records": None, "CurrentLeader": {"LeaderId": -1, "LeaderEpoch": -1}}
        for i in range(partitions)]
    return encode_response("Fetch", 13, m.header, m.body)


@pytest.fixture(scope="module")
def frame(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bigfetch") / "fetch.bin"
    path.write_bytes(big_fetch_answer(PARTITIONS))
    return path


def run(*args: str) -> tuple[bytes, int]:
    """``kwire ARGS``' output and its peak memory in MB."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    p = subprocess.run(peak_rss.kwire_argv(list(args)), capture_output=True, env=env)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout, peak_rss.split(p.stderr)[1] >> 20


def test_the_frame_is_what_it_says(frame):
    data = frame.read_bytes()
    assert 3_600_000 < len(data) < 3_800_000
    m = decode_response(data, "Fetch", 13)
    assert len(m.body["Responses"][0]["Partitions"]) == PARTITIONS


@pytest.mark.parametrize("fmt", ["pretty", "coloured", "json", "yaml"])
def test_decode_prints_every_partition_in_bounded_memory(frame, fmt):
    """Each output form; "coloured" is the tree with its styles (`--color always`, as on a terminal)."""
    how = ("--color", "always") if fmt == "coloured" else ()
    form = "pretty" if fmt == "coloured" else fmt
    out, mb = run(*how, "decode", f"@{frame}", "--api", "Fetch", "--version", "13", "--format", form)
    if fmt == "coloured":
        assert out.count(b"\x1b[") > 2 * PARTITIONS
        out = re.sub(rb"\x1b\[[0-9;]*m", b"", out)
    if form == "json":
        parts = json.loads(out)["body"]["Responses"][0]["Partitions"]
        assert len(parts) == PARTITIONS and parts[-1]["PartitionIndex"] == PARTITIONS - 1
    elif form == "pretty":
        lines = out.decode().splitlines()
        assert lines[0] == f"Fetch v13 response  api key 1, {len(frame.read_bytes()) - 4} bytes"
        assert f"                └── [{PARTITIONS - 1}]" in lines  # the last partition
        assert sum(1 for x in lines if "HighWatermark: 1043  int64" in x) == PARTITIONS
    else:
        assert out.count(b"- {\"PartitionIndex\": ") == PARTITIONS  # one flow-style line each
    # the decoded tree takes ~0.6 KB a partition (60 MB), kwire ~30 MB; the printing adds little to
    # it (measured 90-100 MB; a tree of Python objects a line would add ~700 bytes a line: 700 MB)
    assert mb < 200, f"{fmt}: {mb} MB"


def test_pcap_decodes_it_in_bounded_memory(frame, tmp_path):
    from kwire_cli.inputs.dump import parse_hex as hex_bytes
    req = hex_bytes((ROOT / "fixtures" / "hex" / "fetch-request-v13.hex").read_text())
    cap = tmp_path / "fetch.pcap"
    cap.write_bytes(answer_pcap(req, frame.read_bytes()))
    out, mb = run("pcap", str(cap), "--format", "jsonl")
    rows = [json.loads(x) for x in out.splitlines()]
    assert len(rows) == 2 and rows[1]["api_name"] == "Fetch" and rows[1]["error"] is None
    assert len(rows[1]["body"]["Responses"][0]["Partitions"]) == PARTITIONS
    assert mb < 250, f"pcap: {mb} MB"  # measured ~130 MB


def test_a_row_with_a_long_list_is_written_an_item_at_a_time():
    """A row of a big frame whose list holds more than LONG_LIST items is written a piece at a
    time, the same bytes as one line_encoder call (a 400,000-partition answer's line is 120 MB)."""
    from kwire_cli.render.jsonlines import LONG_LIST, line_encoder, line_writer
    data = big_fetch_answer(2 * LONG_LIST)
    m = decode_response(data, "Fetch", 13)
    row = {"frame": 1, "api_key": 1, "size": len(data) - 4, **m.to_json()}
    pieces: list[bytes] = []
    line_writer()(row, pieces.append)
    assert b"".join(pieces) == line_encoder()(row)
    assert len(pieces) > 100 and max(len(p) for p in pieces) < 64 * 1024
