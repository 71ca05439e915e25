"""spark-decode's rows and their Spark schema, built from the output-row declaration
(``kwire_cli.capture.rows.COLUMNS``).

Two forms, by output format:

* ``jsonl``: ``(line, api_name)``, the line ``kwire pcap --format jsonl`` prints for the frame and
  the column the output is partitioned by.
* ``parquet``: one typed value per declared column, in declared order (``ALWAYS``, ``SOMETIMES`` and
  ``SPARK`` columns alike): JSON values as JSON text, ``extra`` the row's undeclared keys.

Rows are built once, in that form, and leave the Python workers as Arrow record batches
(``RowBatcher``, for ``mapInArrow``): the JSON text is written by the encoder as UTF-8 bytes and
becomes Arrow string columns as it is (a binary array viewed as UTF-8, no copy, no check), so the
JVM receives columnar batches of UTF-8 instead of pickled objects to convert to Java strings.
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


ROWS_PER_BATCH = 2048          # rows per Arrow batch handed to the JVM, at most
BYTES_PER_BATCH = 16 << 20     # ... and about this many bytes of JSON text


def _arrow_type(t: ColumnType):
    import pyarrow as pa
    return {ColumnType.STRING: pa.string(), ColumnType.INT32: pa.int32(), ColumnType.INT64: pa.int64(),
            ColumnType.FLOAT64: pa.float64(), ColumnType.STRINGS: pa.list_(pa.string()),
            ColumnType.JSON: None}[t]  # JSON: UTF-8 bytes, viewed as a string column


def _arrow_columns(fmt: str) -> list[tuple[str, Any]]:
    if fmt == "jsonl":
        return [("line", None), (PARTITION_COLUMN, _arrow_type(ColumnType.STRING))]
    return [(c.name, _arrow_type(c.type)) for c in COLUMNS]


class RowBatcher:
    """Output rows -> Arrow record batches in the output schema (``row_schema``), for ``mapInArrow``.

    ``add(rec)`` returns a batch when one is full (``ROWS_PER_BATCH`` rows or ``BYTES_PER_BATCH``
    of text), else None; ``flush()`` the last one (None if empty)."""

    def __init__(self, fmt: str) -> None:
        import pyarrow as pa
        self.pa = pa
        self.fmt = fmt
        self.columns = _arrow_columns(fmt)
        self.names = [n for n, _ in self.columns]
        self.rows: list[tuple] = []
        self.size = 0
        self.line = encoders()[0]
        self._names: dict[str | None, bytes | None] = {}

    def add(self, rec: dict):
        if self.fmt == "jsonl":
            line = self.line(json_ordered(rec))
            self.rows.append((line, rec.get(PARTITION_COLUMN)))
            self.size += len(line)
        else:
            r = to_row(rec, self.fmt)
            self.rows.append(r)
            self.size += sum(len(v) for v in r if v.__class__ is bytes)
        if len(self.rows) >= ROWS_PER_BATCH or self.size >= BYTES_PER_BATCH:
            return self.flush()
        return None

    def finish(self):
        """The last batch (None if empty)."""
        return self.flush()

    def flush(self):
        if not self.rows:
            return None
        pa = self.pa
        arrays = []
        for (name, t), col in zip(self.columns, zip(*self.rows, strict=True), strict=True):
            if t is None:
                arrays.append(utf8_array(pa, col))
            elif self.fmt == "jsonl" and name == PARTITION_COLUMN:  # the api names, a few dozen distinct
                enc = self._names
                arrays.append(utf8_array(pa, tuple(enc[v] if v in enc else enc.setdefault(v, _utf8(v))
                                                   for v in col)))
            else:
                arrays.append(pa.array(col, type=t))
        self.rows = []
        self.size = 0
        return pa.RecordBatch.from_arrays(arrays, names=self.names)


def _utf8(v: str | None) -> bytes | None:
    return None if v is None else v.encode()


def utf8_array(pa, values: tuple):
    """UTF-8 ``bytes`` (or None) -> an Arrow string array, its buffers made directly: one join of the
    bytes and their offsets (``pa.array`` converts them one by one, about six times slower, and its
    first call imports pandas: 0.6 s of every Python worker's start for a jsonl job)."""
    from array import array
    from itertools import accumulate
    n = len(values)
    nulls = values.count(None)
    if nulls:
        bits = bytearray((n + 7) // 8)
        for i, v in enumerate(values):
            if v is not None:
                bits[i >> 3] |= 1 << (i & 7)
        valid = pa.py_buffer(bits)
        values = tuple(b"" if v is None else v for v in values)
    else:
        valid = None
    offsets = array("i", [0])  # a batch is cut at BYTES_PER_BATCH (plus one row): far below 2 GiB
    offsets.extend(accumulate(map(len, values)))
    return pa.Array.from_buffers(pa.string(), n, [valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))],
                                 null_count=nulls)


def _spark_type(t: ColumnType):
    from pyspark.sql.types import ArrayType, DoubleType, IntegerType, LongType, StringType
    return {ColumnType.STRING: StringType(), ColumnType.INT32: IntegerType(), ColumnType.INT64: LongType(),
            ColumnType.FLOAT64: DoubleType(), ColumnType.STRINGS: ArrayType(StringType()),
            ColumnType.JSON: StringType()}[t]


def row_schema(fmt: str):
    """The Spark schema of the output, from the declared column types (JSON values as their text)."""
    from pyspark.sql.types import StructField, StructType
    if fmt == "jsonl":
        return StructType([StructField("line", _spark_type(ColumnType.JSON)),
                           StructField(PARTITION_COLUMN, _spark_type(ColumnType.STRING))])
    return StructType([StructField(c.name, _spark_type(c.type)) for c in COLUMNS])
