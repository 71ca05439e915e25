"""pcapng options read by the capture reader (IDB ``if_tsresol``/``if_tsoffset``, ISB
``isb_ifdrop``) are bounded by their own block. On a real pcapng recording (fixtures/secure/tls)
whose interface and packet blocks are given options, then damaged: an option that runs past its
block, or a known option of the wrong length, is a ``corrupt-block`` damage note naming the block
and the option's offset; the block is kept (the interface stays, so no packet is lost), never an
internal error, never bytes of the next block read as the option's value. The header-only scan
(``headerscan``) gives the reader's connections on every damaged file."""
from __future__ import annotations

import random
import struct
from pathlib import Path

from cli_run import kwire
from kwire_cli.capture import CaptureStats, Damage, Packet, reader
from kwire_cli.spark import reading
from test_headerscan import check_file, tasks_of

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "fixtures").rglob("*.pcapng"))
TLS13 = ROOT / "fixtures" / "secure" / "tls" / "tls13-aes128-gcm-kafka-python.dsb.pcapng"


def blocks(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, type, block bytes) of a little-endian pcapng file."""
    out, pos = [], 0
    while pos + 8 <= len(data):
        t, n = struct.unpack_from("<II", data, pos)
        out.append((pos, t, data[pos:pos + n]))
        pos += n
    return out


def block(t: int, body: bytes) -> bytes:
    n = 12 + len(body)
    return struct.pack("<II", t, n) + body + struct.pack("<I", n)


def opt(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


IDB_OPTS = opt(2, b"eth0") + opt(9, b"\x06") + opt(14, struct.pack("<q", 0)) + b"\x00" * 4
EPB_OPTS = opt(1, b"kwire") + opt(2, struct.pack("<I", 1)) + b"\x00" * 4


def with_options(data: bytes) -> tuple[bytes, list[tuple[int, int]]]:
    """The recording with options on every IDB (if_name, if_tsresol 6, if_tsoffset 0) and EPB
    (opt_comment, epb_flags): the same packets and times. Also the (start, end) file offsets of
    every IDB's and EPB's options."""
    out, spans = b"", []
    for _, t, b in blocks(data):
        if t == 1:
            nb = block(1, b[8:16] + IDB_OPTS)
            spans.append((len(out) + 16, len(out) + len(nb) - 4))
        elif t == 6:
            nb = block(6, b[8:-4] + EPB_OPTS)
            spans.append((len(out) + len(b) - 4, len(out) + len(nb) - 4))
        else:
            nb = b
        out += nb
    return out, spans


def read(path: Path) -> tuple[list, list[Damage]]:
    """(packet number, time, 4-tuple, payload) of every TCP packet, and the damage events."""
    pk, dmg = [], []
    for e in reader.iter_packets(str(path), stats=CaptureStats()):
        if e.__class__ is Packet:
            pk.append((e.packet, e.ts, e[3:7], bytes(e.payload)))
        else:
            dmg.append(e)
    return pk, dmg


def test_options_as_written_change_nothing(tmp_path):
    good = tmp_path / "good.pcapng"
    good.write_bytes(with_options(TLS13.read_bytes())[0])
    assert read(good) == read(TLS13) and len(read(TLS13)[0]) > 50


def _idb_at(data: bytes) -> int:
    return next(off for off, t, _ in blocks(data) if t == 1)


def test_if_tsoffset_cut_in_the_last_block(tmp_path):
    """An IDB at the end of the file whose if_tsoffset claims 8 bytes with none left in the block
    (the old reader: 'internal error: unpack_from requires a buffer of at least 8 bytes'): every
    packet before it is decoded, and one damage note names the block and the option."""
    data = TLS13.read_bytes()
    cut = block(1, struct.pack("<HHI", 1, 0, 0x40000) + struct.pack("<HH", 14, 8))
    path = tmp_path / "cut.pcapng"
    path.write_bytes(data + cut)
    pk, dmg = read(path)
    assert pk == read(TLS13)[0]
    assert [(d.kind, d.detail) for d in dmg] == [(
        "corrupt-block", f"interface description block at offset {len(data)}: option if_tsoffset at offset "
        f"{len(data) + 16} claims 8 bytes; only 0 left in the block; options from there ignored")]
    r = kwire("pcap", "--summary", str(path))
    assert r.code == 0, r
    assert "internal error" not in r.err
    assert "corrupt-block 1" in r.out and "option if_tsoffset" in r.out
    rows = kwire("pcap", str(path))
    assert rows.code == 0 and rows.out == kwire("pcap", str(TLS13)).out


def test_option_past_its_block_with_blocks_after(tmp_path):
    """The same IDB first, packets after it: the option's value is not taken from the next block
    (the old reader read the trailing length and the next block's type as if_tsoffset, 6 << 32 |
    24 seconds); the interface stays, every packet is read with its own time."""
    data = TLS13.read_bytes()
    at = _idb_at(data)
    bad = block(1, struct.pack("<HHI", 1, 0, 0x40000) + struct.pack("<HH", 14, 8))
    path = tmp_path / "mid.pcapng"
    path.write_bytes(data[:at] + bad + data[at + 20:])
    pk, dmg = read(path)
    want = read(TLS13)[0]
    assert [(n, ts, k, p) for n, ts, k, p in pk] == want
    assert len(dmg) == 1 and dmg[0].kind == "corrupt-block" and f"at offset {at}:" in dmg[0].detail
    assert check_file(path, 1 << 30) == (1, 1)


def test_spark_ranges_report_header_damage_once(tmp_path):
    """spark-decode cuts the file into ranges, each read after the header context (the section
    header and the damaged IDB): the note is reported once, by the first range, not once a range."""
    data = TLS13.read_bytes()
    at = _idb_at(data)
    bad = block(1, struct.pack("<HHI", 1, 0, 0x40000) + struct.pack("<HH", 14, 8))
    path = tmp_path / "mid.pcapng"
    path.write_bytes(data[:at] + bad + data[at + 20:])
    plan, tasks = tasks_of(path, 2048)
    assert plan.kind == "pcapng" and len(tasks) > 5
    stats = CaptureStats()
    items = [it for range_no, rng in tasks for it in reading.read_range(plan, 0, rng, range_no, stats)]
    dmg = [it for it in items if it.__class__ is Damage]
    assert [d.detail for d in dmg] == [d.detail for d in read(path)[1]] and len(dmg) == 1
    assert stats.damage_count == {"corrupt-block": 1} and stats.damage_bytes == {"corrupt-block": 4}
    assert [(p.packet, p.ts) for p in items if p.__class__ is Packet] == [(n, ts) for n, ts, _, _ in read(TLS13)[0]]


def test_wrong_lengths_and_huge_lengths(tmp_path):
    data, _ = with_options(TLS13.read_bytes())
    at = _idb_at(data)
    want = read(TLS13)[0]
    # if_tsresol of 0 bytes: ignored (microseconds stand), the options after it still read
    zero = block(1, data[at + 8:at + 16] + opt(9, b"") + opt(14, struct.pack("<q", 0)) + b"\x00" * 4)
    # an option length of 0xFFFF: past the block
    huge = bytearray(data[at:at + struct.unpack_from("<I", data, at + 4)[0]])
    struct.pack_into("<H", huge, 16 + 2, 0xFFFF)
    # if_tsoffset of 4 bytes
    short = block(1, data[at + 8:at + 16] + opt(14, b"\x01\x00\x00\x00") + b"\x00" * 4)
    end = at + struct.unpack_from("<I", data, at + 4)[0]
    for name, idb, detail in [
            ("zero", zero, f"option if_tsresol at offset {at + 16} is 0 bytes, not 1; ignored"),
            ("huge", bytes(huge), f"option 2 at offset {at + 16} claims 65535 bytes; only "),
            ("short", short, f"option if_tsoffset at offset {at + 16} is 4 bytes, not 8; ignored")]:
        path = tmp_path / f"{name}.pcapng"
        path.write_bytes(data[:at] + idb + data[end:])
        pk, dmg = read(path)
        shift = len(idb) - (end - at)
        assert pk == want, name
        assert len(dmg) == 1 and dmg[0].kind == "corrupt-block", (name, dmg)
        assert detail in dmg[0].detail and dmg[0].detail.startswith(f"interface description block at offset {at}")
        r = kwire("pcap", "--summary", str(path))
        assert r.code == 0 and "internal error" not in r.err and "corrupt-block 1" in r.out, (name, r, shift)


def test_isb_option_past_its_block(tmp_path):
    data = TLS13.read_bytes()
    isb = block(5, struct.pack("<III", 0, 0, 0) + struct.pack("<HH", 5, 8) + b"\x00" * 4)
    path = tmp_path / "isb.pcapng"
    path.write_bytes(data + isb)
    pk, dmg = read(path)
    assert pk == read(TLS13)[0]
    assert [d.detail for d in dmg] == [
        f"interface statistics block at offset {len(data)}: option isb_ifdrop at offset {len(data) + 20} claims 8 "
        "bytes; only 4 left in the block; options from there ignored"]


def test_mutation_sweep_over_every_option_byte(tmp_path):
    """Every byte of the options of every IDB and EPB of every pcapng fixture (given options as
    written by with_options) set to 0, 0xFF and a random value: never an exception; packets
    decoded unless the damage is to their own block's bytes; damage only as events. A sample of
    the damaged files also through the header-only scan, which must agree with the reader."""
    rnd = random.Random(5)
    checked = 0
    for fx in FIXTURES:
        data, spans = with_options(fx.read_bytes())
        base = len(read(fx)[0])
        for k, (s, e) in enumerate(spans):
            if k > 12 and rnd.random() > 0.15:
                continue  # all IDBs and the first packets; a sample of the rest
            for i in range(s, e):
                for v in (0, 0xFF, rnd.randrange(256)):
                    m = bytearray(data)
                    m[i] = v
                    path = tmp_path / "m.pcapng"
                    path.write_bytes(bytes(m))
                    pk, dmg = read(path)  # must not raise
                    assert len(pk) == base, (fx.name, i, v, dmg)
                    assert all(d.kind == "corrupt-block" for d in dmg), (fx.name, i, v, dmg)
                    checked += 1
                    if rnd.random() < 0.02:
                        assert check_file(path, 1 << 30) == (1, 1)
    assert checked > 3000
