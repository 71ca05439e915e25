"""Capture formats and link layers: every variant must give back exactly the frames sent."""
from __future__ import annotations

import gzip
import io
import struct

import pytest

from capture_util import (
    Conversation,
    PcapngWriter,
    PcapWriter,
    ethernet,
    ethernet_frame,
    fragment_header,
    hop_by_hop,
    ipv4,
    ipv6,
    kafka_request,
    kafka_response,
    loop,
    null,
    pcap_ts,
    routing_header,
    segment_bytes,
    sll,
    sll2,
    tcp,
    write_pcap,
)
from kwire_cli.capture import CaptureError, CaptureStats, Damage, KafkaFrame, Packet, iter_capture, iter_packets
from kwire_cli.capture.events import Note
from kwire_cli.errors import KwireError


def conversation(client=("10.0.0.1", 50000), server=("10.0.0.2", 9092), mss=None):
    """A handshake, two request/response exchanges and a close; returns (segments, expected)."""
    c = Conversation(client, server)
    segs = c.handshake()
    r1 = kafka_request(18, 3, 7, "my-client", b"\x00\x01\x02")
    p1 = kafka_response(7, b"api versions answer" * 3)
    r2 = kafka_request(3, 12, 8, None, b"\x00" * 40)
    p2 = kafka_response(8, b"metadata")
    segs += c.send(0, r1, mss) + c.send(1, p1, mss) + c.send(0, r2, mss) + c.send(1, p2, mss)
    segs += [c.fin(0), c.fin(1), c.ack(0)]
    expected = [("request", r1[4:]), ("response", p1[4:]), ("request", r2[4:]), ("response", p2[4:])]
    return segs, expected


def frames(data: bytes, **kw):
    st = CaptureStats()
    evs = list(iter_capture(io.BytesIO(data), stats=st, **kw))
    fr = [e for e in evs if isinstance(e, KafkaFrame)]
    dmg = [e for e in evs if isinstance(e, Damage)]
    return fr, dmg, st


def assert_clean(data: bytes, expected, latency=True, **kw):
    fr, dmg, st = frames(data, **kw)
    assert dmg == []
    assert [(f.kind, f.data) for f in fr] == expected
    assert st.reconcile()["ok"], st.reconcile()
    # pairing: every response has its request's api key and a latency
    for f in fr:
        if f.kind == "response":
            assert f.api_key is not None and f.latency is not None
            assert f.latency > 0 or not latency
    return fr, st


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nanos", [False, True])
def test_pcap_byte_orders_and_resolutions(order, nanos):
    segs, expected = conversation()
    data = write_pcap(segs, order=order, nanos=nanos)
    fr, st = assert_clean(data, expected)
    assert st.packets == len(segs) == st.tcp_packets
    # the first request completes in packet 4 (after the 3-way handshake), 1-based
    assert fr[0].packet == 4 and fr[0].ts == pytest.approx(pcap_ts(3), abs=1e-9)
    assert fr[0].src == "10.0.0.1:50000" and fr[0].dst == "10.0.0.2:9092"
    assert fr[1].kind == "response" and fr[1].api_key == 18 and fr[1].correlation_id == 7
    assert fr[1].request_packet == 4


def test_nanosecond_timestamps_kept():
    f = io.BytesIO()
    w = PcapWriter(f, 1, "<", nanos=True)
    c = Conversation()
    seg = c.send(0, kafka_request(18, 0, 1, "x"))[0]
    w.write((1_700_000_000, 123_456_789), ethernet_frame(seg))
    pk = [p for p in iter_packets(io.BytesIO(f.getvalue())) if isinstance(p, Packet)]
    assert pk[0].ts == pytest.approx(1_700_000_000.123456789, abs=1e-7)


def test_split_segments_small_mss():
    segs, expected = conversation(mss=5)
    fr, _st = assert_clean(write_pcap(segs), expected)
    # a frame cut in 5-byte segments starts in one packet and completes in a later one
    assert fr[0].start_packet < fr[0].packet


def _linktype_capture(linktype, encap, order="<"):
    segs, expected = conversation()
    return write_pcap(segs, linktype=linktype, encap=encap, order=order), expected


def test_vlan_single_and_stacked():
    segs, expected = conversation()
    assert_clean(write_pcap(segs, encap=lambda s: ethernet_frame(s, [(0x8100, 5)])), expected)
    assert_clean(write_pcap(segs, encap=lambda s: ethernet_frame(s, [(0x88A8, 100), (0x8100, 200)])), expected)


@pytest.mark.parametrize("linktype,wrap", [
    (113, lambda s: sll(*segment_bytes(s))),
    (276, lambda s: sll2(*segment_bytes(s))),
    (101, lambda s: segment_bytes(s)[0]),
    (12, lambda s: segment_bytes(s)[0]),
    (14, lambda s: segment_bytes(s)[0]),
    (108, lambda s: loop(segment_bytes(s)[0], 2)),
    (228, lambda s: segment_bytes(s)[0]),
])
def test_link_types(linktype, wrap):
    data, expected = _linktype_capture(linktype, wrap)
    assert_clean(data, expected)


@pytest.mark.parametrize("order", ["<", ">"])
def test_null_loopback_host_endian(order):
    data, expected = _linktype_capture(0, lambda s: null(segment_bytes(s)[0], 2, order), order)
    assert_clean(data, expected)


@pytest.mark.parametrize("family", [10, 24, 28, 30])
def test_null_loopback_ipv6_families(family):
    segs, expected = conversation(("::1", 50000), ("::1", 9092))
    assert_clean(write_pcap(segs, linktype=0, encap=lambda s: null(segment_bytes(s)[0], family)), expected)


def test_ipv6_ethernet_and_sll2():
    segs, expected = conversation(("fd00::1", 40000), ("fd00::2", 9092))
    fr, _ = assert_clean(write_pcap(segs), expected)
    assert fr[0].src == "[fd00::1]:40000" and fr[0].conn == "[fd00::1]:40000->[fd00::2]:9092"
    assert_clean(write_pcap(segs, linktype=276, encap=lambda s: sll2(*segment_bytes(s))), expected)


def test_linktype_ipv6_229():
    segs, expected = conversation(("fd00::1", 40000), ("fd00::2", 9092))
    assert_clean(write_pcap(segs, linktype=229, encap=lambda s: segment_bytes(s)[0]), expected)


def test_ipv6_extension_headers_walked():
    segs, expected = conversation(("fd00::1", 40000), ("fd00::2", 9092))

    def enc(s):
        sip, sp, dip, dp, seq, ack, flags, payload = s
        ext = [(0, hop_by_hop(8)), (60, hop_by_hop(16)), (43, routing_header()), (44, fragment_header(0, False))]
        return ethernet(ipv6(sip, dip, tcp(sp, dp, seq, ack, flags, payload), ext), 0x86DD)

    assert_clean(write_pcap(segs, encap=enc), expected)


def test_ipv4_options_and_tcp_options():
    segs, expected = conversation()

    def enc(s):
        sip, sp, dip, dp, seq, ack, flags, payload = s
        seg = tcp(sp, dp, seq, ack, flags, payload, options=b"\x01\x01\x08\x0a" + b"\x00" * 8)
        return ethernet(ipv4(sip, dip, seg, options=b"\x94\x04\x00\x00"), 0x0800)

    assert_clean(write_pcap(segs, encap=enc), expected)


def test_ethernet_padding_not_payload():
    # tiny segments pad the Ethernet frame to 60 bytes; the padding must not reach the stream
    c = Conversation()
    segs = c.handshake() + c.send(0, kafka_request(18, 0, 1, None), mss=1)
    fr, dmg, _ = frames(write_pcap(segs))
    assert [f.data for f in fr] == [kafka_request(18, 0, 1, None)[4:]]
    assert [d.kind for d in dmg] == ["unanswered-request"]


def test_ip_fragments_and_non_tcp_skipped_and_counted():
    segs, expected = conversation()
    f = io.BytesIO()
    w = PcapWriter(f)
    t = 1_700_000_000.0
    w.write(t, ethernet(ipv4("10.0.0.9", "10.0.0.8", b"\x00" * 8 + b"dns", proto=17), 0x0800))  # UDP
    w.write(t, ethernet(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20, 0x0806))  # ARP
    w.write(t, ethernet(ipv4("10.0.0.1", "10.0.0.2", b"\x00" * 24, flags_frag=0x2000), 0x0800))  # MF set
    w.write(t, ethernet(ipv4("10.0.0.1", "10.0.0.2", b"\x00" * 24, flags_frag=0x0003), 0x0800))  # offset 3
    w.write(t, ethernet(ipv6("fd00::1", "fd00::2", b"\x00" * 24, [(44, fragment_header(5, True))]), 0x86DD))
    w.write(t, ethernet(ipv6("fd00::1", "fd00::2", b"\x00" * 12, proto=58), 0x86DD))  # ICMPv6
    for i, s in enumerate(segs):
        w.write(t + 1 + i / 1000, ethernet_frame(s))
    fr, dmg, st = frames(f.getvalue())
    assert [(x.kind, x.data) for x in fr] == expected and dmg == []
    assert st.skipped == {"non-tcp": 2, "non-ip": 1, "ip-fragment": 3}
    assert st.packets == 6 + len(segs) and st.tcp_packets == len(segs)
    assert fr[0].packet == 6 + 4
    # with report_skipped every skipped packet is an event naming it
    _fr, dmg2, _ = frames(f.getvalue(), report_skipped=True)
    assert [(d.packet, d.kind) for d in dmg2] == [(1, "non-tcp"), (2, "non-ip"), (3, "ip-fragment"),
                                                 (4, "ip-fragment"), (5, "ip-fragment"), (6, "non-tcp")]


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_two_interfaces_different_link_types(order):
    """Client traffic on an Ethernet interface with microsecond stamps, broker replies on an SLL
    interface with nanosecond stamps; SPB, unknown blocks, NRB and ISB mixed in."""
    segs, expected = conversation()
    f = io.BytesIO()
    w = PcapngWriter(f, order)
    w.name_resolution()
    eth = w.interface(1)
    cooked = w.interface(113, tsresol=9)
    w.unknown()
    t0 = 1_700_000_000.0
    for i, s in enumerate(segs):
        if s[0] == "10.0.0.1":
            w.epb(eth, t0 + i * 0.01, ethernet_frame(s))
        else:
            w.epb(cooked, t0 + i * 0.01, sll(*segment_bytes(s)))
        w.unknown(0x40000BAD, b"custom")
    w.interface_stats(0, ifdrop=3)
    w.interface_stats(1)
    w.interface_stats(0, ifdrop=7)  # cumulative: 7 in all, not 10
    fr, st = assert_clean(f.getvalue(), expected)
    assert st.capture_drops == 7
    assert fr[1].ts == pytest.approx(t0 + 0.04, abs=1e-6)  # a response stamped in ns resolution
    assert fr[0].packet == 4


def test_pcapng_binary_tsresol_tsoffset_and_spb_and_second_section():
    segs, expected = conversation()
    f = io.BytesIO()
    w = PcapngWriter(f, "<")
    w.interface(1, tsresol=0x80 | 20, tsoffset=1_000)  # 2^-20 s units, +1000 s
    half = len(segs) // 2
    for i, s in enumerate(segs[:half]):
        w.epb(0, 1_700_000_000.0 + i, ethernet_frame(s))
    # a new section in the other byte order; its first interface is raw IP, read through SPBs
    w2 = PcapngWriter(f, ">")
    w2.interface(101)
    for s in segs[half:]:
        w2.spb(segment_bytes(s)[0])
    # simple packet blocks carry no time: they take the last time seen, so latencies are 0 here
    fr, _ = assert_clean(f.getvalue(), expected, latency=False)
    first = next(p for p in iter_packets(io.BytesIO(f.getvalue())) if isinstance(p, Packet))
    assert first.ts == pytest.approx(1_700_001_000.0, abs=1e-5)


def test_gzip_compressed_pcap():
    segs, expected = conversation()
    assert_clean(gzip.compress(write_pcap(segs)), expected)


def test_path_input_and_label(tmp_path):
    segs, expected = conversation()
    p = tmp_path / "c.pcap"
    p.write_bytes(write_pcap(segs))
    evs = list(iter_capture(str(p)))
    assert [e.data for e in evs] == [d for _k, d in expected]
    assert evs[0].file == str(p)
    assert list(iter_capture(p, file_label="x"))[0].file == "x"


def test_not_a_capture_is_a_kwire_error(tmp_path):
    with pytest.raises(CaptureError, match=r"not a pcap or pcapng file: magic 0x7b226122 at offset 0") as e:
        list(iter_capture(io.BytesIO(b'{"a": 1}')))
    assert isinstance(e.value, KwireError)
    with pytest.raises(CaptureError, match="only 2 bytes"):
        list(iter_capture(io.BytesIO(b"\xd4\xc3")))
    with pytest.raises(CaptureError, match="file header cut short"):
        list(iter_capture(io.BytesIO(b"\xd4\xc3\xb2\xa1\x02\x00")))
    with pytest.raises(CaptureError, match="cannot open capture"):
        list(iter_capture(str(tmp_path / "missing.pcap")))


def test_truncated_file_mid_record():
    segs, expected = conversation()
    data = write_pcap(segs)
    # cut inside the record of the last request's response (packet 7 carries p2)
    records = _record_offsets(data)
    cut = records[6] + 16 + 30
    fr, dmg, st = frames(data[:cut])
    assert [(f.kind, f.data) for f in fr] == expected[:3]
    tr = [d for d in dmg if d.kind == "truncated-record"]
    assert len(tr) == 1 and tr[0].packet == 7
    assert f"offset {records[6]}" in tr[0].detail and "only 30 left" in tr[0].detail
    # the request whose answer was cut off is reported unanswered; nothing raised
    assert any(d.kind == "unanswered-request" and "8" in d.detail for d in dmg)
    assert st.reconcile()["ok"]


def test_truncated_record_header():
    segs, _ = conversation()
    data = write_pcap(segs)
    records = _record_offsets(data)
    evs = list(iter_packets(io.BytesIO(data[:records[2] + 10])))
    assert sum(isinstance(e, Packet) for e in evs) == 2
    assert isinstance(evs[-1], Damage) and evs[-1].kind == "truncated-record" and evs[-1].packet == 3
    assert "cut short: 10 of 16 bytes" in evs[-1].detail


def test_record_longer_than_snaplen_is_read_whole_with_one_note():
    """As Wireshark does: a record longer than the file header's snap length (up to the format's
    limit) is read whole; the file gets one note."""
    c = Conversation()
    segs = c.handshake()
    big = kafka_request(0, 3, 1, "c", b"\x00\x00\x00\x00\x00\x01" + b"z" * 300)
    bigger = kafka_request(0, 3, 3, "c", b"\x00\x00\x00\x00\x00\x01" + b"y" * 400)
    segs += c.send(0, big) + c.send(0, kafka_request(18, 0, 2, "c")) + c.send(0, bigger)
    f = io.BytesIO()
    w = PcapWriter(f, snaplen=200)
    for i, s in enumerate(segs):
        w.write(1_700_000_000 + i, ethernet_frame(s))
    st = CaptureStats()
    evs = list(iter_capture(io.BytesIO(f.getvalue()), stats=st))
    fr = [e for e in evs if isinstance(e, KafkaFrame)]
    assert [(x.correlation_id, x.data) for x in fr] == [(1, big[4:]), (2, fr[1].data), (3, bigger[4:])]
    assert not [e for e in evs if isinstance(e, Damage) and e.kind != "unanswered-request"]
    notes = [e for e in evs if isinstance(e, Note)]
    assert len(notes) == 1 and notes[0].kind == "over-snaplen" and notes[0].packet == 4
    assert "exceeds the file header's snap length 200" in notes[0].detail and "read whole" in notes[0].detail
    assert st.packets == 6 and st.reconcile()["ok"]


def test_snaplen_cut_payload_is_a_gap_not_garbage():
    """A capture with a small snap length: records carry only the headers' worth of payload."""
    c = Conversation()
    segs = c.handshake()
    r1 = kafka_request(18, 0, 1, "c", b"a" * 100)
    r2 = kafka_request(18, 0, 2, "c", b"b" * 10)
    segs += c.send(0, r1) + c.send(0, r2)
    f = io.BytesIO()
    w = PcapWriter(f, snaplen=96)
    for i, s in enumerate(segs):
        full = ethernet_frame(s)
        w.write(1_700_000_000 + i, full[:96], origlen=len(full))
    fr, dmg, st = frames(f.getvalue())
    gaps = [d for d in dmg if d.kind == "gap"]
    assert sum(d.bytes for d in gaps) == (len(r1) - (96 - 54))
    # request 1's header was captured: a frame all the same, cut (its first 38 bytes)
    assert [x.correlation_id for x in fr] == [1, 2]
    assert fr[0].cut and len(fr[0].data) == 96 - 54 - 4 and fr[0].size == len(r1) - 4 and not fr[1].cut
    assert st.reconcile()["ok"]


def test_pcapng_truncated_and_corrupt_blocks():
    segs, expected = conversation()
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.interface(1)
    for i, s in enumerate(segs):
        w.epb(0, 1_700_000_000 + i, ethernet_frame(s))
    data = f.getvalue()
    fr, dmg, _ = frames(data[:-10])
    assert [(x.kind, x.data) for x in fr] == expected
    assert [d.kind for d in dmg if d.kind == "truncated-record"] == ["truncated-record"]
    assert [d.packet for d in dmg if d.kind == "truncated-record"] == [len(segs)]
    bad = bytearray(data)
    bad[-4:] = b"\x00\x00\x00\x00"  # trailing length of the last block
    _fr, dmg, _ = frames(bytes(bad))
    assert [d.kind for d in dmg if d.kind == "corrupt-block"] == ["corrupt-block"]
    # an interface id that was never described
    f2 = io.BytesIO()
    w2 = PcapngWriter(f2)
    w2.interface(1)
    w2.ifaces.append(10 ** 6)
    w2.epb(1, 1_700_000_000, ethernet_frame(segs[0]))
    evs = list(iter_packets(io.BytesIO(f2.getvalue())))
    assert len(evs) == 1 and evs[0].kind == "corrupt-block" and "interface 1" in evs[0].detail


def test_unsupported_link_type_reported_once():
    f = io.BytesIO()
    w = PcapWriter(f, linktype=147)
    for i in range(3):
        w.write(1_700_000_000 + i, b"\x00" * 40)
    evs = list(iter_packets(io.BytesIO(f.getvalue())))
    assert [e.kind for e in evs] == ["unsupported-link"]


def test_stream_without_seek_and_short_reads():
    """A pipe-like object that returns a few bytes per read."""
    segs, expected = conversation()
    data = write_pcap(segs)

    class Dribble(io.RawIOBase):
        def __init__(self, b):
            self.b, self.p = b, 0

        def readable(self):
            return True

        def read(self, n=-1):
            n = 7 if n is None or n < 0 else min(n, 7)
            d = self.b[self.p:self.p + n]
            self.p += len(d)
            return d

    evs = list(iter_capture(Dribble(data)))
    assert [(e.kind, e.data) for e in evs] == expected


def test_kafka_frame_crossing_read_chunks(monkeypatch):
    """Records straddle the reader's chunk boundary: shrink the chunk to prove it."""
    from kwire_cli.capture import chunks
    monkeypatch.setattr(chunks, "CHUNK", 50)
    segs, expected = conversation(mss=37)
    for data in (write_pcap(segs), _as_pcapng(segs)):
        assert_clean(data, expected)


def _as_pcapng(segs):
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.interface(1)
    for i, s in enumerate(segs):
        w.epb(0, 1_700_000_000 + i / 100, ethernet_frame(s))
    return f.getvalue()


def _record_offsets(data: bytes) -> list[int]:
    offs = []
    p = 24
    while p + 16 <= len(data):
        offs.append(p)
        p += 16 + struct.unpack_from("<I", data, p + 8)[0]
    return offs


def test_against_dpkt_independent_parse():
    """Packet fields agree with dpkt's parse of the same file (an independent implementation)."""
    dpkt = pytest.importorskip("dpkt")
    segs, _ = conversation(mss=11)
    data = write_pcap(segs, encap=lambda s: ethernet_frame(s, [(0x8100, 3)]))
    ours = [p for p in iter_packets(io.BytesIO(data)) if isinstance(p, Packet)]
    theirs = []
    for ts, buf in dpkt.pcap.Reader(io.BytesIO(data)):
        eth = dpkt.ethernet.Ethernet(buf)
        ip = eth.data
        t = ip.data
        theirs.append((ts, t.sport, t.dport, t.seq, t.ack, t.flags, bytes(t.data)))
    assert [(pytest.approx(p.ts, abs=1e-6), p.src_port, p.dst_port, p.seq, p.ack, p.flags, p.payload)
            for p in ours] == theirs


def _all_events(data: bytes):
    try:
        return list(iter_capture(io.BytesIO(data), broker_ports=set()))
    except CaptureError:
        return None


def test_every_truncation_point_is_handled():
    segs, expected = conversation(mss=9)
    for data in (write_pcap(segs[:8]), _as_pcapng(segs[:8])):
        for cut in range(len(data)):
            evs = _all_events(data[:cut])  # never anything but events or a CaptureError
            if evs is not None and cut > 40:
                assert not any(isinstance(e, Damage) and e.kind == "corrupt-block" for e in evs)


def test_random_corruption_never_escapes_as_a_python_error():
    import random
    rnd = random.Random(1234)
    segs, _ = conversation(mss=13)
    bases = [write_pcap(segs), _as_pcapng(segs), write_pcap(segs, order=">", nanos=True),
             write_pcap(segs, linktype=0, encap=lambda s: null(segment_bytes(s)[0], 2)),
             write_pcap(segs, linktype=276, encap=lambda s: sll2(*segment_bytes(s))),
             gzip.compress(write_pcap(segs))]
    for _ in range(400):
        data = bytearray(rnd.choice(bases))
        for _k in range(rnd.randint(1, 12)):
            i = rnd.randrange(len(data))
            op = rnd.random()
            if op < 0.6:
                data[i] = rnd.randrange(256)
            elif op < 0.8:
                del data[i:i + rnd.randint(1, 40)]
            else:
                data[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 40)))
        evs = _all_events(bytes(data))
        if evs is not None:
            for e in evs:
                assert isinstance(e, (KafkaFrame, Damage, Note))


def test_truncated_gzip_capture_ends_cleanly():
    segs, expected = conversation()
    z = gzip.compress(write_pcap(segs))
    fr, dmg, st = frames(z[:len(z) * 2 // 3])
    assert 1 <= len(fr) < len(expected)
    assert [(f.kind, f.data) for f in fr] == expected[:len(fr)]
    assert any(d.kind == "truncated-record" for d in dmg)
    assert st.reconcile()["ok"]


def test_byte_range_read_from_a_path(tmp_path):
    # a byte range of a capture given as a path (the range's bytes, the whole file's header apart):
    # the same packets and numbers as the whole file, and the range's file is closed at the end
    f = io.BytesIO()
    w = PcapWriter(f, 1, "<")
    c = Conversation()
    for i in range(3):
        seg = c.send(0, kafka_request(18, 0, i + 1, "x"))[0]
        w.write((1_700_000_000 + i, 0), ethernet_frame(seg))
    data = f.getvalue()
    first = 24 + 16 + struct.unpack_from("<I", data, 24 + 8)[0]  # the second packet's offset
    part = tmp_path / "range.bin"
    part.write_bytes(data[first:])
    whole = [(p.packet, p.ts) for p in iter_packets(io.BytesIO(data)) if isinstance(p, Packet)]
    ranged = [(p.packet, p.ts) for p in iter_packets(str(part), header=data[:24], offset=first, packet_base=1)
              if isinstance(p, Packet)]
    assert ranged == whole[1:]
    assert len(whole) == 3
