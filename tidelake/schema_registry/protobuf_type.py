"""PROTOBUF schemas: a ``.proto`` text, compiled by ``protoc`` (grpcio-tools' bundled compiler, run as a child
process so its messages can be read), or a base64 ``FileDescriptorProto`` (what Confluent's serializers
register). Both become a ``FileDescriptorProto`` checked by protobuf's ``DescriptorPool`` with its references.

The canonical form is the descriptor itself (deterministic bytes, base64, without its file name), so a
schema registered as text and as a descriptor is one schema. A text schema is kept and answered as written, a
descriptor is kept as sent and answered as ``.proto`` text (``proto_text.py``), as Confluent answers;
``?format=serialized`` answers the base64 descriptor. A text schema imports its references whatever form they
were registered in: they are handed to protoc as a descriptor set (``--descriptor_set_in``).

No library compares two descriptors, so compatibility is written here, after the rules of Confluent's
``ProtobufSchema`` diff that break reading: a message or enum the old schema used removed, a field's number
reused with another type (apart from the wire-compatible groups Protobuf allows), a change between singular
and repeated, a field moved into or out of a oneof, a proto2 required field added or removed. Removing a
field or adding one is compatible (Protobuf skips unknown fields and defaults missing ones).
"""
from __future__ import annotations

import base64
import binascii
import functools
import os
import subprocess
import sys
import tempfile
from typing import Mapping

import grpc_tools
from google.protobuf import descriptor_pb2, descriptor_pool, message
from google.protobuf import any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2

from tidelake.schema_registry.proto_text import proto_text
from tidelake.schema_registry.schema_types import InvalidSchema, ParsedSchema

F = descriptor_pb2.FieldDescriptorProto
_WIRE_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
]
_WELL_KNOWN = {m.DESCRIPTOR.name: m.DESCRIPTOR for m in
               (any_pb2, duration_pb2, empty_pb2, field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2)}
_PROTOC_TIMEOUT_S = 30.0
_MAIN_FILE = "__registered__.proto"


class ProtobufType:
    name = "PROTOBUF"

    def parse(self, schema: str, references: Mapping[str, str]) -> ParsedSchema:
        return _parse(schema, tuple(references.items()))

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        return _diff(reader.parsed, writer.parsed)

    def answered_as_stored(self, stored: str, fmt: str | None) -> bool:
        return fmt != "serialized" and not _is_base64(stored)

    def formatted(self, parsed: ParsedSchema, fmt: str | None) -> str:
        if fmt == "serialized":
            return base64.b64encode(parsed.parsed.SerializeToString(deterministic=True)).decode()
        return parsed.stored if not _is_base64(parsed.stored) else proto_text(parsed.parsed)


@functools.lru_cache(maxsize=1024)
def _parse(schema: str, references: tuple[tuple[str, str], ...]) -> ParsedSchema:
    """Cached: a text schema costs a protoc run, and clients look the same schema up again and again."""
    ref_files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, text in references:       # dependencies first, so each can be compiled against the ones before
        ref_files[name] = _to_descriptor(text, name, dict(ref_files))
    fdp = _to_descriptor(schema, _MAIN_FILE, ref_files)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto) -> None:
        for dep in proto.dependency:
            if dep in added:
                continue
            if dep in ref_files:
                add(ref_files[dep])
            elif dep in _WELL_KNOWN:
                known = descriptor_pb2.FileDescriptorProto()
                _WELL_KNOWN[dep].CopyToProto(known)
                add(known)
            else:
                raise InvalidSchema(f"Invalid schema: import {dep!r} is neither a reference nor a well-known type")
        if proto.name not in added:
            try:
                pool.Add(proto)
                pool.FindFileByName(proto.name)
            except (TypeError, KeyError) as e:
                raise InvalidSchema(f"Invalid schema: {e}") from None
            added.add(proto.name)

    add(fdp)
    canonical = descriptor_pb2.FileDescriptorProto()
    canonical.CopyFrom(fdp)
    canonical.ClearField("name")
    text = base64.b64encode(canonical.SerializeToString(deterministic=True)).decode()
    return ParsedSchema("PROTOBUF", text, schema if not _is_base64(schema) else text, fdp)


def _is_base64(schema: str) -> bool:
    stripped = schema.strip()
    return bool(stripped) and " " not in stripped and "\n" not in stripped


def _to_descriptor(schema: str, file_name: str,
                   references: Mapping[str, descriptor_pb2.FileDescriptorProto]) -> descriptor_pb2.FileDescriptorProto:
    if _is_base64(schema):
        try:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.strip(), validate=True))
        except (binascii.Error, message.DecodeError) as e:
            raise InvalidSchema(f"Invalid schema: neither .proto text nor a base64 FileDescriptorProto ({e})") from None
        fdp.name = file_name
        return fdp
    return _compile(schema, file_name, references)


def _compile(schema: str, file_name: str,
             references: Mapping[str, descriptor_pb2.FileDescriptorProto]) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory(prefix="tidelake-proto-") as tmp:
        with open(os.path.join(tmp, file_name), "w", encoding="utf-8") as f:
            f.write(schema)
        args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{_well_known_dir()}",
                f"--descriptor_set_out={os.path.join(tmp, 'out.pb')}"]
        if references:
            known = descriptor_pb2.FileDescriptorSet()
            for proto in _with_well_known_dependencies(references.values()):
                known.file.append(proto)
            with open(os.path.join(tmp, "references.pb"), "wb") as f:
                f.write(known.SerializeToString())
            args.append(f"--descriptor_set_in={os.path.join(tmp, 'references.pb')}")
        done = subprocess.run(args + [file_name], capture_output=True, text=True, timeout=_PROTOC_TIMEOUT_S, cwd=tmp)
        if done.returncode != 0:
            reason = " ".join(line.replace(tmp + os.sep, "") for line in done.stderr.strip().splitlines())
            raise InvalidSchema(f"Invalid schema: {reason or 'protoc failed'}")
        with open(os.path.join(tmp, "out.pb"), "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return files.file[-1]


def _with_well_known_dependencies(protos) -> list[descriptor_pb2.FileDescriptorProto]:
    """The references plus the well-known files they import (protoc looks every import up in the set)."""
    out: list[descriptor_pb2.FileDescriptorProto] = []
    names: set[str] = set()
    for proto in protos:
        for dep in proto.dependency:
            if dep in _WELL_KNOWN and dep not in names:
                known = descriptor_pb2.FileDescriptorProto()
                _WELL_KNOWN[dep].CopyToProto(known)
                out.append(known)
                names.add(dep)
        out.append(proto)
        names.add(proto.name)
    return out


@functools.lru_cache(maxsize=1)
def _well_known_dir() -> str:
    # the well-known .proto sources grpcio-tools ships beside its protoc
    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


def _messages(fdp: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, msgs) -> None:
        for m in msgs:
            name = f"{prefix}{m.name}"
            found[name] = m
            walk(name + ".", m.nested_type)

    walk(f"{fdp.package}." if fdp.package else "", fdp.message_type)
    return found


def _diff(reader: descriptor_pb2.FileDescriptorProto, writer: descriptor_pb2.FileDescriptorProto) -> list[str]:
    problems: list[str] = []
    reader_msgs, writer_msgs = _messages(reader), _messages(writer)
    for name, old in writer_msgs.items():
        new = reader_msgs.get(name)
        if new is None:
            problems.append(f"#/{name}: message removed (MESSAGE_REMOVED)")
            continue
        new_fields = {f.number: f for f in new.field}
        for old_field in old.field:
            field = new_fields.get(old_field.number)
            if field is None:
                continue
            where = f"#/{name}/{old_field.number}"
            if field.type != old_field.type and not any(
                    field.type in g and old_field.type in g for g in _WIRE_GROUPS):
                problems.append(f"{where}: field type changed (FIELD_SCALAR_KIND_CHANGED)")
            elif field.type_name.lstrip(".") != old_field.type_name.lstrip("."):
                problems.append(f"{where}: field's named type changed (FIELD_NAMED_TYPE_CHANGED)")
            if (field.label == F.LABEL_REPEATED) != (old_field.label == F.LABEL_REPEATED):
                problems.append(f"{where}: field changed between singular and repeated (FIELD_KIND_CHANGED)")
            if field.HasField("oneof_index") != old_field.HasField("oneof_index") and not (
                    field.proto3_optional or old_field.proto3_optional):
                problems.append(f"{where}: field moved into or out of a oneof (FIELD_MOVED_TO_EXISTING_ONEOF)")
        old_numbers = {f.number for f in old.field}
        for field in new.field:
            if field.label == F.LABEL_REQUIRED and field.number not in old_numbers:
                problems.append(f"#/{name}/{field.number}: required field added (REQUIRED_FIELD_ADDED)")
        for old_field in old.field:
            if old_field.label == F.LABEL_REQUIRED and old_field.number not in new_fields:
                problems.append(f"#/{name}/{old_field.number}: required field removed (REQUIRED_FIELD_REMOVED)")
    return problems
