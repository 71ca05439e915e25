"""capture.formats (magic table, header context, packets at an offset, walking them),
capture.linklayer (the one link -> IP -> TCP walk) and the reader's range arguments, on the
recorded captures."""
from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

import pytest

from capture_util import (
    PcapngWriter,
    PcapWriter,
    ethernet,
    fragment_header,
    hop_by_hop,
    ipv4,
    ipv6,
    routing_header,
    sll2,
    tcp,
)
from kwire_cli.capture import Damage, Packet, iter_packets, iter_records
from kwire_cli.capture.events import IP_FRAGMENT, NON_IP, NON_TCP, TRUNCATED_HEADER, UNSUPPORTED_LINK
from kwire_cli.capture.formats import (
    PCAP_MAGICS,
    SNIFF_BYTES,
    Layout,
    capture_kind,
    header_context,
    packet_at,
    sniff,
    walk_packets,
)
from kwire_cli.capture.linklayer import LT_ETHERNET, LT_SLL2, Segment, tcp_segment

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = sorted((ROOT / "fixtures" / "captures").glob("*.pcap")) + [ROOT / "fixtures" / "negotiate" /
                                                                       "tansu-apiversions.pcap"]


def _starts(data: bytes, layout: Layout) -> list[int]:
    """Packet offsets of a pcap file, walked by hand from the file format."""
    out, pos = [], layout.data_start
    while pos < len(data):
        out.append(pos)
        pos += layout.header_len + struct.unpack_from(layout.byte_order + "I", data, pos + 8)[0]
    return out


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_recorded_captures_sniff_walk_and_plausible_packets(path):
    data = path.read_bytes()
    assert sniff(data[:4]) == capture_kind(data[:4]) == "pcap"
    gz = gzip.compress(data)
    assert sniff(gz[:4]) == "gzip" and capture_kind(gz[:SNIFF_BYTES]) == "pcap"
    layout = header_context(data[:4096])
    assert layout == Layout("pcap", "<", 24, 16, 1e-6, struct.unpack_from("<I", data, 16)[0])
    starts = _starts(data, layout)
    # as many packets as the reader numbers, and the walk ends at the end of the file
    numbers = [r[0] for r in iter_records(io.BytesIO(data))]
    assert numbers == list(range(1, len(starts) + 1))
    assert walk_packets(data, 24, len(data), layout) == (len(data), len(starts))
    # every true start is a plausible packet whose length leads to the next one
    prev = None
    for a, b in zip(starts, starts[1:] + [len(data)], strict=True):
        length, sec = packet_at(data, a, layout, prev, struct.unpack_from("<I", data, 24)[0])
        assert a + length == b
        prev = sec
    # a walk that stops part-way ends at the first packet boundary at or after the stop
    mid = starts[len(starts) // 2] + 1
    end, n = walk_packets(data, 24, mid, layout)
    assert end == starts[len(starts) // 2 + 1] and n == len(starts) // 2 + 1


def test_magic_table_covers_every_pcap_flavour_and_pcapng():
    assert {(m.byte_order, m.ts_unit, m.header_len) for m in PCAP_MAGICS.values()} == {
        ("<", 1e-6, 16), (">", 1e-6, 16), ("<", 1e-9, 16), (">", 1e-9, 16), ("<", 1e-6, 24), (">", 1e-6, 24)}
    for order, nanos in (("<", False), (">", False), ("<", True), (">", True)):
        f = io.BytesIO()
        PcapWriter(f, order=order, nanos=nanos)
        assert sniff(f.getvalue()) == "pcap"
        assert header_context(f.getvalue()).ts_unit == (1e-9 if nanos else 1e-6)
    assert sniff(b"hello") is None and capture_kind(gzip.compress(b"00 01 02 03")) is None
    assert capture_kind(b"\x1f\x8b not really gzip") is None


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_header_context_ends_at_the_first_packet_block(order):
    f = io.BytesIO()
    w = PcapngWriter(f, order)  # writes the section header
    w.interface(1)
    w.name_resolution()
    w.interface(113)
    ctx_end = len(f.getvalue())
    frame = ethernet(ipv4("10.0.0.1", "10.0.0.2", tcp(1, 9092, 5, 0, 0x18, b"abcd")), 0x0800)
    for i in range(3):
        w.epb(0, 1_700_000_000 + i, frame)
    w.interface(1)  # an interface described after the first packet
    w.epb(2, 1_700_000_009, frame)
    data = f.getvalue()
    layout = header_context(data)
    assert layout == Layout("pcapng", order, ctx_end)
    assert packet_at(data, ctx_end, layout) is not None and packet_at(data, ctx_end + 4, layout) is None
    seen: list = []
    assert walk_packets(data, ctx_end, len(data), layout, seen) == (len(data), 4)
    assert len(seen) == 1  # the late interface description
    assert header_context(data[:ctx_end]) is None  # no packet block in what was given


def test_reader_of_a_range_reports_whole_file_packet_numbers_and_offsets():
    """A capture cut short in the middle of a packet: reading the whole file and reading only a
    range (header context + the bytes from a packet boundary on, with its offset and the packets
    before it) give the same packets and the same damage report."""
    data = (ROOT / "fixtures" / "captures" / "kafka-python-consume.pcap").read_bytes()
    layout = header_context(data)
    starts = _starts(data, layout)
    cut = starts[-3] + 30
    whole = list(iter_packets(io.BytesIO(data[:cut]), "x.pcap"))
    k = len(starts) // 2
    part = list(iter_packets(io.BytesIO(data[starts[k]:cut]), "x.pcap", header=data[:24], offset=starts[k],
                             packet_base=k))
    tail = [p for p in whole if p.__class__ is Damage or p.packet > k]
    assert part == tail
    (damage,) = [d for d in part if d.__class__ is Damage]
    assert damage.detail == (f"packet {len(starts) - 2} at offset {starts[-3]} claims "
                             f"{struct.unpack_from('<I', data, starts[-3] + 8)[0]} bytes; only 14 left in the file")


def test_tcp_segment_agrees_with_the_reader_on_every_recorded_packet():
    for path in CAPTURES:
        packets = {p.packet: p for p in iter_packets(str(path)) if p.__class__ is Packet}
        for number, _ts, lt, buf, start, end in iter_records(str(path)):
            seg = tcp_segment(lt, buf, start, end)
            if number in packets:
                assert seg == Segment(*packets[number][3:])
            else:
                assert seg in (NON_IP, NON_TCP, IP_FRAGMENT, TRUNCATED_HEADER)


def test_tcp_segment_link_types_and_skip_reasons():
    seg = tcp(50000, 9092, 100, 7, 0x18, b"\x00\x00\x00\x02hi")
    v6 = ipv6("fd00::1", "fd00::2", seg, ext=[(0, hop_by_hop(16)), (43, routing_header()), (44, fragment_header())])
    got = tcp_segment(LT_SLL2, sll2(v6, 0x86DD))
    assert got == Segment("fd00::1", 50000, "fd00::2", 9092, 100, 7, 0x18, b"\x00\x00\x00\x02hi", 6)
    frame = ethernet(ipv4("10.0.0.1", "10.0.0.2", seg), 0x0800, vlans=[(0x88A8, 1), (0x8100, 2)])
    assert tcp_segment(LT_ETHERNET, frame).payload == b"\x00\x00\x00\x02hi"
    assert tcp_segment(LT_ETHERNET, ethernet(b"\x00" * 28, 0x0806)) == NON_IP  # ARP
    assert tcp_segment(LT_ETHERNET, ethernet(ipv4("10.0.0.1", "10.0.0.2", b"x" * 8, proto=17), 0x0800)) == NON_TCP
    frag = ipv4("10.0.0.1", "10.0.0.2", seg, flags_frag=0x2000)
    assert tcp_segment(LT_ETHERNET, ethernet(frag, 0x0800)) == IP_FRAGMENT
    assert tcp_segment(LT_ETHERNET, frame[:40]) == TRUNCATED_HEADER
    assert tcp_segment(147, frame) == UNSUPPORTED_LINK
