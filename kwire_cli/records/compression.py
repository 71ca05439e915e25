"""Kafka's compression codecs, with a hard cap on decompressed size.

Codec ids are the ones in the batch / message attributes (bits 0-2):
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

* gzip: RFC 1952 members (concatenated members are read, as Java's GZIPInputStream does);
  decompressed with ``zlib.decompressobj(...).decompress(data, max_length)`` so output never grows
  past the cap.
* snappy: the xerial / snappy-java framing Java clients write (``\\x82SNAPPY\\x00``, int32 version,
  int32 compatible version, then ``[int32 big-endian length][raw snappy block]...``) and plain raw
  snappy (librdkafka, Sarama). Each raw block's uncompressed length is read from its preamble and
  checked against the cap before anything is allocated.
* lz4: the LZ4 frame format, parsed here block by block (each block is at most 4 MiB, decompressed
  with ``cramjam.lz4.decompress_block_into``), so the cap is checked between blocks. The frame
  descriptor checksum (HC) is checked both ways: the correct one, and the one early Kafka wrote for
  magic 0 messages (KAFKA-1493 / KAFKA-3160: xxh32 taken over the 4 magic bytes as well). Frames
  with linked blocks fall back to cramjam's whole-frame decoder with a growing, capped buffer.
* zstd: ``cramjam.zstd.decompress_into`` into a buffer that grows geometrically up to cap + 1 byte;
  zstd stops as soon as the buffer is full, so a bomb costs at most cap + 1 bytes.

One registry: the ``Compression`` enum. Each member has its ``label`` (the name in the value tree),
``decompress(payload, cap)``, ``compress(data, magic=, framing=)``, the ``framings`` it tells
apart and whether legacy message sets (magic 0/1) may use it. ``decompress`` returns
``(data, framing)`` (data: bytes, or the bytearray it was decompressed into, not copied once
more) where framing names what was found ("xerial" / "raw" for snappy, "frame" /
"frame-kafka-legacy-hc" / "frame-bad-hc" for lz4, else None); ``compress`` takes the same framing
name back so a re-encode keeps it. The module functions ``decompress(codec_id, ...)`` (which also
charges the frame budget) and ``compress(codec_id, ...)`` take the id from the attributes and
refuse an unknown one; ``codec_label`` names any id ("unknown(N)" past the registry).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

import cramjam

from kwire_cli.errors import CompressionError, DecompressedTooLarge
from kwire_cli.records.limits import DECOMPRESSED_OPTION, current_budget
from kwire_cli.wire import Buffer

# what decompression gives back: a bytearray for the codecs that decompress into one (not copied
# into bytes again: that copy is twice the decompressed size at once), bytes otherwise
Decompressed = bytes | bytearray


class Compression(IntEnum):
    """Kafka's compression codecs, by their id in the batch / message attributes (bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """The codec's name in the value tree: "none", "gzip", "snappy", "lz4", "zstd"."""
        return self.name.lower()

    @property
    def framings(self) -> tuple[str, ...]:
        """The framings ``decompress`` tells apart (and ``compress`` can write back)."""
        return _CODECS[self].framings

    @property
    def legacy(self) -> bool:
        """Whether legacy message sets (magic 0 and 1) may use it (zstd came with magic 2)."""
        return _CODECS[self].legacy

    def decompress(self, payload: Decompressed, cap: int) -> tuple[Decompressed, str | None]:
        """``(data, framing)``: never more than ``cap`` bytes (DecompressedTooLarge past it,
        CompressionError for a corrupt payload). No frame budget: see the module's ``decompress``."""
        return _CODECS[self].decompress(payload, cap)

    def compress(self, data: bytes, *, magic: int = 2, framing: str | None = None) -> bytes:
        """Compressed ``data``. snappy: xerial framing (what Java clients write) unless framing is
        "raw"; lz4: a standard frame, or the old-Kafka header checksum when framing is
        "frame-kafka-legacy-hc" or (no framing given and magic == 0)."""
        return _CODECS[self].compress(data, magic, framing)

    @classmethod
    def of(cls, codec_id: int) -> Compression | None:
        """The codec with this id, or None for an id past the registry (5, 6, 7)."""
        return _BY_ID.get(codec_id)

    @classmethod
    def named(cls, label: str) -> Compression | None:
        """The codec with this label ("gzip", ...), or None."""
        return _BY_LABEL.get(label)


_BY_ID: dict[int, Compression] = {c.value: c for c in Compression}
_BY_LABEL: dict[str, Compression] = {c.label: c for c in Compression}
_LABELS: tuple[str, ...] = tuple(c.label for c in Compression)
# the value tree's name of each codec id an attributes field can hold (0-7)
_ID_LABELS: tuple[str, ...] = tuple(_LABELS[i] if i < len(_LABELS) else f"unknown({i})" for i in range(8))


def codec_label(codec_id: int) -> str:
    """The value tree's name of a codec id: its label, or "unknown(N)" for an id past the registry."""
    if 0 <= codec_id < 8:
        return _ID_LABELS[codec_id]
    return f"unknown({codec_id})"


def codec_labels() -> tuple[str, ...]:
    """Every codec's label, in id order."""
    return _LABELS


# ---------------------------------------------------------------------------------------------
# xxh32 (only ever run over the few bytes of an LZ4 frame descriptor)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data`` (pure Python; meant for short inputs such as frame descriptors)."""
    n = len(data)
    pos = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        limit = n - 16
        while pos <= limit:
            a, b, c, d = struct.unpack_from("<IIII", data, pos)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + n) & _M32
    while pos + 4 <= n:
        (w,) = struct.unpack_from("<I", data, pos)
        acc = (_rotl((acc + w * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        acc = (_rotl((acc + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


# ---------------------------------------------------------------------------------------------
# decompression

def _too_large(cap: int) -> DecompressedTooLarge:
    return DecompressedTooLarge(f"decompressed size exceeds the cap of {cap} bytes")


def _gunzip(payload: Decompressed, cap: int) -> bytearray:
    out = bytearray()  # grown in place (a list of chunks joined at the end is twice the size at once)
    total = 0
    data = payload
    member = 0
    while True:
        d = zlib.decompressobj(47)  # 32 + 15: gzip or zlib header, auto-detected
        while True:
            try:
                # in steps, so that `total` says how much a corrupt member made before failing
                chunk = d.decompress(data, min(cap + 1 - total, 1 << 20))
            except zlib.error as e:
                raise CompressionError(f"gzip member {member}: {e}", total) from None
            total += len(chunk)
            if total > cap:
                raise _too_large(cap)
            out += chunk
            if d.eof:
                break
            data = d.unconsumed_tail
            if not data and not chunk:
                raise CompressionError(f"gzip member {member}: stream truncated (no end of stream)", total)
        rest = d.unused_data
        if rest[:2] == b"\x1f\x8b":
            data = rest
            member += 1
            continue
        # anything else after the last member is ignored, as java.util.zip.GZIPInputStream does
        return out


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _unsnappy_raw(block: Buffer, cap: int, total: int, where: str) -> bytearray:
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:  # cramjam.DecompressionError and friends
        raise CompressionError(f"snappy{where}: {e}") from None
    if total + n > cap:
        raise _too_large(cap)
    out = bytearray(n)  # its length is known: decompressed in place, not into a buffer then copied
    try:
        got = cramjam.snappy.decompress_raw_into(block, out)
    except Exception as e:
        raise CompressionError(f"snappy{where}: {e}", total + n) from None
    del out[got:]
    return out


def _unsnappy(payload: Decompressed, cap: int) -> tuple[Decompressed, str]:
    if len(payload) >= 16 and payload[:8] == _XERIAL_MAGIC:
        out = bytearray()
        total = 0
        pos = 16
        n = len(payload)
        index = 0
        while pos < n:
            if pos + 4 > n:
                raise CompressionError(
                    f"snappy (xerial) block {index} at byte {pos}: length cut short ({n - pos} of 4 bytes)", total)
            (size,) = struct.unpack_from(">i", payload, pos)
            if size < 0 or pos + 4 + size > n:
                raise CompressionError(
                    f"snappy (xerial) block {index} at byte {pos}: length {size} runs past the end "
                    f"of the {n}-byte payload", total)
            block = payload[pos + 4:pos + 4 + size]
            chunk = _unsnappy_raw(block, cap, total, f" (xerial) block {index} at byte {pos}")
            total += len(chunk)
            out += chunk
            del chunk
            pos += 4 + size
            index += 1
        return out, "xerial"
    return _unsnappy_raw(payload, cap, 0, " (raw)"), "raw"


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}
# frame descriptor (FLG BD [content size] [dict id]) -> (header checksum, early Kafka's one):
# producers use one or two descriptors, and xxh32 in Python costs more than the block itself
_HC_CACHE: dict[bytes, tuple[int, int]] = {}


def _grow_into(fn: Callable[[Buffer, bytearray], int], payload: Buffer, cap: int, name: str,
               hint: int | None = None) -> bytearray:
    """``fn(payload, buf)`` into a buffer grown (4 times each step) until it fits, up to cap + 1
    bytes; ``hint``: the size the payload says it has (tried first, when under the cap)."""
    size = min(cap + 1, max(1 << 16, len(payload) * 8) if hint is None else hint + 1)
    while True:
        buf = bytearray(size)
        try:
            n = fn(payload, buf)
        except Exception as e:  # cramjam.DecompressionError
            msg = str(e)
            if "failed to write whole buffer" in msg:
                if size > cap:
                    raise _too_large(cap) from None
                size = min(cap + 1, size * 4)
                del buf  # before the next one is made: both at once are up to 1.25 times the cap
                continue
            raise CompressionError(f"{name}: {msg}", size) from None
        if n > cap:
            raise _too_large(cap)
        del buf[n:]
        return buf  # not bytes(buf): a copy, twice the decompressed size at once


def _unlz4(payload: Decompressed, cap: int) -> tuple[Decompressed, str]:
    n = len(payload)
    if n < 7:
        raise CompressionError(f"lz4: frame of {n} bytes is shorter than a frame header")
    if payload[:4] != _LZ4_MAGIC:
        raise CompressionError(f"lz4: bad frame magic {payload[:4].hex()} (expected 04224d18)")
    flg = payload[4]
    bd = payload[5]
    if flg >> 6 != 1:
        raise CompressionError(f"lz4: unsupported frame version {flg >> 6}")
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    desc_end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if desc_end >= n:
        raise CompressionError("lz4: frame descriptor cut short")
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if block_max is None:
        raise CompressionError(f"lz4: bad block maximum size code {(bd >> 4) & 7}")
    hc = payload[desc_end]
    desc = bytes(payload[4:desc_end])  # (a bytearray payload's slice is no dict key)
    known = _HC_CACHE.get(desc)
    if known is None:
        known = ((xxh32(desc) >> 8) & 0xFF, (xxh32(_LZ4_MAGIC + desc) >> 8) & 0xFF)
        if len(_HC_CACHE) < 256:
            _HC_CACHE[desc] = known
    right_hc, legacy_hc = known
    if hc == right_hc:
        framing = "frame"
    elif hc == legacy_hc:
        framing = "frame-kafka-legacy-hc"
    else:
        framing = "frame-bad-hc"
    if not independent:
        fixed = payload if framing == "frame" else (
            payload[:desc_end] + bytes((right_hc,)) + payload[desc_end + 1:])
        return _grow_into(cramjam.lz4.decompress_into, fixed, cap, "lz4 (linked blocks)"), framing

    out = bytearray()
    total = 0
    pos = desc_end + 1
    scratch = bytearray(block_max)
    index = 0
    unpack_from = struct.unpack_from
    decompress_block_into = cramjam.lz4.decompress_block_into
    while True:
        if pos + 4 > n:
            raise CompressionError(f"lz4: frame truncated at byte {pos} (no end mark)", total)
        (size,) = unpack_from("<I", payload, pos)
        pos += 4
        if size == 0:
            if content_checksum and pos + 4 > n:
                raise CompressionError("lz4: content checksum cut short", total)
            break
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        if size > block_max:
            raise CompressionError(
                f"lz4: block {index} at byte {pos - 4}: size {size} exceeds the frame's block maximum {block_max}",
                total)
        if pos + size > n:
            raise CompressionError(
                f"lz4: block {index} at byte {pos - 4}: {size} bytes run past the end of the {n}-byte payload",
                total)
        if stored:
            chunk: Buffer = payload[pos:pos + size]
        else:
            try:
                got = decompress_block_into(payload[pos:pos + size], scratch)
            except Exception as e:
                raise CompressionError(f"lz4: block {index} at byte {pos - 4}: {e}", total) from None
            chunk = memoryview(scratch)[:got]
        total += len(chunk)
        if total > cap:
            raise _too_large(cap)
        out += chunk
        pos += size + (4 if block_checksum else 0)
        index += 1
    return out, framing


def decompress(codec: int, payload: Decompressed, cap: int) -> tuple[Decompressed, str | None]:
    """Decompress ``payload`` with Kafka codec id ``codec``; never produce more than ``cap`` bytes,
    nor more than what is left of the current ``frame_budget`` (which is then charged).

    Raises CompressionError (DecompressedTooLarge when over the cap).
    """
    budget = current_budget()
    if budget is None:
        return _decompress(codec, payload, cap)
    eff = budget.left if budget.left < cap else cap
    try:
        out = _decompress(codec, payload, eff)
    except DecompressedTooLarge:
        if eff < cap or cap >= budget.limit:  # the frame's cap stopped it (or a batch cap no tighter)
            left, budget.left = budget.left, 0
            what = "the frame's cap" if left == budget.limit else f"the {left} bytes left of the frame's cap"
            raise DecompressedTooLarge(
                f"decompressed size exceeds {what} of {budget.limit} bytes (all batches together; "
                f"{DECOMPRESSED_OPTION} raises it)") from None
        budget.left -= cap  # the bytes it took to find out count too
        raise
    except CompressionError as e:  # corrupt after producing output: that work counts as well
        budget.left -= min(e.produced, eff)
        raise
    budget.left -= len(out[0])
    return out


def _codec(codec_id: int) -> Compression:
    codec = Compression.of(codec_id)
    if codec is None:
        raise CompressionError(f"unknown compression codec {codec_id}")
    return codec


def _decompress(codec: int, payload: Decompressed, cap: int) -> tuple[Decompressed, str | None]:
    return _codec(codec).decompress(payload, cap)


# ---------------------------------------------------------------------------------------------
# compression

def _lz4_frame(data: bytes, legacy_hc: bool) -> bytes:
    flg = 0x60  # version 01, independent blocks, no checksums, no content size
    bd = 0x40   # 64 KiB blocks, as Kafka's Java client writes
    desc = bytes((flg, bd))
    if legacy_hc:
        hc = (xxh32(_LZ4_MAGIC + desc) >> 8) & 0xFF
    else:
        hc = (xxh32(desc) >> 8) & 0xFF
    parts = [_LZ4_MAGIC, desc, bytes((hc,))]
    mv = memoryview(data)
    compress_block = cramjam.lz4.compress_block
    for i in range(0, len(data), 1 << 16):
        raw = mv[i:i + (1 << 16)]
        block = bytes(compress_block(bytes(raw), store_size=False))
        if len(block) >= len(raw):
            parts.append(struct.pack("<I", len(raw) | 0x80000000))
            parts.append(bytes(raw))
        else:
            parts.append(struct.pack("<I", len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def _xerial(data: bytes) -> bytes:
    parts = [_XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    compress_raw = cramjam.snappy.compress_raw
    for i in range(0, len(data), 32 * 1024):
        block = bytes(compress_raw(data[i:i + 32 * 1024]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def compress(codec: int, data: bytes, *, magic: int = 2, framing: str | None = None) -> bytes:
    """Compress ``data`` with Kafka codec id ``codec`` (see ``Compression.compress``); an unknown
    id raises CompressionError."""
    return _codec(codec).compress(data, magic=magic, framing=framing)


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: gzip header and trailer
    return c.compress(data) + c.flush()


def _snappy(data: bytes, _magic: int, framing: str | None) -> bytes:
    if framing == "raw":
        return bytes(cramjam.snappy.compress_raw(data))
    return _xerial(data)


def _lz4(data: bytes, magic: int, framing: str | None) -> bytes:
    return _lz4_frame(data, framing == "frame-kafka-legacy-hc" or (framing is None and magic == 0))


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_content_size(payload: Buffer) -> int | None:
    """The content size a zstd frame header declares (RFC 8878 3.1.1.1), or None: a hint only (a
    payload of several frames, or a header that lies, still decompresses right)."""
    if len(payload) < 6 or payload[:4] != _ZSTD_MAGIC:
        return None
    fhd = payload[4]
    fcs_flag, single = fhd >> 6, (fhd >> 5) & 1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    width = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or pos + width > len(payload):
        return None
    n = int.from_bytes(payload[pos:pos + width], "little")
    return n + 256 if width == 2 else n


def _unzstd(payload: Decompressed, cap: int) -> bytearray:
    hint = _zstd_content_size(payload)
    if hint is not None and hint > cap:
        hint = None
    return _grow_into(cramjam.zstd.decompress_into, payload, cap, "zstd", hint)


def _none_decompress(payload: Decompressed, cap: int) -> tuple[Decompressed, str | None]:
    if len(payload) > cap:
        raise _too_large(cap)
    return payload, None


class _Codec(NamedTuple):
    decompress: Callable[[Decompressed, int], tuple[Decompressed, str | None]]
    compress: Callable[[bytes, int, str | None], bytes]
    framings: tuple[str, ...]
    legacy: bool


_CODECS: dict[Compression, _Codec] = {
    Compression.NONE: _Codec(_none_decompress, lambda data, magic, framing: bytes(data), (), True),
    Compression.GZIP: _Codec(lambda payload, cap: (_gunzip(payload, cap), None),
                             lambda data, magic, framing: _gzip(data), (), True),
    Compression.SNAPPY: _Codec(_unsnappy, _snappy, ("xerial", "raw"), True),
    Compression.LZ4: _Codec(_unlz4, _lz4, ("frame", "frame-kafka-legacy-hc", "frame-bad-hc"), True),
    Compression.ZSTD: _Codec(lambda payload, cap: (_unzstd(payload, cap), None),
                             lambda data, magic, framing: bytes(cramjam.zstd.compress(data)), (), False),
}
