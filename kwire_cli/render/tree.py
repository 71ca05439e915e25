"""Pretty trees of decoded messages, walked along the spec so that each field shows its type.

Labels are ``kwire_cli.render.plaintree.Label`` objects (styled spans; Rich prints them on a
terminal), never markup, so a topic called ``[bold]`` prints as is, and every text taken from the
message or the specs goes through ``kwire_cli.render.safe`` (controls, bidi and other format
characters as visible escapes).
Error codes show their Kafka names, API keys their API names, long byte strings are cut short
(the JSON output always has all of them), and records fields show either their decoded batches
or their hex.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from functools import partial
from typing import Any

from kwire_cli.render.plaintree import Label, Node
from kwire_cli.render.safe import escape, quoted
from kwire_cli.spec.meanings import struct_reading, value_meaning
from kwire_cli.spec.model import FieldSpec, FieldType, StructSpec
from kwire_cli.values.records import DECODED_KEYS, decoded_form

MAX_BYTES_SHOWN = 64      # bytes of a bytes/records value printed before cutting short
MAX_INLINE_SCALARS = 16   # arrays of scalars up to this length print on one line
MAX_CHARS_SHOWN = 4096    # characters of a string value printed before cutting short
# batch, record and header lines of one message's tree; the rest are counted in a note. Rich took about
# 250 us and 3 KB per line (200,000 empty records: 49 s, 730 MB), so this keeps a tree under 3 s
MAX_RECORD_LINES = 10_000

S_NAME = "bold"
S_TYPE = "dim"
S_NULL = "italic dim"
S_OK = "green"
S_ERR = "bold red"
S_NOTE = "cyan"


def error_label(code: int) -> str:
    try:
        from kwire_cli.spec.error_codes import error_name
    except ImportError:  # pragma: no cover - the table ships with kwire
        return ""
    return error_name(code)


def api_label(key: int) -> str:
    from kwire_cli.spec.registry import registry
    a = registry().apis.get(key)
    return a.name if a else "unknown API"


def type_text(f: FieldSpec, version: int) -> str:
    t = str(f.type)
    if f.nullable_in(version):
        t += "?"
    if f.tagged_in(version):
        t += f" tag {f.tag}"
    return t


def _hex_text(h: str) -> Label:
    n = len(h) // 2
    h = escape(h[: MAX_BYTES_SHOWN * 2 + 2])  # hex when kwire wrote it; a hand-written value tree may hold anything
    if n == 0:
        return Label("(empty)", style=S_NULL)
    if n <= MAX_BYTES_SHOWN:
        return Label(h) + Label(f"  ({n} bytes)", style=S_TYPE)
    return Label(h[: MAX_BYTES_SHOWN * 2]) + Label(f"…  ({n} bytes; --format json shows all)", style=S_TYPE)


def _long_text(s: str) -> Label:
    """A string value, quoted; past ``MAX_CHARS_SHOWN`` characters cut short, saying how long."""
    if len(s) <= MAX_CHARS_SHOWN:
        return Label(quoted(s))
    return Label(quoted(s[:MAX_CHARS_SHOWN]) + "…") + Label(f"  ({len(s)} characters; --format json shows all)",
                                                         style=S_TYPE)


def redacted_text(value: Any) -> Label | None:
    """A redacted value (``{"redacted": REASON, "bytes": N}``, kwire_cli.codec.secrets) as one
    line; None for any other value."""
    if isinstance(value, dict) and len(value) == 2 and "redacted" in value and "bytes" in value:
        return Label(f"<redacted: {value['redacted']}, {value['bytes']} bytes; --show-secrets shows it>",
                    style=S_NOTE)
    return None


def scalar_text(value: Any, ft: FieldType | None = None, name: str = "") -> Label:
    if value is None:
        return Label("null", style=S_NULL)
    if isinstance(value, dict):
        red = redacted_text(value)
        if red is not None:
            return red
        if len(value) == 1 and isinstance(value.get("invalid_utf8"), str):
            return _hex_text(value["invalid_utf8"]) + Label("  ⚠ not UTF-8: its bytes, as hex", style=S_ERR)
    if isinstance(value, bool):
        return Label("true" if value else "false")
    if isinstance(value, int):
        t = Label(str(value))
        if name.endswith("ErrorCode") and (ft is None or ft.kind in ("int16", "int32")):
            t.append(" " + escape(error_label(value)), style=S_OK if value == 0 else S_ERR)
        elif name in ("ApiKey", "RequestApiKey") and (ft is None or ft.kind == "int16"):
            t.append(" " + escape(api_label(value)), style=S_NOTE)
        return t
    if isinstance(value, float):
        return Label(repr(value))
    if isinstance(value, str):
        if ft is not None and ft.kind in ("bytes", "records"):
            return _hex_text(value)
        return _long_text(value)
    return Label(escape(value))


def _label(name: str, value: Label | None, typ: str | None) -> Label:
    t = Label(escape(name), style=S_NAME)
    if value is not None:
        t.append(": ")
        t.append_text(value)
    if typ:
        t.append("  " + escape(typ), style=S_TYPE)
    return t


def add_struct(node: Node, value: dict, struct: StructSpec | None, version: int) -> None:
    """Children of `node`: one per field of `value`, in spec order, then any extra keys; made when
    the tree prints (``Node.fill``)."""
    node.fill = partial(struct_kids, value, struct, version)


class _Fields:
    """A struct's fields at one version, looked up once for every value of it (a big array's
    items): by name, their type texts and the defaults of the tagged ones."""

    __slots__ = ("struct", "specs", "types", "defaults")

    def __init__(self, struct: StructSpec | None, version: int) -> None:
        from kwire_cli.codec.partial import default_value
        fields = struct.fields if struct is not None else []
        self.struct = struct  # held: its id stays its own while it is a key of _FIELDS
        self.specs = {f.name: f for f in fields}
        self.types = {f.name: type_text(f, version) for f in fields}
        self.defaults = {f.name: default_value(f, version) for f in fields if f.tagged_in(version)}


_FIELDS: dict[tuple[int, int], _Fields] = {}


def _fields(struct: StructSpec | None, version: int) -> _Fields:
    key = (id(struct), version)
    got = _FIELDS.get(key)
    if got is None or got.struct is not struct:
        if len(_FIELDS) >= 4096:  # spec sets loaded one after another (--specs): bounded
            _FIELDS.clear()
        got = _FIELDS[key] = _Fields(struct, version)
    return got


def struct_kids(value: dict, struct: StructSpec | None, version: int) -> Iterator[Node]:
    """The nodes of `value`'s fields, in spec order, then any extra keys."""
    known = _fields(struct, version)
    specs, types, defaults = known.specs, known.types, known.defaults
    explicit = value.get("_explicit_tags") or ()
    unsent = []
    for key, v in value.items():
        if key == "_explicit_tags":
            continue  # bookkeeping for byte-exact re-encoding, not a field
        f = specs.get(key)
        if f is not None and key in defaults and f.tag not in explicit and v == defaults[key]:
            unsent.append(key)  # a tagged field that was not on the wire
            continue
        if key == "_unknown_tags":
            sub = Node(_label("unknown tagged fields", None, f"{len(v)}"))
            for tag, h in v.items():
                sub.add(_label(f"tag {tag}", _hex_text(h), None))
            yield sub
            continue
        if f is None:
            yield value_node(key, v)
        else:
            yield field_node(f, v, version, struct.name if struct is not None else None, types[key])
    if unsent:
        yield Node(Label(escape(f"(not sent, at their defaults: {', '.join(unsent)})"), style=S_TYPE))


def _meant(t: Label, within: str | None, name: str, value: Any) -> Label:
    """A value's label with what the value means in its group protocol ("accept", "join"), if anything."""
    m = value_meaning(within, name, value)
    if m is not None:
        t.append(" " + escape(m), style=S_NOTE)
    return t


def _reading(f: FieldSpec, value: Any) -> Label | None:
    """A struct value in one line where the group protocols repeat it (a task, an endpoint, acquired
    records, acknowledgements), or None."""
    r = struct_reading(f.struct.name if f.struct is not None else None, value)
    return Label(escape(r), style=S_NOTE) if r is not None else None


def add_field(node: Node, f: FieldSpec, v: Any, version: int, within: str | None = None) -> None:
    """A field's line (and subtree); ``within`` names the struct it is in (what its values mean)."""
    node.children.append(field_node(f, v, version, within))


def field_node(f: FieldSpec, v: Any, version: int, within: str | None = None, typ: str | None = None) -> Node:
    """A field's node, its subtree made when it prints; ``within`` names the struct it is in,
    ``typ`` is its type text (``type_text``) when known."""
    ft = f.type
    if typ is None:
        typ = type_text(f, version)
    if v is None:
        return Node(_label(f.name, Label("null", style=S_NULL), typ))
    if ft.kind == "struct" and isinstance(v, dict):
        return Node(_label(f.name, _reading(f, v), typ), partial(struct_kids, v, f.struct, version))
    if ft.kind == "array" and isinstance(v, list):
        el = ft.element
        assert el is not None  # an array type has an element type
        if el.kind != "struct" and len(v) <= MAX_INLINE_SCALARS:
            inner = Label("[")
            for i, x in enumerate(v):
                if i:
                    inner.append(", ")
                inner.append_text(_meant(scalar_text(x, el, f.name), within, f.name, x))
            inner.append("]")
            return Node(_label(f.name, inner, typ))
        return Node(_label(f.name, Label(f"{len(v)} item" + ("" if len(v) == 1 else "s"), style=S_TYPE), typ),
                       partial(_item_kids, f, el, v, version, within))
    if ft.kind == "records" and isinstance(v, dict):
        return records_node(f.name, v, typ)
    return Node(_label(f.name, _meant(scalar_text(v, ft, f.name), within, f.name, v), typ))


def _item_kids(f: FieldSpec, el: FieldType, v: list, version: int, within: str | None) -> Iterator[Node]:
    for i, x in enumerate(v):
        if el.kind == "struct" and isinstance(x, dict):
            item = Label(f"[{i}]", style=S_NAME)
            reading = _reading(f, x)
            if reading is not None:
                item.append("  ")
                item.append_text(reading)
            yield Node(item, partial(struct_kids, x, f.struct, version))
        else:
            yield Node(_label(f"[{i}]", _meant(scalar_text(x, el, f.name), within, f.name, x), None))


def add_value(node: Node, name: str, v: Any, typ: str | None = None) -> None:
    """A value without a spec (records batches, extra keys): dicts and lists as subtrees."""
    node.children.append(value_node(name, v, typ))


def value_node(name: str, v: Any, typ: str | None = None) -> Node:
    """The node of a value without a spec, its subtree made when it prints."""
    if isinstance(v, dict):
        red = redacted_text(v)
        if red is not None:
            return Node(_label(name, red, typ))
        if set(v) == {"text"} and isinstance(v["text"], str):
            return Node(_label(name, Label(quoted(v["text"])), typ))
        if set(v) == {"hex"} and isinstance(v["hex"], str):
            return Node(_label(name, _hex_text(v["hex"]), typ))
        return Node(_label(name, None if v else Label("{}", style=S_TYPE), typ),
                       partial(_dict_kids, v))
    if isinstance(v, list):
        if all(not isinstance(x, (dict, list)) for x in v) and len(v) <= MAX_INLINE_SCALARS:
            inner = Label("[")
            for i, x in enumerate(v):
                if i:
                    inner.append(", ")
                inner.append_text(scalar_text(x))
            inner.append("]")
            return Node(_label(name, inner, typ))
        return Node(_label(name, Label(f"{len(v)} item" + ("" if len(v) == 1 else "s"), style=S_TYPE), typ),
                       partial(_list_kids, v))
    return Node(_label(name, scalar_text(v, None, name), typ))


def _dict_kids(v: dict) -> Iterator[Node]:
    for k, x in v.items():
        yield value_node(str(k), x)


def _list_kids(v: list) -> Iterator[Node]:
    for i, x in enumerate(v):
        yield value_node(f"[{i}]", x)


def message_tree(api_name: str, api_key: int, version: int, kind: str, header: dict | None,
                 body: dict | None, size: int | None, *, header_struct: StructSpec | None = None,
                 header_version: int | None = None, body_struct: StructSpec | None = None,
                 error: str | None = None, layout_version: int | None = None, notes: Iterable[str] = (),
                 violations: Iterable[Any] = ()) -> Node:
    """The tree `kwire decode` prints. `error` adds a last line saying where decoding stopped;
    ``layout_version`` (the body read with another version's layout), ``notes`` and ``violations``
    (lenient decoding: each rule the bytes break, where) are shown after the body."""
    title = Label(escape(f"{api_name} v{version} {kind}"), style="bold")
    if layout_version is not None:
        title.append(f" (read as v{layout_version})", style="bold")
    title.append(f"  api key {api_key}", style=S_TYPE)
    if size is not None:
        title.append(f", {size} bytes", style=S_TYPE)
    root = Node(title)
    lines.set([MAX_RECORD_LINES])
    if header is not None:
        hv = f"header v{header_version}" if header_version is not None else "header"
        add_struct(root.add(Label(hv, style="bold")), header, header_struct, header_version or 0)
    if body is not None:
        add_struct(root.add(Label("body", style="bold")), body, body_struct,
                   version if layout_version is None else layout_version)
    for note in notes:
        root.add(Label(f"note: {escape(note)}", style=S_NOTE))
    for v in violations:
        at = f" at {v.path}" if v.path else ""
        off = f" (offset {v.offset})" if v.offset is not None else ""
        root.add(Label(escape(f"⚠ violation {v.rule}{at}{off}: {v.detail}"), style=S_ERR))
    if error:
        root.add(Label(f"✗ decoding stopped: {escape(error)}", style=S_ERR))
    return root


# --------------------------------------------------------------------------- records

# batch, record and header lines the tree being made may still show (message_tree sets it)
# (outside one, each records field may show that many)
lines: ContextVar[list[int] | None] = ContextVar("kwire_tree_record_lines", default=None)

def _kv_text(v: Any) -> Label:
    """A record key/value/header value: {"text": s}, {"hex": h} or None."""
    if v is None:
        return Label("null", style=S_NULL)
    if isinstance(v, dict) and "note" in v:  # a key/value naming a schema that did not decode
        return _kv_text({k: x for k, x in v.items() if k != "note"}) + Label(
            f"  (not decoded: {escape(str(v['note']))})", style=S_NOTE)
    if isinstance(v, dict) and isinstance(v.get("text"), str):
        return _long_text(v["text"])
    if isinstance(v, dict) and isinstance(v.get("hex"), str):
        return Label("0x") + _hex_text(v["hex"])
    if isinstance(v, dict) and decoded_form(v) is not None:  # read with its schema (kwire_cli.values)
        return _decoded_text(v)
    return Label(escape(v))


def _decoded_text(v: dict) -> Label:
    """A decoded key/value: its object as one line of JSON, then its format and schema."""
    obj = decoded_form(v)
    t = Label(escape(obj if isinstance(obj, str) else
                     json.dumps(obj, ensure_ascii=False, separators=(", ", ": "), default=str)))
    schema = v.get("schema") or {}
    names = [f"{k} {schema[k]}" for k in ("id", "subject", "message", "guid") if k in schema]
    fmt = next(k for k in DECODED_KEYS if k in v)
    t.append(escape(f"  ({fmt}{', ' if names else ''}{', '.join(names)})"), style=S_TYPE)
    return t


def _record_label(i: int, r: dict) -> Label:
    t = Label(f"[{i}]", style=S_NAME)
    if "Offset" in r:
        t.append(escape(f" offset {r['Offset']}"))
    if "Timestamp" in r:
        t.append(escape(f"  ts {r['Timestamp']}"), style=S_TYPE)
    t.append("  key ")
    t.append_text(_kv_text(r.get("Key")))
    t.append("  value ")
    t.append_text(_kv_text(r.get("Value")))
    ctl = r.get("Control")
    if isinstance(ctl, dict):
        t.append(escape(f"  control {ctl.get('Type', ctl)}"), style=S_NOTE)
    return t


def _batch_label(i: int, b: dict) -> Label:
    t = Label(f"batch {i}", style=S_NAME)
    if "error" in b:
        t.append(f"  {escape(b['error'])}", style=S_ERR)
        return t
    magic = b.get("Magic")
    recs = b.get("Records")
    if magic == 2:
        base = b.get("BaseOffset", 0)
        last = base + (b.get("LastOffsetDelta") or 0)
        n = b.get("RecordCount", len(recs) if isinstance(recs, list) else "?")
        t.append(escape(f"  offsets {base}..{last}, {n} record{'s' if n != 1 else ''}"))
        t.append(escape(f", {b.get('Compression', '?')}, {b.get('TimestampType', '?')}"), style=S_TYPE)
        if b.get("ProducerId", -1) != -1:
            t.append(escape(f", producer {b['ProducerId']} epoch {b.get('ProducerEpoch')} "
                            f"seq {b.get('BaseSequence')}"), style=S_TYPE)
        for flag, word in (("IsTransactional", "transactional"), ("IsControlBatch", "control")):
            if b.get(flag):
                t.append(f", {word}", style=S_NOTE)
    else:
        t.append(escape(f"  magic {magic} message at offset {b.get('Offset')}, {b.get('Compression', 'none')}"))
    if b.get("CrcValid") is False:
        t.append("  CRC MISMATCH", style=S_ERR)
    elif b.get("CrcValid") is True:
        t.append("  CRC ok", style=S_OK)
    return t


def _not_shown(node: Node, recs: list) -> None:
    """The note for the records (and their headers) a tree leaves out."""
    nh = sum(len(r["Headers"]) for r in recs if isinstance(r, dict) and isinstance(r.get("Headers"), list))
    what = f"{len(recs)} more record{'s' if len(recs) != 1 else ''}"
    if nh:
        what += f" and {nh} header{'s' if nh != 1 else ''}"
    node.add(Label(f"… {what} not shown: a tree shows {MAX_RECORD_LINES} batch, record and header lines "
                  "(--format json shows all)", style=S_NOTE))


def add_records(node: Node, name: str, v: dict, typ: str | None = None) -> None:
    """A decoded records field (kwire_cli.records' shape) as batches and one line per record;
    anything else falls back to the generic rendering."""
    node.children.append(records_node(name, v, typ))


def records_node(name: str, v: dict, typ: str | None = None) -> Node:
    """The node of a records field, its batches and records made when it prints (the tree's budget
    of record lines is spent then, in print order)."""
    batches = v.get("batches")
    if not isinstance(batches, list):
        return value_node(name, v, typ)
    nrec = sum(len(b["Records"]) for b in batches if isinstance(b, dict) and isinstance(b.get("Records"), list))
    summary = Label(f"{len(batches)} batch{'es' if len(batches) != 1 else ''}, {nrec} record{'s' if nrec != 1 else ''}",
                   style=S_TYPE)
    return Node(_label(name, summary, typ), partial(_records_kids, v, batches))


def _records_kids(v: dict, batches: list) -> Iterator[Node]:
    left = lines.get() or [MAX_RECORD_LINES]
    for i, b in enumerate(batches):
        if left[0] <= 0:
            yield Node(Label(f"… {len(batches) - i} more batches not shown: a tree shows {MAX_RECORD_LINES} "
                             "batch, record and header lines (--format json shows all)", style=S_NOTE))
            break
        left[0] -= 1
        if not isinstance(b, dict):
            yield value_node(f"[{i}]", b)
            continue
        bn = Node(_batch_label(i, b))
        _batch_kids(bn, b, left)
        yield bn
    tail = v.get("partial_trailing_batch")
    if tail:
        yield Node(Label(f"partial trailing batch at byte {tail.get('offset')}, {tail.get('bytes')} bytes "
                         f"(cut by the fetch size limit)", style=S_NOTE))


def _batch_kids(bn: Node, b: dict, left: list[int]) -> None:
    """A batch's records and headers, as many as the tree's budget of record lines ``left`` allows."""
    if "RawHex" in b:
        bn.add(_label("RawHex", _hex_text(b["RawHex"]), None))
    recs = b.get("Records") if b.get("Magic") == 2 else b.get("Messages", [b] if "Value" in b else [])
    recs = recs if isinstance(recs, list) else []
    for j, r in enumerate(recs):
        if left[0] <= 0:
            _not_shown(bn, recs[j:])
            break
        left[0] -= 1
        if not isinstance(r, dict):
            add_value(bn, f"[{j}]", r)
            continue
        rn = bn.add(_record_label(j, r))
        hs = r.get("Headers") or []
        for hi, h in enumerate(hs):
            if left[0] <= 0:
                rn.add(Label(f"… {len(hs) - hi} more headers not shown (--format json shows all)", style=S_NOTE))
                break
            left[0] -= 1
            if isinstance(h, dict):
                k = h.get("Key")
                ht = Label("header ", style=S_TYPE) + Label(quoted(k) if isinstance(k, str)
                                                          else escape(k)) + Label(": ") + _kv_text(h.get("Value"))
                rn.add(ht)
