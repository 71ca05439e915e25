"""ApiVersionsResponse bytes as broker input: answers recorded from a real tansu broker."""
from __future__ import annotations

import gzip
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cli_run import kwire
from kwire_cli.codec import encode_request, encode_response
from kwire_cli.negotiation import (
    NegotiationError,
    decode_api_versions_bytes,
    kwire_api_names,
    kwire_client_ranges,
    load_broker_file,
    negotiate,
    parse_broker_input,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "negotiate"


def tansu(version) -> bytes:
    return bytes.fromhex((FIX / f"tansu-apiversions-v{version}.hex").read_text().strip())


def v0_ranges_by_hand(data: bytes) -> dict[int, tuple[int, int]]:
    """Independent reading of the v0 layout: size, correlation id, error, int32 count, entries."""
    size, _corr, err, n = struct.unpack_from(">iihi", data, 0)
    assert size == len(data) - 4 and err == 0
    out = {}
    for i in range(n):
        k, lo, hi = struct.unpack_from(">hhh", data, 14 + 6 * i)
        out[k] = (lo, hi)
    assert 14 + 6 * n == len(data)
    return out


def test_every_recorded_version_decodes_to_the_same_ranges():
    expected = v0_ranges_by_hand(tansu(0))
    assert len(expected) > 20 and 18 in expected
    seen = {}
    for v in (0, 1, 2, 3, 4):
        (a,) = load_broker_file(FIX / f"tansu-apiversions-v{v}.hex")
        assert a.form == "hex" and a.complete and a.error is None
        assert a.ranges == expected
        seen[v] = a.api_version
        assert a.notes[0].startswith(f"decoded as ApiVersionsResponse v{a.api_version} (size prefix, header")
        assert a.notes[0].endswith(f"correlation id {v + 1}")
    # v1/v2 and v3/v4 share a layout: the lowest version that reads the bytes is reported
    assert seen == {0: 0, 1: 1, 2: 1, 3: 3, 4: 3}


def test_without_size_prefix_and_without_header():
    data = tansu(4)
    full = decode_api_versions_bytes(data, "t")
    no_prefix = decode_api_versions_bytes(data[4:], "t")
    body_only = decode_api_versions_bytes(data[8:], "t")
    assert full.ranges == no_prefix.ranges == body_only.ranges
    assert "(no size prefix, header" in no_prefix.notes[0]
    assert "(no size prefix, no header" in body_only.notes[0]
    # v0 body alone: error code, count, entries
    assert decode_api_versions_bytes(tansu(0)[8:], "t").ranges == v0_ranges_by_hand(tansu(0))


def test_raw_binary_and_spaced_hex_are_accepted(tmp_path):
    raw = tmp_path / "answer.bin"
    raw.write_bytes(tansu(1))
    (a,) = load_broker_file(raw)
    assert a.form == "raw" and a.address == "answer.bin"
    spaced = " ".join(tansu(1).hex()[i:i + 2] for i in range(0, len(tansu(1)) * 2, 2))
    (b,) = parse_broker_input(spaced, "x")
    assert a.ranges == b.ranges == v0_ranges_by_hand(tansu(0))


def test_tansu_answers_a_v127_request_without_unsupported_version():
    # Recorded fact: tansu 0.6.0 does not follow KIP-511 here; it answers error 0 with its full
    # list in the v3 layout, where Kafka would answer UNSUPPORTED_VERSION in the v0 layout.
    (a,) = load_broker_file(FIX / "tansu-apiversions-v127.hex")
    assert a.error is None and a.api_version == 3
    assert a.ranges == v0_ranges_by_hand(tansu(0))


def test_kip511_unsupported_version_answer_is_explained_not_failed():
    (a,) = load_broker_file(FIX / "kip511-unsupported-version.hex")
    assert a.api_version == 0
    assert a.error == "UNSUPPORTED_VERSION (35)" and a.error_code == 35 and not a.complete
    assert a.ranges == {18: (0, 3)}
    assert any("KIP-511" in n and "retries with v3" in n for n in a.notes)
    result = negotiate(kwire_client_ranges(), [a], None, kwire_api_names())
    api18 = next(e for e in result["apis"] if e["api_key"] == 18)
    assert api18["common"] == [0, 3] and api18["chosen"] == 3
    produce = next(e for e in result["apis"] if e["api_key"] == 0)
    assert produce["brokers"] == {} and produce["chosen"] is None
    assert produce["reason"] == "no broker answer lists this API (the answers given are incomplete)"


def test_negotiation_against_tansu_matches_a_hand_computation():
    (a,) = load_broker_file(FIX / "tansu-apiversions-v4.hex")
    client = kwire_client_ranges()
    result = negotiate(client, [a], None, kwire_api_names())
    broker = v0_ranges_by_hand(tansu(0))
    for e in result["apis"]:
        k = e["api_key"]
        if k in broker and k in client:
            lo = max(broker[k][0], client[k][0])
            hi = min(broker[k][1], client[k][1])
            assert e["chosen"] == (hi if lo <= hi else None), e
        elif k not in broker:
            assert e["chosen"] is None and e["brokers"] == {a.address: None}


def test_features_in_a_v3_answer_are_kept():
    body = {"ErrorCode": 0,
            "ApiKeys": [{"ApiKey": 18, "MinVersion": 0, "MaxVersion": 4}],
            "ThrottleTimeMs": 0,
            "SupportedFeatures": [{"Name": "metadata.version", "MinVersion": 1, "MaxVersion": 25},
                                  {"Name": "kraft.version", "MinVersion": 0, "MaxVersion": 1}],
            "FinalizedFeaturesEpoch": 17,
            "FinalizedFeatures": [{"Name": "metadata.version", "MaxVersionLevel": 22,
                                   "MinVersionLevel": 22}]}
    data = encode_response(18, 4, {"CorrelationId": 9}, body)
    a = decode_api_versions_bytes(data, "k:9092")
    assert a.supported_features == {"metadata.version": (1, 25), "kraft.version": (0, 1)}
    assert a.finalized_features == {"metadata.version": (22, 22)} and a.finalized_epoch == 17


def test_a_request_is_named_instead_of_decoded():
    req = encode_request(18, 3, {"CorrelationId": 1, "ClientId": "kwire"},
                         {"ClientSoftwareName": "kwire", "ClientSoftwareVersion": "0.1.0"})
    with pytest.raises(NegotiationError) as ei:
        parse_broker_input(req.hex(), "req.hex")
    assert str(ei.value) == "req.hex: this is a request: ApiVersions v3 (api key 18), not an ApiVersionsResponse"


def test_bytes_that_are_no_apiversions_response():
    with pytest.raises(NegotiationError) as ei:
        parse_broker_input("00000004deadbeef", "bad.hex")
    msg = str(ei.value)
    assert msg.startswith("bad.hex: not an ApiVersionsResponse: no layout (v0-v4, with or without size "
                          "prefix and header) reads all 8 bytes (first failure: ")
    assert "\n" not in msg
    with pytest.raises(NegotiationError, match="too short"):
        parse_broker_input("0000", "short.hex")


def test_capture_of_the_same_exchanges():
    # tcpdump recording of scripts/record_apiversions.py against tansu: six connections, one
    # ApiVersions exchange each (v0-v4 and v127); the capture reader pairs each answer with its
    # request; the v127 answer (tansu replies in the v3 layout, which v4 shares) reads whole with the
    # newest layout the specs know, v4: an assumed version, said in the notes.
    (a,) = load_broker_file(FIX / "tansu-apiversions.pcap")
    assert a.form == "capture" and a.address.startswith("127.0.0.1:")
    assert a.ranges == v0_ranges_by_hand(tansu(0))
    assert a.api_version == 4
    assert a.notes[0].startswith("the request was ApiVersions v127 (frame ")
    assert a.notes[0].endswith("the answer reads whole with the v4 layout: assumed version: ApiVersions v127 is "
                               "newer than the specs in use (newest v4); its bytes read whole with the v4 layout, "
                               "shown here")
    assert "6 ApiVersions answers from this broker in the capture" in a.notes[-1]


def test_capture_as_bytes_and_a_capture_without_apiversions(tmp_path):
    data = (FIX / "tansu-apiversions.pcap").read_bytes()
    (a,) = parse_broker_input(data, "cap")
    assert a.ranges == v0_ranges_by_hand(tansu(0))
    # keep only the pcap global header: a valid capture with no packets
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(data[:24])
    with pytest.raises(NegotiationError, match=r"empty.pcap: the capture holds no ApiVersions answer$"):
        load_broker_file(empty)


def test_a_real_metadata_response_is_named_instead_of_decoded():
    # tansu's answer to a MetadataRequest v0 (recorded): a response carries no API key, so kwire
    # says which responses the bytes read as
    with pytest.raises(NegotiationError) as ei:
        load_broker_file(FIX / "tansu-metadata-v0-response.hex")
    assert str(ei.value) == (f"{FIX / 'tansu-metadata-v0-response.hex'}: this is probably a response: "
                             "Metadata v0 (api key 3), not an ApiVersionsResponse")


CAPTURES = FIX.parent / "captures"


def _client_captures():
    manifest = CAPTURES / "manifest.json"
    if not manifest.exists():
        return []
    import json
    m = json.loads(manifest.read_text())
    if (m.get("broker", {}).get("name"), m.get("broker", {}).get("version")) != ("tansu", "0.6.0"):
        return []
    return sorted(name for name, c in m.get("captures", {}).items()
                  if any(k.startswith("18:") for k in c.get("requests", {})) and (CAPTURES / name).exists())


@pytest.mark.skipif(not _client_captures(), reason="no client captures of tansu 0.6.0 recorded")
@pytest.mark.parametrize("name", _client_captures())
def test_client_captures_agree_with_the_recorded_answer(name):
    # kafka-python, confluent-kafka and kafkajs each asked tansu 0.6.0 with their own ApiVersions
    # version; every answer must list what tansu's answer recorded by our script lists
    answers = load_broker_file(CAPTURES / name)
    assert len(answers) == 1
    (a,) = answers
    assert a.form == "capture" and a.complete
    assert a.ranges == v0_ranges_by_hand(tansu(0))


# ------------------------------------------------ the same readers as kwire decode and kwire pcap

def _xxd(path: Path, *args: str) -> str:
    xxd = shutil.which("xxd")
    if xxd is None:
        pytest.skip("xxd is not installed (apt-get install xxd)")
    return subprocess.run([xxd, *args, str(path)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("args", [(), ("-g1",)])
def test_xxd_dump_of_a_recorded_answer_reads_as_the_hex_does(tmp_path, args):
    """kwire negotiate reads an xxd dump of an ApiVersions answer, as kwire decode does (one dump
    reader): the recorded tansu v3 answer, dumped by the real xxd."""
    binary = tmp_path / "tansu-v3.bin"
    binary.write_bytes(tansu(3))
    dump = tmp_path / "tansu-v3.xxd"
    dump.write_text(_xxd(binary, *args))
    assert dump.read_text().startswith("00000000: 0000 011b" if not args else "00000000: 00 00 01 1b")
    (from_hex,) = load_broker_file(FIX / "tansu-apiversions-v3.hex")
    (from_xxd,) = load_broker_file(dump)
    assert (from_xxd.form, from_xxd.api_version, from_xxd.ranges, from_xxd.notes) == (
        "hex", 3, from_hex.ranges, from_hex.notes)
    assert from_xxd.ranges == v0_ranges_by_hand(tansu(0))
    # the CLI, from the file and from stdin, and kwire decode of the same dump
    r = kwire("negotiate", str(dump), "--format", "json")
    assert r.code == 0, r
    assert r.json()["brokers"][0]["notes"] == from_hex.notes
    s = kwire("negotiate", "-", "--format", "json", input=dump.read_bytes())
    assert s.code == 0, s
    by_api = lambda out: [(a["api_key"], list(a["brokers"].values()), a["chosen"]) for a in out["apis"]]
    assert by_api(s.json()) == by_api(r.json())
    assert list(s.json()["apis"][0]["brokers"]) == ["broker"]  # stdin has no file name
    d = kwire("decode", f"@{dump}", "--api", "ApiVersions", "--version", "3", "--format", "json")
    assert d.code == 0 and len(d.json()["body"]["ApiKeys"]) == len(from_hex.ranges)


def test_gzip_compressed_capture_reads_as_the_capture_does(tmp_path):
    """kwire negotiate reads a gzip-compressed capture, as kwire pcap does (one magic table)."""
    plain = FIX / "tansu-apiversions.pcap"
    gz = tmp_path / "tansu-apiversions.pcap.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    (a,) = load_broker_file(plain)
    (b,) = load_broker_file(gz)
    assert (b.form, b.address, b.ranges, b.api_version, b.notes) == (a.form, a.address, a.ranges, a.api_version,
                                                                       [n.replace(str(plain), str(gz)) for n in a.notes])
    (c,) = parse_broker_input(gz.read_bytes(), "-")  # stdin: the bytes, sniffed inside the gzip
    assert c.ranges == a.ranges and c.form == "capture"
    r = kwire("negotiate", str(gz), "--format", "json")
    assert r.code == 0, r
    assert r.json()["apis"] == kwire("negotiate", str(plain), "--format", "json").json()["apis"]
    # the same file through kwire pcap: the same ApiVersions answers
    p = kwire("pcap", str(gz), "--format", "jsonl", "--filter", "api=ApiVersions")
    assert p.code == 0 and p.out.count('"api_name":"ApiVersions"') == 12
    assert p.out == kwire("pcap", str(plain), "--format", "jsonl", "--filter", "api=ApiVersions").out \
        .replace(str(plain), str(gz))
