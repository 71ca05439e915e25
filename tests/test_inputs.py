"""kwire_cli.inputs: the one reader of input arguments and pasted bytes, on the dump fixtures
(written by the real tools, see fixtures/hex/dumps/README.md) and the recorded captures."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from kwire_cli.capture import Packet, iter_packets
from kwire_cli.inputs import (
    Block,
    InputError,
    NotADump,
    SourceError,
    bytes_from_source,
    is_text,
    message_bytes,
    parse_hex,
    read_blocks,
    read_source,
)
from kwire_cli.inputs.forms import RECOGNISERS

ROOT = Path(__file__).resolve().parents[1]
HEX = ROOT / "fixtures" / "hex"
DUMPS = HEX / "dumps"
MR12 = (DUMPS / "metadata-request-v12.bin").read_bytes()


@pytest.mark.parametrize("name,form", [("metadata-request-v12.xxd.txt", "offset-dump"),
                                       ("metadata-request-v12.xxd-g1.txt", "offset-dump"),
                                       ("metadata-request-v12.hexdump-C.txt", "offset-dump"),
                                       ("metadata-request-v12.xxd-p.txt", "hex")])
def test_each_dump_form_reads_to_one_block_with_its_provenance(name, form):
    text = (DUMPS / name).read_text()
    (block,) = read_blocks(text)
    n_lines = len(text.splitlines())
    assert block == Block(MR12, 1, n_lines, form, None, 1 if form == "offset-dump" else None)
    assert message_bytes([block]) == MR12  # a size-prefixed Kafka frame is never cut as a packet


def test_tshark_blocks_keep_their_labels_and_lines_and_the_reassembled_one_is_the_message():
    text = (DUMPS / "metadata-response-v12.tshark-reassembled.txt").read_text()
    frame, reassembled = read_blocks(text)
    assert (frame.label, frame.first_line, frame.last_line, len(frame.data)) == ("Frame", 2, 11, 156)
    assert (reassembled.label, reassembled.first_line, len(reassembled.data)) == ("Reassembled TCP", 13, 162)
    assert message_bytes([frame, reassembled]) == bytes.fromhex((HEX / "metadata-response-v12.hex").read_text())
    with pytest.raises(InputError, match="the dump holds 2 separate blocks of bytes"):
        message_bytes([frame, frame])


def test_a_dumped_frame_is_cut_to_the_payload_the_capture_reader_sees():
    """tshark -x of frame 8 of kafka-python-admin.pcap: the dump reader's TCP payload is the one
    the capture reader reads from the capture itself (one link-layer walk for both)."""
    (block,) = read_blocks((DUMPS / "metadata-request-v12.tshark.txt").read_text())
    (pkt,) = [p for p in iter_packets(str(ROOT / "fixtures" / "captures" / "kafka-python-admin.pcap"))
              if p.__class__ is Packet and p.packet == 8]
    assert len(block.data) > len(pkt.payload)
    assert message_bytes([block]) == pkt.payload


@pytest.mark.parametrize("text,message", [
    ("00zz", "not hex: unexpected character 'z' at line 1, column 3"),
    ("0x12 0x3z", "not hex: unexpected character 'z' at line 1, column 9"),       # after a 0x prefix
    ("0x12 xz", "not hex: unexpected character 'x' at line 1, column 6"),         # not the x of 0x
    ("00 01 # a comment\n02 xyz\n", "not hex: unexpected character 'x' at line 2, column 4"),
])
def test_text_that_is_no_dump_names_line_and_column(text, message):
    with pytest.raises(NotADump) as e:
        read_blocks(text)
    assert str(e.value) == message


def test_a_star_line_repeats_only_within_its_own_block():
    line = "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................"
    one = f"Frame (48 bytes):\n0000  {line}\n*\n0020  {line}\n"
    (b,) = read_blocks(one)
    assert b.data == bytes(range(16)) * 3
    # a second block with a gap at the same line index as the first block's '*' is refused
    two = one + f"Reassembled TCP (48 bytes):\n0000  {line}\n0020  {line}\n"
    with pytest.raises(InputError, match=r"hex dump skips bytes at line 7 \(offset 0x20, expected 0x10\)"):
        read_blocks(two)


def test_recognisers_are_tried_in_order_and_plain_hex_is_the_catch_all():
    assert [r.__module__.rsplit(".", 1)[1] for r in RECOGNISERS] == [
        "tcpdump", "follow", "od", "offsetdump", "nodebuffer", "bytelist", "escaped", "base64text", "plainhex"]
    # a single line with one space after an offset-like start is plain hex, not a dump
    assert read_blocks("00000000 0000")[0].form == "hex"
    assert parse_hex("# answer\n00 00 00 06\n00000000 0000\n") == bytes.fromhex("00000006000000000000")
    with pytest.raises(InputError, match=r"^odd number of hex digits \(3\): a byte needs two$"):
        read_blocks("000")
    with pytest.raises(InputError, match=r"^empty input: no hex digits$"):
        read_blocks("\n  \n")


def test_bytes_from_source_text_or_raw():
    assert bytes_from_source(MR12) == MR12
    assert bytes_from_source((DUMPS / "metadata-request-v12.xxd.txt").read_bytes()) == MR12
    assert bytes_from_source(b"0102", binary=True) == b"0102"
    assert is_text(b"00 01\t\r\n") and is_text("é 00".encode()) and not is_text(b"\x00\x01")
    assert not is_text("\u200b".encode())  # a zero-width space is not printable
    with pytest.raises(InputError, match=r"^empty input$"):
        bytes_from_source(b"", binary=True)


def test_read_source_forms_and_one_line_errors(tmp_path, monkeypatch):
    f = tmp_path / "m.hex"
    f.write_text("00 01\n")
    assert read_source(f"@{f}").data == b"00 01\n" and read_source(f"@{f}").name == str(f)
    assert read_source(str(f)).origin == "argument"              # a bare path is text by default
    assert read_source(str(f), paths="existing").origin == "file"
    assert read_source("ab" * 3000, paths="existing").origin == "argument"  # too long for a path
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"0a0b")))
    src = read_source("-")
    assert (src.data, src.name, src.origin) == (b"0a0b", "<stdin>", "stdin")
    with pytest.raises(SourceError, match=f"^INPUT: file {tmp_path / 'nope'} does not exist$"):
        read_source(f"@{tmp_path / 'nope'}")
    with pytest.raises(SourceError, match=f"^FILE: {tmp_path} is a directory$"):
        read_source(str(tmp_path), what="FILE", paths="any")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"api: caf\xe9\n")
    with pytest.raises(InputError, match=f"^{bad}: not UTF-8 text \\(byte 8\\)$"):
        read_source(str(bad), paths="any").text()


# ------------------------------------------------------------------------------------------------
# issue 14: every dump form of fixtures/hex/dumps (made by scripts/make_dump_fixtures.sh with the
# real tools, from our recordings) is read by its own recogniser, to the bytes of the recording

from kwire_cli.inputs.dump import Text, recognise  # noqa: E402
from kwire_cli.inputs.frames import chain, pair_frames, split_frames  # noqa: E402

CAP = ROOT / "fixtures" / "captures" / "kafkajs-produce.pcap"


def recorded_payloads() -> dict[int, Packet]:
    """Packet number -> the capture reader's TCP segment of kafkajs-produce.pcap."""
    return {p.packet: p for p in iter_packets(str(CAP)) if p.__class__ is Packet}


def recorded_frames() -> list[tuple[str, bytes]]:
    """(direction, Kafka frame) of the whole recorded conversation, in the order the capture
    reader sees the segments: each side's payloads joined and cut by their size prefixes."""
    streams: dict[str, bytearray] = {}
    order = []
    for p in recorded_payloads().values():
        if p.payload:
            way = f"{p.src_ip}:{p.src_port} > {p.dst_ip}:{p.dst_port}"
            streams.setdefault(way, bytearray()).extend(p.payload)
            order.append((way, len(streams[way])))
    frames = []
    for way, data in streams.items():
        spans = chain(bytes(data))
        assert spans is not None
        frames += [(way, a, bytes(data[a:b])) for a, b in spans]
    # in conversation order: by the segment that completes each frame
    ends = {}
    for i, (way, end) in enumerate(order):
        ends[(way, end)] = i
    frames.sort(key=lambda f: ends[(f[0], f[1] + len(f[2]))])
    return [(w, d) for w, _, d in frames]


BIN = {stem: (DUMPS / f"{stem}.bin").read_bytes()
       for stem in ("metadata-request-v12", "produce-request-v9", "saslauthenticate-request-v2")}

#: sample -> (the recogniser meant for it, the bytes of the frames it holds)
SAMPLES = {
    "kafkajs-apiversions-request-v2.tcpdump-x.txt": ("tcpdump", lambda: [recorded_payloads()[4].payload]),
    "kafkajs-apiversions-request-v2.tcpdump-xx.txt": ("tcpdump", lambda: [recorded_payloads()[4].payload]),
    "kafkajs-apiversions-request-v2.tcpdump-X.txt": ("tcpdump", lambda: [recorded_payloads()[4].payload]),
    "kafkajs-produce-request-v7.tcpdump-X.txt": ("tcpdump", lambda: [recorded_payloads()[10].payload]),
    "kafkajs-packets-4-9.tcpdump-X.txt": (
        "tcpdump", lambda: [p.payload for n, p in sorted(recorded_payloads().items()) if 4 <= n <= 9 and p.payload]),
    "kafkajs-produce.follow-tcp-hex.txt": ("follow", lambda: [d for _, d in recorded_frames()]),
    "kafkajs-produce-request-v7.sll.tshark-x.txt": ("offsetdump", lambda: [recorded_payloads()[10].payload]),
    "kafkajs-produce-request-v7.sll2.tshark-x.txt": ("offsetdump", lambda: [recorded_payloads()[10].payload]),
    "kafkajs-produce-request-v7.rawip.tshark-x.txt": ("offsetdump", lambda: [recorded_payloads()[10].payload]),
    "kafkajs-produce-request-v7.null.tshark-x.txt": ("offsetdump", lambda: [recorded_payloads()[10].payload]),
    "metadata-request-v12.tshark.txt": ("offsetdump", None),  # kafka-python-admin.pcap: tested above
    "metadata-response-v12.tshark-reassembled.txt": (
        "offsetdump", lambda: [bytes.fromhex((HEX / "metadata-response-v12.hex").read_text())]),
    "metadata-request-v12.xxd.txt": ("offsetdump", lambda: [BIN["metadata-request-v12"]]),
    "metadata-request-v12.xxd-g1.txt": ("offsetdump", lambda: [BIN["metadata-request-v12"]]),
    "metadata-request-v12.hexdump-C.txt": ("offsetdump", lambda: [BIN["metadata-request-v12"]]),
    "saslauthenticate-request-v2.hexdump-C.txt": ("offsetdump", lambda: [BIN["saslauthenticate-request-v2"]]),
    "metadata-request-v12.xxd-p.txt": ("plainhex", lambda: [BIN["metadata-request-v12"]]),
    "metadata-request-v12.od-Ax-tx1.txt": ("od", lambda: [BIN["metadata-request-v12"]]),
    "saslauthenticate-request-v2.od-Ax-tx1.txt": ("od", lambda: [BIN["saslauthenticate-request-v2"]]),
    "produce-request-v9.od-tx1.txt": ("od", lambda: [BIN["produce-request-v9"]]),
    "metadata-request-v12.xxd-i.txt": ("bytelist", lambda: [BIN["metadata-request-v12"]]),
    "produce-request-v9.go-sharp-v.txt": ("bytelist", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.go-v.txt": ("bytelist", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.java-arrays-tostring.txt": ("bytelist", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.node-buffer-json.txt": ("bytelist", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.python-bytes-repr.txt": ("escaped", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.python-str-repr.txt": ("escaped", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.base64.txt": ("base64text", lambda: [BIN["produce-request-v9"]]),
    "produce-request-v9.node-buffer-inspect.txt": ("nodebuffer", None),  # refused: Node cut it short
}


def test_every_dump_sample_is_in_the_table():
    assert sorted(SAMPLES) == sorted(p.name for p in DUMPS.glob("*.txt"))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_is_claimed_by_its_own_recogniser_only(name):
    """The recogniser meant for a sample claims it (or refuses it with an error: Node's cut
    buffer), and no other specific one does; plain hex, the catch-all, also reads od's output
    (offsets and bytes are all hex digits, when there is no '*' line), which od's recogniser, tried
    first, claims."""
    meant, _ = SAMPLES[name]
    text = Text((DUMPS / name).read_text())
    claims = []
    for r in RECOGNISERS:
        mod = r.__module__.rsplit(".", 1)[1]
        try:
            if r(text) is not None:
                claims.append(mod)
        except InputError:
            claims.append(mod)
    expected = [meant, "plainhex"] if meant == "od" and "*" not in text.text else [meant]
    assert claims == expected


@pytest.mark.parametrize("name", sorted(n for n, (_, want) in SAMPLES.items() if want is not None))
def test_each_sample_gives_exactly_the_recorded_frames(name):
    meant, want = SAMPLES[name]
    blocks, by = recognise((DUMPS / name).read_text())
    assert by == meant
    assert [f.data for f in split_frames(blocks)] == want()


@pytest.mark.parametrize("kind, linktype, header", [("sll", 113, 16), ("sll2", 276, 20), ("rawip", 101, 0),
                                                    ("null", 0, 4)])
def test_tshark_x_of_each_link_type_is_read_with_its_link_header(kind, linktype, header):
    (block,) = read_blocks((DUMPS / f"kafkajs-produce-request-v7.{kind}.tshark-x.txt").read_text())
    pkt = recorded_payloads()[10]
    assert block.linktype == linktype and block.direction == "127.0.0.1:52206 > 127.0.0.1:9092"
    assert len(block.data) == header + 20 + 32 + len(pkt.payload)  # link, IPv4, TCP with timestamps, payload
    assert message_bytes([block]) == pkt.payload


def test_tcpdump_blocks_carry_their_header_line_link_type_and_direction():
    x, xx = (read_blocks((DUMPS / f"kafkajs-apiversions-request-v2.tcpdump-{k}.txt").read_text())[0]
             for k in ("x", "xx"))
    assert (x.linktype, xx.linktype) == (101, 1)   # -x from the IP header, -xx with Ethernet's
    assert xx.data[14:] == x.data and x.direction == xx.direction == "127.0.0.1:52206 > 127.0.0.1:9092"
    assert x.label.startswith("05:13:54.902236 IP 127.0.0.1.52206 > 127.0.0.1.9092: Flags [P.]")
    six = read_blocks((DUMPS / "kafkajs-packets-4-9.tcpdump-X.txt").read_text())
    assert [len(b.data) for b in six] == [79, 52, 286, 52, 104, 199]  # the ACKs have no payload
    assert [b.direction.split(" > ")[0].rsplit(":", 1)[1] for b in six] == ["52206", "9092", "9092", "52206",
                                                                             "52206", "9092"]


def test_follow_tcp_stream_pairs_every_response_with_its_request():
    frames = split_frames(read_blocks((DUMPS / "kafkajs-produce.follow-tcp-hex.txt").read_text()))
    decoded = pair_frames(frames)
    assert all(d.error is None for d in decoded)
    assert [(d.message.api_name, d.message.api_version, d.kind, d.request) for d in decoded] == [
        ("ApiVersions", 2, "request", None), ("ApiVersions", 2, "response", 0),
        ("Metadata", 6, "request", None), ("Metadata", 6, "response", 2),
        ("Produce", 7, "request", None), ("Produce", 7, "response", 4),
        ("Metadata", 6, "request", None), ("Metadata", 6, "response", 6),
        ("Produce", 7, "request", None), ("Produce", 7, "response", 8)]
    assert frames[0].direction == "127.0.0.1:52206 > 127.0.0.1:9092" and frames[0].where() == (
        "lines 7-8 (127.0.0.1:52206 > 127.0.0.1:9092)")


def test_node_inspect_output_is_refused_naming_what_node_left_out():
    with pytest.raises(InputError, match=r"^the <Buffer> at line 1 shows 50 bytes and leaves out 114 more: "):
        read_blocks((DUMPS / "produce-request-v9.node-buffer-inspect.txt").read_text())
    assert read_blocks("<Buffer 00 00 00 06 00 03>")[0].data == bytes.fromhex("000000060003")


def test_web_page_text_bom_no_break_spaces_and_reply_quoting_are_text():
    h = MR12.hex()
    spaced = " ".join(h[i:i + 2] for i in range(0, len(h), 2))
    web = "\ufeff" + spaced.replace(" ", "\u00a0")
    assert is_text(web.encode()) and bytes_from_source(web.encode()) == MR12  # not binary ("API key -4165")
    assert parse_hex("\u202f".join([h[:20], h[20:]])) == MR12
    xxd = (DUMPS / "metadata-request-v12.xxd.txt").read_text()
    quoted = "".join("> " + line + "\n" for line in xxd.splitlines())
    assert parse_hex(quoted) == MR12 and parse_hex(quoted.replace("> ", "> > ")) == MR12
    assert parse_hex(f"// request\n{h[:40]} // first bytes\n{h[40:]}\n") == MR12


def test_several_paragraphs_and_binary_frames_chain_into_frames():
    h, p9 = MR12.hex(), BIN["produce-request-v9"].hex()
    frames = split_frames(read_blocks(f"# one\n{h}\n\n# two\n{p9}\n"))
    assert [(f.data, f.lines, f.blocks[0].label) for f in frames] == [
        (MR12, "line 2", "one"), (BIN["produce-request-v9"], "line 5", "two")]
    frames = split_frames(read_blocks(h + p9))  # one line, two frames back to back
    assert [f.data for f in frames] == [MR12, BIN["produce-request-v9"]]
    # hex over several paragraphs that does not chain stays one message (as before)
    body = MR12[4:].hex()
    assert [f.data for f in split_frames(read_blocks(f"{body[:40]}\n\n{body[40:]}"))] == [MR12[4:]]
    assert split_frames([Block(MR12 + MR12, 0, 0, "binary")])[1].lines == f"bytes {len(MR12)}-{2 * len(MR12) - 1}"


@pytest.mark.parametrize("text, error", [
    ("unsigned char x[] = {0x00, 0x01};\nunsigned int x_len = 3;\n",
     "the array holds 2 bytes, but its length variable says 3"),
    ("new byte[]{0, -129}", r"-129 at line 1, column 15 is not a byte \(-128..255\)"),
    ("'\\x00\u0100'", r"character 'Ā' \(U\+0100\) at line 1, column 6 is not a byte"),
    ("000000 00 01 02\n000010 03\n000011\n", "od dump offsets do not follow from the bytes in any base"),
    ("05:13:54 IP a.1 > b.2: length 2\n\t0x0000:  4500\n\t0x0004:  0000\n",
     r"tcpdump hex offsets skip at line 3 \(offset 0x0004, expected 0x0002\)"),
])
def test_broken_forms_name_line_and_problem(text, error):
    with pytest.raises(InputError, match="^" + error):
        read_blocks(text)


@pytest.mark.parametrize("text, data", [
    ("[]byte{0x0, 0x1d, 0xff}", "001dff"),
    ("byte[] b = {(byte) 0x80, 0x01, -1};", "8001ff"),
    ("[0 0 0 160]", "000000a0"),
    ("vec![0x00u8, 0x01]", "0001"),
    ("bytearray(b'\\x00\\x01kw')", "00016b77"),
    ("b'\\x00'\nb'\\x01'", None),                       # two values, one per line: two blocks
    ('"\\x00\\x00" "\\x00\\x06"', "00000006"),          # adjacent literals join
    ('"\\000\\001\\u00ff"', "0001ff"),
    ('"0000001d"', "0000001d"),                         # hex in quotes is hex
    ("AAAABgADAAwAAAAB", "000000060003000c00000001"),
])
def test_literal_forms(text, data):
    blocks = read_blocks(text)
    if data is None:
        assert [b.data for b in blocks] == [b"\x00", b"\x01"]
    else:
        assert b"".join(b.data for b in blocks) == bytes.fromhex(data)


@pytest.mark.parametrize("text", ["{ApiKeys: [{ApiKey: 0, MinVersion: 0, MaxVersion: 9}]}",
                                  "ApiKeys: [[0, 0, 9], [1, 0, 11]]", "nonsense-arg", "kwire"])
def test_other_text_is_no_dump(text):
    with pytest.raises(NotADump):
        read_blocks(text)


def test_quote_stripping_ends_whatever_separates_the_lines():
    """Found by fuzz/fuzz_all.py (hexdump target): a '>' after a vertical tab, form feed, U+0085,
    U+2028 ... (where str.splitlines breaks a line but a regex's ^ does not) looked quoted and was
    never unquoted: normalize() went round for ever (`kwire decode` hung on b'\\x0b>00')."""
    import subprocess
    import sys
    seps = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"]
    code = ("from kwire_cli.inputs.dump import normalize\n"
            f"for sep in {seps!r}:\n"
            "    for text in (sep + '>00\\n', '>00' + sep + '>00\\n', '> 00' + sep + ' > 01\\n'):\n"
            "        normalize(text)\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    from kwire_cli.inputs.dump import normalize
    assert normalize("> 00 01\n> 02\n") == "00 01\n02\n"  # real quoting is still removed
