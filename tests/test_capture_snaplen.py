"""Captures cut by a snap length (``editcap -s N``, ``tcpdump -s N``): every Kafka frame whose header
was captured is a row (API, version, correlation id, client id), marked cut (``captured``: the bytes
of it captured from its start), paired with its response; the TCP sequence numbers still tell where
each frame ends, so the frames after a cut one are read whole when they were captured whole."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kwire_cli.capture import CaptureStats, iter_capture
from kwire_cli.capture.rows import CUT_FRAME
from kwire_cli.capture.session import Conversation
from kwire_cli.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "captures" / "kafka-python-consume.pcap"
KEY = ("src", "dst", "kind", "api_key", "api_name", "api_version", "correlation_id", "client_id", "size")

pytestmark = pytest.mark.skipif(shutil.which("editcap") is None, reason="editcap (Wireshark) not installed")


def _rows(path: Path) -> tuple[list[dict], CaptureStats]:
    stats = CaptureStats()
    rows = list(Conversation().rows(iter_capture(str(path), stats=stats)))
    return rows, stats


def _cut(tmp_path: Path, snaplen: int) -> Path:
    out = tmp_path / f"cut-{snaplen}.pcap"
    subprocess.run(["editcap", "-s", str(snaplen), str(FIXTURE), str(out)], check=True, capture_output=True)
    return out


def test_a_snaplen_cut_capture_has_the_rows_of_the_whole_one(tmp_path: Path) -> None:
    whole, _ = _rows(FIXTURE)
    cut, stats = _rows(_cut(tmp_path, 128))
    assert len(whole) == 58
    # the same frames, the same pairing: every row of the whole capture has its row, with what
    # its header says (and, for a response, what its request's said)
    assert sorted(tuple(r[k] for k in KEY) for r in cut) == sorted(tuple(r[k] for k in KEY) for r in whole)
    cut_rows = [r for r in cut if r.get("captured") is not None]
    assert len(cut_rows) == 48 and stats.cut_frames == 48
    for r in cut_rows:
        assert 0 < r["captured"] < r["size"]
        assert r["error_kind"] == CUT_FRAME and r["body"] is None
        assert f"cut: {r['captured']} of {r['size']} bytes captured" in r["error"]
    responses = [r for r in cut if r["kind"] == "response"]
    assert responses and all(r["api_key"] is not None and r["latency_ms"] is not None for r in responses)
    # frames captured whole decode as in the whole capture
    by_key = {tuple(r[k] for k in KEY): r for r in whole}
    whole_ones = [r for r in cut if r.get("captured") is None]
    assert len(whole_ones) == 10
    for r in whole_ones:
        assert r["body"] == by_key[tuple(r[k] for k in KEY)]["body"]
    assert stats.reconcile()["ok"]


def test_a_header_cut_before_the_client_id_still_gives_the_row(tmp_path: Path) -> None:
    # 80 bytes: Ethernet, IPv4 and TCP with timestamps take 66, leaving a request's size, api key,
    # version, correlation id and the client id's length: every frame is cut, none is lost
    whole, _ = _rows(FIXTURE)
    cut, stats = _rows(_cut(tmp_path, 80))
    key = tuple(k for k in KEY if k != "client_id")
    assert sorted(tuple(r[k] for k in key) for r in cut) == sorted(tuple(r[k] for k in key) for r in whole)
    assert all(r["captured"] == 10 and r["client_id"] is None for r in cut if r["kind"] == "request")
    assert stats.reconcile()["ok"]


def test_the_table_marks_cut_frames(tmp_path: Path) -> None:
    cut = _cut(tmp_path, 128)
    res = CliRunner().invoke(cli, ["pcap", str(cut)])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stdout.splitlines() if not line.startswith("kwire:")]
    assert len(lines) == 59  # the heading and 58 rows
    assert sum("cut: " in line and "bytes captured" in line for line in lines) == 48
    assert "kwire: note: 48 frame(s) cut by the capture's snap length" in res.stderr


def test_records_longer_than_the_header_snap_length_are_read_whole_with_one_note(tmp_path: Path) -> None:
    # the same capture, its file header saying a snap length of 100: most records are longer
    data = bytearray(FIXTURE.read_bytes())
    assert data[:4] == bytes.fromhex("d4c3b2a1")  # little-endian pcap: the snap length is at offset 16
    data[16:20] = (100).to_bytes(4, "little")
    lying = tmp_path / "snap100-header.pcap"
    lying.write_bytes(bytes(data))
    whole, _ = _rows(FIXTURE)
    read, stats = _rows(lying)
    assert [tuple(r[k] for k in KEY) + (r["body"],) for r in read] == \
        [tuple(r[k] for k in KEY) + (r["body"],) for r in whole]
    assert stats.reconcile()["ok"] and not stats.damage_count
    res = CliRunner().invoke(cli, ["pcap", str(lying)])
    assert res.exit_code == 0
    notes = [line for line in res.stderr.splitlines() if "over" in line or "snap length" in line]
    assert len(notes) == 1 and notes[0].startswith("kwire: note: ")
    assert "exceeds the file header's snap length 100" in notes[0] and "read whole, as Wireshark does" in notes[0]
