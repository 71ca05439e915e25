"""spark-decode's rows and their Spark schema, built from the output-row declaration
(``kwire_cli.capture.rows.COLUMNS``).

Two forms, by output format:

* ``jsonl``: ``(line, api_name)``, the line ``kwire pcap --format jsonl`` prints for the frame and
  the column the output is partitioned by.
* ``parquet``: one typed value per declared column, in declared order (``ALWAYS``, ``SOMETIMES`` and
  ``SPARK`` columns alike): JSON values as JSON text, ``extra`` the row's undeclared keys.

JSON text travels from the Python workers as UTF-8 ``bytes`` (binary columns, cast to strings in the
JVM by ``rows_dataframe``): far cheaper to hand over than Python strings.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kwire_cli.capture.rows import COLUMNS, DECLARED, SPARK, ColumnType, json_ordered

PARTITION_COLUMN = "api_name"  # the output is partitioned by it (DIR/api_name=Produce/...)
JSONL_COLUMNS = ("line", PARTITION_COLUMN)

_encoders: dict = {}


def encoders() -> tuple[Callable[[dict], bytes], Callable[[Any, Any], bytes]]:
    """kwire pcap's JSON line encoder (orjson when installed), and one for a column's JSON value
    (``part(value, api_key)``: the careful encoder for APIs with float fields, as the line's)."""
    enc = _encoders.get("line")
    if enc is None:
        from kwire_cli.render.json import to_jsonable
        from kwire_cli.render.jsonlines import float_apis, json_default, line_encoder
        line = line_encoder()
        floats = float_apis()
        try:
            import orjson
            fast = orjson.dumps
        except ImportError:  # pragma: no cover - orjson is optional
            fast = None

        def careful(v):
            return json.dumps(to_jsonable(v), ensure_ascii=False, allow_nan=False,
                              separators=(",", ":")).encode()

        def part(v, api_key):
            if fast is None or api_key in floats:
                return careful(v)
            try:
                return fast(v, default=json_default)
            except TypeError:
                return careful(v)
        enc = _encoders["line"] = (line, part)
    return enc


# how each declared column becomes a typed value: (name, how), how in "plain", "float", "list",
# "json", "extra"
_HOW = {ColumnType.STRING: "plain", ColumnType.INT32: "plain", ColumnType.INT64: "plain",
        ColumnType.FLOAT64: "float", ColumnType.STRINGS: "list", ColumnType.JSON: "json"}
_PLAN = tuple((c.name, "extra" if c.presence is SPARK else _HOW[c.type]) for c in COLUMNS)


def to_row(rec: dict, fmt: str) -> tuple:
    """One row as the tasks hand it to Spark: ``(line, api_name)`` (jsonl) or the typed columns."""
    line, part = encoders()
    if fmt == "jsonl":
        return (line(json_ordered(rec)), rec.get(PARTITION_COLUMN))
    ak = rec.get("api_key")
    get = rec.get
    out: list = []
    add = out.append
    for name, how in _PLAN:
        if how == "plain":
            add(get(name))
        elif how == "json":
            v = get(name)
            add(None if v is None else part(v, ak))
        elif how == "float":
            v = get(name)
            add(None if v is None else float(v))
        elif how == "list":
            add(list(get(name) or ()))
        else:  # extra: the keys no column declares
            extra = {k: v for k, v in rec.items() if k not in DECLARED}
            add(part(extra, ak) if extra else None)
    return tuple(out)


def _spark_type(t: ColumnType, wire: bool):
    from pyspark.sql.types import ArrayType, BinaryType, DoubleType, IntegerType, LongType, StringType
    return {ColumnType.STRING: StringType(), ColumnType.INT32: IntegerType(), ColumnType.INT64: LongType(),
            ColumnType.FLOAT64: DoubleType(), ColumnType.STRINGS: ArrayType(StringType()),
            ColumnType.JSON: BinaryType() if wire else StringType()}[t]


def row_schema(fmt: str, wire: bool = False):
    """The Spark schema of the output (``wire=True``: as the tasks hand rows over, JSON text as
    binary), from the declared column types."""
    from pyspark.sql.types import StructField, StructType
    if fmt == "jsonl":
        return StructType([StructField("line", _spark_type(ColumnType.JSON, wire)),
                           StructField(PARTITION_COLUMN, _spark_type(ColumnType.STRING, wire))])
    return StructType([StructField(c.name, _spark_type(c.type, wire)) for c in COLUMNS])


def _text_columns(fmt: str) -> frozenset[str]:
    """Columns that cross as binary JSON text and are written as strings."""
    if fmt == "jsonl":
        return frozenset({"line"})
    return frozenset(c.name for c in COLUMNS if c.type is ColumnType.JSON)


def rows_dataframe(spark, rows, fmt: str):
    """Task rows -> the DataFrame to write (binary JSON columns cast to strings)."""
    from pyspark.sql import functions as F
    df = spark.createDataFrame(rows, row_schema(fmt, wire=True), verifySchema=False)
    text = _text_columns(fmt)
    return df.select([F.col(c).cast("string").alias(c) if c in text else F.col(c) for c in df.columns])
