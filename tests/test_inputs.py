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
    assert [r.__module__ for r in RECOGNISERS] == ["kwire_cli.inputs.forms.offsetdump",
                                                    "kwire_cli.inputs.forms.plainhex"]
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
