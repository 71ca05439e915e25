"""TCP reassembly, Kafka framing, resynchronisation and pairing on handcrafted segments."""
from __future__ import annotations

import io

from capture_util import ACK, RST, Conversation, kafka_request, kafka_response, produce_body, write_pcap
from kwire_cli.capture import (
    CaptureStats,
    Damage,
    KafkaFrame,
    Packet,
    StreamAssembler,
    conn_key,
    iter_capture,
    iter_packets,
)


def packets(segs, t0=1000.0, file="f"):
    return [Packet(file, i + 1, t0 + i, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], len(s[7]))
            for i, s in enumerate(segs)]


def run(segs, **kw):
    st = CaptureStats()
    asm = StreamAssembler(stats=st, **kw)
    evs = list(asm.process(packets(segs)))
    fr = [e for e in evs if isinstance(e, KafkaFrame)]
    dmg = [e for e in evs if isinstance(e, Damage)]
    rec = st.reconcile()
    assert rec["ok"], rec
    assert st.pending_bytes == 0
    return fr, dmg, st


def kinds(dmg):
    return [d.kind for d in dmg]


REQS = [kafka_request(3, 12, i, "client-1", bytes(range(40))) for i in range(1, 6)]
RESPS = [kafka_response(i, b"response-%d" % i * 5) for i in range(1, 6)]


def test_out_of_order_segments():
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0] + REQS[1], mss=10)
    order = [parts[i] for i in (0, 2, 1, 5, 3, 4, 7, 6)] + parts[8:]
    segs += order
    fr, dmg, st = run(segs)
    assert [f.data for f in fr] == [REQS[0][4:], REQS[1][4:]]
    # the first request (bytes 0..61) completes when the last of its pieces arrives: parts[6]
    assert fr[0].packet == 3 + order.index(parts[6]) + 1
    assert fr[0].start_packet == 4 and fr[1].packet == len(segs)
    assert st.duplicate_bytes == 0 and kinds(dmg) == ["unanswered-request"]


def test_retransmissions_dropped_and_counted():
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0], mss=20)
    segs += [parts[0], parts[0], parts[1], parts[0], parts[1], parts[2], parts[3], parts[3]]
    segs += c.send(1, RESPS[0])
    fr, dmg, st = run(segs)
    assert [f.data for f in fr] == [REQS[0][4:], RESPS[0][4:]]
    assert st.duplicate_bytes == 20 + 20 + 20 + 2
    assert dmg == [] and fr[1].api_key == 3 and fr[1].correlation_id == 1


def test_overlap_first_copy_wins():
    """Overlapping copies carry different bytes here, so the test sees which copy won: always the
    first one captured, whether it was delivered already or is still waiting out of order."""
    c = Conversation()
    segs = c.handshake()
    base = c.seq[0]
    data = REQS[0]
    other = bytes(x ^ 0xFF for x in data)
    cs, ss = c.c, c.s
    mk = lambda off, payload: (cs[0], cs[1], ss[0], ss[1], base + off, c.seq[1], ACK, payload)
    segs += [mk(0, data[:20]),            # first copy of 0..20
             mk(10, other[10:40]),        # overlaps 10..20 (trimmed); 20..40 only here
             mk(50, data[50:56]),         # out of order, buffered
             mk(45, other[45:60]),        # overlaps the buffered 50..56: only 45..50 and 56..60 kept
             mk(40, data[40:45]),         # fills the hole
             mk(60, data[60:])]
    fr, _dmg, st = run(segs)
    expect = bytearray(data)
    expect[20:40] = other[20:40]
    expect[45:50] = other[45:50]
    expect[56:60] = other[56:60]
    assert fr[0].data == bytes(expect[4:])
    assert st.duplicate_bytes == 10 + 6


def test_sequence_wraparound():
    c = Conversation(isn_c=0xFFFFFFFF - 30, isn_s=0xFFFFFFF0)
    segs = c.handshake()
    for i in range(3):
        segs += c.send(0, REQS[i], mss=17)
        segs += c.send(1, RESPS[i], mss=13)
    assert c.seq[0] < 1000 and c.seq[1] < 1000  # both directions wrapped past 2^32
    # reorder two segments straddling the wrap point
    segs[4], segs[5] = segs[5], segs[4]
    fr, dmg, _st = run(segs)
    assert [f.data for f in fr] == [x[4:] for p in zip(REQS[:3], RESPS[:3]) for x in p]
    assert dmg == [] and all(f.request_ts is not None for f in fr if f.kind == "response")


def test_mid_stream_start_resyncs_and_reports_skipped_bytes():
    c = Conversation()
    c.handshake()  # not captured
    stream = REQS[0] + REQS[1] + REQS[2]
    parts = c.send(0, stream, mss=25)
    start = 2  # capture starts at byte 50, inside the first request (58 bytes)
    segs = parts[start:]
    segs += c.send(1, RESPS[0] + RESPS[1] + RESPS[2], mss=30)
    fr, dmg, st = run(segs)
    reqs = [f for f in fr if f.kind == "request"]
    assert [f.data for f in reqs] == [REQS[1][4:], REQS[2][4:]]
    skip = [d for d in dmg if d.kind == "resync-skip"]
    assert skip[0].bytes == len(REQS[0]) - 50
    # the broker direction: the response to request 1 (never seen) is skipped; 2 and 3 pair
    resps = [f for f in fr if f.kind == "response"]
    assert [f.correlation_id for f in resps] == [2, 3] and all(f.api_key == 3 for f in resps)
    assert [d.bytes for d in skip[1:]] == [len(RESPS[0])]
    assert st.damage_bytes["resync-skip"] == len(REQS[0]) - 50 + len(RESPS[0])


def test_mid_stream_start_at_frame_boundary_has_no_damage():
    c = Conversation()
    c.handshake()
    segs = c.send(0, REQS[0]) + c.send(1, RESPS[0])
    fr, dmg, _st = run(segs)
    assert [f.correlation_id for f in fr] == [1, 1] and dmg == []


def test_dropped_packet_inside_a_frame_skips_exactly_its_rest():
    """The lost segment is in the middle of request 2: the rest of it is skipped by its known
    size and request 3 comes out intact with no scanning."""
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0] + REQS[1] + REQS[2], mss=20)
    dropped = parts[4]  # bytes 80..100, inside request 2 (58..116)
    segs += [p for p in parts if p is not dropped]
    segs += c.send(1, RESPS[0] + RESPS[1] + RESPS[2])
    fr, dmg, st = run(segs)
    assert [f.data for f in fr if f.kind == "request"] == [REQS[0][4:], REQS[2][4:]]
    gap = [d for d in dmg if d.kind == "gap"]
    assert len(gap) == 1 and gap[0].bytes == 20
    # packet numbers around it: parts[3] is packet 3+4=7, the next one captured is packet 8
    assert "between packets 7 and 8" in gap[0].detail
    partial = [d for d in dmg if d.kind == "partial-frame"]
    assert len(partial) == 1 and partial[0].bytes == len(REQS[1]) - 20
    assert "resync-skip" not in kinds(dmg)
    # request 2's header survived the gap, so its response still pairs
    assert [f.correlation_id for f in fr if f.kind == "response" and f.api_key == 3] == [1, 2, 3]
    assert st.damage_bytes["gap"] == 20


def test_dropped_packet_across_frame_boundary_resyncs_at_next_request():
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0] + REQS[1] + REQS[2], mss=50)
    dropped = parts[1]  # bytes 50..100: end of request 1 and the start of request 2
    segs += [p for p in parts if p is not dropped]
    fr, dmg, st = run(segs)
    assert [f.correlation_id for f in fr] == [3]
    assert kinds(dmg)[:3] == ["gap", "partial-frame", "resync-skip"]
    assert [d.bytes for d in dmg[:3]] == [50, 50, len(REQS[0]) * 2 - 100]
    assert st.lost_bytes == 50 + 50 + (len(REQS[0]) * 2 - 100)


def test_gap_declared_when_peer_acknowledges_past_it():
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0] + REQS[1], mss=20)
    segs += [parts[0]] + parts[2:]  # parts[1] lost
    segs.append(c.ack(1))  # the broker acknowledges everything: the capture missed bytes 20..40
    segs += c.send(0, REQS[2])
    st = CaptureStats()
    asm = StreamAssembler(stats=st)
    seen = []
    for p in packets(segs):
        seen.append((p.packet, [e.kind if isinstance(e, Damage) else e.correlation_id for e in asm.feed(p)]))
    ack_frame = len(segs) - 1
    assert dict(seen)[ack_frame][0] == "gap"  # declared by the ACK, not at the end
    assert dict(seen)[len(segs)] == [3]


def test_gap_declared_when_buffer_bound_exceeded():
    c = Conversation()
    segs = c.handshake()
    data = b"".join(REQS) * 4
    parts = c.send(0, data, mss=16)
    segs += [parts[0]] + parts[2:]
    st = CaptureStats()
    asm = StreamAssembler(stats=st, max_buffered=100)
    out = []
    pk = packets(segs)
    for p in pk:
        out += [(p.packet, e) for e in asm.feed(p)]
    # the gap was declared while reading, a few packets after the loss, not at the end
    first_gap = next(f for f, e in out if isinstance(e, Damage) and e.kind == "gap")
    assert first_gap <= 3 + 10
    out += [(None, e) for e in asm.finish()]
    got = [e.correlation_id for _f, e in out if isinstance(e, KafkaFrame)]
    assert got == [2, 3, 4, 5] + [1, 2, 3, 4, 5] * 3
    assert st.reconcile()["ok"]


def test_gap_at_end_of_capture_reported():
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0], mss=20)
    segs += [parts[0], parts[2]]
    fr, dmg, st = run(segs)
    assert fr == [] and "gap" in kinds(dmg) and st.damage_bytes["gap"] == 20
    # 20 bytes before the gap and 20 after it were seen of a frame that was never completed
    assert st.damage_bytes["partial-frame"] == 40


def test_produce_acks0_gets_no_wait_and_acks1_does():
    c = Conversation()
    segs = c.handshake()
    p0v3 = kafka_request(0, 3, 1, "p", produce_body(0, 3, "tx-1"))
    p0v9 = kafka_request(0, 9, 2, "p", produce_body(0, 9, None), flexible=True, tags=b"\x01\x05\x02hi")
    p0v2 = kafka_request(0, 2, 3, "p", produce_body(0, 2))
    p1 = kafka_request(0, 9, 4, "p", produce_body(1, 9, "tx"), flexible=True)
    pall = kafka_request(0, 7, 5, "p", produce_body(-1, 7))
    segs += c.send(0, p0v3 + p0v9 + p0v2 + p1 + pall)
    segs += c.send(1, kafka_response(4, b"ok"))
    fr, dmg, st = run(segs)
    assert [f.acks for f in fr if f.kind == "request"] == [0, 0, 0, 1, -1]
    assert st.acks0_requests == 3
    # only request 5 (acks=-1) is left without its response
    un = [d for d in dmg if d.kind == "unanswered-request"]
    assert len(un) == 1 and "correlation ids 5" in un[0].detail


def test_unpaired_response_and_oversize_frame():
    c = Conversation()
    segs = c.handshake()
    segs += c.send(0, REQS[0])
    segs += c.send(1, kafka_response(99, b"who?") + RESPS[0])
    segs += c.send(0, b"\x7f\xff\xff\xff" + b"\x00" * 20 + REQS[1])  # an impossible size
    segs += c.send(1, RESPS[1])
    fr, dmg, st = run(segs, max_frame=1 << 20)
    assert [(f.kind, f.correlation_id, f.api_key) for f in fr] == [
        ("request", 1, 3), ("response", 99, None), ("response", 1, 3), ("request", 2, 3), ("response", 2, 3)]
    assert kinds(dmg) == ["unpaired-response", "oversize-frame", "resync-skip"]
    assert dmg[2].bytes == 24


def test_rst_closes_and_port_reuse_makes_a_new_connection():
    c = Conversation(isn_c=100, isn_s=200)
    segs = c.handshake() + c.send(0, REQS[0]) + c.send(1, RESPS[0])
    a, b = c.c, c.s
    segs.append((a[0], a[1], b[0], b[1], c.seq[0], 0, RST, b""))
    segs.append((a[0], a[1], b[0], b[1], c.seq[0], 0, ACK, b"late"))  # after the reset: ignored
    c2 = Conversation(isn_c=90000, isn_s=1)
    segs += c2.handshake() + c2.send(0, REQS[1]) + c2.send(1, RESPS[1]) + [c2.fin(0), c2.fin(1), c2.ack(0)]
    fr, dmg, st = run(segs)
    assert [f.conn for f in fr] == ["10.0.0.1:50000->10.0.0.2:9092"] * 2 + ["10.0.0.1:50000->10.0.0.2:9092#2"] * 2
    assert dmg == [] and st.after_close_bytes == 4 and st.connections == 2


def test_fin_closes_connection_and_frees_state():
    st = CaptureStats()
    asm = StreamAssembler(stats=st)
    n = 0
    for k in range(50):
        c = Conversation(client=("10.0.0.1", 40000 + k))
        segs = c.handshake() + c.send(0, REQS[0]) + c.send(1, RESPS[0]) + [c.fin(0), c.fin(1), c.ack(0)]
        for p in packets(segs):
            n += sum(isinstance(e, KafkaFrame) for e in asm.feed(p))
        assert len(asm._flows) == 0  # state dropped as each connection closes
    assert n == 100 and st.connections == 50


def test_idle_connections_are_swept():
    st = CaptureStats()
    asm = StreamAssembler(stats=st, idle_timeout=10.0)
    c = Conversation()
    for p in packets(c.handshake() + c.send(0, REQS[0]), t0=0.0):
        asm.feed(p)
    assert len(asm._flows) == 2
    asm._sweep(100.0)
    assert asm._flows == {}
    assert st.damage_count.get("unanswered-request") == 1


def test_broker_detected_without_known_port():
    c = Conversation(client=("10.1.1.1", 33000), server=("10.1.1.2", 19093))
    segs = c.handshake() + c.send(0, REQS[0]) + c.send(1, RESPS[0])
    fr, dmg, _ = run(segs)
    assert fr[0].kind == "request" and fr[0].dst == "10.1.1.2:19093" and dmg == []
    # mid-stream, no SYN, broker on an unusual high port: the request header tells
    c = Conversation(client=("10.1.1.1", 1000), server=("10.1.1.2", 29092))
    c.handshake()
    fr, dmg, _ = run(c.send(0, REQS[0]) + c.send(1, RESPS[0]))
    assert [(f.kind, f.src) for f in fr] == [("request", "10.1.1.1:1000"), ("response", "10.1.1.2:29092")]


def test_strict_mode_drops_non_kafka_connection():
    c = Conversation(client=("10.1.1.1", 33000), server=("10.1.1.2", 22))
    segs = c.handshake() + c.send(1, b"SSH-2.0-OpenSSH_9.2\r\n") + c.send(0, b"SSH-2.0-client\r\n")
    fr, dmg, st = run(segs, strict=True)
    assert fr == [] and kinds(dmg) == ["non-kafka"]
    assert st.non_kafka_bytes == 21 + 16


def test_conn_key_groups_both_directions():
    c = Conversation()
    pk = packets(c.handshake())
    assert conn_key(pk[0]) == conn_key(pk[1]) == ("10.0.0.1", 50000, "10.0.0.2", 9092)


def test_several_files_grouped_by_connection_like_spark():
    """Split one capture into rotated files, regroup the packets by connection, sort by ts, feed."""
    segs = []
    convs = [Conversation(client=("10.0.0.1", 41000 + k)) for k in range(3)]
    for c in convs:
        segs += c.handshake()
    for i in range(5):
        for c in convs:
            segs += c.send(0, REQS[i], mss=30) + c.send(1, RESPS[i], mss=30)
    data = write_pcap(segs)
    whole = [e for e in iter_capture(io.BytesIO(data)) if isinstance(e, KafkaFrame)]
    # rotate into three files
    files = [write_pcap(part, t0=1_700_000_000 + 1000 * k)
             for k, part in enumerate((segs[:20], segs[20:45], segs[45:]))]
    groups: dict = {}
    for idx, blob in enumerate(files):
        for p in iter_packets(io.BytesIO(blob), f"file{idx}"):
            groups.setdefault(conn_key(p), []).append(p)
    out = []
    for key, pk in groups.items():
        pk.sort(key=lambda p: p.ts)
        out += [e for e in StreamAssembler().process(pk) if isinstance(e, KafkaFrame)]
    assert sorted((f.conn, f.kind, f.correlation_id, f.data) for f in out) == \
        sorted((f.conn, f.kind, f.correlation_id, f.data) for f in whole)
    # and iter_capture over the list of files merges them by time
    merged = [e for e in iter_capture([io.BytesIO(b) for b in files]) if isinstance(e, KafkaFrame)]
    assert [(f.conn, f.data) for f in merged] == [(f.conn, f.data) for f in whole]
    assert {f.file for f in out} == {"file0", "file1", "file2"}


def test_large_frame_spanning_many_segments():
    big = kafka_request(0, 7, 1, "p", produce_body(1, 7) + bytes(range(256)) * 2000)
    c = Conversation()
    segs = c.handshake() + c.send(0, big, mss=1448) + c.send(1, kafka_response(1, b"ok"))
    fr, dmg, st = run(segs)
    assert fr[0].data == big[4:] and fr[0].size == len(big) - 4 and dmg == []
    assert fr[0].start_packet == 4 and fr[0].packet == 3 + (len(big) + 1447) // 1448


def test_header_only_capture_counts_everything_as_gap():
    """A capture cut to the headers (snaplen 54): no payload at all, every byte a gap, no frames,
    nothing invented; and a later full-size retransmission of a cut range is not re-delivered."""
    c = Conversation()
    segs = c.handshake()
    data = REQS[0] + REQS[1]
    parts = c.send(0, data, mss=31)
    pk = packets(segs)
    for i, s in enumerate(parts):
        pk.append(Packet("f", len(pk) + 1, 2000.0 + i, s[0], s[1], s[2], s[3], s[4], s[5], s[6], b"", len(s[7])))
    st = CaptureStats()
    evs = list(StreamAssembler(stats=st).process(pk))
    assert not any(isinstance(e, KafkaFrame) for e in evs)
    assert st.damage_bytes["gap"] == len(data) and st.delivered_bytes == 0
    assert st.reconcile()["ok"]


def test_snaplen_cut_out_of_order_segment():
    c = Conversation()
    segs = c.handshake()
    parts = c.send(0, REQS[0] + REQS[1], mss=62)
    pk = packets(segs)
    s1, s0 = parts[1], parts[0]
    # request 2 arrives first, cut to 20 bytes; then request 1, whole
    pk.append(Packet("f", 4, 2000.0, s1[0], s1[1], s1[2], s1[3], s1[4], s1[5], s1[6], s1[7][:20], 62))
    pk.append(Packet("f", 5, 2001.0, s0[0], s0[1], s0[2], s0[3], s0[4], s0[5], s0[6], s0[7], 62))
    st = CaptureStats()
    evs = list(StreamAssembler(stats=st).process(pk))
    fr = [e for e in evs if isinstance(e, KafkaFrame)]
    # request 2's header was captured: it is a frame all the same, cut (its first 16 bytes)
    assert [f.correlation_id for f in fr] == [1, 2]
    assert not fr[0].cut and fr[1].cut and len(fr[1].data) == 16 and fr[1].size == len(REQS[1]) - 4
    assert st.damage_bytes["gap"] == 42 and "partial-frame" not in st.damage_bytes
    assert st.cut_frames == 1 and st.cut_bytes == 20
    assert st.reconcile()["ok"]


def test_open_requests_bounded_per_connection():
    c = Conversation()
    segs = c.handshake() + c.send(0, b"".join(kafka_request(18, 0, i, "c") for i in range(30)))
    segs += c.send(1, kafka_response(29, b"late") + kafka_response(0, b"evicted"))
    fr, dmg, st = run(segs, max_open=10)
    assert [d.kind for d in dmg].count("unanswered-request") == 20 + 1  # 20 evicted, 9 left at the end
    resp = [f for f in fr if f.kind == "response"]
    assert [(f.correlation_id, f.api_key) for f in resp] == [(29, 18), (0, None)]
    assert "unpaired-response" in kinds(dmg)


def test_api_check_tightens_resync():
    """Mid-stream: junk that looks like an api key 50 request header comes first; with an api_check
    that knows key 50 does not exist, resync skips it and lands on the real request."""
    fake = kafka_request(50, 1, 7, "x", b"")
    c = Conversation()
    c.handshake()
    segs = c.send(0, b"\x01\x02" + fake[:12] + REQS[0])
    fr, _dmg, _ = run(segs)
    assert fr[0].api_key == 50  # the plausible-looking junk wins without the check
    fr, dmg, _ = run(segs, api_check=lambda k, v: k != 50)
    assert [f.correlation_id for f in fr] == [1]
    assert [d.bytes for d in dmg if d.kind == "resync-skip"] == [14]


def test_syn_ack_without_syn_starts_both_directions():
    c = Conversation(client=("10.1.1.1", 33000), server=("10.1.1.2", 30000))
    hs = c.handshake()
    segs = hs[1:] + c.send(0, REQS[0], mss=5) + c.send(1, RESPS[0])
    fr, dmg, _ = run(segs, broker_ports=set())
    # the SYN-ACK sender is the listening side: the broker, even with the higher port
    assert [(f.kind, f.correlation_id) for f in fr] == [("request", 1), ("response", 1)] and dmg == []
    assert fr[0].dst == "10.1.1.2:30000"


def test_random_reordering_duplication_and_overlap_reassemble_exactly():
    """Random segmentations, extra overlapping copies and shuffles (within the buffer bound):
    the frames always come out exactly, and every surplus byte is counted as a duplicate."""
    import random
    rnd = random.Random(99)
    data = b"".join(REQS)
    for trial in range(150):
        c = Conversation(isn_c=rnd.choice([1, 0xFFFFFF00, rnd.randrange(1 << 32)]))
        segs = c.handshake()
        base = c.seq[0]
        cs, ss = c.c, c.s
        mk = lambda off, end: (cs[0], cs[1], ss[0], ss[1], (base + off) & 0xFFFFFFFF, c.seq[1], ACK, data[off:end])
        cuts = sorted(rnd.sample(range(1, len(data)), rnd.randint(1, 25)))
        pieces = [mk(a, b) for a, b in zip([0] + cuts, cuts + [len(data)])]
        for _ in range(rnd.randint(0, 10)):
            a = rnd.randrange(len(data))
            pieces.append(mk(a, min(len(data), a + rnd.randint(1, 80))))
        rnd.shuffle(pieces)
        fr, dmg, st = run(segs + pieces)
        assert [f.data for f in fr] == [r[4:] for r in REQS], trial
        assert kinds(dmg) == ["unanswered-request"]
        assert st.duplicate_bytes == sum(len(p[7]) for p in pieces) - len(data)


def test_random_losses_never_invent_frames_and_always_balance():
    import random
    rnd = random.Random(7)
    data = b"".join(REQS * 3)
    sent = {r[4:] for r in REQS}
    for trial in range(150):
        c = Conversation()
        segs = c.handshake()
        parts = c.send(0, data, mss=rnd.randint(5, 70))
        kept = [p for p in parts if rnd.random() > 0.15]
        fr, dmg, st = run(segs + kept, max_buffered=rnd.choice([64, 4096]))
        assert all(f.data in sent for f in fr), trial
        lost = sum(len(p[7]) for p in parts) - sum(len(p[7]) for p in kept)
        # every dropped byte is a gap, except a dropped tail the capture never learnt about
        tail = 0
        for p in reversed(parts):
            if p in kept:
                break
            tail += len(p[7])
        assert st.damage_bytes.get("gap", 0) == lost - tail, trial
        assert st.frame_bytes + st.lost_bytes - st.damage_bytes.get("gap", 0) == st.delivered_bytes


def test_frames_too_short_for_a_header_are_unparseable():
    c = Conversation()
    segs = c.handshake() + c.send(0, b"\x00\x00\x00\x03abc" + REQS[0]) + c.send(1, b"\x00\x00\x00\x02xy" + RESPS[0])
    fr, dmg, _ = run(segs)
    assert [(f.kind, f.size, f.correlation_id) for f in fr] == [("request", 3, None), ("request", 58, 1),
                                                               ("response", 2, None), ("response", len(RESPS[0]) - 4, 1)]
    assert kinds(dmg) == ["unparseable", "unparseable"]


def test_only_the_broker_side_captured():
    """Asymmetric capture: no client bytes at all. Responses are still framed (blind resync), and
    come out unpaired."""
    c = Conversation()
    c.handshake()
    c.send(0, REQS[0] + REQS[1] + REQS[2])  # not captured
    stream = RESPS[0] + RESPS[1] + RESPS[2]
    segs = c.send(1, stream[30:], mss=40)  # and the capture starts inside the first response
    fr, dmg, st = run(segs)
    assert [f.correlation_id for f in fr] == [2, 3]
    assert [d.kind for d in dmg] == ["resync-skip", "unpaired-response", "unpaired-response"]
    assert dmg[0].bytes == len(RESPS[0]) - 30


def test_lost_last_segment_followed_only_by_acks_and_fin_is_a_gap():
    """The last request's packet is lost; only the broker's ACK and the FINs follow. The ACK
    (and the FIN's sequence number) show the bytes existed: a gap, reported at close."""
    c = Conversation()
    segs = c.handshake() + c.send(0, REQS[0]) + c.send(1, RESPS[0])
    lost = c.send(0, REQS[1])  # not captured
    segs += [c.ack(1), c.fin(0), c.fin(1), c.ack(0)]
    fr, dmg, st = run(segs)
    gaps = [d for d in dmg if d.kind == "gap"]
    assert len(gaps) == 1 and gaps[0].bytes == len(lost[0][7])
    assert "acknowledged by the peer" in gaps[0].detail or "before the FIN" in gaps[0].detail
    assert [f.correlation_id for f in fr] == [1, 1]
    # the same with only the FIN as evidence (no ACK from the broker captured)
    c = Conversation()
    segs = c.handshake() + c.send(0, REQS[0])
    c.send(0, REQS[1])
    segs += [c.fin(0)]
    fr, dmg, st = run(segs)
    assert st.damage_bytes["gap"] == len(REQS[1])
    # and no gap when nothing was lost: the ACK of a FIN is not a byte
    c = Conversation()
    segs = c.handshake() + c.send(0, REQS[0]) + c.send(1, RESPS[0]) + [c.fin(0), c.fin(1), c.ack(0)]
    segs.append(c.ack(1))
    fr, dmg, st = run(segs)
    assert dmg == [] and "gap" not in st.damage_bytes


def test_syn_retried_with_new_isn_before_data():
    c = Conversation(isn_c=1000)
    first_syn = c.handshake()[0]
    c = Conversation(isn_c=777777)
    segs = [first_syn] + c.handshake() + c.send(0, REQS[0]) + c.send(1, RESPS[0])
    fr, dmg, st = run(segs)
    assert [f.correlation_id for f in fr] == [1, 1] and dmg == [] and st.connections == 1
