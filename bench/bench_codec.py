"""Codec benchmark: kwire vs kafka-python 3.x vs kio, same bytes, one run.

    python bench/bench_codec.py                 # full run (~30 s of CPU on 2 cores)
    python bench/bench_codec.py --quick         # short timing loops, for a smoke test
    python bench/bench_codec.py --json out.json # also write every figure as JSON

Each message is built once with kwire, then decoded by all three libraries; the benchmark checks
that they read the same field values and that each library re-encodes its own decoded object to
exactly the same bytes. Then it times decode (bytes -> object) and encode (object -> bytes).

Two levels, timed separately so that each ratio compares like with like:

* frame: the whole frame (4-byte size prefix + header + body).
    kwire        kwire_cli.codec.decode_request(frame) / decode_response(frame, key, version);
                 encode_request / encode_response(..., size_prefix=True)
    kafka-python Cls.decode(frame, version=v, header=True, framed=True);
                 obj.encode(header=True, framed=True)
    kio          (no frame API) size prefix via struct, then entity_reader(header schema) and
                 entity_reader(body class) at the next offset; encode writes a 4-byte placeholder,
                 entity_writer(header), entity_writer(body) into io.BytesIO and patches the size
* body: the body bytes only (no prefix, no header).
    kwire        compile_plan(spec, version, records_mode).decode(body, 0, len) / .encode(value, bytearray())
    kafka-python Cls.decode(body, version=v) / obj.encode()
    kio          entity_reader(Cls)(body, 0) / entity_writer(Cls)(io.BytesIO(), obj)

Records (ProduceRequest): kafka-python and kio keep a records field as raw bytes; kwire's row
"records=raw" keeps them as raw bytes too (records_mode="hex": a hex string). The row
"records=decoded" has kwire decode every record batch (kwire_cli.records) into values, and encode
them back; kafka-python and kio are shown in that row with their raw-bytes figures, for reference
only, so its ratios compare unequal work (marked with *).

Timing: time.perf_counter around a loop of M calls; M is calibrated so that one run takes about
--run-time seconds; the figure is the best of --repeat runs. The garbage collector stays enabled
(decoders allocate many containers, so collections are part of the real cost); before timing, the
heap the harness built (three libraries and their schemas) is moved out of its way with
gc.freeze(), so that a full collection costs what the decoder's own objects cost rather than what
the benchmark process happens to hold; gc.collect() runs before each timed run.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import json
import platform
import struct
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kwire_cli.codec import compile_plan, decode_request, decode_response, encode_request, encode_response  # noqa: E402
from kwire_cli.codec import primitives as P  # noqa: E402
from kwire_cli.spec import registry  # noqa: E402

try:
    from kwire_cli.records import decode_records, encode_records
except ImportError:  # the records codec is optional for this benchmark
    decode_records = encode_records = None

from kafka.protocol.consumer import FetchRequest as KpFetchRequest  # noqa: E402
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse  # noqa: E402
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse  # noqa: E402
from kafka.protocol.producer import ProduceRequest as KpProduceRequest  # noqa: E402
from kio.schema.api_versions.v3.response import ApiVersionsResponse as KioApiVersionsResponse  # noqa: E402
from kio.schema.fetch.v12.request import FetchRequest as KioFetchRequest  # noqa: E402
from kio.schema.metadata.v12.response import MetadataResponse as KioMetadataResponse  # noqa: E402
from kio.schema.produce.v9.request import ProduceRequest as KioProduceRequest  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

_SIZE = struct.Struct(">i")
LIBS = ("kwire", "kafka-python", "kio")
LEVELS = ("frame", "body")
OPS = ("decode", "encode")


# ----------------------------------------------------------------------------- the messages

def metadata_body() -> dict:
    """MetadataResponse v12: 3 brokers, 50 topics x 10 partitions, replication factor 3."""
    return {
        "ThrottleTimeMs": 0,
        "Brokers": [{"NodeId": i, "Host": f"broker-{i}.kafka.svc.cluster.local", "Port": 9092,
                     "Rack": f"eu-west-1{'abc'[i]}"} for i in range(3)],
        "ClusterId": "MkU3OEVBNTcwNTJENDM2Qg",
        "ControllerId": 1,
        "Topics": [{
            "ErrorCode": 0, "Name": f"orders.events.v{t:03d}",
            "TopicId": P.uuid_to_text(uuid.UUID(int=(t + 1) * 0x9E3779B97F4A7C15).bytes),
            "IsInternal": False,
            "Partitions": [{
                "ErrorCode": 0, "PartitionIndex": p, "LeaderId": (t + p) % 3, "LeaderEpoch": 7 + p,
                "ReplicaNodes": [(t + p + r) % 3 for r in range(3)],
                "IsrNodes": [(t + p + r) % 3 for r in range(3 if p % 4 else 2)],
                "OfflineReplicas": [],
            } for p in range(10)],
            "TopicAuthorizedOperations": -2147483648,
        } for t in range(50)],
    }


def api_versions_body() -> dict:
    """ApiVersionsResponse v3 as a KRaft broker sends it: 60 API ranges plus feature tags."""
    keys = list(range(52)) + [55, 57, 60, 61, 64, 65, 66, 68]
    return {
        "ErrorCode": 0,
        "ApiKeys": [{"ApiKey": k, "MinVersion": 0, "MaxVersion": 3 + k % 11} for k in keys],
        "ThrottleTimeMs": 0,
        "SupportedFeatures": [{"Name": "metadata.version", "MinVersion": 1, "MaxVersion": 21},
                              {"Name": "kraft.version", "MinVersion": 0, "MaxVersion": 1}],
        "FinalizedFeaturesEpoch": 1234,
        "FinalizedFeatures": [{"Name": "metadata.version", "MaxVersionLevel": 21, "MinVersionLevel": 21}],
        "ZkMigrationReady": False,
    }


def fetch_body() -> dict:
    """FetchRequest v12 from a consumer: 5 topics x 10 partitions, an incremental session."""
    return {
        "ClusterId": None, "ReplicaId": -1, "MaxWaitMs": 500, "MinBytes": 1, "MaxBytes": 52428800,
        "IsolationLevel": 1, "SessionId": 918273645, "SessionEpoch": 12,
        "Topics": [{"Topic": f"orders.events.v{t:03d}", "Partitions": [{
            "Partition": p, "CurrentLeaderEpoch": 7 + p, "FetchOffset": 1_000_000 * t + 12_345 * p,
            "LastFetchedEpoch": 7 + p, "LogStartOffset": -1, "PartitionMaxBytes": 1048576,
        } for p in range(10)]} for t in range(5)],
        "ForgottenTopicsData": [{"Topic": "orders.events.v099", "Partitions": [0, 1, 2]}],
        "RackId": "eu-west-1a",
    }


def produce_records(partition: int) -> bytes:
    """One uncompressed record batch (magic 2) of 10 records, ~100-byte JSON values, a header each."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=4242, producer_epoch=0, base_sequence=100 * partition,
                                  batch_size=1 << 20)
    for i in range(10):
        value = json.dumps({"order": 10_000 * partition + i, "sku": f"SKU-{i:05d}", "qty": i + 1,
                            "price": 19.99 + i, "currency": "EUR", "note": "x" * 20}).encode()
        b.append(i, timestamp=1_700_000_000_000 + i, key=f"customer-{i}".encode(), value=value,
                 headers=[("trace-id", f"{i:032x}".encode())])
    return bytes(b.build())


def produce_body() -> dict:
    """ProduceRequest v9: acks=all, 2 topics x 3 partitions, one 10-record batch each."""
    return {
        "TransactionalId": None, "Acks": -1, "TimeoutMs": 30000,
        "TopicData": [{"Name": f"orders.events.v{t:03d}", "PartitionData": [
            {"Index": p, "Records": produce_records(3 * t + p).hex()} for p in range(3)]}
            for t in range(2)],
    }


# ----------------------------------------------------------------------------- value checks

def _camel(snake: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in snake.split("_"))


def _norm(x: Any) -> Any:
    """One comparable form for the three libraries' leaf values."""
    if isinstance(x, uuid.UUID):
        return x.bytes
    if isinstance(x, (list, tuple)):
        return tuple(_norm(y) for y in x)
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    if hasattr(x, "total_seconds"):  # kio reads *Ms fields as timedelta
        return round(x.total_seconds() * 1000)
    if hasattr(x, "value") and isinstance(x.value, int):  # kio's ErrorCode enum
        return x.value
    return x


def _get(obj: Any, name: str, lib: str) -> Any:
    if lib == "kwire":
        return obj[_camel(name)]
    return getattr(obj, name)


def extract(obj: Any, path: str, lib: str, names: dict[str, str]) -> Any:
    """Walk 'topics[].partitions[].leader_id' through a decoded object; lists flatten."""
    parts = path.split(".")

    def walk(o, i):
        if i == len(parts):
            return [o]
        part = parts[i]
        many = part.endswith("[]")
        part = part.rstrip("[]")
        name = names.get(part, part) if lib == "kio" else part
        v = _get(o, name, lib)
        if many:
            out = []
            for el in v:
                out += walk(el, i + 1)
            return out
        return walk(v, i + 1)
    return [_norm(v) for v in walk(obj, 0)]


def _kwire_leaf(path: str, values: list) -> list:
    """kwire's value-tree leaves in the other libraries' terms: uuid text and hex to bytes."""
    last = path.split(".")[-1]
    if last.endswith("_id") and last.startswith("topic"):
        return [P.uuid_from_text(v) for v in values]
    if last == "records":
        return [v if isinstance(v, bytes) else bytes.fromhex(v) for v in values]
    return values


# ----------------------------------------------------------------------------- adapters

@dataclass
class Case:
    name: str
    api_key: int
    kind: str
    version: int
    header: dict
    body: dict
    kp_cls: Any
    kio_cls: Any
    check_paths: tuple
    kio_names: dict = field(default_factory=dict)  # where kio renames a field
    records_mode: str | None = None  # kwire's records_mode for messages with records
    # filled in by build()
    frame: bytes = b""
    body_bytes: bytes = b""

    @property
    def label(self) -> str:
        return f"{registry().api(self.api_key).name}{self.kind.capitalize()} v{self.version}"

    def build(self) -> None:
        enc = encode_request if self.kind == "request" else encode_response
        self.frame = enc(self.api_key, self.version, self.header, self.body)
        plan = self.plan("hex")
        out = bytearray()
        plan.encode(self.body, out)
        self.body_bytes = bytes(out)
        assert self.frame.endswith(self.body_bytes)

    def plan(self, mode: str):
        return compile_plan(registry().api(self.api_key).spec(self.kind), self.version, mode)


class KwireAdapter:
    lib = "kwire"

    def __init__(self, case: Case, records_mode: str):
        self.case = case
        self.mode = records_mode
        self.plan = case.plan(records_mode)
        key, v = case.api_key, case.version
        if case.kind == "request":
            self.decode_frame = lambda data: decode_request(data, records=records_mode)
            self.encode_frame = lambda m: encode_request(key, v, m.header, m.body)
        else:
            self.decode_frame = lambda data: decode_response(data, key, v, records=records_mode)
            self.encode_frame = lambda m: encode_response(key, v, m.header, m.body)
        dec = self.plan.decode
        enc = self.plan.encode
        self.decode_body = lambda data: dec(data, 0, len(data))[0]

        def encode_body(value):
            out = bytearray()
            enc(value, out)
            return out
        self.encode_body = encode_body

    def body_of(self, obj):  # frame-level object -> body object
        return obj.body


class KafkaPythonAdapter:
    lib = "kafka-python"

    def __init__(self, case: Case):
        cls, v = case.kp_cls, case.version
        self.decode_frame = lambda data: cls.decode(data, version=v, header=True, framed=True)
        self.encode_frame = lambda obj: obj.encode(header=True, framed=True)
        self.decode_body = lambda data: cls.decode(data, version=v)
        self.encode_body = lambda obj: obj.encode()

    def body_of(self, obj):
        return obj


class KioAdapter:
    lib = "kio"

    def __init__(self, case: Case):
        cls = case.kio_cls
        hcls = cls.__header_schema__
        read_h, read_b = entity_reader(hcls), entity_reader(cls)
        write_h, write_b = entity_writer(hcls), entity_writer(cls)
        unpack, pack = _SIZE.unpack_from, _SIZE.pack

        def decode_frame(data):
            size = unpack(data, 0)[0]
            header, n = read_h(data, 4)
            body, m = read_b(data, 4 + n)
            if 4 + n + m != 4 + size:
                raise ValueError("frame size mismatch")
            return header, body

        def encode_frame(obj):
            buf = io.BytesIO()
            buf.write(b"\0\0\0\0")
            write_h(buf, obj[0])
            write_b(buf, obj[1])
            buf.seek(0)
            buf.write(pack(buf.getbuffer().nbytes - 4))
            return buf.getvalue()

        def encode_body(obj):
            buf = io.BytesIO()
            write_b(buf, obj)
            return buf.getvalue()

        self.decode_frame = decode_frame
        self.encode_frame = encode_frame
        self.decode_body = lambda data: read_b(data, 0)[0]
        self.encode_body = encode_body

    def body_of(self, obj):
        return obj[1]


# ----------------------------------------------------------------------------- verification

def verify(case: Case, adapters: list) -> list[str]:
    """Same values from every library, and every library re-encodes its object byte for byte."""
    notes = []
    ref = None
    for ad in adapters:
        obj = ad.decode_frame(case.frame)
        body = ad.body_of(obj)
        got = {}
        for path in case.check_paths:
            vals = extract(body, path, ad.lib, case.kio_names)
            if ad.lib == "kwire":
                if ad.mode == "decode" and path.endswith("records"):
                    continue
                vals = _kwire_leaf(path, vals)
            got[path] = vals
        if ref is None:
            ref = got
        else:
            for path, vals in got.items():
                if path in ref and ref[path] != vals:
                    raise SystemExit(f"{case.label}: {ad.lib} reads {path} differently from kwire:\n"
                                     f"  {ref[path][:5]}\n  {vals[:5]}")
        again = bytes(ad.encode_frame(obj))
        if again != case.frame:
            raise SystemExit(f"{case.label}: {ad.lib} re-encodes its decoded frame to different bytes")
        body_obj = ad.decode_body(case.body_bytes)
        if bytes(ad.encode_body(body_obj)) != case.body_bytes:
            raise SystemExit(f"{case.label}: {ad.lib} re-encodes its decoded body to different bytes")
        if ad.lib == "kwire" and ad.mode == "decode":
            recs = [decode_records(bytes.fromhex(pd["Records"]))
                    for t in case.body["TopicData"] for pd in t["PartitionData"]]
            mine = [pd["Records"] for t in body["TopicData"] for pd in t["PartitionData"]]
            if recs != mine or sum(len(b["Records"]) for r in mine for b in r["batches"]) != 60:
                raise SystemExit(f"{case.label}: kwire's decoded records are not what kwire_cli.records reads")
    n = sum(len(v) for v in ref.values())
    label = case.label + (f" (kwire records as {case.records_mode})" if case.records_mode else "")
    notes.append(f"{label}: {len(adapters)} libraries agree on {n} values in "
                 f"{len(case.check_paths)} fields; each re-encodes to the same {len(case.frame)} bytes")
    return notes


# ----------------------------------------------------------------------------- timing

CLOCK = time.perf_counter  # --clock process_time: CPU time, steadier on a busy machine


def timed(fn: Callable, arg: Any, n: int) -> float:
    gc.collect()
    clock = CLOCK
    t0 = clock()
    for _ in range(n):
        fn(arg)
    return clock() - t0


def calibrate(fn: Callable, arg: Any, run_time: float) -> int:
    """How many calls make one timed run of about run_time seconds."""
    n = 1
    while True:
        t = timed(fn, arg, n)
        if t >= run_time / 4:
            break
        n *= 4 if t < run_time / 40 else 2
    return max(1, int(n * run_time / t))


def rates(jobs: dict, run_time: float, repeat: int) -> dict:
    """Calls per second for each job (fn, arg): best of `repeat` runs of M calls each.

    The jobs are timed in turn within each round (kwire, kafka-python, kio, kwire, ...), so a
    change in machine load hits all of them alike and the ratios stay fair."""
    gc.collect()
    gc.freeze()  # the harness's own heap (three libraries, their schemas) out of every collection
    sizes = {k: calibrate(fn, arg, run_time) for k, (fn, arg) in jobs.items()}
    best = {k: float("inf") for k in jobs}
    for _ in range(repeat):
        for k, (fn, arg) in jobs.items():
            best[k] = min(best[k], timed(fn, arg, sizes[k]))
    return {k: sizes[k] / best[k] for k in jobs}


# ----------------------------------------------------------------------------- main

def cases() -> list[Case]:
    hdr_req = {"CorrelationId": 41, "ClientId": "bench-client"}
    hdr_resp = {"CorrelationId": 41}
    out = [
        Case("metadata", 3, "response", 12, hdr_resp, metadata_body(), KpMetadataResponse,
             KioMetadataResponse,
             ("throttle_time_ms", "controller_id", "cluster_id", "brokers[].node_id", "brokers[].host",
              "brokers[].rack", "topics[].name", "topics[].topic_id", "topics[].partitions[].partition_index",
              "topics[].partitions[].leader_id", "topics[].partitions[].leader_epoch",
              "topics[].partitions[].replica_nodes", "topics[].partitions[].isr_nodes"),
             {"throttle_time_ms": "throttle_time"}),
        Case("api_versions", 18, "response", 3, hdr_resp, api_versions_body(), KpApiVersionsResponse,
             KioApiVersionsResponse,
             ("error_code", "api_keys[].api_key", "api_keys[].min_version", "api_keys[].max_version",
              "supported_features[].name", "supported_features[].max_version", "finalized_features_epoch",
              "finalized_features[].max_version_level"),
             {"throttle_time_ms": "throttle_time"}),
        Case("fetch", 1, "request", 12, hdr_req, fetch_body(), KpFetchRequest, KioFetchRequest,
             ("max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "session_id", "session_epoch",
              "topics[].topic", "topics[].partitions[].partition", "topics[].partitions[].fetch_offset",
              "topics[].partitions[].current_leader_epoch", "topics[].partitions[].partition_max_bytes",
              "forgotten_topics_data[].partitions", "rack_id"),
             {"max_wait_ms": "max_wait", "forgotten_topics_data": "forgotten_topics_data"}),
        Case("produce", 0, "request", 9, hdr_req, produce_body(), KpProduceRequest, KioProduceRequest,
             ("acks", "timeout_ms", "topic_data[].name", "topic_data[].partition_data[].index",
              "topic_data[].partition_data[].records"),
             {"timeout_ms": "timeout"}, records_mode="bytes"),
    ]
    out.append(dataclasses.replace(out[-1], records_mode="hex"))
    if decode_records is not None:
        out.append(dataclasses.replace(out[-1], records_mode="decode"))
    return out


def run(args) -> dict:
    results = []
    notes = []
    for case in cases():
        if args.only and case.name not in args.only:
            continue
        case.build()
        kw = KwireAdapter(case, case.records_mode or "hex")
        adapters = [kw, KafkaPythonAdapter(case), KioAdapter(case)]
        notes += verify(case, adapters)
        row = {"message": case.label, "case": case.name, "records": case.records_mode,
               "frame_bytes": len(case.frame), "body_bytes": len(case.body_bytes), "rates": {}}
        for level in LEVELS:
            data = case.frame if level == "frame" else case.body_bytes
            for op in OPS:
                jobs = {}
                for ad in adapters:
                    if ad.lib != "kwire" and any(r["case"] == case.name for r in results):
                        continue  # same bytes, same work for them: filled in from the first row below
                    dec = ad.decode_frame if level == "frame" else ad.decode_body
                    enc = ad.encode_frame if level == "frame" else ad.encode_body
                    jobs[(level, op, ad.lib)] = (dec, data) if op == "decode" else (enc, dec(data))
                row["rates"].update(rates(jobs, args.run_time, args.repeat))
        first = next((r for r in results if r["case"] == case.name), None)
        if first is not None:
            for key, val in first["rates"].items():
                if key[2] != "kwire":
                    row["rates"][key] = val
        results.append(row)
        print(f"  timed {case.label}" + (f" (records as {row['records']})" if row["records"] else ""),
              file=sys.stderr, flush=True)
    return {"results": results, "notes": notes}


def _fmt_rate(r: float) -> str:
    return f"{r:,.0f}"


def table(results: list, level: str, op: str) -> str:
    head = ["message", "bytes", f"kwire {op}s/s", f"kafka-python {op}s/s", f"kio {op}s/s",
            "kwire/kafka-python", "kwire/kio"]
    rows = []
    for r in results:
        rates = r["rates"]
        kw, kp, ki = (rates[(level, op, lib)] for lib in ("kwire", "kafka-python", "kio"))
        star = "*" if r["records"] == "decode" else ""
        name = r["message"] + ({"bytes": " (records: bytes)", "hex": " (records: hex)",
                                "decode": " (records: decoded)", None: ""}[r["records"]])
        rows.append([name, str(r["frame_bytes"] if level == "frame" else r["body_bytes"]),
                     _fmt_rate(kw), _fmt_rate(kp), _fmt_rate(ki),
                     f"{kw / kp:.2f}x{star}", f"{kw / ki:.2f}x{star}"])
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    lines = ["| " + " | ".join(h.ljust(w) if i == 0 else h.rjust(w)
                               for i, (h, w) in enumerate(zip(head, widths, strict=True))) + " |",
             "|" + "|".join("-" * (w + 1) + ("-" if i == 0 else ":") for i, w in enumerate(widths)) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                       for i, (c, w) in enumerate(zip(row, widths, strict=True))) + " |")
    return "\n".join(lines)


def versions() -> dict:
    out = {"python": platform.python_version(), "machine": platform.machine()}
    for dist in ("kwire", "kafka-python", "kio"):
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            out[dist] = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    ap.add_argument("--run-time", type=float, default=0.08, help="seconds per timed run (default 0.08)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per figure, best kept (default 5)")
    ap.add_argument("--quick", action="store_true", help="--run-time 0.02 --repeat 2")
    ap.add_argument("--only", nargs="*", help="case names: metadata api_versions fetch produce")
    ap.add_argument("--clock", choices=("perf_counter", "process_time"), default="perf_counter",
                    help="wall time (default) or this process's CPU time, steadier when other jobs share the CPUs")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = getattr(time, args.clock)
    if args.quick:
        args.run_time, args.repeat = 0.02, 2
    t0 = time.perf_counter()
    out = run(args)
    vers = versions()
    print(f"kwire codec benchmark: python {vers['python']}, kafka-python {vers['kafka-python']}, "
          f"kio {vers['kio']}; best of {args.repeat} runs of ~{args.run_time}s each ({args.clock})")
    for note in out["notes"]:
        print("verified:", note)
    for level in LEVELS:
        for op in OPS:
            what = ("whole frame: size prefix + header + body" if level == "frame"
                    else "body only: no size prefix, no header")
            print(f"\n{op} ({what}), {op}s per second")
            print(table(out["results"], level, op))
    if any(r["records"] for r in out["results"]):
        print("\nrecords: bytes = kwire keeps each records field as raw bytes, like kafka-python and kio (same work); "
              "hex = kwire's JSON value-tree form (lowercase hex text); decoded = kwire decodes every record batch "
              "into values. kafka-python and kio keep raw bytes in every row (their figures are timed once).\n"
              "* unequal work: kwire decodes 60 records that the others leave as bytes.")
    elapsed = time.perf_counter() - t0
    print(f"\ntotal benchmark time {elapsed:.1f} s")
    if args.json:
        doc = {"versions": vers, "clock": args.clock, "run_time": args.run_time, "repeat": args.repeat,
               "elapsed_s": round(elapsed, 1),
               "notes": out["notes"], "results": []}
        for r in out["results"]:
            d = {k: v for k, v in r.items() if k != "rates"}
            for level in LEVELS:
                for op in OPS:
                    g = {lib: round(r["rates"][(level, op, lib)], 1) for lib in LIBS}
                    g["kwire/kafka-python"] = round(g["kwire"] / g["kafka-python"], 3)
                    g["kwire/kio"] = round(g["kwire"] / g["kio"], 3)
                    d[f"{level}_{op}_per_s"] = g
            doc["results"].append(d)
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
