"""Kafka ``records`` fields: record batches (magic 2) and legacy message sets (magic 0 and 1).

Sans-io: bytes in, values out, and back.

    from kwire_cli.records import decode_records, encode_records, RecordsError

    value = decode_records(data, max_decompressed=DEFAULT_MAX_DECOMPRESSED)
    data = encode_records(value)

Modules: ``decode`` (the decode_records driver), ``v2`` (record batches), ``legacy`` (message
sets v0/v1), ``forms`` (key/value forms), ``layout`` (byte layouts, batch errors), ``encode``,
``compression`` (the ``Compression`` registry), ``limits`` (per-frame limits and budgets),
``native`` (the optional C fast path, ``_native.c``).

Decoded shape
-------------
``{"batches": [...], "partial_trailing_batch": None | {"offset": n, "bytes": n, "hex": "..."}}``

``batches`` holds one dict per record batch (magic 2) or top-level legacy message (magic 0/1), in
byte order. Every dict has ``ByteOffset`` (its position in the records field) and ``Magic``.

Record batch (magic 2), Kafka's field names::

    ByteOffset, BaseOffset, BatchLength, PartitionLeaderEpoch, Magic,
    Crc (stored), CrcComputed (CRC-32C over Attributes..end), CrcValid,
    Attributes (the int16) and its parts: Compression ("none"|"gzip"|"snappy"|"lz4"|"zstd"),
      TimestampType ("CreateTime"|"LogAppendTime"), IsTransactional, IsControlBatch, HasDeleteHorizonMs,
    LastOffsetDelta, BaseTimestamp, MaxTimestamp, ProducerId, ProducerEpoch, BaseSequence,
    RecordCount (the stored count), Records,
    CompressedSize, DecompressedSize            (compressed batches only)
    CompressionFraming                          (snappy: "xerial"|"raw";
                                                 lz4: "frame"|"frame-kafka-legacy-hc"|"frame-bad-hc")

Record::

    Length, Attributes, TimestampDelta, Timestamp, OffsetDelta, Offset, Key, Value, Headers
    Control: {Version, Type, TypeId, MarkerVersion, CoordinatorEpoch}   (control batches only)

``Timestamp`` = BaseTimestamp + TimestampDelta, except in a LogAppendTime batch where it is
MaxTimestamp (what clients report). ``Offset`` = BaseOffset + OffsetDelta. Control types:
0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3 SNAPSHOT_HEADER, 4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION,
6 KRAFT_VOTERS; MarkerVersion / CoordinatorEpoch come from the value of ABORT/COMMIT markers.

Legacy message (magic 0/1)::

    ByteOffset, Offset, MessageSize, Crc, CrcComputed (CRC-32 over Magic..end), CrcValid, Magic,
    Attributes, Compression, TimestampType + Timestamp (magic 1 only), Key, Value
    compressed wrapper: Key, CompressedSize, DecompressedSize, CompressionFraming and
      Messages: [inner messages, same shape, plus AbsoluteOffset] instead of Value.
      For magic 1 inner offsets are relative: AbsoluteOffset = wrapper Offset - last inner Offset
      + inner Offset (left as stored when that base is negative, e.g. a producer's wrapper offset 0,
      as Java's and kafka-python's readers do); for magic 0 inner offsets are already absolute.

Key, Value and header values: ``None`` for null, ``{"text": s}`` when the bytes are valid UTF-8
and printable (tab, CR and LF allowed), else ``{"hex": "lowercase hex"}``. Either form gives back the
exact bytes. Header keys are plain strings (``{"hex": ...}`` if not valid UTF-8). Headers are a
list of ``{"Key", "Value"}`` in wire order, duplicates kept.

Errors
------
Per-batch problems that clients tolerate or that only affect one batch never raise: a wrong CRC
sets ``CrcValid: false``; a corrupt or over-cap compressed payload, a broken record, an unknown
magic or codec adds ``"error": "batch N at byte B (offset O): ..."`` and ``"RawHex"`` (the whole
batch, so nothing is lost) and decoding goes on with the next batch (the length framing still
holds). A trailing batch cut short by the broker's fetch size limit is ``partial_trailing_batch``,
not an error. ``RecordsError`` (one line naming batch index and byte offset) is raised only when
the framing itself is unusable: a batch length below the 14-byte minimum.

Decompressed size is capped per batch (``max_decompressed``, default 256 MiB); decompression is
streamed / bounded so a bomb never allocates much past the cap.

Encoding
--------
``encode_records`` takes the decoded shape back (an uncompressed batch re-encodes byte for byte;
a compressed one re-compresses to the same records) or a friendlier authoring shape::

    {"batches": [{"Compression": "lz4", "BaseOffset": 0,
                  "Records": [{"Key": "k", "Value": "v", "Headers": [{"Key": "h", "Value": "x"}]}]}]}

Rules:

* A batch with ``RawHex`` is written verbatim (that is how error batches round-trip).
* ``Magic`` defaults to 2; ``Magic: 0|1`` writes a legacy message (``Messages`` + a Compression for a
  compressed wrapper).
* Computed always: BatchLength / MessageSize, record Length, RecordCount, varints, CRC. The stored
  ``Crc`` is written instead only when the value says ``CrcValid: false`` (so a decoded batch with a
  bad CRC reproduces its bytes).
* Attributes: the ``Attributes`` int is the base; named parts (Compression, TimestampType,
  IsTransactional, IsControlBatch, HasDeleteHorizonMs) override their bits when present.
* Defaults: BaseOffset 0, PartitionLeaderEpoch -1, ProducerId -1, ProducerEpoch -1,
  BaseSequence -1, BaseTimestamp = first record's Timestamp or now (ms), MaxTimestamp = largest
  record timestamp, LastOffsetDelta = largest OffsetDelta. Per record: OffsetDelta, else
  Offset - BaseOffset, else its index; TimestampDelta, else Timestamp - BaseTimestamp, else 0.
* Key/Value/header values accept ``None``, a plain string (UTF-8), ``{"text": s}``, ``{"hex": h}``,
  ``{"base64": b}``, ``{"json": any}`` (compact JSON), numbers and booleans (their text).
  Headers also accept ``[key, value]`` pairs, or a mapping when keys are unique.
* A record may give ``Control: {Type: COMMIT|ABORT|..., CoordinatorEpoch: n}`` instead of Key/Value:
  the control key (and marker value) are built from it, and a batch whose records all do so is
  flagged IsControlBatch unless that flag is given.
* snappy is written with the xerial framing Java clients use unless ``CompressionFraming: raw``;
  lz4 uses a standard frame (64 KiB independent blocks) except for magic 0 or
  ``CompressionFraming: frame-kafka-legacy-hc``, which write early Kafka's header checksum.
"""

import importlib
from typing import TYPE_CHECKING, Any

from kwire_cli.errors import RecordsError

if TYPE_CHECKING:
    from .compression import Compression, codec_label
    from .decode import decode_records
    from .encode import encode_records, to_bytes
    from .forms import show_bytes
    from .limits import (
        DEFAULT_MAX_DECOMPRESSED,
        FrameBudget,
        FrameLimits,
        frame_budget,
        frame_limits,
        set_frame_limits,
    )

# The package's names are loaded from their modules when first used (PEP 562): a message without
# records fields never imports the decoders, the compression libraries or crc32c (start-up time).
_WHERE = {
    "Compression": "compression", "codec_label": "compression",
    "decode_records": "decode",
    "encode_records": "encode", "to_bytes": "encode",
    "show_bytes": "forms",
    "DEFAULT_MAX_DECOMPRESSED": "limits", "FrameBudget": "limits", "FrameLimits": "limits",
    "frame_budget": "limits", "frame_limits": "limits", "set_frame_limits": "limits",
}


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Compression",
    "DEFAULT_MAX_DECOMPRESSED",
    "FrameBudget",
    "FrameLimits",
    "RecordsError",
    "codec_label",
    "decode_records",
    "encode_records",
    "frame_budget",
    "frame_limits",
    "set_frame_limits",
    "show_bytes",
    "to_bytes",
]
