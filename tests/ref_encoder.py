"""A test-only encoder of Kafka messages, written from the message-spec rules, sharing no code with
kwire's codec or spec model: it reads a spec file's JSON (Kafka's own, comments and all, or kwire's)
and writes a frame of one version with a value in every field, tagged fields included.

The rules (Kafka's MessageDataGenerator): a version is in a range "N", "N-M", "N+" or "none";
fields are written in order when the version is in their `versions`; in a flexible version strings,
bytes, records and arrays are compact (unsigned-varint length + 1, 0 for null) unless a string or
bytes field's own `flexibleVersions` says otherwise, else int16 (strings) or int32 (bytes, records,
arrays) lengths with -1 for null; a nullable struct starts with an int8 (-1 null, 1 present); a
flexible struct ends with its tagged fields, sorted by tag, each as tag, size and value.
"""
from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

INTS = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "int64": ">q"}


def read_spec(path: Path) -> dict[str, Any]:
    """A spec file as JSON, its // and /* */ comments outside strings left out."""
    text, out, i, in_str = path.read_text(encoding="utf-8"), [], 0, False
    while i < len(text):
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        else:
            out.append(c)
        i += 1
    return json.loads("".join(out))


def in_range(text: Any, v: int) -> bool:
    s = str(text).strip() if text is not None else "none"
    if s == "none":
        return False
    if s.endswith("+"):
        return v >= int(s[:-1])
    if "-" in s:
        lo, hi = s.split("-")
        return int(lo) <= v <= int(hi)
    return v == int(s)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Sample:
    """Builds a value for every field of a spec at one version (none at its default) and encodes it."""

    def __init__(self, spec: dict[str, Any], version: int):
        self.v = version
        self.flexible = in_range(spec.get("flexibleVersions"), version)
        self.common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
        self.n = 0
        self.fields = spec.get("fields", [])

    def _next(self) -> int:
        self.n += 1
        return self.n

    def present(self, f: dict[str, Any]) -> bool:
        return in_range(f.get("versions", f.get("taggedVersions")), self.v)

    def tagged(self, f: dict[str, Any]) -> bool:
        return "tag" in f and in_range(f.get("taggedVersions"), self.v)

    def sub_fields(self, f: dict[str, Any]) -> list[dict[str, Any]]:
        if "fields" in f:
            return f["fields"]
        return self.common[f["type"].removeprefix("[]")]

    # ------------------------------------------------------------------ values
    def value(self, f: dict[str, Any]) -> Any:
        t = f["type"]
        if t.startswith("[]"):
            inner = t[2:]
            if inner in INTS or inner in ("bool", "float64", "string", "uuid", "bytes"):
                return [self.scalar(inner, None) for _ in range(2)]
            return [self.struct_value(self.sub_fields(f)) for _ in range(2)]
        if t in INTS or t in ("bool", "float64", "string", "uuid", "bytes", "records"):
            return self.scalar(t, f.get("default"))
        return self.struct_value(self.sub_fields(f))

    def scalar(self, t: str, default: Any) -> Any:
        n = self._next()
        if t in INTS:
            value = 1 + n % 120 if t == "int8" else 1000 + n
            return value if str(value) != str(default) else value + 1
        if t == "bool":
            return str(default).lower() != "true"
        if t == "float64":
            return n + 0.5
        if t == "string":
            return f"s{n}-é"
        if t == "uuid":
            return base64.urlsafe_b64encode(bytes([n % 251 + 1] * 16)).decode().rstrip("=")
        return bytes([n % 256, 0xAB, 0xCD]).hex()  # bytes and records, as hex

    def struct_value(self, fields: list[dict[str, Any]]) -> dict[str, Any]:
        return {f["name"]: self.value(f) for f in fields if self.present(f)}

    def message(self) -> dict[str, Any]:
        return self.struct_value(self.fields)

    # ------------------------------------------------------------------ bytes
    def compact(self, f: dict[str, Any] | None) -> bool:
        if f is not None and "flexibleVersions" in f:
            return in_range(f["flexibleVersions"], self.v)
        return self.flexible

    def encode_struct(self, fields: list[dict[str, Any]], value: dict[str, Any]) -> bytes:
        out = bytearray()
        tagged = []
        for f in fields:
            if not self.present(f):
                continue
            if self.tagged(f):
                tagged.append((int(f["tag"]), self.encode_field(f, value[f["name"]])))
                continue
            out += self.encode_field(f, value[f["name"]])
        if self.flexible:
            out += uvarint(len(tagged))
            for tag, data in sorted(tagged):
                out += uvarint(tag) + uvarint(len(data)) + data
        return bytes(out)

    def encode_field(self, f: dict[str, Any], value: Any) -> bytes:
        t = f["type"]
        if t.startswith("[]"):
            inner = t[2:]
            out = bytearray(uvarint(len(value) + 1) if self.compact(None) else struct.pack(">i", len(value)))
            for item in value:
                if inner in INTS or inner in ("bool", "float64", "string", "uuid", "bytes"):
                    out += self.encode_scalar(inner, item, None)
                else:
                    out += self.encode_struct(self.sub_fields(f), item)
            return bytes(out)
        if t in INTS or t in ("bool", "float64", "string", "uuid", "bytes", "records"):
            return self.encode_scalar(t, value, f)
        data = self.encode_struct(self.sub_fields(f), value)
        if in_range(f.get("nullableVersions"), self.v):
            return struct.pack(">b", 1) + data
        return data

    def encode_scalar(self, t: str, value: Any, f: dict[str, Any] | None) -> bytes:
        if t in INTS:
            return struct.pack(INTS[t], value)
        if t == "bool":
            return b"\x01" if value else b"\x00"
        if t == "float64":
            return struct.pack(">d", value)
        if t == "uuid":
            return base64.urlsafe_b64decode(value + "==")
        data = value.encode("utf-8") if t == "string" else bytes.fromhex(value)
        if self.compact(f):
            return uvarint(len(data) + 1) + data
        return struct.pack(">h" if t == "string" else ">i", len(data)) + data


def request_frame(spec: dict[str, Any], version: int, body: dict[str, Any], corr: int, client: str) -> bytes:
    s = Sample(spec, version)
    cid = client.encode("utf-8")
    header = struct.pack(">hhih", spec["apiKey"], version, corr, len(cid)) + cid
    if s.flexible:
        header += uvarint(0)  # request header v2: no tagged fields
    payload = header + s.encode_struct(s.fields, body)
    return struct.pack(">i", len(payload)) + payload


def response_frame(spec: dict[str, Any], version: int, body: dict[str, Any], corr: int) -> bytes:
    s = Sample(spec, version)
    header = struct.pack(">i", corr)
    if s.flexible and spec["apiKey"] != 18:
        header += uvarint(0)  # response header v1
    payload = header + s.encode_struct(s.fields, body)
    return struct.pack(">i", len(payload)) + payload
