"""Captures that start mid-stream (issue 13.1): re-segmented real captures cut at every packet.

Every bundled capture is rewritten with its TCP payloads split into 100-byte (and, for a few,
7-byte) segments (``capture_cut``: same flows, same sequence numbers split, same ACKs), then read
from packet k on, for every k: each frame found must be one of the whole capture's frames (same
bytes, same direction, same first and last packet, consistent pairing: a response is paired with
its own request or not at all), and the frames wholly after the cut should all be found.

The figures (frames found of those wholly after the cut) are printed per capture; what is not
found is the answer to a request sent before the cut whose API the rest of the capture never
shows (it cannot be told from payload without guessing), e.g. kafkajs-produce's last Produce
answer when the cut falls inside that request.
"""
from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from capture_cut import cut_report, read_packets, resegment_pcap, split_packets
from kwire_cli.capture import CaptureStats, KafkaFrame, StreamAssembler, iter_capture
from kwire_cli.capture.check import CodecCheck

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
CAPTURES = sorted(glob.glob(str(FIXTURES / "captures" / "*.pcap")))
SECURE_PLAIN = sorted(glob.glob(str(FIXTURES / "secure" / "tls" / "*.plain.pcap"))
                      + [p for p in glob.glob(str(FIXTURES / "secure" / "sasl" / "sasl-*.pcap"))
                         if "-ssl-" not in p or p.endswith(".plain.pcap")])
CHECK = CodecCheck()


def assembler():
    return StreamAssembler(stats=CaptureStats(), check=CHECK)


def _report(path: str, size: int, step: int = 1):
    packets = read_packets(resegment_pcap(path, size))
    return cut_report(packets, assembler, range(1, len(packets), step))


def _check(results: list, floor: float, overall: float) -> None:
    expected = sum(r.expected for _p, r in results)
    found = sum(r.found for _p, r in results)
    for path, r in results:
        print(f"{os.path.basename(path)}: {r.cuts} cuts, {r.found}/{r.expected} = {r.percent:.2f}% of the "
              f"frames wholly after the cut found, {len(r.phantoms)} phantom")
    print(f"all: {found}/{expected} = {100 * found / expected:.3f}%")
    for path, r in results:
        assert not r.phantoms, (path, [(k, f.kind, f.size, f.correlation_id) for k, f in r.phantoms[:5]])
        assert not r.mispaired, (path, r.mispaired[:3])
        assert r.percent >= floor, (path, r.percent, [(k, f.kind, f.correlation_id, f.api_key) for k, f in r.missed[:10]])
    assert 100 * found / expected >= overall


def test_resegmenting_keeps_every_frame():
    """The harness itself: a re-segmented capture gives the frames of the original."""
    for path in CAPTURES:
        orig = [(f.kind, f.src, f.data, f.correlation_id, f.api_key) for f in iter_capture(path)
                if isinstance(f, KafkaFrame)]
        for size in (100, 7):
            pk = read_packets(resegment_pcap(path, size))
            asm = assembler()
            got = [(f.kind, f.src, f.data, f.correlation_id, f.api_key) for f in asm.process(pk)
                   if isinstance(f, KafkaFrame)]
            assert got == orig, (path, size)
            assert len(pk) > len(read_packets(path))


def test_split_keeps_sequence_numbers_and_acks():
    path = CAPTURES[0]
    pk = read_packets(path)
    segs = split_packets(pk, 7)
    stream: dict = {}
    for _ts, (sip, sp, _dip, _dp, seq, _ack, _fl, pl) in segs:
        if pl:
            stream.setdefault((sip, sp), {})[seq] = pl
    for p in pk:
        if p.payload:
            pieces = stream[(p.src_ip, p.src_port)]
            got = b"".join(pieces[(p.seq + i) & 0xFFFFFFFF] for i in range(0, len(p.payload), 7))
            assert got == p.payload


def test_cut_at_sampled_packets_every_capture():
    """Fast: 100-byte segments, every third cut point, every bundled capture."""
    results = [(p, _report(p, 100, step=3)) for p in CAPTURES]
    _check(results, floor=95.0, overall=99.0)


def test_cut_at_every_packet_every_capture():
    """100-byte segments, every cut point; 7-byte segments for the three admin captures."""
    results = [(p, _report(p, 100)) for p in CAPTURES]
    results += [(p + " (7-byte segments)", _report(p, 7)) for p in CAPTURES if "admin" in p]
    _check(results, floor=95.0, overall=99.5)


def test_cut_at_every_packet_secure_plaintext_fixtures():
    """The SASL and TLS fixtures' plaintext twins (other clients' handshakes, other ports)."""
    results = [(p, _report(p, 100)) for p in SECURE_PLAIN]
    results = [(p, r) for p, r in results if r.expected]
    _check(results, floor=97.0, overall=99.5)


def test_a_capture_starting_inside_a_response_invents_nothing():
    """The first bytes of a connection caught mid-stream are not trusted as a size: cut inside a
    response, nothing of it comes out, and what follows does."""
    path = str(FIXTURES / "captures" / "kafkajs-produce.pcap")
    pk = read_packets(resegment_pcap(path, 100))
    whole = [f for f in assembler().process(pk) if isinstance(f, KafkaFrame)]
    first = next(f for f in whole if f.kind == "response" and f.packet > f.start_packet)
    k = next(i for i, p in enumerate(pk) if p.packet == first.start_packet + 1)
    st = CaptureStats()
    asm = StreamAssembler(stats=st, check=CHECK)
    got = [e for e in asm.process(pk[k:])]
    frames = [f for f in got if isinstance(f, KafkaFrame)]
    assert first.data not in [f.data for f in frames]
    assert [(f.kind, f.correlation_id) for f in frames] == \
        [(f.kind, f.correlation_id) for f in whole if f.start_packet > first.packet]
    assert st.reconcile()["ok"] and st.damage_bytes["resync-skip"] > 0


KAFKA_GO = os.environ.get("KWIRE_KAFKA_GO_FIXTURES")


@pytest.mark.skipif(not KAFKA_GO, reason="KWIRE_KAFKA_GO_FIXTURES (kafka-go's fixtures/ folder) not set")
def test_kafka_go_pcapng_cut_invents_nothing():
    """fixtures/vectors/README.md: kafka-go's captures (not committed), each cut at every packet
    (editcap -r FILE cut.pcapng 55-1000 was one such cut): no frame is invented."""
    assert KAFKA_GO is not None
    files = sorted(glob.glob(os.path.join(KAFKA_GO, "*.pcapng")))
    assert files
    results = []
    for path in files:
        packets = read_packets(path)
        results.append((path, cut_report(packets, assembler)))
    _check(results, floor=95.0, overall=98.0)
