"""Written to a pipe or a file, a pcap table row is one line however narrow COLUMNS is (issue 14,
item 6: rows were folded at the page width, 200 columns by default)."""
from __future__ import annotations

from pathlib import Path

from cli_run import kwire

CAPTURE = str(Path(__file__).resolve().parents[1] / "fixtures" / "captures" / "kafka-python-consume.pcap")


def test_a_table_row_is_one_line_whatever_the_width():
    frames = len(kwire("pcap", CAPTURE, "--format", "jsonl").out.splitlines())
    assert frames > 10
    for columns in ("40", "200", ""):
        out = kwire("pcap", CAPTURE, env={"COLUMNS": columns}).out.splitlines()
        assert len(out) == frames + 1  # the header, then a line per frame
        assert out[0].split() == ["frame", "time", "src", "->", "dst", "kind", "api", "corr", "client", "size",
                                  "latency_ms", "info"]
        assert all(line.split()[0].isdigit() for line in out[1:])
    assert max(len(line) for line in out) > 40
