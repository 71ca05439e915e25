#!/usr/bin/env python3
"""Build fixtures/logs/: Kafka log directories for `kwire dump-log`, from real bytes.

There is no Kafka broker here, so the files are assembled as a broker writes them:

* ``<topic>-<partition>/00000000000000000000.log`` (+ ``.index``, ``.timeindex``): the record
  batches of the Produce requests in fixtures/captures/*-produce.pcap (taken out of the captures
  by kwire's own capture reader, byte for byte), per topic partition in capture order, each
  batch's base offset set to the partition's next offset and its leader epoch to 0 (as the broker
  does on append; neither is covered by the CRC, so every batch stays as its client wrote it). The
  offset index has an entry for every batch (last offset, position), the time index one for every
  batch whose largest timestamp is a new maximum (timestamp, last offset), as a broker with
  index.interval.bytes=1 writes them.
* ``<topic>-<partition>/<log end offset>.snapshot``: the producer state snapshot the broker writes
  when the segment rolls or it shuts down: the last batch of every idempotent producer (producer
  id, epoch, last sequence, last offset, offset delta, timestamp) as its producer state manager
  keeps it (no transactions in these captures: coordinator epoch and open transaction -1).
* ``__consumer_offsets-12/...log``: the valid ``__consumer_offsets`` vectors of
  fixtures/vectors/internal (peers' bytes, each a record key and value) in batches of three,
  then a tombstone of the first key.
* ``__cluster_metadata-0/...log``: the valid metadata record vectors (framed values, no key), then
  a control batch of the KRaft LeaderChange vector; ``...-0000000001.checkpoint``: a snapshot,
  the SnapshotHeader vector's control batch, the TopicRecord and PartitionRecord vectors, the
  SnapshotFooter's control batch.

    python scripts/make_log_fixtures.py            # writes fixtures/logs
    python scripts/make_log_fixtures.py OUT_DIR
"""
from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

from crc32c import crc32c

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kwire_cli.capture import iter_capture
from kwire_cli.codec import decode_request
from kwire_cli.errors import KwireError
from kwire_cli.records import decode_records, encode_records

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ("confluent-kafka-produce.pcap", "kafka-python-produce.pcap", "kafkajs-produce.pcap")
VECTORS = ROOT / "fixtures" / "vectors" / "internal" / "manifest.json"
BASE_TIMESTAMP = 1_700_000_000_000  # the internal topics' batches: a fixed time, for stable files


def produce_batches(capture: Path) -> list[tuple[str, int, bytes]]:
    """(topic, partition, records bytes) of every Produce request partition in the capture."""
    out = []
    for ev in iter_capture(str(capture)):
        data = getattr(ev, "data", None)
        if data is None or getattr(ev, "api_key", None) != 0 or getattr(ev, "kind", None) != "request":
            continue
        try:
            msg = decode_request(data, records="bytes")
        except KwireError:
            continue
        for t in msg.body["TopicData"]:
            for p in t["PartitionData"]:
                if p["Records"]:
                    out.append((t["Name"], p["Index"], bytes(p["Records"])))
    return out


def split_entries(records: bytes) -> list[bytes]:
    """The entries (offset, length, rest) of a records field."""
    out, pos = [], 0
    while pos + 12 <= len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        out.append(records[pos:pos + 12 + length])
        pos += 12 + length
    return out


def assign(entry: bytes, base_offset: int) -> tuple[bytes, int, int]:
    """The entry as the broker appends it (magic 2: base offset set, leader epoch 0), its last
    offset and largest timestamp."""
    magic = entry[16]
    if magic != 2:
        raise SystemExit(f"a legacy message set in a capture: not handled here (magic {magic})")
    out = bytearray(entry)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, 0)
    (last_delta,) = struct.unpack_from(">i", out, 23)
    batch = decode_records(bytes(out))["batches"][0]
    max_ts = max((r["Timestamp"] for r in batch["Records"]), default=batch["MaxTimestamp"])
    return bytes(out), base_offset + last_delta, max_ts


def write_partition(folder: Path, entries: list[bytes], snapshot: bool = True) -> None:
    """A segment from offset 0 with its offset and time indexes (and the producer state snapshot)."""
    folder.mkdir(parents=True, exist_ok=True)
    log, index, timeindex = bytearray(), bytearray(), bytearray()
    next_offset, max_ts = 0, -1
    producers: dict[int, tuple] = {}
    for entry in entries:
        data, last, ts = assign(entry, next_offset)
        producer = producer_state(data, last)
        if producer is not None:
            producers[producer[0]] = producer
        index += struct.pack(">ii", last, len(log))
        if ts > max_ts:
            timeindex += struct.pack(">qi", ts, last)
            max_ts = ts
        log += data
        next_offset = last + 1
    name = "0" * 20
    (folder / f"{name}.log").write_bytes(bytes(log))
    (folder / f"{name}.index").write_bytes(bytes(index))
    (folder / f"{name}.timeindex").write_bytes(bytes(timeindex))
    if snapshot:
        (folder / f"{next_offset:020d}.snapshot").write_bytes(producer_snapshot(producers))


def producer_state(entry: bytes, last: int) -> tuple | None:
    """What the broker's producer state manager keeps of an idempotent producer's batch: (producer
    id, epoch, last sequence, last offset, offset delta, max timestamp, coordinator epoch -1, open
    transaction's first offset -1); None for a batch without a producer id."""
    (last_delta,) = struct.unpack_from(">i", entry, 23)
    max_ts, pid, epoch, base_seq = struct.unpack_from(">qqhi", entry, 35)
    if pid < 0:
        return None
    return (pid, epoch, base_seq + last_delta, last, last_delta, max_ts, -1, -1)


def producer_snapshot(producers: dict[int, tuple]) -> bytes:
    """A producer state snapshot as the broker writes one at the log end offset (version 1, the
    CRC-32C of what follows it, the entries), producers in id order."""
    body = struct.pack(">i", len(producers)) + b"".join(
        struct.pack(">qhiqiqiq", *producers[pid]) for pid in sorted(producers))
    return struct.pack(">hI", 1, crc32c(body)) + body


def batch(records: list[dict], *, control: bool = False) -> bytes:
    return encode_records({"batches": [{"BaseTimestamp": BASE_TIMESTAMP, "MaxTimestamp": BASE_TIMESTAMP,
                                        "IsControlBatch": control, "Records": records}]})


def _form(h: str | None) -> dict | None:
    return None if h is None else {"hex": h}


def internal_logs(out: Path) -> None:
    vectors = json.loads(VECTORS.read_text())["vectors"]
    offsets = [v for v in vectors if v["topic"] == "__consumer_offsets" and v["valid"]
               and v["key_form"] == v["value_form"] == "prefixed"]
    recs = [{"Key": _form(v["key_hex"]), "Value": _form(v["value_hex"])} for v in offsets]
    recs.append({"Key": _form(offsets[0]["key_hex"]), "Value": None})  # a tombstone
    entries = [batch(recs[i:i + 3]) for i in range(0, len(recs), 3)]
    write_partition(out / "__consumer_offsets-12", entries)

    by_id = {v["id"]: v for v in vectors}
    meta = [v for v in vectors if v["topic"] == "__cluster_metadata" and v["valid"] and v["value_form"] == "framed"]
    entries = [batch([{"Key": None, "Value": _form(v["value_hex"])} for v in meta])]
    lc = by_id["codecrafters-log-leader-change"]
    entries.append(batch([{"Key": _form(lc["key_hex"]), "Value": _form(lc["value_hex"])}], control=True))
    write_partition(out / "__cluster_metadata-0", entries, snapshot=False)

    header, footer = by_id["codecrafters-bootstrap-snapshot-header"], by_id["codecrafters-bootstrap-snapshot-footer"]
    snap = [batch([{"Key": _form(header["key_hex"]), "Value": _form(header["value_hex"])}], control=True),
            batch([{"Key": None, "Value": _form(by_id[i]["value_hex"])}
                   for i in ("codecrafters-topic-record-foo", "codecrafters-partition-record-foo")]),
            batch([{"Key": _form(footer["key_hex"]), "Value": _form(footer["value_hex"])}], control=True)]
    data, next_offset = bytearray(), 0
    for entry in snap:
        e, last, _ = assign(entry, next_offset)
        data += e
        next_offset = last + 1
    (out / "__cluster_metadata-0" / f"{next_offset:020d}-{1:010d}.checkpoint").write_bytes(bytes(data))


def capture_logs(out: Path) -> dict[tuple[str, int], list[bytes]]:
    parts: dict[tuple[str, int], list[bytes]] = {}
    for name in CAPTURES:
        for topic, partition, records in produce_batches(ROOT / "fixtures" / "captures" / name):
            parts.setdefault((topic, partition), []).extend(split_entries(records))
    for (topic, partition), entries in sorted(parts.items()):
        write_partition(out / f"{topic}-{partition}", entries)
    return parts


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "fixtures" / "logs"
    parts = capture_logs(out)
    internal_logs(out)
    print(f"wrote {len(parts)} partitions from captures and 2 internal-topic partitions to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
