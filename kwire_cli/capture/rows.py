"""The output row: what `kwire pcap` and `kwire spark-decode` write for each Kafka frame.

One declaration, ``COLUMNS``, says for every column its name, value type, place in a JSON line,
Arrow/Parquet type, the table cell that shows it and what it holds. Everything that writes or reads
rows is built from it: ``Conversation.row`` (its columns, ``ROW_KEYS``), the JSON lines of ``kwire pcap`` and of
spark-decode (``json_ordered``), the pcap table (``kwire_cli.output.table``), the Spark rows
and their Spark/Parquet schema (``kwire_cli.spark.rows``), the ``--filter`` fields
(``FILTER_FIELDS``, read by ``capture.filter``) and the benchmarks.

A row is a plain ``dict``. Columns ``ALWAYS`` present are in every row, in declared order;
``SOMETIMES`` columns (``topic_names``, ``embedded``) only in rows that have a value for them;
the ``SPARK`` column (``extra``) only in Spark's typed (Parquet) rows, where it holds any other key
a row carries as JSON, so that a key added later is not lost there.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class ColumnType(enum.Enum):
    """A column's value type: ``(name, Arrow type, Parquet type)``. Every value may also be null."""

    STRING = ("string", "string", "BYTE_ARRAY (String)")
    INT32 = ("int32", "int32", "INT32")
    INT64 = ("int64", "int64", "INT64")
    FLOAT64 = ("float64", "double", "DOUBLE")
    STRINGS = ("list of strings", "list<item: string>", "LIST of BYTE_ARRAY (String)")
    JSON = ("nested JSON value", "string", "BYTE_ARRAY (String), JSON text")

    @property
    def label(self) -> str:
        return self.value[0]

    @property
    def arrow(self) -> str:
        """The Arrow type, as pyarrow prints it (JSON values are stored as their JSON text)."""
        return self.value[1]

    @property
    def parquet(self) -> str:
        return self.value[2]

    @property
    def numeric(self) -> bool:
        return self in (ColumnType.INT32, ColumnType.INT64, ColumnType.FLOAT64)


class Presence(enum.Enum):
    ALWAYS = "always"        # in every row (null when there is no value)
    SOMETIMES = "sometimes"  # only in rows that have a value for it
    SPARK = "spark"          # only in spark-decode's typed rows (Parquet)


ALWAYS, SOMETIMES, SPARK = Presence.ALWAYS, Presence.SOMETIMES, Presence.SPARK
STRING, INT32, INT64, FLOAT64, STRINGS, JSON = (ColumnType.STRING, ColumnType.INT32, ColumnType.INT64,
                                                ColumnType.FLOAT64, ColumnType.STRINGS, ColumnType.JSON)


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    doc: str
    heading: str | None = None   # the pcap table cell that shows it (None: not in the table)
    presence: Presence = ALWAYS


# Error kinds (the ``error_kind`` column): a typed error's ``kind`` for a frame the codec refused
# ("decode-error", "unknown-api-key", "unknown-version", "trailing-bytes"), and two of the capture's own.
DECODE_ERROR = "decode-error"
INTERNAL_ERROR = "internal-error"        # the codec itself failed (not a KwireError): a kwire bug
UNPAIRED_RESPONSE = "unpaired-response"  # a response whose request is not in the capture
CUT_FRAME = "cut-frame"                  # a frame a gap cut after its header: shown, its body not decoded

COLUMNS: tuple[Column, ...] = (
    Column("file", STRING, "the capture file, as named on the command line"),
    Column("frame", INT64, "number of the packet that completed the frame, 1-based as Wireshark numbers "
           "packets (the column keeps Wireshark's name)", "frame"),
    Column("ts", FLOAT64, "time of that packet, seconds since the epoch (the table: since the capture's first "
           "frame, shown or not)",
           "time"),
    Column("src", STRING, "sender, ip:port ([ip]:port for IPv6)", "src -> dst"),
    Column("dst", STRING, "receiver, ip:port", "src -> dst"),
    Column("kind", STRING, "request or response", "kind"),
    Column("api_key", INT32, "API key (a response: its request's); null for an unpaired response"),
    Column("api_name", STRING, "API name (UNKNOWN(n) for a key the specs do not know)", "api"),
    Column("api_version", INT32, "API version (a response: its request's)", "api"),
    Column("correlation_id", INT32, "correlation id", "corr"),
    Column("client_id", STRING, "client id of the request header (a response: its request's)", "client"),
    Column("size", INT64, "frame size in bytes, without the 4-byte size prefix", "size"),
    Column("latency_ms", FLOAT64, "a response: milliseconds since its request completed", "latency_ms"),
    Column("header", JSON, "the decoded request or response header"),
    Column("body", JSON, "the decoded body (the value tree of DESIGN.md; records fields decoded into "
           "batches unless --raw-records); the table's info notes batches with a bad CRC or left undecoded", "info"),
    Column("error_codes", STRINGS, "names of the non-zero error codes in the body (fields whose name ends "
           "in ErrorCode)", "info"),
    Column("error", STRING, "why the frame did not decode, one line; null when it decoded", "info"),
    Column("error_kind", STRING, "the class of that failure, counted in the summary's undecodable_by_reason: "
           "decode-error, unknown-api-key, unknown-version, trailing-bytes, unpaired-response, "
           "internal-error, cut-frame (see captured); null when the frame decoded"),
    Column("topic_names", JSON, "topic ids in the body -> the names Metadata-like answers earlier in the "
           "capture gave them (null: not seen)", "info", SOMETIMES),
    Column("embedded", JSON, "the consumer protocol inside JoinGroup/SyncGroup (subscription, assignment)",
           presence=SOMETIMES),
    Column("violations", JSON, "rules of the format the frame breaks, read past (lenient decoding; --strict "
           "makes them errors): a list of {path, offset, rule, detail}, offsets in the frame after its size "
           "prefix; counted in the summary's violations_by_rule", "info", SOMETIMES),
    Column("notes", JSON, "what a reader should know about how the frame was read: a KIP-511 fallback answer "
           "read with the v0 layout, a version newer than the specs read with the newest layout (assumed)",
           "info", SOMETIMES),
    Column("captured", INT64, "a frame a gap cut after its header (a snap length, lost packets): the bytes of "
           "it captured from its start; the row shows what they hold (API, version, correlation id, client id), "
           "its body is not decoded (error_kind cut-frame)", presence=SOMETIMES),
    Column("extra", JSON, "spark-decode Parquet only: any other key a row carries, as JSON (none today)",
           presence=SPARK),
)

BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
ROW_KEYS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.presence is ALWAYS)
SOMETIMES_KEYS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.presence is SOMETIMES)
JSON_KEYS: tuple[str, ...] = ROW_KEYS + SOMETIMES_KEYS  # the order of a JSON line
DECLARED: frozenset[str] = frozenset(BY_NAME)


_N_ROW_KEYS = len(ROW_KEYS)
_SOMETIMES_AT = {k: i for i, k in enumerate(SOMETIMES_KEYS)}


def json_ordered(row: dict[str, Any]) -> dict[str, Any]:
    """The row as a JSON line writes it: every ``ALWAYS`` column in declared order (null where the row
    lacks it), then the ``SOMETIMES`` columns it has, then any other key it carries (in its order).
    A row already in that order (``ROW_KEYS``, then ``SOMETIMES`` ones in declared order:
    most rows) is returned itself, not copied."""
    keys = tuple(row)
    if keys == ROW_KEYS:
        return row
    if keys[:_N_ROW_KEYS] == ROW_KEYS:
        last = -1
        for k in keys[_N_ROW_KEYS:]:
            at = _SOMETIMES_AT.get(k, -1)
            if at <= last:
                break
            last = at
        else:
            return row
    out = {k: row.get(k) for k in ROW_KEYS}
    for k in SOMETIMES_KEYS:
        if k in row:
            out[k] = row[k]
    for k in row:
        if k not in out:
            out[k] = row[k]
    return out


#: the columns a frame's row has before its body is decoded (its framing, pairing and request
#: header): a --filter that reads only these can leave a frame out undecoded (Conversation.rows)
HEADER_COLUMNS = frozenset({"file", "frame", "ts", "src", "dst", "kind", "api_key", "api_name", "api_version",
                            "correlation_id", "client_id", "size", "latency_ms"})


# ------------------------------------------------------------------------------ filter fields
@dataclass(frozen=True)
class FilterField:
    """A ``--filter`` field: the columns it reads and how it compares (``match``):
    ``number`` (=, !=, <, >, <=, >=), ``text`` (those, and ~ for a part), ``endpoint`` (ip:port, ip or
    port), ``api`` (a name, a key, or ~ part of a name), ``error-code`` (a name or a code in
    error_codes; alone: any), ``present`` (alone: the column is not null); ``body-text`` and
    ``body-number``: any of the values ``kwire_cli.capture.bodyfields`` finds in the body compares
    as text or number (``!=``: none equals; alone: there is one)."""

    name: str
    columns: tuple[str, ...]
    match: str


FILTER_FIELDS: tuple[FilterField, ...] = (
    FilterField("api", ("api_name", "api_key"), "api"),
    FilterField("version", ("api_version",), "number"),
    FilterField("kind", ("kind",), "text"),
    FilterField("client", ("client_id",), "text"),
    FilterField("error", ("error_codes",), "error-code"),
    FilterField("undecodable", ("error",), "present"),
    FilterField("conn", ("src", "dst"), "endpoint"),
    FilterField("src", ("src",), "endpoint"),
    FilterField("dst", ("dst",), "endpoint"),
    FilterField("corr", ("correlation_id",), "number"),
    FilterField("frame", ("frame",), "number"),
    FilterField("size", ("size",), "number"),
    FilterField("latency", ("latency_ms",), "number"),
    FilterField("file", ("file",), "text"),
    # values inside the body (kwire_cli.capture.bodyfields: the specs' entityType, or field names)
    FilterField("topic", ("body", "topic_names"), "body-text"),
    FilterField("partition", ("body",), "body-number"),
    FilterField("group", ("body",), "body-text"),
    FilterField("member", ("body",), "body-text"),
    FilterField("producer_id", ("body",), "body-number"),
    FilterField("transactional_id", ("body",), "body-text"),
    FilterField("key", ("body",), "body-text"),
    FilterField("header", ("body",), "body-text"),
)


def markdown() -> str:
    """The declaration as a Markdown table (docs/spark.md holds it; ``python -m kwire_cli.capture.rows``
    prints it)."""
    out = ["| column | type | Parquet | in rows | pcap table | what it holds |",
           "|---|---|---|---|---|---|"]
    for c in COLUMNS:
        out.append(f"| `{c.name}` | {c.type.label} | {c.type.parquet} | {c.presence.value} | "
                   f"{c.heading or ''} | {c.doc} |")
    return "\n".join(out) + "\n"


def _check() -> None:
    """The declaration is consistent (checked at import: a mistake here fails every test)."""
    if len(BY_NAME) != len(COLUMNS):
        raise RuntimeError("output rows: column names repeat")
    for f in FILTER_FIELDS:
        if not set(f.columns) <= DECLARED:
            raise RuntimeError(f"output rows: filter field {f.name} reads undeclared columns")


_check()

if __name__ == "__main__":
    print(markdown(), end="")
