"""Protobuf values: the registry's .proto text compiled by protoc, the message chosen by its indexes.

A registry answers a Protobuf schema as .proto text (or, asked ``?format=serialized``, as a base64
FileDescriptorProto, as Confluent's own in-memory registry keeps them): both are read.  The text
is compiled by protoc (grpcio-tools' build of it) in a child process with a time and memory
limit, so a hostile schema costs at most that; imports are the schema's references (by their
names) and protobuf's well-known types.  Values are parsed by the protobuf runtime (its nesting
limit applies) and shown per protobuf's JSON mapping (``json_format``, field names as in the .proto).
"""
from __future__ import annotations

import base64
import binascii
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message

from kwire_cli.values.schemas import Schema

PROTOC_TIMEOUT = 30.0
PROTOC_MEMORY = 1 << 30
MAIN_FILE = "kwire_registry_schema.proto"


class ProtobufSchemaError(ValueError):
    """A schema protoc refuses, or one the runtime cannot load (the reason is one line)."""


@dataclass(frozen=True)
class CompiledProto:
    """A schema's files loaded into their own descriptor pool, and the schema's own file."""

    pool: descriptor_pool.DescriptorPool
    file: descriptor_pb2.FileDescriptorProto


def compile_protobuf(schema: Schema) -> CompiledProto:
    files = _collect(schema, "", {})
    serialized = {name: _serialized(text) for name, text in files.items()}
    if all(fd is not None for fd in serialized.values()):
        protos = [fd for fd in serialized.values() if fd is not None]
        return _load(protos, _serialized(schema.text) or protos[-1])
    fds = _protoc(files)
    main = next((f for f in fds.file if f.name == MAIN_FILE), None)
    if main is None:
        raise ProtobufSchemaError("protoc wrote no descriptor of the schema")
    return _load(list(fds.file), main)


def _collect(schema: Schema, name: str, files: dict[str, str]) -> dict[str, str]:
    """The schema's files by import name, references first (the schema itself is MAIN_FILE)."""
    for ref in schema.references:
        if ref.name not in files:
            _collect(ref.schema, ref.name, files)
    files[name or MAIN_FILE] = schema.text
    return files


def _serialized(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 schema string holds (None: it is .proto text)."""
    stripped = text.strip()
    if not stripped or any(c in stripped for c in " \n;{"):
        return None
    try:
        fd = descriptor_pb2.FileDescriptorProto()
        fd.ParseFromString(base64.b64decode(stripped, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    return fd


def _limits() -> None:  # pragma: no cover (runs in the child)
    resource.setrlimit(resource.RLIMIT_AS, (PROTOC_MEMORY, PROTOC_MEMORY))


def _protoc(files: dict[str, str]) -> descriptor_pb2.FileDescriptorSet:
    try:
        import grpc_tools
    except ImportError:
        raise ProtobufSchemaError("reading Protobuf schema text needs grpcio-tools: "
                                  "pip install 'kwire[values]'") from None
    include = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="kwire-proto-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ProtobufSchemaError(f"reference name {name!r} is not a relative path")
            path = root.joinpath("src", *rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        out = root / "set.pb"
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{root / 'src'}", f"-I{include}",
               "--include_imports", f"--descriptor_set_out={out}", MAIN_FILE]
        try:
            done = subprocess.run(cmd, cwd=root / "src", capture_output=True, timeout=PROTOC_TIMEOUT,
                                  stdin=subprocess.DEVNULL, preexec_fn=_limits,
                                  env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            raise ProtobufSchemaError(f"protoc took longer than {PROTOC_TIMEOUT:.0f} s on the schema") from None
        if done.returncode != 0:
            lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
            first = lines[0] if lines else f"exit {done.returncode}"
            raise ProtobufSchemaError(f".proto does not compile: {first[:300]}")
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(out.read_bytes())
        return fds


def _load(protos: list[descriptor_pb2.FileDescriptorProto],
          main: descriptor_pb2.FileDescriptorProto) -> CompiledProto:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(fd: descriptor_pb2.FileDescriptorProto) -> None:
        if fd.name in added:
            return
        added.add(fd.name)
        for dep in fd.dependency:
            known = next((p for p in protos if p.name == dep), None) or _well_known(dep)
            if known is None:
                raise ProtobufSchemaError(f"import {dep!r} is neither a reference nor a well-known type")
            add(known)
        pool.Add(fd)

    try:
        for fd in protos:
            add(fd)
        add(main)
    except (TypeError, ValueError, KeyError) as exc:
        raise ProtobufSchemaError(f"descriptors do not load: {str(exc).splitlines()[0][:200]}") from None
    return CompiledProto(pool, main)


def _well_known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    if not name.startswith("google/protobuf/"):
        return None
    from google.protobuf import (  # noqa: F401 (register them)
        any_pb2,
        api_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )
    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        return None
    fd = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(fd)
    return fd


def message_name(compiled: CompiledProto, indexes: list[int]) -> str:
    """The full name of the message the indexes point at (top-level, then nested)."""
    fd = compiled.file
    messages = list(fd.message_type)
    names: list[str] = [fd.package] if fd.package else []
    for depth, index in enumerate(indexes):
        if index >= len(messages):
            where = "top-level" if depth == 0 else f"nested in {'.'.join(names)}"
            raise ValueError(f"message index {index} out of range: {len(messages)} message(s) {where}")
        names.append(messages[index].name)
        messages = list(messages[index].nested_type)
    return ".".join(names)


def decode_protobuf(compiled: CompiledProto, indexes: list[int], payload: bytes) -> tuple[str, Any]:
    """(message name, the message per protobuf's JSON mapping); ValueError when it does not parse."""
    name = message_name(compiled, indexes)
    descriptor = compiled.pool.FindMessageTypeByName(name)
    msg: Message = message_factory.GetMessageClass(descriptor)()
    try:
        msg.ParseFromString(payload)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise ValueError(f"Protobuf {name} does not parse: {str(exc)[:200]}") from None
    try:
        return name, json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                               descriptor_pool=compiled.pool)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"Protobuf {name} has no JSON form: {str(exc)[:200]}") from None
