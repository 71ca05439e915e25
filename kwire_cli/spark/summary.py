"""The summary of ``kwire pcap --summary``, computed with Spark aggregations over the rows written.

``kwire_cli.capture.session.Summary`` computes it from records; this module computes the same
dict from the output rows (read back from ``out``, so it describes exactly what was written):
counts, undecodable frames by reason, per (API, version, kind) counts, bytes and nearest-rank
latency percentiles (``percentile_disc``: the same nearest rank ``Summary`` uses), error codes,
clients and their versions, and the negotiation audit (the last ApiVersions answer of each broker,
then ``Summary.audit`` itself). What is not in the rows (capture counters, damage, what-if) comes
from the job's accumulator.

Differences from ``kwire pcap --summary`` (documented in docs/spark.md): latency percentiles use
every latency (``Summary`` keeps the first 100,000 per API and version); ties in the error-code
order are broken by name; ``damage_events`` are the first 200 by file order and packet number.
"""
from __future__ import annotations

import glob
import json
import os

from kwire_cli.capture.session import Summary, error_kind


SMALL = ("file", "frame", "ts", "src", "dst", "kind", "api_key", "api_name", "api_version", "client_id",
         "size", "latency_ms", "error_codes", "error")


def read_rows(spark, out: str, fmt: str, columns=None):
    """The rows written by the job as a DataFrame with typed columns (jsonl lines are parsed)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType
    from kwire_cli.spark.job import row_schema
    schema = row_schema("parquet")
    if not glob.glob(os.path.join(out, "api_name=*")):  # nothing written (no frames at all)
        df = spark.createDataFrame([], schema)
        return df.select(*columns) if columns else df
    if fmt == "parquet":
        df = spark.read.schema(schema).option("basePath", out).parquet(out)
        return df.select(*columns) if columns else df
    text = spark.read.option("basePath", out).text(out)
    cols = [f.name for f in schema.fields if f.name != "api_name" and (not columns or f.name in columns)]
    if columns and not {"header", "body"} & set(cols):
        # the small columns of a kwire pcap line are before "header" and after "body": parse those
        # two ends only, never the (possibly huge) header and body (JSON escaping guarantees the
        # separators cannot occur inside a string)
        head, tail = _line_ends()
        hs = StructType([f for f in schema.fields if f.name in head and f.name in cols])
        ts = StructType([f for f in schema.fields if f.name in tail and f.name in cols])
        h = F.concat(F.substring_index("value", ',"header":', 1), F.lit("}"))
        t = F.concat(F.lit('{"' + tail[0] + '":'), F.substring_index("value", ',"' + tail[0] + '":', -1))
        return text.select(F.from_json(h, hs).alias("h"), F.from_json(t, ts).alias("t"), "api_name") \
            .select("h.*", "t.*", "api_name")
    fields = StructType([f for f in schema.fields if f.name in cols])
    return text.select(F.from_json("value", fields).alias("r"), "api_name").select("r.*", "api_name")


def _line_ends() -> tuple[tuple, tuple]:
    """The record keys a kwire pcap line has before "header" and after "body" (RECORD_KEYS order)."""
    from kwire_cli.capture.session import RECORD_KEYS
    keys = list(RECORD_KEYS)
    h, b = keys.index("header"), keys.index("body")
    assert b == h + 1, RECORD_KEYS
    return tuple(keys[:h]), tuple(keys[b + 1:])


def spark_summary(spark, out: str, fmt: str, totals, damage: list[dict]) -> dict:
    from pyspark import StorageLevel
    df = read_rows(spark, out, fmt, SMALL).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _summary(spark, df, out, fmt, totals, damage)
    finally:
        df.unpersist()


def _summary(spark, df, out, fmt, totals, damage) -> dict:
    from pyspark.sql import functions as F
    ok = F.col("error").isNull()

    kind_udf = F.udf(error_kind, "string", useArrow=False)
    undecodable = {r["k"]: int(r["n"]) for r in
                   df.where(~ok).groupBy(kind_udf("error").alias("k")).agg(F.count(F.lit(1)).alias("n")).collect()}

    api = F.coalesce(F.col("api_name"), F.lit("?"))
    apis = []
    frames = decoded = 0
    for r in df.groupBy(api.alias("api_name"), "api_version", "kind").agg(
            F.count(F.lit(1)).alias("count"), F.sum(F.coalesce("size", F.lit(0))).alias("bytes"),
            F.count(F.when(~ok, 1)).alias("undecodable"),
            F.expr("percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms)").alias("p50"),
            F.expr("percentile_disc(0.99) WITHIN GROUP (ORDER BY latency_ms)").alias("p99")).collect():
        frames += int(r["count"])
        decoded += int(r["count"]) - int(r["undecodable"])
        apis.append({"api_name": r["api_name"], "api_version": r["api_version"], "kind": r["kind"],
                     "count": int(r["count"]), "bytes": int(r["bytes"]), "undecodable": int(r["undecodable"]),
                     "latency_p50_ms": r["p50"], "latency_p99_ms": r["p99"]})
    apis.sort(key=lambda a: (str(a["api_name"]), a["api_version"] if a["api_version"] is not None else -1,
                             a["kind"]))

    errs = df.select(F.explode("error_codes").alias("e")).groupBy("e").count().collect()
    error_codes = dict(sorted(((r["e"], int(r["count"])) for r in errs), key=lambda kv: (-kv[1], kv[0])))

    # decoded requests by (broker, client id, API, version): clients and the negotiation audit
    clients: dict = {}
    summ = Summary()
    for r in df.where((F.col("kind") == "request") & ok) \
            .groupBy("dst", "client_id", "api_key", "api_name", "api_version").count().collect():
        n = int(r["count"])
        cid = r["client_id"]
        summ.requests_seen[(r["dst"], cid, r["api_key"], r["api_name"], r["api_version"])] = n
        c = clients.setdefault(cid if cid is not None else "(null)", {"requests": 0, "versions": {}})
        c["requests"] += n
        vs = c["versions"].setdefault(r["api_name"], [])
        if r["api_version"] not in vs:
            vs.append(r["api_version"])
            vs.sort()
    for c in clients.values():
        c["versions"] = dict(sorted(c["versions"].items()))
    # the last ApiVersions answer of each broker that listed its APIs without an error
    av = read_rows(spark, out, fmt, ("src", "ts", "file", "frame", "kind", "error", "body")) \
        .where((F.col("api_name") == "ApiVersions") & (F.col("kind") == "response") & ok) \
        .withColumn("ec", F.get_json_object("body", "$.ErrorCode").cast("int")) \
        .withColumn("nk", F.size(F.from_json(F.get_json_object("body", "$.ApiKeys"), "array<string>"))) \
        .where((F.coalesce(F.col("ec"), F.lit(0)) == 0) & (F.col("nk") > 0)) \
        .groupBy("src").agg(F.max_by("body", F.struct("ts", "file", "frame")).alias("body"))
    for r in av.collect():
        body = json.loads(r["body"])
        summ.advertised[r["src"]] = {k["ApiKey"]: (k["MinVersion"], k["MaxVersion"])
                                     for k in body.get("ApiKeys") or []}
    result = {
        "frames": frames, "decoded": decoded, "undecodable": sum(undecodable.values()),
        "undecodable_by_reason": dict(sorted(undecodable.items())),
        "reconciled": frames == decoded + sum(undecodable.values()),
        "apis": apis,
        "error_codes": error_codes,
        "clients": {k: clients[k] for k in sorted(clients, key=str)},
        "negotiation_audit": summ.audit(),
        "advertised_by": sorted(summ.advertised),
        "what_if_tagged_error_fields": dict(totals.what_if),
        "capture": totals.stats.to_dict(),
    }
    kinds: dict = {}
    for k, (n, b) in sorted(totals.damage_kinds.items()):
        kinds[k] = {"events": n, "bytes": b}
    result["damage"] = kinds
    result["damage_events"] = damage[:200]
    return result
