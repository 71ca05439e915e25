"""Counting the record batches of a decoded body: batches, records, compression codecs, bad CRCs,
batches left undecoded or cut at the frame's cap of records and headers. ``kwire pcap --summary``
counts them per capture (``kwire_cli.capture.summary``), ``kwire decode`` warns from them; here, in
the records layer, so that decoding one message does not import the capture reader."""
from __future__ import annotations

from typing import Any

from kwire_cli.records.limits import DECOMPRESSED_OPTION, ITEMS_OPTION

# how the error of a batch cut by the frame's cap of records and headers ends (records/)
CAP_SAYS = f"({ITEMS_OPTION} raises it)"
# ... and of one the frame's cap of bytes stopped (decompressed, and the text of keys and values)
BYTE_CAP_SAYS = f"{DECOMPRESSED_OPTION} raises it)"


def batch_stats(body: Any, into: dict[str, Any]) -> dict[str, Any]:
    """Add the record batches of a decoded body to ``into`` (see ``new_batch_stats``): batches
    (a legacy message set's top-level messages count as batches), records (``records_in``: legacy
    messages included), compression codecs, batches whose CRC does not match, batches that did not decode (and of
    them, ``item_cap``: those cut by the frame's cap of records and headers, --max-records, and
    ``byte_cap``: those its cap of bytes stopped, --max-decompressed), and
    records fields ending in a partial batch (normal in Fetch answers). Records kept as hex
    (--raw-records) are not counted."""

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                if isinstance(v, dict) and "batches" in v and "partial_trailing_batch" in v:
                    count_records_field(v, into)  # a records field, as kwire_cli.records decodes it
                elif isinstance(v, (dict, list)):
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(body)
    return into


def count_records_field(field: dict[str, Any], into: dict[str, Any]) -> None:
    """Add one decoded records field (``{"batches": ..., "partial_trailing_batch": ...}``) to
    ``into``, as ``batch_stats`` counts each it finds."""
    if field.get("partial_trailing_batch") is not None:
        into["partial_trailing_batches"] += 1
    codecs = into["compression"]
    for b in field["batches"]:
        into["batches"] += 1
        into["records"] += records_in(b)
        c = b.get("Compression")
        if c is not None:
            codecs[c] = codecs.get(c, 0) + 1
        if b.get("CrcValid") is False:
            into["crc_invalid"] += 1
        if "error" in b:
            into["batch_errors"] += 1
            if CAP_SAYS in b["error"]:
                into["item_cap"] += 1
            elif BYTE_CAP_SAYS in b["error"]:
                into["byte_cap"] += 1


def records_in(batch: dict[str, Any]) -> int:
    """The records an entry of a decoded records field holds: a record batch (magic 2) its
    ``Records``; a legacy message (magic 0/1) is one record, or, as a compressed wrapper, holds its
    inner ``Messages`` (wrappers within wrappers counted through); an entry that did not decode
    holds none."""
    n = 0
    todo = [batch]
    while todo:
        b = todo.pop()
        recs = b.get("Records")
        if recs is not None:
            n += len(recs)
            continue
        inner = b.get("Messages")
        if inner is not None:
            todo.extend(m for m in inner if isinstance(m, dict))
        elif b.get("Magic") in (0, 1) and "error" not in b:
            n += 1
    return n


def new_batch_stats() -> dict[str, Any]:
    return {"batches": 0, "records": 0, "compression": {}, "crc_invalid": 0, "batch_errors": 0,
            "item_cap": 0, "byte_cap": 0, "partial_trailing_batches": 0}
