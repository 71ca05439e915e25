"""The one warning line after a capture run says in plain words what went wrong, and only when
something did (kwire_cli.render.damage): an unanswered request at the end of a capture is
normal traffic, not a warning."""
from __future__ import annotations

from pathlib import Path

from cli_run import kwire
from kwire_cli.render.damage import damage_warning

ROOT = Path(__file__).resolve().parent.parent
CAPS = ROOT / "fixtures" / "captures"
TLS = ROOT / "fixtures" / "secure" / "tls"


def test_the_quick_start_prints_no_warning():
    """README's quick start: one request of confluent-kafka-consume.pcap is still waiting for its
    answer when the client resets the connection (a warning of '0 of 447 frames did not decode;
    1 damage events' before)."""
    r = kwire("pcap", str(CAPS))
    assert r.code == 0
    assert "warning" not in r.err, r.err
    s = kwire("pcap", str(CAPS), "--summary", "--format", "json").json()
    assert s["damage"] == {"unanswered-request": {"events": 1, "bytes": 0}}   # still counted


def test_a_capture_cut_inside_a_packet_is_said_in_words(tmp_path):
    data = (CAPS / "kafkajs-consume.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:len(data) - 700])
    r = kwire("pcap", str(cut))
    assert r.code == 0
    assert r.err.splitlines()[-1] == ("kwire: warning: a file that ends inside a packet; 1 request not answered "
                                      "(2 damage events; see --summary)")


def test_tls_without_its_key_log_is_a_note_not_damage():
    cap = TLS / "tls12-ecdhe-rsa-aes128-gcm-kafka-python.pcap"
    r = kwire("pcap", str(cap))
    assert r.code == 0 and "warning" not in r.err and "--tls-keylog FILE" in r.err, r.err
    assert "warning" not in kwire("pcap", str(cap), "--tls-keylog", str(cap.with_suffix(".keylog"))).err


def test_damage_warning_words():
    assert damage_warning({"frames": 10, "undecodable": 0, "damage": {}}) is None
    assert damage_warning({"frames": 10, "undecodable": 0,
                           "damage": {"unanswered-request": {"events": 3, "bytes": 0}}}) is None
    assert damage_warning({"frames": 10, "undecodable": 2, "damage": {}}, skipped=4) == (
        "2 of 10 frames did not decode (4 more, left out by --filter, were not decoded) (see --summary)")
    assert damage_warning({"frames": 10, "undecodable": 0, "damage": {
        "gap": {"events": 2, "bytes": 2920}, "unanswered-request": {"events": 1, "bytes": 0}}}, see="out/s.json") == (
        "2 gaps in the captured bytes (2,920 bytes never captured: dropped packets); 1 request not answered "
        "(3 damage events; see out/s.json)")
