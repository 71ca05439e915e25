"""A late segment is data, not a gap (issue 13.3).

A capture can show two consecutive segments swapped, with the receiver's ACK of the later bytes
between them (packets of one flow timestamped on different CPUs, a mirror port). The ACK past the
hole no longer declares the hole lost at once: it is held open (for ``hold_time`` of capture time
or ``hold_packets`` packets of the connection) and the late copy fills it. A segment that never
comes is still a gap, with the right byte count.
"""
from __future__ import annotations

import io
from pathlib import Path

from capture_cut import read_packets, split_packets, write_segments
from kwire_cli.capture import CaptureStats, Damage, KafkaFrame, iter_capture

ROOT = Path(__file__).resolve().parents[1]
CAPS = ROOT / "fixtures" / "captures"
ACK = 0x10


def _segments(name: str, size: int = 48) -> list[tuple]:
    return split_packets(read_packets(str(CAPS / name)), size)


def _read(segs: list[tuple], **options):
    st = CaptureStats()
    evs = list(iter_capture(io.BytesIO(write_segments(segs)), file_label="t.pcap", stats=st, **options))
    frames = [(f.kind, f.src, f.data, f.api_key, f.api_version, f.correlation_id)
              for f in evs if isinstance(f, KafkaFrame)]
    return frames, [d for d in evs if isinstance(d, Damage)], st


def _pair(segs: list[tuple]) -> int:
    """Index of two consecutive broker-to-client data segments of one stream, in the middle of a
    response that spans more segments."""
    for i in range(len(segs) - 2):
        (_t0, a), (_t1, b), (_t2, c) = segs[i:i + 3]
        if (a[1] == 9092 and b[1] == 9092 and c[1] == 9092 and a[7] and b[7] and c[7] and a[3] == b[3] == c[3]
                and (a[4] + len(a[7])) & 0xFFFFFFFF == b[4] and i > 20):
            return i
    raise AssertionError("no such segments")


def _swap_with_ack_between(segs: list[tuple], i: int) -> list[tuple]:
    (ta, a), (tb, b) = segs[i], segs[i + 1]
    ack = (b[2], b[3], b[0], b[1], a[5], (b[4] + len(b[7])) & 0xFFFFFFFF, ACK, b"")  # the client's ACK of B
    return segs[:i] + [(ta, b), (ta + 1e-6, ack), (tb, a)] + segs[i + 2:]


def test_swapped_segments_with_the_ack_between_are_reassembled():
    segs = _segments("kafkajs-consume.pcap")
    whole, whole_dmg, _st = _read(segs)
    i = _pair(segs)
    late = _swap_with_ack_between(segs, i)
    frames, dmg, st = _read(late)
    assert frames == whole and len(frames) > 40
    assert [d.kind for d in dmg] == [d.kind for d in whole_dmg]
    assert "gap" not in st.damage_bytes and st.duplicate_bytes == 0
    assert st.reconcile()["ok"] and st.lost_bytes == 0
    # before: the ACK declared the hole lost at once, and the late copy was thrown away
    frames0, _dmg0, st0 = _read(late, hold_time=0.0, hold_packets=0)
    assert st0.damage_bytes["gap"] == len(segs[i][1][7]) == 48
    assert st0.duplicate_bytes == 48 and len(frames0) == len(whole) - 1


def test_every_swapped_pair_of_a_capture():
    """Any two consecutive data segments of the capture swapped, the ACK of the later between."""
    segs = _segments("kafka-python-produce.pcap", 100)
    whole, _d, _st = _read(segs)
    done = 0
    for i in range(len(segs) - 1):
        (_ta, a), (_tb, b) = segs[i], segs[i + 1]
        if not (a[7] and b[7] and a[:4] == b[:4] and (a[4] + len(a[7])) & 0xFFFFFFFF == b[4]):
            continue
        frames, _dmg, st = _read(_swap_with_ack_between(segs, i))
        assert frames == whole, i
        assert "gap" not in st.damage_bytes and st.reconcile()["ok"], i
        done += 1
    assert done > 20


def test_a_segment_really_lost_is_still_a_gap_of_its_size():
    segs = _segments("kafkajs-consume.pcap")
    whole, _d, _st = _read(segs)
    i = _pair(segs)
    lost = segs[i][1]
    swapped = _swap_with_ack_between(segs, i)
    gone = [s for s in swapped if s[1] is not lost]
    frames, dmg, st = _read(gone)
    gaps = [d for d in dmg if d.kind == "gap"]
    assert len(gaps) == 1 and gaps[0].bytes == len(lost[7]) == 48
    assert st.damage_bytes["gap"] == 48 and st.reconcile()["ok"]
    assert len(frames) == len(whole) - 1  # the response the segment belonged to
    assert [d for d in dmg if d.kind == "partial-frame"]
    # the gap is declared while reading (after a bounded wait), not at the end of the capture:
    # answers on that connection come out after it
    evs = list(iter_capture(io.BytesIO(write_segments(gone)), file_label="t.pcap"))
    at = next(k for k, e in enumerate(evs) if isinstance(e, Damage) and e.kind == "gap")
    assert any(isinstance(e, KafkaFrame) and e.kind == "response" and e.conn == gaps[0].conn for e in evs[at:])
