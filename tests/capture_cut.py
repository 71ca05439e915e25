"""Re-segmenting and cutting real captures (issue 13.1): the harness of the mid-stream tests.

``resegment_pcap`` rewrites a capture with every TCP payload split into segments of at most N
bytes (same flows, same sequence numbers split, same ACK numbers, FIN on the last piece only);
the packets are written with ``capture_util``'s writer, not kwire's. ``cut_report`` then starts an
assembler at every packet k (or a sample of them) and compares what it finds with the frames of
the whole capture: every frame of a cut capture must be one of the whole capture's frames (same
bytes, same direction, same first and last packet, pairing consistent) and the frames wholly after
the cut should all be found.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from capture_util import PcapWriter, ethernet, ip_packet, tcp
from kwire_cli.capture import CaptureStats, KafkaFrame, Packet, iter_packets

SYN = 0x02
FIN = 0x01
RST = 0x04
PSH = 0x08


def read_packets(path_or_bytes) -> list[Packet]:
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    return [p for p in iter_packets(src, "cap", stats=CaptureStats()) if type(p) is Packet]


def split_packets(packets: Iterable[Packet], size: int) -> list[tuple]:
    """``(ts, segment tuple)`` for every packet, payloads cut into pieces of at most ``size`` bytes
    (pieces keep the packet's ACK; SYN, FIN and RST travel on the first / last piece only)."""
    out: list[tuple] = []
    for p in packets:
        pl = p.payload
        if len(pl) <= size:
            out.append((p.ts, (p.src_ip, p.src_port, p.dst_ip, p.dst_port, p.seq, p.ack, p.flags, pl)))
            continue
        n = (len(pl) + size - 1) // size
        for i in range(n):
            flags = p.flags
            if i:
                flags &= ~(SYN | RST)
                seq = (p.seq + (1 if p.flags & SYN else 0) + i * size) & 0xFFFFFFFF
            else:
                seq = p.seq
            if i < n - 1:
                flags &= ~(FIN | PSH)
            out.append((p.ts + i * 1e-6, (p.src_ip, p.src_port, p.dst_ip, p.dst_port, seq, p.ack, flags,
                                           pl[i * size:(i + 1) * size])))
    return out


def write_segments(segs: list[tuple]) -> bytes:
    """A pcap (Ethernet) of ``(ts, segment)`` pairs."""
    f = io.BytesIO()
    w = PcapWriter(f)
    for ts, (sip, sp, dip, dp, seq, ack, flags, payload) in segs:
        pkt, et = ip_packet(sip, dip, tcp(sp, dp, seq, ack, flags, payload))
        w.write(ts, ethernet(pkt, et))
    return f.getvalue()


def resegment_pcap(path: str, size: int) -> bytes:
    return write_segments(split_packets(read_packets(path), size))


def frame_key(f: KafkaFrame, canon: dict | None = None) -> tuple:
    """What identifies a frame: direction, bytes, the packets of its first and last byte (a
    retransmitted copy of a packet stands for the packet it repeats: ``canon``)."""
    sp, ep = f.start_packet, f.packet
    if canon:
        sp, ep = canon.get(sp, sp), canon.get(ep, ep)
    return (f.src, f.dst, f.kind, sp, ep, f.data)


def copies(packets: list[Packet]) -> dict:
    """Packet number -> the number of the first packet with the same segment (a retransmission
    carries the bytes of the packet it repeats)."""
    first: dict = {}
    canon = {}
    for p in packets:
        if p.payload:
            k = (p.src_ip, p.src_port, p.dst_ip, p.dst_port, p.seq, p.payload)
            canon[p.packet] = first.setdefault(k, p.packet)
    return canon


@dataclass
class CutReport:
    cuts: int = 0
    expected: int = 0          # frames wholly after the cut, summed over the cuts
    found: int = 0             # of those, found in the cut capture
    phantoms: list = field(default_factory=list)      # (cut, frame) not in the whole capture
    mispaired: list = field(default_factory=list)     # (cut, frame, whole frame)
    missed: list = field(default_factory=list)        # (cut, whole frame) wholly after, not found

    @property
    def percent(self) -> float:
        return 100.0 * self.found / self.expected if self.expected else 100.0


def frames_of(packets: list[Packet], make_assembler: Callable) -> list[KafkaFrame]:
    asm = make_assembler()
    return [e for e in asm.process(packets) if type(e) is KafkaFrame]


def cut_report(packets: list[Packet], make_assembler: Callable, cuts: Iterable[int] | None = None,
               keep_missed: int = 50) -> CutReport:
    """Start reading at packet index k (0-based) for every k in ``cuts`` (default: all)."""
    whole = frames_of(packets, make_assembler)
    canon = copies(packets)
    by_key = {frame_key(f, canon): f for f in whole}
    rep = CutReport()
    if cuts is None:
        cuts = range(1, len(packets))
    for k in cuts:
        first = packets[k].packet
        got = frames_of(packets[k:], make_assembler)
        after = [f for f in whole if f.start_packet is not None and f.start_packet >= first]
        rep.cuts += 1
        rep.expected += len(after)
        found = set()
        for f in got:
            key = frame_key(f, canon)
            w = by_key.get(key)
            if w is None:
                rep.phantoms.append((k, f))
                continue
            found.add(key)
            if f.kind == "response" and f.api_key is not None and (f.api_key, f.api_version) != (w.api_key, w.api_version):
                rep.mispaired.append((k, f, w))
            if f.kind == "response" and f.correlation_id != w.correlation_id:
                rep.mispaired.append((k, f, w))
        for f in after:
            if frame_key(f, canon) in found:
                rep.found += 1
            elif len(rep.missed) < keep_missed:
                rep.missed.append((k, f))
    return rep
