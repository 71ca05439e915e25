"""The union of two releases' message specs: every version either one defines, each version laid out
as the release that still has it lays it out.

Kafka's newer folder wins for every version it defines; the versions only the older folder defines
(those a later release removed: Produce 0-2, LeaderAndIsr, ShareFetch's early-access v0, ...) keep
the older folder's layout. A field's `versions` and `nullableVersions` become the union of the
versions each folder gives it, so a field the newer folder dropped ("0-2" in the older file, absent
in the newer) stays for the removed versions only.

kwire's own facts are added at the top of a merged spec (Kafka's format has no word for them):
`removedVersions` and `removedIn` (which release stopped accepting them, as the newer folder's
comments state) and `unstableVersions` (removed versions that the older folder marked unstable).
`check_union` verifies the result version by version against both folders.
"""
from __future__ import annotations

import re
from typing import Any

from kwire_cli.spec.model import FieldSpec, MessageSpec, build_message_spec
from kwire_cli.spec.versions import NONE, OPEN, Versions

Raw = dict[str, Any]

# files renamed by the newer release: old file stem -> new file stem (the API keeps its key)
RENAMED = {"ListClientMetricsResourcesRequest": "ListConfigResourcesRequest",
           "ListClientMetricsResourcesResponse": "ListConfigResourcesResponse"}

_REMOVED = re.compile(r"(?:This request was|Versions? (\d+)(?:-(\d+))? (?:was|were)\b[^\n]*?) removed in "
                      r"Apache Kafka (\d+\.\d+)")


def removed_in(text_with_comments: str) -> str | None:
    """The release the newer folder says removed versions (from its comments: a fact, not copied)."""
    m = _REMOVED.search(text_with_comments)
    return m.group(3) if m else None


def _range(vs: set[int], open_top: bool) -> str:
    """A set of versions as a spec range: N, N-M or N+ (ValueError when not contiguous)."""
    if not vs:
        return "none"
    lo, hi = min(vs), max(vs)
    if len(vs) != hi - lo + 1:
        raise ValueError(f"versions {sorted(vs)} are not contiguous")
    if open_top:
        return f"{lo}+"
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _members(text: Any, within: Versions) -> set[int]:
    v = Versions.parse(text if text is not None else "none")
    return {x for x in range(within.lo, within.hi + 1) if x in v}


def _field_range(f: Raw, key: str) -> Any:
    if key == "versions":
        return f.get("versions", f.get("taggedVersions"))
    return f.get(key, "none")


def _union_versions(new: Raw | None, old: Raw | None, key: str, new_valid: Versions, removed: Versions) -> str | None:
    """A field's `key` range in the union: the newer folder's within its valid versions, the older
    folder's within the removed ones (None: the field has no such versions)."""
    ns = _members(_field_range(new, key), new_valid) if new is not None else set()
    os_ = _members(_field_range(old, key), removed) if old is not None else set()
    vs = ns | os_
    if not vs:
        return "none" if key == "versions" else None
    open_top = new is not None and new_valid.hi in ns and Versions.parse(_field_range(new, key)).open_ended
    return _range(vs, open_top)


def merge_fields(new: list[Raw], old: list[Raw], new_valid: Versions, removed: Versions) -> list[Raw]:
    """The union of two field lists: the newer order, an older-only field placed after the field
    before it in the older order."""
    old_by = {f["name"]: f for f in old}
    new_names = {f["name"] for f in new}
    out: list[Raw] = []
    for f in new:
        out.append(_merge_field(f, old_by.get(f["name"]), new_valid, removed))
    for i, f in enumerate(old):
        if f["name"] in new_names:
            continue
        if not _members(f.get("versions", f.get("taggedVersions")), removed):
            continue  # not in any removed version: the newer folder's layout covers the rest
        merged = _merge_field(None, f, new_valid, removed)
        # after the nearest earlier field of the older order that the union has
        at = 0
        for prev in reversed(old[:i]):
            idx = next((k for k, g in enumerate(out) if g["name"] == prev["name"]), None)
            if idx is not None:
                at = idx + 1
                break
        out.insert(at, merged)
    return [f for f in out if f.get("versions") != "none"]


def _merge_field(new: Raw | None, old: Raw | None, new_valid: Versions, removed: Versions) -> Raw:
    base = dict(new if new is not None else old)  # type: ignore[arg-type]
    if new is not None and old is not None and new["type"] != old["type"] and _members(old.get("versions"), removed):
        raise ValueError(f"field {new['name']} changed type {old['type']} -> {new['type']}")
    tagged_only = "versions" not in base
    vs = _union_versions(new, old, "versions", new_valid, removed)
    if not tagged_only:
        base["versions"] = vs
    nv = _union_versions(new, old, "nullableVersions", new_valid, removed)
    if nv is None:
        base.pop("nullableVersions", None)
    else:
        base["nullableVersions"] = nv
    if "fields" in base:
        base["fields"] = merge_fields((new or {}).get("fields", []), (old or {}).get("fields", []), new_valid, removed)
    return base


def merge_spec(new: Raw | None, old: Raw | None, removed_release: str | None) -> Raw:
    """One spec of the union (either side may be missing)."""
    if old is None:
        assert new is not None
        return new
    old_valid = Versions.parse(old["validVersions"])
    new_valid = Versions.parse(new["validVersions"]) if new is not None else NONE
    removed_set = {v for v in range(old_valid.lo, old_valid.hi + 1) if v not in new_valid}
    if not removed_set:
        assert new is not None
        return new
    removed = Versions.parse(_range(removed_set, False))
    if not new_valid.empty and removed.hi >= new_valid.lo:
        raise ValueError(f"{old['name']}: removed versions {removed} are not below {new_valid}")
    if new is None or new_valid.empty:
        out = {k: v for k, v in old.items() if k not in ("latestVersionUnstable", "deprecatedVersions")}
        if new is not None:
            out["name"] = new["name"]
        valid = old_valid
    else:
        out = dict(new)
        valid = Versions(removed.lo, new_valid.hi)
        out["validVersions"] = str(valid)
        if Versions.parse(new.get("flexibleVersions", "none")).empty:
            out["flexibleVersions"] = old.get("flexibleVersions", "none")
        out["fields"] = merge_fields(new.get("fields", []), old.get("fields", []), new_valid, removed)
        structs_old = {s["name"]: s for s in old.get("commonStructs", [])}
        structs = []
        for s in new.get("commonStructs", []):
            m = dict(s)
            older = structs_old.pop(s["name"], {}).get("fields", [])
            m["fields"] = merge_fields(s["fields"], older, new_valid, removed)
            structs.append(m)
        for s in old.get("commonStructs", []):
            if s["name"] in structs_old:
                m = dict(s)
                m["fields"] = merge_fields([], s["fields"], new_valid, removed)
                structs.append(m)
        if structs:
            out["commonStructs"] = structs
    dep = Versions.parse(old.get("deprecatedVersions", "none")).intersect(removed)
    if not dep.empty:
        out["deprecatedVersions"] = str(dep)
    else:
        out.pop("deprecatedVersions", None)
    out["removedVersions"] = str(removed)
    if removed_release:
        out["removedIn"] = removed_release
    if old.get("latestVersionUnstable") and old_valid.hi in removed:
        out["unstableVersions"] = str(old_valid.hi)
    return out


def layout(fields: list[FieldSpec], v: int, hints: bool = True) -> list[tuple[Any, ...]]:
    """What a version of a message is on the wire: its fields, in order, with everything that
    decides their bytes and values (the same view the reference test compares); `hints` adds the
    generator's hints (mapKey, entityType), which are one per field, not per version."""
    out = []
    for f in fields:
        if v not in f.versions:
            continue
        out.append((f.name, str(f.type), f.nullable_in(v), f.tag if f.tagged_in(v) else None,
                    f.flexible_versions is not None and v in f.flexible_versions,
                    repr(f.default)) + ((f.map_key, f.entity_type) if hints else ()) +
                   (tuple(layout(f.struct.fields, v, hints)) if f.struct else (),))
    return out


def check_union(merged: Raw, new: Raw | None, old: Raw | None) -> None:
    """Every version of the union lays out as the folder it comes from (AssertionError if not)."""
    m = build_message_spec(merged, merged["name"])
    sources: list[tuple[MessageSpec, Versions]] = []
    nspec = build_message_spec(new, new["name"]) if new is not None else None
    if nspec is not None:
        sources.append((nspec, nspec.valid_versions))
    if old is not None:
        ospec = build_message_spec(old, old["name"])
        taken = nspec.valid_versions if nspec is not None else NONE
        sources.append((ospec, Versions(ospec.valid_versions.lo, min(ospec.valid_versions.hi,
                                                                      OPEN if taken.empty else taken.lo - 1))))
    for i, (spec, versions) in enumerate(sources):
        hints = i == 0 and nspec is not None  # a removed version's hints are the newer folder's
        for v in range(versions.lo, versions.hi + 1):
            if v not in spec.valid_versions:
                continue
            assert v in m.valid_versions, f"{merged['name']} v{v} missing from the union"
            assert m.flexible(v) == spec.flexible(v), f"{merged['name']} v{v}: flexible differs"
            assert layout(m.fields, v, hints) == layout(spec.fields, v, hints), \
                f"{merged['name']} v{v}: layout differs"
