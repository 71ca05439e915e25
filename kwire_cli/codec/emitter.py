"""What the code generator's parts share: the message and version being compiled, the generated
code's lines and globals (short names for the runtime helpers), the structs met so far and the
names handed out. The decoder's and the encoder's emitters (emit_read, emit_write) build on it;
compiler._Gen drives both."""
from __future__ import annotations

import struct
from typing import Any

from kwire_cli import wire
from kwire_cli.codec import runtime as R
from kwire_cli.errors import DecodeError, EncodeError, KwireError
from kwire_cli.spec.model import FieldSpec, MessageSpec, StructSpec


def struct_of(f: FieldSpec | None) -> StructSpec:
    """The struct of the struct (or array-of-structs) field being generated."""
    if f is None:
        raise AssertionError("a struct type without its field")
    return f.struct_spec


class Emitter:
    def __init__(self, spec: MessageSpec, version: int, records_mode: str, root_tags: bool = True):
        self.spec = spec
        self.v = version
        self.flexible = spec.flexible(version)
        self.records_mode = records_mode
        self.root_tags = root_tags  # False: the root struct's decoder stops after its last field
        self.lines: list[str] = []
        # the generated code's globals: short local names for the runtime helpers
        self.ns: dict[str, Any] = {
            "_DE": DecodeError, "_EE": EncodeError, "_short": R.short, "_short_group": R.short_group,
            "_neg_len": R.neg_len, "_not_nullable": R.not_nullable, "_bad_utf8": R.bad_utf8,
            "_big_array": R.big_array, "_tag_size": R.tag_size, "_tag_order": R.tag_order, "_ruv": wire.read_uvarint,
            "_wuv": wire.write_uvarint, "_uuid_t": R.uuid_text, "_uuid_b": R.uuid_bytes,
            "_hexb": R.hex_bytes, "_strb": R.str_bytes, "_recb": R.records_bytes, "_list": R.as_list,
            "_badkeys": R.bad_keys, "_not_dict": R.not_dict, "_pack_err": R.pack_error,
            "_badbool": R.bad_bool, "_conv_float": R.conv_float, "_unknown_tags": R.collect_unknown_tags,
            "_write_tags": R.write_tags, "_unpack_from": struct.unpack_from, "_pack": struct.pack,
            "_serr": struct.error, "_I16": struct.Struct(">h").unpack_from,
            "_I32": struct.Struct(">i").unpack_from, "_P16": struct.Struct(">h").pack,
            "_P32": struct.Struct(">i").pack, "_KE": KwireError, "_M": R.MISSING, "_too_deep": R.too_deep,
            "_MAXI": R.MAX_ITEMS, "_too_many": R.too_many,
            "_rec": R.records_decoder(records_mode),
        }
        self.struct_ids: dict[int, int] = {}
        self.structs: list[StructSpec] = []  # by struct id
        self.pending: list[tuple[StructSpec, int]] = []
        self.counter = 0
        self.tag_defaults: list[tuple[str, str, Any]] = []
        self.in_tags = 0  # > 0 while generating a tag section: no inlining there
        self.tag_vars: dict[int, tuple[str, str]] = {}
        self.shared_defaults: set[int] = set()  # structs whose default decoders share (decoded_default)

    # -- helpers
    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any, prefix: str = "_c") -> str:
        n = self.name(prefix)
        self.ns[n] = value
        return n

    def struct_id(self, s: StructSpec) -> int:
        key = id(s)
        if key not in self.struct_ids:
            self.struct_ids[key] = len(self.struct_ids)
            self.structs.append(s)
            self.pending.append((s, self.struct_ids[key]))
        return self.struct_ids[key]

    def tag_names(self, f: FieldSpec) -> tuple[str, str]:
        """(encoder function, default-bytes constant) of a tagged field, made once per field."""
        key = id(f)
        if key not in self.tag_vars:
            self.tag_vars[key] = (self.name("enctag"), self.name("_tagdef"))
        return self.tag_vars[key]

    def compact(self, f: FieldSpec) -> bool:
        return f.compact_in(self.v, self.flexible)

    def default_expr(self, f: FieldSpec) -> str:
        d = f.default
        if f.type.kind == "struct":
            return "None" if d is None else f"dflt{self.struct_id(f.struct_spec)}()"
        if isinstance(d, list):
            return "[]"
        if isinstance(d, float):
            return self.const(d)
        return repr(d)

    def decoded_default(self, f: FieldSpec) -> str:
        """What a decoder puts in the tree for a tagged field absent from the bytes: the default;
        for a struct, one dict made once per compiled plan and shared by every place it stands in
        every tree decoded (a Fetch answer's partitions hold three each: 400,000 partitions would
        otherwise make 1.2 million dicts, ~220 MB). Decoded trees are read, never changed in place."""
        expr = self.default_expr(f)
        if f.type.kind != "struct" or f.default is None:
            return expr
        sid = self.struct_id(f.struct_spec)
        self.shared_defaults.add(sid)
        return f"_sd{sid}"

    def make_shared_defaults(self) -> None:
        """The dicts ``decoded_default`` names (after the generated code ran: its dflt functions make them)."""
        for sid in self.shared_defaults:
            self.ns[f"_sd{sid}"] = self.ns[f"dflt{sid}"]()

    def emit(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)
