"""Producers: per producer id and epoch, per partition batches, records, bytes, compression, acks and
Produce response times; sequence anomalies; transactions.

A batch's bytes are its BatchLength; its records' area is BatchLength minus the 49 bytes of the
batch header after the length, and its uncompressed size the records' own lengths with their length
prefixes (compression ratio = uncompressed / records' area). Sequence anomalies, per producer id,
epoch and partition in position order: ``resent`` (a batch whose base sequence was already sent),
``gap`` (a base sequence past the last batch's last sequence + 1), and the answers
OUT_OF_ORDER_SEQUENCE_NUMBER and DUPLICATE_SEQUENCE_NUMBER. A transaction begins at the first
AddPartitionsToTxn or AddOffsetsToTxn of a transactional id after InitProducerId or the previous
EndTxn, and ends at an EndTxn answered with error code 0 (committed or aborted).
"""
from __future__ import annotations

from typing import Any

from kwire_cli.analysis.dist import Dist
from kwire_cli.analysis.names import error_code
from kwire_cli.capture.names import topic_name
from kwire_cli.spec.error_codes import error_name

PRODUCE, INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 0, 22, 24, 25, 26
BATCH_HEADER = 49  # bytes of a v2 batch after its length field, before its records
MAX_SEQ_FACTS = 100_000  # per partition of a producer
SEQ_ERRORS = {45: "OUT_OF_ORDER_SEQUENCE_NUMBER", 46: "DUPLICATE_SEQUENCE_NUMBER"}


def _varint_len(n: int) -> int:
    z = (n << 1) ^ (n >> 63)
    k = 1
    while z >= 0x80:
        z >>= 7
        k += 1
    return k


class Part:
    """One producer's traffic to one partition."""

    __slots__ = ("batches", "records", "bytes", "area", "raw", "compression", "acks", "dist", "seqs")

    def __init__(self) -> None:
        self.batches = self.records = self.bytes = self.area = self.raw = 0
        self.compression: dict[str, int] = {}
        self.acks: set[int] = set()
        self.dist = Dist()
        self.seqs: list[tuple[Any, ...]] = []  # (pos, base sequence, records, file, frame)

    def merge(self, o: Part) -> None:
        self.batches += o.batches
        self.records += o.records
        self.bytes += o.bytes
        self.area += o.area
        self.raw += o.raw
        for c, n in o.compression.items():
            self.compression[c] = self.compression.get(c, 0) + n
        self.acks |= o.acks
        self.dist.merge(o.dist)
        self.seqs.extend(o.seqs)
        if len(self.seqs) > MAX_SEQ_FACTS:
            self.seqs.sort(key=lambda s: s[0])
            del self.seqs[MAX_SEQ_FACTS:]


class Producers:
    """Per (producer id, epoch) partitions, answers' anomalies and transactional facts."""

    def __init__(self) -> None:
        self.parts: dict[tuple[Any, ...], Part] = {}  # (pid, epoch, topic, partition) -> Part
        self.answers: list[tuple[Any, ...]] = []      # (pos, pid, epoch, topic, partition, error, file, frame)
        self.txn: dict[str, list[tuple[Any, ...]]] = {}  # transactional id -> [(pos, what, pid, epoch)]
        self.txn_ids: dict[tuple[Any, ...], str] = {}  # (pid, epoch) -> transactional id
        self.client_ids: dict[tuple[Any, ...], set[Any]] = {}

    def request(self, r: dict[str, Any], pos: Any) -> Any:
        """Count a Produce request's batches; keep for its answer the batches' producers by partition."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        acks = body.get("Acks")
        txid = body.get("TransactionalId")
        names = r.get("topic_names")
        keep = {}
        for t in body.get("TopicData") or []:
            name = topic_name(t, names)
            for p in t.get("PartitionData") or []:
                idx = p.get("Index")
                recs = p.get("Records")
                if not isinstance(recs, dict):
                    continue
                for b in recs.get("batches") or []:
                    pid = b.get("ProducerId", -1)
                    epoch = b.get("ProducerEpoch", -1)
                    if pid is None or pid < 0:
                        pid = epoch = -1
                    k = (pid, epoch, name, idx)
                    part = self.parts.get(k)
                    if part is None:
                        part = self.parts[k] = Part()
                    n = b.get("RecordCount") or 0
                    length = b.get("BatchLength") or 0
                    part.batches += 1
                    part.records += n
                    part.bytes += length
                    c = b.get("Compression")
                    if c is not None:
                        part.compression[c] = part.compression.get(c, 0) + 1
                        if length > BATCH_HEADER and isinstance(b.get("Records"), list):
                            part.area += length - BATCH_HEADER
                            part.raw += sum(x.get("Length", 0) + _varint_len(x.get("Length", 0))
                                            for x in b["Records"])
                    if isinstance(acks, int):
                        part.acks.add(acks)
                    if pid >= 0:
                        base = b.get("BaseSequence", -1)
                        if len(part.seqs) < MAX_SEQ_FACTS and base is not None and base >= 0:
                            part.seqs.append((pos, base, n, r.get("file"), r.get("frame")))
                        if isinstance(txid, str):
                            self.txn_ids[(pid, epoch)] = txid
                    self.client_ids.setdefault((pid, epoch), set()).add(r.get("client_id"))
                    keep[(name, idx)] = (pid, epoch)
        return keep

    @staticmethod
    def extract(r: dict[str, Any]) -> Any:
        """A Produce answer's (topic, partition, error code) and its response time."""
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        names = r.get("topic_names")
        got = [(topic_name(t, names), p.get("Index"), p.get("ErrorCode") or 0)
               for t in body.get("Responses") or [] for p in t.get("PartitionResponses") or []]
        return r.get("latency_ms"), r.get("file"), r.get("frame"), got

    def apply(self, pos: Any, keep: Any, ext: Any) -> None:
        if not keep or ext is None:
            return
        lat, file, frame, got = ext
        for name, idx, code in got:
            pe = keep.get((name, idx))
            if pe is None:
                continue
            part = self.parts.get(pe + (name, idx))
            if part is not None and lat is not None:
                part.dist.add(pos, lat)
            if code in SEQ_ERRORS:
                self.answers.append((pos, pe[0], pe[1], name, idx, code, file, frame))

    def txn_request(self, r: dict[str, Any]) -> Any:
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        key = r["api_key"]
        if key == ADD_PARTITIONS and isinstance(body.get("Transactions"), list):
            return [(t.get("TransactionalId"), t.get("ProducerId"), t.get("ProducerEpoch"), "open")
                    for t in body["Transactions"] if not t.get("VerifyOnly")]
        if key == ADD_PARTITIONS:  # versions 0-3
            return [(body.get("V3AndBelowTransactionalId"), body.get("V3AndBelowProducerId"),
                     body.get("V3AndBelowProducerEpoch"), "open")]
        what = {INIT_PID: "init", ADD_PARTITIONS: "open", ADD_OFFSETS: "open",
                END_TXN: "commit" if body.get("Committed") else "abort"}[key]
        return [(body.get("TransactionalId"), body.get("ProducerId"), body.get("ProducerEpoch"), what)]

    @staticmethod
    def txn_extract(r: dict[str, Any]) -> Any:
        body = r.get("body")
        if not isinstance(body, dict):
            return None
        failed = bool(error_code(body)) and r["api_key"] != ADD_PARTITIONS
        return failed, body.get("ProducerId"), body.get("ProducerEpoch")

    def txn_apply(self, pos: Any, req: Any, ext: Any) -> None:
        if not req or ext is None or ext[0]:
            return
        for txid, pid, epoch, what in req:
            if not isinstance(txid, str):
                continue
            if what == "init":
                pid, epoch = ext[1], ext[2]
            self.txn.setdefault(txid, []).append((pos, what, pid, epoch))
            if isinstance(pid, int) and pid >= 0:
                self.txn_ids[(pid, epoch)] = txid

    def merge(self, o: Producers) -> None:
        for k, p in o.parts.items():
            m = self.parts.get(k)
            if m is None:
                self.parts[k] = p
            else:
                m.merge(p)
        self.answers.extend(o.answers)
        for txid, fs in o.txn.items():
            self.txn.setdefault(txid, []).extend(fs)
        self.txn_ids.update(o.txn_ids)
        for k, s in o.client_ids.items():
            self.client_ids.setdefault(k, set()).update(s)

    def anomalies(self) -> list[tuple[Any, ...]]:
        """(pos, pid, epoch, anomaly dict) of every sequence anomaly, in position order."""
        out = []
        for (pid, epoch, topic, idx), part in self.parts.items():
            if pid < 0:
                continue
            last = None  # the last sequence sent so far
            seen = set()
            for pos, base, n, file, frame in sorted(part.seqs, key=lambda s: s[0]):
                kind = None
                if base in seen:
                    kind, detail = "resent", f"base sequence {base} sent again"
                elif last is not None and base > last + 1:
                    kind, detail = "gap", f"base sequence {base} after last sequence {last}"
                if kind is not None:
                    out.append((pos, pid, epoch, {"kind": kind, "topic": topic, "partition": idx,
                                                  "sequence": base, "detail": detail, "file": file,
                                                  "frame": frame}))
                seen.add(base)
                end = base + max(n, 1) - 1
                if last is None or end > last:
                    last = end
        for pos, pid, epoch, topic, idx, code, file, frame in self.answers:
            out.append((pos, pid, epoch, {"kind": error_name(code), "topic": topic, "partition": idx,
                                          "sequence": None, "detail": f"answered {error_name(code)}",
                                          "file": file, "frame": frame}))
        out.sort(key=lambda a: a[0])
        return out

    def transactions(self) -> dict[tuple[Any, ...], dict[str, int]]:
        """(pid, epoch) -> begun, committed, aborted (and the transactional id's totals under (txid,))."""
        out: dict[tuple[Any, ...], dict[str, int]] = {}
        for _txid, facts in self.txn.items():
            open_ = False
            for _pos, what, pid, epoch in sorted(facts, key=lambda f: f[0]):
                t = out.setdefault((pid, epoch), {"begun": 0, "committed": 0, "aborted": 0})
                if what == "open" and not open_:
                    t["begun"] += 1
                    open_ = True
                elif what in ("commit", "abort"):
                    t["committed" if what == "commit" else "aborted"] += 1
                    open_ = False
                elif what == "init":
                    open_ = False
        return out

    def to_list(self, anomalies: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        txns = self.transactions()
        by: dict[tuple[Any, ...], list[Any]] = {}
        for (pid, epoch, topic, idx), part in self.parts.items():
            by.setdefault((pid, epoch), []).append((topic, idx, part))
        for k in txns:
            by.setdefault(k, [])
        out = []
        for pid, epoch in sorted(by, key=lambda k: (k[0] if isinstance(k[0], int) else -2,
                                                     k[1] if isinstance(k[1], int) else -2)):
            parts = []
            for topic, idx, p in sorted(by[(pid, epoch)], key=lambda x: (x[0], x[1] if x[1] is not None else -1)):
                d = p.dist.to_dict((("p50_ms", 0.5), ("p99_ms", 0.99)))
                seqs = sorted(p.seqs, key=lambda s: s[0])
                parts.append({"topic": topic, "partition": idx, "batches": p.batches, "records": p.records,
                              "bytes": p.bytes, "uncompressed_bytes": p.raw if p.area else None,
                              "compression": dict(sorted(p.compression.items())),
                              "compression_ratio": round(p.raw / p.area, 3) if p.area else None,
                              "acks": sorted(p.acks), "responses": d["count"], "p50_ms": d["p50_ms"],
                              "p99_ms": d["p99_ms"], "max_ms": d["max_ms"],
                              "first_sequence": seqs[0][1] if seqs else None,
                              "last_sequence": max(s[1] + max(s[2], 1) - 1 for s in seqs) if seqs else None})
            out.append({"producer_id": pid, "producer_epoch": epoch,
                        "transactional_id": self.txn_ids.get((pid, epoch)),
                        "client_ids": sorted(self.client_ids.get((pid, epoch), set()), key=str),
                        "partitions": parts,
                        "anomalies": [a for _p, ap, ae, a in anomalies if (ap, ae) == (pid, epoch)][:1000],
                        "transactions": txns.get((pid, epoch), {"begun": 0, "committed": 0, "aborted": 0})})
        return out
