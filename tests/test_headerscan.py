"""spark-decode's connection pre-pass from headers only (``kwire_cli.capture.headerscan``): on every
capture of fixtures/, whole and cut into byte ranges as the job cuts them, on captures written here
with every link type, encapsulation and pcap/pcapng variant the reader walks, and on damaged
captures, the scan's connections are exactly those of the packets the full capture reader gives
(``spark.reading.read_range``) -- or the scan says None and the pre-pass reads the range in full.
Both walks are checked: the Python reference and the C one (when built)."""
from __future__ import annotations

import gzip
import io
import mmap
import random
import struct
import sys
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
    loop,
    null,
    routing_header,
    sll,
    sll2,
    tcp,
)
from kwire_cli.capture import CaptureStats, Packet, headerscan
from kwire_cli.capture.formats import HARD_RECORD_LIMIT
from kwire_cli.errors import KwireError
from kwire_cli.spark import reading, stages

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzzlib

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_CAPTURES = sorted(p for p in (ROOT / "fixtures").rglob("*") if p.suffix in (".pcap", ".pcapng"))

WALKS = {"python": headerscan.py_tcp_connections}
if headerscan.native_tcp_connections is not None:
    WALKS["c"] = lambda *a: headerscan.native_tcp_connections(*a, HARD_RECORD_LIMIT)  # type: ignore[misc]


def reader_keys(plan: reading.FilePlan, rng, range_no: int = 0) -> set:
    """The pre-pass's answer the long way: every packet the capture reader gives for the range."""
    seen = set()
    try:
        for item in reading.read_range(plan, 0, rng, range_no, CaptureStats()):
            if item.__class__ is Packet:
                seen.add(item[3:7])
    except KwireError:
        pass
    return seen


def scan_bytes(plan: reading.FilePlan, rng) -> dict[str, dict | None]:
    """Each walk's answer for the range, connection -> captured TCP bytes (None: it falls back to
    the reader); the same from bytes and from a memoryview, and the same in both walks."""
    with open(plan.path, "rb") as f:
        data = f.read()
    out: dict[str, dict | None] = {}
    for name, walk in WALKS.items():
        for buf in (data, memoryview(data)):
            if rng is None or plan.kind == "whole":
                keys = walk(buf, 0, len(data), None)
            else:
                keys = walk(buf, rng[0], rng[1], plan.prefix)
            got = None if keys is None else {headerscan.four_tuple(k): n for k, n in keys.items()}
            assert out.get(name, got) == got
            out[name] = got
    assert len({None if v is None else tuple(sorted(v.items())) for v in out.values()}) == 1, "the walks differ"
    return out


def scan_keys(plan: reading.FilePlan, rng) -> dict[str, set | None]:
    """Each walk's connections for the range (None: it falls back to the reader)."""
    return {name: None if v is None else set(v) for name, v in scan_bytes(plan, rng).items()}


def tasks_of(path: Path, split: int) -> tuple[reading.FilePlan, list]:
    """The read tasks spark-decode makes of one file (``job.run``: plan, index, stitch)."""
    plan = reading.plan_file(str(path), str(path), split)
    assert not plan.failure, plan.failure
    if plan.kind in ("pcap", "pcapng"):
        cuts = reading.nominal_ranges(plan, split)
        plan.ranges = reading.stitch(plan, cuts, [reading.index_range(plan, i, cuts) for i in range(len(cuts) - 1)])
    if plan.kind == "whole" or not plan.ranges:
        return plan, [(0, None)]
    return plan, list(enumerate(plan.ranges))


def check_file(path: Path, split: int, must_answer: bool = True) -> tuple[int, int]:
    """Every read task of ``path``: each walk agrees with the reader (or, unless ``must_answer``,
    gives None). Returns (tasks, tasks the scan answered)."""
    plan, tasks = tasks_of(path, split)
    answered = 0
    for range_no, rng in tasks:
        want = reader_keys(plan, rng, range_no)
        got = scan_keys(plan, rng)
        for name, keys in got.items():
            if keys is None:
                assert not must_answer, (path, rng, name)
                continue
            assert keys == want, (path, rng, name, keys ^ want)
        if all(k is not None for k in got.values()):
            answered += 1
        # what the pre-pass uses: the native walk when built, through an mmap of the file
        rc = reading.range_connections(plan, rng)
        assert rc is None or set(rc) == want
    return len(tasks), answered


# ----------------------------------------------------------------------------- real recordings
@pytest.mark.parametrize("path", FIXTURE_CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_every_fixture_whole_and_in_ranges(path):
    """Whole (as a small file is read) and cut into ranges of about 2 KB at packet boundaries
    (as a large one is): the same connections as the reader's, and never a fallback."""
    plan, _ = tasks_of(path, 1 << 30)
    assert reader_keys(plan, None), "a fixture with TCP connections"
    n, answered = check_file(path, 1 << 30)
    assert (n, answered) == (1, 1)
    n, answered = check_file(path, 2048)
    assert answered == n and (n > 1 or path.stat().st_size < 2 * 2048)


@pytest.mark.parametrize("path", FIXTURE_CAPTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_bytes_per_connection_are_the_packets_tcp_bytes(path):
    """What the job weighs connections by: per connection, the captured bytes from each packet's TCP
    header on: at least the reader's payload bytes plus a 20-byte TCP header per packet, at most
    a 60-byte header and a minimum frame's padding more; whole or in ranges, the same total."""
    plan, _ = tasks_of(path, 1 << 30)
    payload: dict = {}
    for item in reading.read_range(plan, 0, None, 0, CaptureStats()):
        if item.__class__ is Packet:
            n, b = payload.get(item[3:7], (0, 0))
            payload[item[3:7]] = (n + 1, b + len(item.payload))
    got = scan_bytes(plan, None)
    for counts in got.values():
        assert counts is not None and set(counts) == set(payload)
        for conn, (n, b) in payload.items():
            assert b + 20 * n <= counts[conn] <= b + (60 + 46) * n, (conn, n, b, counts[conn])
    cut, tasks = tasks_of(path, 2048)
    total: dict = {}
    for _, rng in tasks:
        for conn, n in (reading.range_connections(cut, rng) or {}).items():
            total[conn] = total.get(conn, 0) + n
    if len(tasks) > 1:
        assert total == got["python"]


def test_link_types_of_the_fixtures_are_all_walked():
    kinds = set()
    for path in FIXTURE_CAPTURES:
        plan, _ = tasks_of(path, 1 << 30)
        layout = plan.layout
        if layout is not None and layout.kind == "pcap":
            kinds.add(struct.unpack_from(layout.byte_order + "I", plan.prefix, 20)[0])
        else:
            kinds.add("pcapng")
    assert {0, 1, 101, 113, 276, "pcapng"} <= kinds


def test_the_rotated_fixture_directory_gives_the_pre_pass_its_shared_connection():
    """The pre-pass over the two rotated files: a connection in both (shared) and one in the first
    only, ids computed from the header scan equal to those from the reader."""
    files = sorted((ROOT / "fixtures" / "captures" / "rotated").glob("*.pcap"))
    plans = [reading.plan_file(str(p), str(p)) for p in files]
    ids = [[i for i, _ in stages.task_connections((i, 0, None), plans)] for i in range(len(plans))]
    want = [sorted({stages.conn_id("%s|%d|%s|%d" % min(k, k[2:] + k[:2])) for k in reader_keys(p, None)})
            for p in plans]
    assert ids == want
    assert set(ids[0]) & set(ids[1]) and set(ids[0]) - set(ids[1])


def test_gzip_falls_back_to_the_reader_with_the_same_answer(tmp_path):
    src = ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap"
    gz = tmp_path / "kafkajs-consume.pcap.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    plan_gz = reading.plan_file(str(gz), str(gz))
    plan = reading.plan_file(str(src), str(src))
    assert plan_gz.kind == "whole" and reading.range_connections(plan_gz, None) is None
    assert all(v is None for v in scan_keys(plan_gz, None).values())
    # the fallback's ids (the reader over the decompressed bytes) and the scan's are the same
    ids_gz = [i for i, _ in stages.task_connections((0, 0, None), [plan_gz])]
    assert ids_gz and ids_gz == [i for i, _ in stages.task_connections((0, 0, None), [plan])]


# ----------------------------------------------------------------------------- every walk's case
def _seg(a: str, ap: int, b: str, bp: int, payload: bytes = b"x", offset_words: int | None = None) -> bytes:
    t = tcp(ap, bp, 1000, 2000, 0x18, payload)
    if offset_words is not None:
        t = t[:12] + bytes([offset_words << 4]) + t[13:]
    return t


def _ip(a: str, b: str, seg: bytes, **kw) -> tuple[bytes, int]:
    if ":" in a:
        return ipv6(a, b, seg, **kw), 0x86DD
    return ipv4(a, b, seg, **kw), 0x0800


def _ah(nbytes: int = 24) -> bytes:
    """An authentication header body of ``nbytes`` total (its length field counts 4-byte words - 2)."""
    return bytes([nbytes // 4 - 2]) + b"\x00" * (nbytes - 2)


def ethernet_packets() -> list[bytes]:
    """Ethernet frames: TCP that the reader keeps, and what it skips, with the headers in between."""
    v4, v6 = ("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")
    out = []
    for i, (a, b) in enumerate((v4, v6)):
        pkt, et = _ip(a, b, _seg(a, 40000 + i, b, 9092))
        out.append(ethernet(pkt, et))
        out.append(ethernet(pkt, et, [(0x8100, 10)]))                               # 802.1Q
        out.append(ethernet(_ip(a, b, _seg(a, 41000 + i, b, 9092))[0], et, [(0x88A8, 1), (0x8100, 2)]))  # QinQ
        out.append(ethernet(_ip(a, b, _seg(a, 42000 + i, b, 9093))[0], et, [(0x9100, 1), (0x9200, 2)]))
        out.append(ethernet(_ip(b, a, _seg(b, 9092, a, 40000 + i))[0], et))          # the other direction
        out.append(ethernet(_ip(a, b, _seg(a, 43000 + i, b, 9092, offset_words=4))[0], et))  # TCP header < 20: skipped
        out.append(ethernet(_ip(a, b, _seg(a, 44000 + i, b, 9092, b""))[0], et))    # no payload: still a packet
    a, b = v4
    out.append(ethernet(ipv4(a, b, _seg(a, 45000, b, 9092), options=b"\x01\x01\x01\x00"), 0x0800))  # IPv4 options
    out.append(ethernet(ipv4(a, b, _seg(a, 45001, b, 9092), flags_frag=0x2000), 0x0800))  # first fragment: skipped
    out.append(ethernet(ipv4(a, b, _seg(a, 45002, b, 9092), flags_frag=0x0010), 0x0800))  # later fragment: skipped
    out.append(ethernet(ipv4(a, b, b"u" * 20, proto=17), 0x0800))                          # UDP: skipped
    out.append(ethernet(ipv4(a, b, _seg(a, 45003, b, 9092), total_len=0), 0x0800))        # TSO: length 0
    bad_ihl = bytearray(ipv4(a, b, _seg(a, 45004, b, 9092)))
    bad_ihl[0] = 0x44
    out.append(ethernet(bytes(bad_ihl), 0x0800))                                           # IHL < 20: skipped
    out.append(ethernet(b"\x00\x01" * 14, 0x0806))                                         # ARP: skipped
    out.append(ethernet(b"", 0x0800))                                                      # padding only: not IP
    a, b = v6
    seg = _seg(a, 46000, b, 9092)
    out.append(ethernet(ipv6(a, b, seg, ext=[(0, hop_by_hop(16)), (43, routing_header()), (60, hop_by_hop())]),
                        0x86DD))
    out.append(ethernet(ipv6(a, b, _seg(a, 46001, b, 9092), ext=[(44, fragment_header())]), 0x86DD))  # atomic
    out.append(ethernet(ipv6(a, b, _seg(a, 46002, b, 9092), ext=[(44, fragment_header(more=True))]), 0x86DD))
    out.append(ethernet(ipv6(a, b, _seg(a, 46003, b, 9092), ext=[(44, fragment_header(offset=9))]), 0x86DD))
    out.append(ethernet(ipv6(a, b, _seg(a, 46004, b, 9092), ext=[(51, _ah())]), 0x86DD))  # AH
    out.append(ethernet(ipv6(a, b, _seg(a, 46005, b, 9092), ext=[(135, hop_by_hop()), (139, hop_by_hop()),
                                                                 (140, hop_by_hop())]), 0x86DD))
    out.append(ethernet(ipv6(a, b, b"u" * 16, proto=17), 0x86DD))                          # UDP: skipped
    out.append(ethernet(ipv6(a, b, b"e" * 16, proto=50), 0x86DD))                          # ESP: skipped
    mapped = ipv6("::ffff:10.0.0.1", "::ffff:10.0.0.2", _seg("::ffff:10.0.0.1", 47000, "::ffff:10.0.0.2", 9092))
    out.append(ethernet(mapped, 0x86DD))                                                    # v4-mapped: its own text
    return out


def _cut_variants(frames: list[bytes]) -> list[tuple[bytes, int]]:
    """Each frame whole, and cut by the snap length at every few bytes of its headers:
    (captured bytes, original length)."""
    out = []
    for f in frames:
        out.append((f, len(f)))
        for cut in range(0, min(len(f), 110), 7):
            out.append((f[:cut], len(f)))
    return out


def write_pcap_file(path: Path, linktype: int, frames: list[tuple[bytes, int]], order: str = "<",
                    nanos: bool = False, snaplen: int = 65535) -> Path:
    with open(path, "wb") as f:
        w = PcapWriter(f, linktype, order, nanos, snaplen)
        for i, (data, orig) in enumerate(frames):
            w.write(1_700_000_000 + i * 0.001, data, origlen=orig)
    return path


def link_frames(linktype: int) -> list[bytes]:
    """The IP packets of ``ethernet_packets``, in link type ``linktype``'s framing."""
    ips = []
    for fr in ethernet_packets():
        off, et = 12, struct.unpack_from(">H", fr, 12)[0]
        while et in (0x8100, 0x88A8, 0x9100, 0x9200):
            off += 4
            et = struct.unpack_from(">H", fr, off)[0]
        ips.append((fr[off + 2:], et))
    fam = {0x0800: 2}
    out = []
    for ip, et in ips:
        if linktype == 113:
            out.append(sll(ip, et))
        elif linktype == 276:
            out.append(sll2(ip, et))
        elif linktype == 0:
            out.append(null(ip, fam.get(et, 30 if et == 0x86DD else 7), "<"))
            out.append(null(ip, fam.get(et, 10 if et == 0x86DD else 7), ">"))
        elif linktype == 108:
            out.append(loop(ip, fam.get(et, 24 if et == 0x86DD else 7)))
        else:
            out.append(ip)
    return out


@pytest.mark.parametrize("linktype", [1, 113, 276, 0, 108, 101, 12, 14, 228, 229, 147])
def test_every_link_type_and_header_case(tmp_path, linktype):
    frames = ethernet_packets() if linktype == 1 else link_frames(linktype)
    path = write_pcap_file(tmp_path / f"lt{linktype}.pcap", linktype, _cut_variants(frames))
    plan, _ = tasks_of(path, 1 << 30)
    want = reader_keys(plan, None)
    assert bool(want) == (linktype != 147)  # 147: a link type the reader does not walk
    n, answered = check_file(path, 1 << 30)
    assert answered == n
    n, answered = check_file(path, 1500)
    assert answered == n and n > 3


@pytest.mark.parametrize("order,nanos", [("<", False), (">", False), ("<", True), (">", True)])
def test_pcap_byte_orders_and_time_units(tmp_path, order, nanos):
    path = write_pcap_file(tmp_path / "x.pcap", 1, [(f, len(f)) for f in ethernet_packets()], order, nanos)
    assert check_file(path, 1 << 30) == (1, 1)
    n, answered = check_file(path, 700)
    assert answered == n > 2


def test_kuznetzov_pcap_and_records_over_the_snap_length(tmp_path):
    frames = ethernet_packets()
    # Kuznetzov's modified pcap: 24-byte packet headers
    data = struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        data += struct.pack("<IIII", 1_700_000_000, i, len(f), len(f)) + b"\x00" * 8 + f
    kz = tmp_path / "kuznetzov.pcap"
    kz.write_bytes(data)
    assert check_file(kz, 1 << 30) == (1, 1)
    assert reader_keys(*tasks_of(kz, 1 << 30)[:1], None)
    # a snap length of 80: longer records are read whole all the same (as Wireshark reads them)
    small = tmp_path / "snap80.pcap"
    with open(small, "wb") as f:
        w = PcapWriter(f, 1, snaplen=80)
        for i, fr in enumerate(frames):
            w.write(1_700_000_000 + i * 0.001, fr + (b"p" * 40 if i % 3 == 0 else b""))
    plan, _ = tasks_of(small, 1 << 30)
    assert len(reader_keys(plan, None)) == len(reader_keys(*tasks_of(kz, 1 << 30)[:1], None))
    assert check_file(small, 1 << 30) == (1, 1)


def _pb(w: PcapngWriter, ifid: int, data: bytes) -> None:
    """An obsolete Packet Block (type 2)."""
    body = struct.pack(w.o + "HHIIII", ifid, 0, 0, 0, len(data), len(data)) + data
    w._block(2, body)


def _v4(port: int, payload: bytes = b"x") -> bytes:
    """An IPv4 packet of a TCP segment from ``port`` (a connection of its own) to 9092."""
    return ipv4("10.0.9.1", "10.0.9.2", _seg("10.0.9.1", port, "10.0.9.2", 9092, payload))


def pcapng_bytes(order: str = "<") -> bytes:
    """Two sections (the second in the other byte order), interfaces of different link types and
    snap lengths, EPB, SPB, PB, packets of an undescribed interface or over the snap length (read), and
    blocks the reader skips. Ports 51000-51009 mark packets whose connection the reader must (even)
    or must not (odd) find."""
    frames = ethernet_packets()
    sll_frames = link_frames(113)
    raw = link_frames(101)
    f = io.BytesIO()
    w = PcapngWriter(f, order)
    eth = w.interface(1, 0)
    w.name_resolution()
    w.spb(frames[0])                                      # interface 0
    lsll = w.interface(113, 100)                          # snap length 100
    lraw = w.interface(101, 0, tsresol=9)
    for i, fr in enumerate(frames):
        w.epb(eth, 1_700_000_000 + i, fr)
    for i, fr in enumerate(sll_frames):
        w.epb(lsll, 1_700_000_100 + i, fr)                # some over 100 bytes: read whole
    w.epb(lsll, 1_700_000_150, sll(_v4(51000, b"p" * 100), 0x0800))  # over the snap length: read whole
    w.epb(lsll, 1_700_000_151, sll(_v4(51002), 0x0800))
    for i, fr in enumerate(raw):
        _pb(w, lraw, fr)
    _pb(w, lraw, _v4(51004))
    w.epb(eth, 1_700_000_200, frames[1])
    w.unknown()
    w.interface_stats(eth, ifdrop=3)
    body = struct.pack(w.o + "IIIII", 9, 0, 0, len(frames[2]), len(frames[2])) + frames[2]
    w._block(6, body + b"\x00" * (-len(body) % 4))       # interface 9: never described
    w.o = ">" if order == "<" else "<"
    w.section()                                           # a new section: interfaces start again
    w.spb(ethernet(_v4(51005), 0x0800))                   # before any interface: skipped
    w.interface(276, 50)                                  # SPBs cut to 50 bytes: no TCP header
    w.interface(276, 0)
    for fr in link_frames(276)[:8]:
        w.epb(1, 1_700_000_300, fr)
    w.spb(sll2(_v4(51007), 0x0800))
    w.epb(1, 1_700_000_301, sll2(_v4(51006), 0x0800))
    w.epb(0, 1_700_000_302, sll2(_v4(51008), 0x0800))    # over interface 0's snap length: read whole
    return f.getvalue()


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_sections_interfaces_and_block_kinds(tmp_path, order):
    path = tmp_path / "x.pcapng"
    path.write_bytes(pcapng_bytes(order))
    plan, _ = tasks_of(path, 1 << 30)
    keys = reader_keys(plan, None)
    assert len(keys) > 10
    marked = {k[1] for k in keys if 51000 <= k[1] < 51010}
    assert marked == {51000, 51002, 51004, 51006, 51008}
    assert check_file(path, 1 << 30) == (1, 1)
    # cut into ranges: interfaces and a second section after the first packet make it whole
    assert tasks_of(path, 1024)[0].kind == "whole"
    assert check_file(path, 1024) == (1, 1)


def test_pcapng_ranges_after_the_header_context(tmp_path):
    """A pcapng file whose interfaces all come first is cut into ranges: each range is walked after
    the header context (section header and interfaces), as the reader reads it."""
    frames = ethernet_packets()
    f = io.BytesIO()
    w = PcapngWriter(f)
    w.interface(1, 0)
    w.interface(113, 0)
    w.interface(101, 120)
    sll_frames, raw = link_frames(113), link_frames(101)
    for k in range(6):
        for i, fr in enumerate(frames):
            w.epb(0, 1_700_000_000 + k, fr)
            w.epb(1, 1_700_000_000 + k, sll_frames[i])
            w.epb(2, 1_700_000_000 + k, raw[i])
    path = tmp_path / "three-interfaces.pcapng"
    path.write_bytes(f.getvalue())
    plan, tasks = tasks_of(path, 2048)
    assert plan.kind == "pcapng" and len(tasks) > 10
    n, answered = check_file(path, 2048)
    assert answered == n


# ----------------------------------------------------------------------------- damaged captures
def _headers_of(data: bytes) -> list[int]:
    """Offsets of the pcap record headers of ``data`` (little-endian, 16-byte headers)."""
    pos, out = 24, []
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return out


def test_damaged_and_truncated_captures_agree_or_fall_back(tmp_path):
    """Real captures cut short at every 97th byte, mutated anywhere (fuzzlib's mutators) and with
    bytes of their record, link, IP and TCP headers overwritten: the scan never fails or loops; it
    answers as the reader does, or says None (the reader then answers); whole and in ranges."""
    rnd = random.Random(18)
    caps = ROOT / "fixtures" / "captures"
    seeds = [(caps / n).read_bytes() for n in ("kafkajs-consume.pcap", "kafka-python-produce.pcap")]
    ng = tmp_path / "seed.pcapng"
    ng.write_bytes(pcapng_bytes())
    seeds.append(ng.read_bytes())
    cases: list[bytes] = []
    for cut in range(0, len(seeds[0]), 97):
        cases.append(seeds[0][:cut])
    for rec in _headers_of(seeds[1])[1:]:  # one byte short of a whole packet, and one past it
        cases += [seeds[1][:rec - 1], seeds[1][:rec + 1]]
    for i in range(150):
        cases.append(fuzzlib.mutate(rnd, seeds[i % 3], rounds=rnd.choice((1, 3, 10))))
    for i in range(300):
        data = bytearray(seeds[i % 2])
        heads = _headers_of(bytes(data))
        for _ in range(rnd.choice((1, 2, 5))):
            at = rnd.choice(heads) + rnd.randrange(16 + 60)
            if at < len(data):
                data[at] = rnd.randrange(256) if rnd.random() < 0.7 else rnd.choice((0, 0xFF, 0x45, 0x06, 0x60))
        cases.append(bytes(data))
    answered = total = 0
    for k, data in enumerate(cases):
        path = tmp_path / f"case-{k}.pcap"
        path.write_bytes(data)
        plan = reading.plan_file(str(path), str(path), 1500)
        if plan.failure:
            continue  # the job reports the file and reads nothing of it
        for split in (1 << 30, 1500):
            n, a = check_file(path, split, must_answer=False)
            total += n
            answered += a
    assert total > 1000 and answered > 0.9 * total


def test_the_scan_is_bounded_on_hostile_lengths():
    """Record and block lengths at their limits, header lengths that point past the packet, empty
    and tiny inputs: an answer or None, at once."""
    pcap_head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 0, 1)
    pcapng_head = struct.pack("<II", 0x0A0D0D0A, 28) + struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1) + \
        struct.pack("<I", 28)
    inputs = [b"", b"\xd4\xc3", pcap_head[:20], pcap_head, pcapng_head[:8], pcapng_head[:11], pcapng_head,
              pcap_head + struct.pack("<IIII", 0, 0, 0xFFFFFFFF, 0xFFFFFFFF) + b"x" * 100,
              pcap_head + struct.pack("<IIII", 0, 0, HARD_RECORD_LIMIT, 0) + b"x" * 100,
              pcapng_head + struct.pack("<II", 6, 0xFFFFFFFC) + b"\x00" * 40,
              pcapng_head + struct.pack("<II", 6, 12) + struct.pack("<I", 12) * 3000,
              pcapng_head + struct.pack("<II", 0x0A0D0D0A, 28) + b"\x00" * 4 + b"ABCD",
              pcapng_head + struct.pack("<II", 0x0A0D0D0A, 28) + b"\x00" * 20,
              b"\x1f\x8b\x08\x00" + b"\x00" * 40]
    idb = struct.pack("<II", 1, 20) + struct.pack("<HHI", 1, 0, 0) + struct.pack("<I", 20)
    frame = ethernet(ipv4("10.0.0.1", "10.0.0.2", tcp(1234, 9092, 1, 1, 0x18, b"x")), 0x0800)
    frame += b"\x00" * (-len(frame) % 4)
    epb = struct.pack("<IIIII", 0, 0, 0, len(frame), len(frame)) + frame
    epb = struct.pack("<II", 6, len(epb) + 12) + epb + struct.pack("<I", len(epb) + 12)
    odd = struct.pack("<II", 0xBAD, 14) + b"ab" + struct.pack("<I", 14)  # a length that is not 4-aligned
    found = [pcapng_head + idb + epb,                     # (the reader finds the packet of these)
             pcapng_head + idb + epb + odd + epb,         # ... and stops at the odd block
             pcapng_head + idb + epb + struct.pack("<II", 0x0A0D0D0A, 28) + b"\x4d\x3c\x2b",  # a cut section
             pcapng_head + idb + epb + struct.pack("<II", 0x0A0D0D0A, 28) + b"BAD!" + b"\x00" * 20 + epb]
    assert all(len({p[3:7] for p in _read(d)}) == 1 for d in found)
    inputs += found
    eth_v6 = ethernet(ipv6("fd00::1", "fd00::2", b"", ext=[(0, b"\xff" + b"\x00" * 6)], proto=0), 0x86DD)
    inputs.append(pcap_head + struct.pack("<IIII", 0, 0, len(eth_v6), len(eth_v6)) + eth_v6)
    for data in inputs:
        want = {p[3:7] for p in _read(data)}
        for name, walk in WALKS.items():
            got = walk(data, 0, len(data), None)
            assert got is None or {headerscan.four_tuple(k) for k in got} == want, (name, data[:40])
            # a range [start, end) beyond the data, or reversed, is an empty answer or None
            assert walk(data, len(data) + 10, len(data) + 20, None) in (None, {})
            assert walk(data, 5, 2, pcap_head) in (None, {})


def _read(data: bytes) -> list:
    from kwire_cli.capture import iter_packets
    out = []
    try:
        for item in iter_packets(io.BytesIO(data), "x", stats=CaptureStats()):
            if item.__class__ is Packet:
                out.append(item)
    except KwireError:
        pass
    return out


def test_the_native_walk_is_the_one_used_when_built():
    if headerscan.native_tcp_connections is None:
        pytest.skip("the C walk is not built")
    data = (ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap").read_bytes()
    with open(ROOT / "fixtures" / "captures" / "kafkajs-consume.pcap", "rb") as f, \
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert headerscan.tcp_connections(mm, 0, len(data)) == headerscan.py_tcp_connections(data, 0, len(data))
