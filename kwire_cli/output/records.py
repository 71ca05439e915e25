"""One line per record that crossed the wire: `kwire pcap --format records`, as kcat prints a topic.

The records are those of Produce requests (what clients wrote) and of Fetch and ShareFetch
responses (what brokers handed out). A Produce request's records are printed when its answer
comes, with the offsets the broker gave them (the partition's BaseOffset plus each record's place
in its batches) or the partition's error; an acks=0 request's at once, offsets unknown (``-``); a
request never answered, at the end of input (or when more than ``MAX_WAITING`` are waiting, the
oldest first), offsets unknown.

``--record-format`` takes kcat's ``-f`` tokens:

    %t topic   %p partition   %o offset   %T timestamp (ms)   %k key   %K key size   %s value
    %S value size   %h headers (k=v, comma-separated)   %a API (Produce, Fetch, ShareFetch)
    %c client id   %f frame (packet number)   %e error (the partition's, or empty)
    %% a percent sign   \\n \\t \\\\ newline, tab, backslash

``--record-format json`` writes one JSON object per record instead (kcat's ``-J``): api, topic,
partition, offset (null: unknown), timestamp, key and value in the rows' forms (``{"text": ...}`` or
``{"hex": ...}``, null), headers, error, client id, file and frame.

Keys, values and headers are written by ``kwire_cli.output.forms.RecordForms`` (its KCAT style): a
key or value that is not printable UTF-8 is its bytes in hex (``0x...``); null is empty with size
-1, as kcat prints them. Every piece taken from the capture is escaped for a terminal
(``kwire_cli.render.safe.escape``): a record is one line whatever its bytes.
"""
from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from kwire_cli.errors import FilterError
from kwire_cli.render.safe import escape, json_text
from kwire_cli.spec.error_codes import error_name

from .forms import KCAT, RecordForms

JSON = "json"  # --record-format json: one JSON object per record (kcat -J)
MAX_WAITING = 10_000  # Produce requests kept for their answer; past it the oldest is printed unanswered
RECORD_APIS = {"Produce", "Fetch", "ShareFetch"}
_TOKEN = re.compile(r"%(.)|\\(.)", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}
_TOKENS = "tpoTkKsShacfe%"


def _batches_of(records: Any) -> Iterator[tuple[list[dict[str, Any]], int, bool]]:
    """(records, offsets the batch takes, is a control batch) of a records field's decoded batches;
    a legacy message is its own batch of one (a compressed wrapper: its inner messages)."""
    if not isinstance(records, dict):
        return
    for b in records.get("batches") or ():
        if "Records" in b:
            recs = b.get("Records") or []
            yield recs, int(b.get("LastOffsetDelta") or 0) + 1, bool(b.get("IsControlBatch"))
        elif b.get("Messages") is not None:
            yield b["Messages"], len(b["Messages"]), False
        elif "Key" in b or "Value" in b:
            yield [b], 1, False


class RecordLines:
    """Output rows in, record lines out (``feed`` per row, ``finish`` at the end of input)."""

    def __init__(self, template: str | None = None) -> None:
        self.json = template == JSON
        self.render: Callable[[dict[str, str]], str] = (
            _default_line if template is None or self.json else compile_template(template))
        # sizes and headers are worked out only for a format that prints them (a value's size is its
        # UTF-8 length: an encode of every value otherwise)
        self.sizes = template is not None and ("%K" in template or "%S" in template)
        self.headers = template is None or "%h" in template
        self.forms = RecordForms(KCAT)
        # (client, broker, corr) -> Produce request row
        self.waiting: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self.records = 0

    def feed(self, row: dict[str, Any], shown: bool = True) -> Iterator[str]:
        """The lines a row makes ready. ``shown``: whether --filter keeps the row; a Produce answer
        the filter drops still gives the offsets of its request's records, if that was kept."""
        name = row.get("api_name")
        if name not in RECORD_APIS or not isinstance(row.get("body"), dict):
            return
        if not shown and not (name == "Produce" and row["kind"] == "response"):
            return
        if name == "Produce":
            if row["kind"] == "request":
                if row["body"].get("Acks") == 0:
                    yield from self._produced(row, None)
                    return
                self.waiting[(row["src"], row["dst"], row["correlation_id"])] = row
                while len(self.waiting) > MAX_WAITING:
                    yield from self._produced(self.waiting.popitem(last=False)[1], None)
            else:
                req = self.waiting.pop((row["dst"], row["src"], row["correlation_id"]), None)
                if req is not None:
                    yield from self._produced(req, row)
        elif row["kind"] == "response":
            yield from self._fetched(row)

    def finish(self) -> Iterator[str]:
        while self.waiting:
            yield from self._produced(self.waiting.popitem(last=False)[1], None)

    # ---------------------------------------------------------------------------------------
    def _topic(self, row: dict[str, Any], t: dict[str, Any]) -> str:
        name = t.get("Name") or t.get("Topic")
        if name:
            return str(name)
        tid = t.get("TopicId")
        return str((row.get("topic_names") or {}).get(tid) or tid or "")

    def _line(self, row: dict[str, Any], topic: str, partition: Any, offset: Any, rec: dict[str, Any],
              error: str) -> str:
        if self.json:
            self.records += 1
            return json_text(json.dumps({
                "api": row["api_name"], "topic": topic, "partition": partition, "offset": offset,
                "timestamp": rec.get("Timestamp"), "key": self.forms.json(rec.get("Key")),
                "value": self.forms.json(rec.get("Value")), "headers": self.forms.json_headers(rec.get("Headers")),
                "error": error or None, "client_id": row.get("client_id"), "file": row.get("file"),
                "frame": row.get("frame")}, ensure_ascii=False, default=str)) + "\n"
        k, v = rec.get("Key"), rec.get("Value")
        ts = rec.get("Timestamp")
        forms = self.forms
        self.records += 1
        return self.render({
            "t": escape(topic), "p": str(partition), "o": "-" if offset is None else str(offset),
            "T": "" if ts is None else str(ts), "k": escape(forms.text(k)), "s": escape(forms.text(v)),
            "K": str(forms.size(k)) if self.sizes else "", "S": str(forms.size(v)) if self.sizes else "",
            "h": escape(forms.headers(rec.get("Headers"))) if self.headers else "", "a": row["api_name"],
            "c": escape(row.get("client_id") or ""), "f": str(row.get("frame")), "e": error})

    def _produced(self, req: dict[str, Any], resp: dict[str, Any] | None) -> Iterator[str]:
        answers: dict[tuple[str, Any], tuple[int | None, int]] = {}
        if resp is not None and isinstance(resp.get("body"), dict):
            for t in resp["body"].get("Responses") or ():
                topic = self._topic(resp, t)
                for p in t.get("PartitionResponses") or ():
                    answers[(topic, p.get("Index"))] = (p.get("BaseOffset"), p.get("ErrorCode") or 0)
        for t in req["body"].get("TopicData") or ():
            topic = self._topic(req, t)
            for p in t.get("PartitionData") or ():
                part = p.get("Index")
                base, code = answers.get((topic, part), (None, 0))
                error = error_name(code) if code else ""
                next_base = base if base is not None and base >= 0 and not code else None
                for recs, span, control in _batches_of(p.get("Records")):
                    for n, rec in enumerate(recs):
                        if control:
                            break
                        off = None
                        if next_base is not None:
                            off = next_base + (int(rec.get("OffsetDelta") or 0) if "OffsetDelta" in rec else n)
                        yield self._line(req, topic, part, off, rec, error)
                    if next_base is not None:
                        next_base += span

    def _fetched(self, row: dict[str, Any]) -> Iterator[str]:
        for t in row["body"].get("Responses") or ():
            topic = self._topic(row, t)
            for p in t.get("Partitions") or ():
                code = p.get("ErrorCode") or 0
                error = error_name(code) if code else ""
                for recs, _span, control in _batches_of(p.get("Records")):
                    if control:
                        continue
                    for rec in recs:
                        yield self._line(row, topic, p.get("PartitionIndex"), rec.get("Offset"), rec, error)


def _default_line(c: dict[str, str]) -> str:
    line = f"{c['a']}  {c['t']} [{c['p']}] @{c['o']}  ts {c['T']}  key {c['k'] or '-'}  value {c['s'] or '-'}"
    if c["h"]:
        line += f"  headers {c['h']}"
    if c["e"]:
        line += f"  error {c['e']}"
    return line + "\n"


def compile_template(template: str) -> Callable[[dict[str, str]], str]:
    """kcat's -f format: a function of the record's cells; an unknown token is a FilterError
    (a usage error). A format without a final newline gets none (kcat's behaviour)."""
    parts: list[str | tuple[str]] = []
    pos = 0
    for m in _TOKEN.finditer(template):
        if m.start() > pos:
            parts.append(template[pos:m.start()])
        tok, esc = m.group(1), m.group(2)
        if tok is not None:
            if tok not in _TOKENS:
                raise FilterError(f"--record-format: %{tok} at position {m.start()} is not a token "
                                  "(%t %p %o %T %k %K %s %S %h %a %c %f %e %%)")
            parts.append("%" if tok == "%" else (tok,))
        else:
            parts.append(_ESCAPES.get(esc, "\\" + esc))
        pos = m.end()
    parts.append(template[pos:])

    def render(cells: dict[str, str]) -> str:
        return "".join(p if isinstance(p, str) else cells[p[0]] for p in parts)
    return render
