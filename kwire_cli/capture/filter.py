"""Display filters over output rows (one per Kafka frame), in the spirit of tshark's.

    api=Metadata            api=3              api~Offset         (name, key, or part of a name)
    version>=9              version=9-12       kind=response
    client=rdkafka          client~python      corr=42  frame>100  size>1000  latency>5
    error                   error=UNKNOWN_TOPIC_OR_PARTITION       error=3   (any depth of the body)
    undecodable             conn=127.0.0.1:9092   conn=9092   src=...   dst=...
    topic=orders  topic~ord  partition=3  group=g1  member~consumer  producer_id=1000
    transactional_id=tx-1   key=k-0  key~user-  header=trace  header~t-   (values inside the body)
    value.customer.name=c1  key.id~A-  value.lines.qty>1   (fields of keys and values read with
                            their schema: --schema-registry, --schemas; names case-sensitive)
    combined with and / or / not (also && || ! and a comma for and) and parentheses.

The fields, the columns each reads and how it compares are declared in
``kwire_cli.capture.rows.FILTER_FIELDS``.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kwire_cli.capture.rows import BY_NAME as COLUMNS
from kwire_cli.capture.rows import FILTER_FIELDS, FLOAT64, HEADER_COLUMNS
from kwire_cli.errors import FilterError, KwireError

_TOKEN = re.compile(r"""\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>==|!=|>=|<=|=|>|<|~)|(?P<and>&&|,)|(?P<or>\|\|)|(?P<not>!)
                        |"(?P<q>[^"]*)"|(?P<word>[^\s()=!<>~,&|"]+))""", re.X)
FIELDS = tuple(f.name for f in FILTER_FIELDS)
MAX_NESTING = 100  # parentheses inside parentheses: past it a one-line error, not Python's recursion limit
MAX_DIGITS = 30    # a number longer than this matches no row, and int() refuses 4300 digits
_BY_NAME = {f.name: f for f in FILTER_FIELDS}

Predicate = Callable[[dict[str, Any]], bool]


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m:
            raise FilterError(f"filter: cannot read {text[pos:].strip()[:20]!r} at position {pos}")
        kind = m.lastgroup
        assert kind is not None  # every alternative is a named group
        value = m.group(kind)
        if kind == "word" and value.lower() in ("and", "or", "not"):
            kind = value.lower()
        if kind == "q":
            kind = "word"
        out.append((kind, value, m.start(kind)))
        pos = m.end()
    return out


def _cmp(op: str, a: Any, b: Any) -> bool:
    if a is None:
        return op == "!="
    result: bool = {"=": a == b, "==": a == b, "!=": a != b, ">": a > b, "<": a < b, ">=": a >= b,
                    "<=": a <= b}[op]
    return result


def _endpoint_match(value: str, ep: str | None) -> bool:
    if ep is None:
        return False
    if value.isdigit():
        return ep.rsplit(":", 1)[-1] == value
    return ep == value or ep.rsplit(":", 1)[0].strip("[]") == value.strip("[]")


def _int(value: str, name: str, pos: int) -> int:
    if len(value.lstrip("-")) > MAX_DIGITS:
        raise FilterError(f"filter: {name} takes a number of at most {MAX_DIGITS} digits, got "
                          f"{len(value)} characters (position {pos})")
    return int(value)


def _term(name: str, op: str | None, value: str | None, pos: int) -> Predicate:
    from kwire_cli.values.fields import parse_path
    path = parse_path(name)
    if path is not None:  # value.customer.name, key.id: fields of keys and values read with their schema
        return _decoded_term(path[0], path[1], op, value, pos)
    name = name.lower()
    field = _BY_NAME.get(name)
    if field is None:
        raise FilterError(f"filter: unknown field {name!r} at position {pos} (known: {', '.join(FIELDS)})")
    match, cols = field.match, field.columns
    if op is None:
        if match in ("body-text", "body-number"):
            from kwire_cli.capture.bodyfields import row_values
            return lambda r: bool(row_values(name, r))
        if match == "error-code":
            col = cols[0]
            return lambda r: bool(r.get(col))
        if match == "present":
            col = cols[0]
            return lambda r: r.get(col) is not None
        raise FilterError(f"filter: {name} needs a comparison, e.g. {name}=... (position {pos})")
    if value is None:
        raise FilterError(f"filter: {name}{op} needs a value (position {pos})")
    if match == "api":
        name_col, key_col = cols
        if value.isdigit():
            key_value = _int(value, name, pos)
            return lambda r: _cmp(op, r.get(key_col), key_value)
        low = value.lower()
        if op == "~":
            return lambda r: low in (r.get(name_col) or "").lower()
        from kwire_cli.spec.registry import registry
        try:
            low = registry().api(value).name.lower()  # MetadataRequest, metadata: Metadata
        except KwireError:
            if low != "sasltoken":  # the rows of KIP-43 raw SASL tokens
                raise FilterError(f"filter: unknown API {value!r} at position {pos} (see `kwire list`; "
                                  f"api~{value} matches a part of a name)") from None
        return lambda r: _cmp(op, (r.get(name_col) or "").lower(), low)
    if match in ("body-text", "body-number"):
        return _body_term(name, match, op, value, pos)
    if match == "number":
        key = cols[0]
        if op in ("=", "==", "!=") and re.fullmatch(r"\d+-\d+", value):
            lo, hi = (_int(v, name, pos) for v in value.split("-"))
            inside: Predicate = lambda r: r.get(key) is not None and lo <= r[key] <= hi  # noqa: E731
            return inside if op != "!=" else (lambda r: not inside(r))
        try:
            num: float = float(value) if COLUMNS[key].type is FLOAT64 else _int(value, name, pos)
        except ValueError:
            raise FilterError(f"filter: {name} takes a number, got {value!r} (position {pos})") from None
        return lambda r: _cmp(op, r.get(key), num)
    if match == "text":
        key = cols[0]
        if op == "~":
            return lambda r: value in (r.get(key) or "")
        return lambda r: _cmp(op, r.get(key), value)
    if match == "error-code":
        col = cols[0]
        want = value.upper()
        if value.lstrip("-").isdigit():
            from kwire_cli.spec.error_codes import error_name
            want = error_name(_int(value, name, pos))
        has: Predicate = lambda r: want in (r.get(col) or [])  # noqa: E731
        return has if op != "!=" else (lambda r: not has(r))
    if match == "endpoint":
        has = lambda r: any(_endpoint_match(value, r.get(k)) for k in cols)  # noqa: E731
        return has if op != "!=" else (lambda r: not has(r))
    raise FilterError(f"filter: {name} does not take {op} (position {pos})")


def _body_term(name: str, match: str, op: str, value: str, pos: int) -> Predicate:
    """A field whose values are inside the body (``kwire_cli.capture.bodyfields``): true when any value
    compares so (``!=``: when none equals)."""
    from kwire_cli.capture.bodyfields import row_values
    if match == "body-number":
        if op == "~":
            raise FilterError(f"filter: {name} takes =, !=, <, >, <=, >= or a range a-b, not ~ (position {pos})")
        if re.fullmatch(r"-?\d+-\d+", value) and not value.startswith("-"):
            lo, hi = (_int(v, name, pos) for v in value.split("-"))
            some: Predicate = lambda r: any(isinstance(v, int) and lo <= v <= hi for v in row_values(name, r))  # noqa: E731
        else:
            try:
                num = _int(value, name, pos)
            except ValueError:
                raise FilterError(f"filter: {name} takes a number, got {value!r} (position {pos})") from None
            cmp = "=" if op == "!=" else op
            some = lambda r: any(isinstance(v, int) and _cmp(cmp, v, num) for v in row_values(name, r))  # noqa: E731
    elif op == "~":
        some = lambda r: any(isinstance(v, str) and value in v for v in row_values(name, r))  # noqa: E731
    elif op in ("=", "==", "!="):
        some = lambda r: any(v == value for v in row_values(name, r))  # noqa: E731
    else:
        cmp = op
        some = lambda r: any(isinstance(v, str) and _cmp(cmp, v, value) for v in row_values(name, r))  # noqa: E731
    return some if op != "!=" else (lambda r: not some(r))


def _decoded_term(field: str, path: list[str], op: str | None, value: str | None, pos: int) -> Predicate:
    """A field inside the decoded keys or values of a frame's records (``kwire_cli.values.fields``):
    true when any record's leaf there compares so (``!=``: when none equals; no comparison: when
    any record has one). Numbers compare as numbers, everything else as its text."""
    from kwire_cli.values.fields import values_at

    def leaves(r: dict[str, Any]) -> Any:
        return values_at(r.get("body"), field, path)

    if op is None:
        return lambda r: next(iter(leaves(r)), None) is not None
    if value is None:
        raise FilterError(f"filter: {field}.{'.'.join(path)}{op} needs a value (position {pos})")
    try:
        num: float | None = float(value) if len(value) <= MAX_DIGITS else None
    except ValueError:
        num = None

    def compare(v: Any, cmp: str) -> bool:
        if cmp == "~":
            return value in _leaf_text(v)
        if num is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
            return _cmp(cmp, v, num)
        return _cmp(cmp, _leaf_text(v), value)

    if op == "!=":
        return lambda r: not any(compare(v, "=") for v in leaves(r))
    return lambda r: any(compare(v, op) for v in leaves(r))


def _leaf_text(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0  # parentheses open around the current position
        self.fields: set[str] = set()  # the fields the expression compares

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def at(self, kind: str) -> bool:
        t = self.peek()
        return t is not None and t[0] == kind

    def take(self) -> tuple[str, str, int]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def parse(self) -> Predicate:
        if not self.toks:
            return lambda r: True
        p = self.or_()
        t = self.peek()
        if t is not None:
            _kind, v, pos = t
            raise FilterError(f"filter: unexpected {v!r} at position {pos}")
        return p

    def or_(self) -> Predicate:
        parts = [self.and_()]
        while self.at("or"):
            self.take()
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else (lambda r: any(p(r) for p in parts))

    def and_(self) -> Predicate:
        parts = [self.not_()]
        while self.at("and"):
            self.take()
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else (lambda r: all(p(r) for p in parts))

    def not_(self) -> Predicate:
        negate = False
        while self.at("not"):  # a run of nots: a loop (thousands of them are one negation or none)
            self.take()
            negate = not negate
        inner = self.atom()
        return (lambda r: not inner(r)) if negate else inner

    def atom(self) -> Predicate:
        t = self.peek()
        if t is None:
            raise FilterError(f"filter: expression ends too early: {self.text!r}")
        kind, value, pos = t
        if kind == "lp":
            self.take()
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise FilterError(f"filter: parentheses nested more than {MAX_NESTING} deep at position {pos}")
            p = self.or_()
            self.depth -= 1
            if not self.at("rp"):
                raise FilterError(f"filter: missing ) for the ( at position {pos}")
            self.take()
            return p
        if kind != "word":
            raise FilterError(f"filter: expected a field name at position {pos}, got {value!r}")
        self.take()
        op = val = None
        if self.at("op"):
            op = self.take()[1]
            if self.at("word"):
                val = self.take()[1]
        self.fields.add(value.lower())
        return _term(value, op, val, pos)


def compile_filter(text: str | None) -> Predicate:
    """A predicate over output rows (``kwire_cli.capture.rows``: what `kwire pcap --format jsonl` writes)."""
    if not text:
        return lambda r: True
    return _Parser(text).parse()


def header_filter(text: str | None) -> Predicate | None:
    """The predicate of ``text`` when every field it compares is a column a frame has before its
    body is decoded (``rows.HEADER_COLUMNS``: api, version, kind, client, conn, corr, frame, size,
    latency, file): then a frame it rejects need not be decoded at all. None otherwise (or
    without a filter)."""
    if not text:
        return None
    parser = _Parser(text)
    pred = parser.parse()
    if not parser.fields or any(f not in _BY_NAME or not set(_BY_NAME[f].columns) <= HEADER_COLUMNS
                                for f in parser.fields):
        return None
    return pred
