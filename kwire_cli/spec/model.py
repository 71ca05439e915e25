"""The validated model of a Kafka message spec.

A spec file becomes a `MessageSpec` whose fields are `FieldSpec`s with parsed version ranges,
resolved types (nested structs and `commonStructs` resolved by name) and parsed defaults.
The loader enforces the rules Kafka's own generator enforces, and every error names the file
and the field.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from kwire_cli.errors import SpecError
from kwire_cli.spec.versions import NONE, Versions
from kwire_cli.wire import uuid_from_text, uuid_to_text

PRIMITIVE_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
                   "int64": 8, "float64": 8, "uuid": 16}
INT_RANGES = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
              "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1)}
VARIABLE = ("string", "bytes", "records")
NULLABLE_KINDS = ("string", "bytes", "records", "array", "struct")
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID as text
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_KNOWN_TYPES = ("message", "request", "response", "header", "data", "metadata", "coordinator-key",
                "coordinator-value")


@dataclass(frozen=True)
class FieldType:
    kind: str                      # a primitive name, "array" or "struct"
    element: FieldType | None = None   # for arrays
    struct_name: str | None = None       # for structs and arrays of structs

    @property
    def is_struct(self) -> bool:
        return self.kind == "struct"

    @property
    def item(self) -> FieldType:
        """The element type of an array type (ValueError for any other type)."""
        if self.element is None:
            raise ValueError(f"{self} is not an array type")
        return self.element

    def __str__(self) -> str:
        if self.kind == "array":
            return "[]" + str(self.element)
        if self.kind == "struct":
            return self.struct_name or "struct"
        return self.kind


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec]
    versions: Versions | None = None  # common structs may carry their own


@dataclass
class FieldSpec:
    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions = NONE
    flexible_versions: Versions | None = None   # field-level override (strings/bytes)
    tag: int | None = None
    tagged_versions: Versions = NONE
    default: Any = None              # parsed default, in value-tree form
    default_text: str | None = None  # as written in the spec
    ignorable: bool = False
    map_key: bool = False
    entity_type: str | None = None
    zero_copy: bool = False
    struct: StructSpec | None = None  # for struct and array-of-struct types
    about: str | None = None  # the spec's description, when its folder carries one (a Kafka checkout's)

    @property
    def struct_spec(self) -> StructSpec:
        """The struct of a struct or array-of-structs field (ValueError for any other field)."""
        if self.struct is None:
            raise ValueError(f"{self.name} is not a struct field")
        return self.struct

    @property
    def tag_number(self) -> int:
        """The tag of a tagged field (ValueError for a field without one)."""
        if self.tag is None:
            raise ValueError(f"{self.name} has no tag")
        return self.tag

    def tagged_in(self, v: int) -> bool:
        return self.tag is not None and v in self.tagged_versions

    def nullable_in(self, v: int) -> bool:
        return v in self.nullable_versions

    def compact_in(self, v: int, flexible: bool) -> bool:
        """Whether the field is written in its compact form (varint lengths) at version `v`:
        the field's own flexibleVersions decide when it has them, else whether the message is
        flexible at `v` (`flexible`, i.e. `MessageSpec.flexible(v)`)."""
        if self.flexible_versions is not None:
            return v in self.flexible_versions
        return flexible


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    struct: StructSpec
    common_structs: dict[str, StructSpec] = dc_field(default_factory=dict)
    source: str = "<spec>"
    latest_version_unstable: bool = False
    deprecated_versions: Versions = NONE
    # kwire's facts about a union of releases (scripts/spec_union.py): versions a release removed,
    # which release (e.g. "4.0"), removed versions that were unstable, the message's former names
    removed_versions: Versions = NONE
    removed_in: str | None = None
    unstable_versions: Versions = NONE
    former_names: tuple[str, ...] = ()

    @property
    def fields(self) -> list[FieldSpec]:
        return self.struct.fields

    def unstable(self, v: int) -> bool:
        """Whether version `v` is one Kafka marks unstable (not enabled by default), now or when it
        was removed."""
        return v in self.unstable_versions or (self.latest_version_unstable and v == self.valid_versions.hi)

    def unstable_list(self) -> list[int]:
        """The versions `unstable` says are unstable."""
        return [v for v in range(self.valid_versions.lo, self.valid_versions.hi + 1) if self.unstable(v)]

    def lifecycle(self) -> list[str]:
        """What `kwire list` and `describe` say of the versions: ["v0-2 removed in 4.0", "v6 unstable",
        "formerly ListClientMetricsResources"] (empty for most APIs)."""
        out = []
        unstable = self.unstable_list()
        if not self.removed_versions.empty:
            gone = [v for v in unstable if v in self.removed_versions]
            out.append(f"v{self.removed_versions} removed in {self.removed_in or 'a later release'}"
                       + (f" (v{'/'.join(map(str, gone))} unstable)" if gone else ""))
        for v in unstable:
            if v not in self.removed_versions:
                out.append(f"v{v} unstable")
        out.extend(f"formerly {api_name_of(n, self.type)}" for n in self.former_names)
        return out

    def version_note(self, v: int) -> str | None:
        """What a reader should know about version `v`: "removed in 4.0", "unstable", or None."""
        notes = []
        if v in self.removed_versions:
            notes.append(f"removed in {self.removed_in}" if self.removed_in else "removed")
        if self.unstable(v):
            notes.append("unstable")
        return ", ".join(notes) or None

    @property
    def api_name(self) -> str:
        return api_name_of(self.name, self.type)

    def flexible(self, v: int) -> bool:
        return v in self.flexible_versions


# --------------------------------------------------------------------------- parsing

def parse_type(text: Any, where: str) -> FieldType:
    if not isinstance(text, str) or not text:
        raise SpecError(f"{where}: missing type")
    if text.startswith("[]"):
        return FieldType("array", element=parse_type(text[2:], where))
    if text in PRIMITIVE_SIZES or text in VARIABLE:
        return FieldType(text)
    if _NAME.match(text) and text[0].isupper():
        return FieldType("struct", struct_name=text)
    raise SpecError(f"{where}: unknown type {text!r}")


def _parse_int(text: str, kind: str, where: str) -> int:
    try:
        v = int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
    except ValueError:
        raise SpecError(f"{where}: default {text!r} is not a valid {kind}") from None
    lo, hi = INT_RANGES[kind]
    if not lo <= v <= hi:
        raise SpecError(f"{where}: default {text!r} is out of range for {kind}")
    return v


def parse_default(f: FieldSpec, where: str) -> Any:
    """The default as a value-tree value (what decode shows and encode assumes when absent)."""
    text = f.default_text
    kind = f.type.kind
    if text == "null":
        if f.nullable_versions.empty:
            raise SpecError(f"{where}: default null on a field that is never nullable")
        if not f.versions.issubset(f.nullable_versions) and not f.tagged_versions.issubset(f.nullable_versions):
            raise SpecError(f"{where}: default null but the field is not nullable in all its versions")
        return None
    if kind in INT_RANGES:
        return 0 if text in (None, "") else _parse_int(text, kind, where)
    if kind == "bool":
        if text in (None, "", "false"):
            return False
        if text == "true":
            return True
        raise SpecError(f"{where}: default {text!r} is not true or false")
    if kind == "float64":
        try:
            return 0.0 if text in (None, "") else float(text)
        except ValueError:
            raise SpecError(f"{where}: default {text!r} is not a float64") from None
    if kind == "string":
        return "" if text is None else text
    if kind == "uuid":
        if text in (None, ""):
            return ZERO_UUID
        try:
            return uuid_to_text(uuid_from_text(text))
        except ValueError:
            raise SpecError(f"{where}: default {text!r} is not a uuid") from None
    if kind in ("bytes", "records"):
        if text not in (None, ""):
            raise SpecError(f"{where}: a {kind} field can only default to null or empty")
        return "" if kind == "bytes" else None
    if kind == "array":
        if text not in (None, ""):
            raise SpecError(f"{where}: an array can only default to null or empty")
        return []
    if kind == "struct":
        if text not in (None, ""):
            raise SpecError(f"{where}: a struct can only default to null")
        return {}  # filled from the struct's own defaults by the codec
    raise SpecError(f"{where}: cannot parse a default for {kind}")


class _Builder:
    def __init__(self, raw: dict[str, Any], source: str):
        self.raw = raw
        self.source = source
        self.common_raw: dict[str, dict[str, Any]] = {}
        self.common: dict[str, StructSpec] = {}
        self.inline_names: set[str] = set()

    def build(self) -> MessageSpec:
        raw, src = self.raw, self.source
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise SpecError(f"{src}: missing or invalid message name")
        mtype = raw.get("type")
        if mtype not in _KNOWN_TYPES:
            raise SpecError(f"{src}: {name}: unknown message type {mtype!r}")
        api_key = raw.get("apiKey")
        if mtype in ("request", "response") and (not isinstance(api_key, int) or api_key < 0):
            raise SpecError(f"{src}: {name}: a {mtype} needs a non-negative integer apiKey")
        if "validVersions" not in raw:
            raise SpecError(f"{src}: {name}: missing validVersions")
        valid = Versions.parse(raw["validVersions"], f"{src}: {name}: validVersions")
        flex = Versions.parse(raw.get("flexibleVersions", "none"), f"{src}: {name}: flexibleVersions")
        deprecated = Versions.parse(raw.get("deprecatedVersions", "none"), f"{src}: {name}: deprecatedVersions")
        removed = Versions.parse(raw.get("removedVersions", "none"), f"{src}: {name}: removedVersions")
        unstable = Versions.parse(raw.get("unstableVersions", "none"), f"{src}: {name}: unstableVersions")
        removed_in = raw.get("removedIn")
        if removed_in is not None and not isinstance(removed_in, str):
            raise SpecError(f"{src}: {name}: removedIn must be a release as text (\"4.0\")")
        former = raw.get("formerNames", [])
        if not isinstance(former, list) or not all(isinstance(n, str) and _NAME.match(n) for n in former):
            raise SpecError(f"{src}: {name}: formerNames must be a list of message names")
        for s in raw.get("commonStructs", []) or []:
            sname = s.get("name")
            if not isinstance(sname, str) or not _NAME.match(sname):
                raise SpecError(f"{src}: {name}: commonStructs entry without a valid name")
            if sname in self.common_raw:
                raise SpecError(f"{src}: {name}: common struct {sname} defined twice")
            self.common_raw[sname] = s
        for sname, s in self.common_raw.items():
            versions = Versions.parse(s["versions"], f"{src}: {sname}: versions") if "versions" in s else None
            self.common[sname] = StructSpec(sname, [], versions)
        for sname, s in self.common_raw.items():
            self.common[sname].fields = self.fields(s.get("fields"), f"{src}: {sname}", flex)
        if not isinstance(raw.get("fields", []), list):
            raise SpecError(f"{src}: {name}: fields must be a list")
        root = StructSpec(name, self.fields(raw.get("fields", []), f"{src}: {name}", flex), valid)
        return MessageSpec(name=name, type=mtype, api_key=api_key, valid_versions=valid,
                           flexible_versions=flex, struct=root, common_structs=self.common,
                           source=src, latest_version_unstable=bool(raw.get("latestVersionUnstable")),
                           deprecated_versions=deprecated, removed_versions=removed, removed_in=removed_in,
                           unstable_versions=unstable, former_names=tuple(former))

    def fields(self, raws: Any, where: str, flex: Versions) -> list[FieldSpec]:
        if raws is None:
            return []
        if not isinstance(raws, list):
            raise SpecError(f"{where}: fields must be a list")
        out: list[FieldSpec] = []
        names: set[str] = set()
        tags: dict[int, str] = {}
        for r in raws:
            f = self.field(r, where, flex)
            if f.name in names:
                raise SpecError(f"{where}.{f.name}: duplicate field name")
            names.add(f.name)
            if f.tag is not None:
                if f.tag in tags:
                    raise SpecError(f"{where}.{f.name}: tag {f.tag} is already used by {tags[f.tag]}")
                tags[f.tag] = f.name
            out.append(f)
        return out

    def field(self, r: Any, where: str, flex: Versions) -> FieldSpec:
        if not isinstance(r, dict):
            raise SpecError(f"{where}: a field must be a JSON object")
        name = r.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise SpecError(f"{where}: invalid field name {name!r}")
        w = f"{where}.{name}"
        ftype = parse_type(r.get("type"), w)
        if "versions" not in r and "taggedVersions" not in r:
            raise SpecError(f"{w}: missing versions")
        # a tagged field may leave out its versions: they are its taggedVersions (as in Kafka's
        # generator; TransactionLogValue's PreviousProducerId does)
        versions = Versions.parse(r.get("versions", r.get("taggedVersions")), f"{w}: versions")
        nullable = Versions.parse(r.get("nullableVersions", "none"), f"{w}: nullableVersions")
        tagged = Versions.parse(r.get("taggedVersions", "none"), f"{w}: taggedVersions")
        fflex = None
        if "flexibleVersions" in r:
            if ftype.kind not in ("string", "bytes"):
                raise SpecError(f"{w}: flexibleVersions can only be set on string or bytes fields")
            fflex = Versions.parse(r["flexibleVersions"], f"{w}: flexibleVersions")
        if not nullable.empty and ftype.kind not in NULLABLE_KINDS:
            raise SpecError(f"{w}: type {ftype} cannot be nullable (nullableVersions {nullable})")
        tag = r.get("tag")
        if isinstance(tag, str) and tag.strip().isdigit():
            tag = int(tag)  # some upstream specs write the tag as a string
        if tag is not None:
            if isinstance(tag, bool) or not isinstance(tag, int) or tag < 0:
                raise SpecError(f"{w}: tag must be a non-negative integer, got {tag!r}")
            if tagged.empty:
                raise SpecError(f"{w}: has a tag but no taggedVersions")
            if not tagged.open_ended:
                raise SpecError(f"{w}: taggedVersions {tagged} must be open-ended (N+)")
            if versions.intersect(tagged) != tagged:
                raise SpecError(f"{w}: taggedVersions {tagged} are not within versions {versions}")
            if not tagged.issubset(flex):
                raise SpecError(f"{w}: taggedVersions {tagged} are not within the flexible versions {flex}")
        elif not tagged.empty:
            raise SpecError(f"{w}: has taggedVersions but no tag")
        flags: dict[str, bool] = {}
        for key in ("ignorable", "mapKey", "zeroCopy"):
            flag = r.get(key, False)
            if flag in ("true", "false"):
                flag = flag == "true"  # as text (Kafka's streams SubscriptionInfoData writes "false")
            if not isinstance(flag, bool):
                raise SpecError(f"{w}: {key} must be true or false")
            flags[key] = flag
        default_text = r.get("default")
        if default_text is None and "default" in r:
            default_text = "null"  # a JSON null literal (ConsumerGroupMemberMetadataValue writes one)
        if default_text is not None and not isinstance(default_text, (str, int, bool)):
            raise SpecError(f"{w}: default must be a string")
        if isinstance(default_text, bool):
            default_text = "true" if default_text else "false"
        elif isinstance(default_text, int):
            default_text = str(default_text)
        f = FieldSpec(name=name, type=ftype, versions=versions, nullable_versions=nullable,
                      flexible_versions=fflex, tag=tag, tagged_versions=tagged,
                      default_text=default_text, ignorable=flags["ignorable"],
                      map_key=flags["mapKey"], entity_type=r.get("entityType"),
                      zero_copy=flags["zeroCopy"],
                      about=r["about"] if isinstance(r.get("about"), str) and r["about"].strip() else None)
        f.default = parse_default(f, w)
        element = ftype.element
        sname = ftype.struct_name if ftype.is_struct else (
            element.struct_name if element is not None and element.is_struct else None)
        if element is not None and element.kind == "array":
            raise SpecError(f"{w}: arrays of arrays are not supported by the message format")
        if sname is not None:
            sub = r.get("fields")
            if sub is not None:
                if sname in self.common:
                    raise SpecError(f"{w}: struct {sname} is defined inline and in commonStructs")
                if sname in self.inline_names:
                    raise SpecError(f"{w}: struct {sname} is defined twice")
                self.inline_names.add(sname)
                f.struct = StructSpec(sname, self.fields(sub, w, flex))
            elif sname in self.common:
                f.struct = self.common[sname]
            else:
                raise SpecError(f"{w}: struct type {sname} has no fields and is not a common struct")
        elif r.get("fields"):
            raise SpecError(f"{w}: type {ftype} cannot have fields")
        if f.map_key and f.type.kind in ("array", "struct"):
            raise SpecError(f"{w}: a mapKey must be a scalar field")
        return f


def build_message_spec(raw: dict[str, Any], source: str = "<spec>") -> MessageSpec:
    return _Builder(raw, source).build()


def api_name_of(name: str, kind: str) -> str:
    """The API name of a request or response spec's name (Metadata for MetadataRequest)."""
    for suffix in ("Request", "Response"):
        if kind in ("request", "response") and name.endswith(suffix):
            return name[: -len(suffix)]
    return name
