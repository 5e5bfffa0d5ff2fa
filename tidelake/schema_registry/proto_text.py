"""A ``FileDescriptorProto`` written back as ``.proto`` text, so a Protobuf schema registered as a base64
descriptor (what Confluent's serializers send) is answered as text, as Confluent's registry answers it
(``?format=serialized`` still gives the descriptor). protobuf's Python library has no such printer; this one covers
what descriptors hold for data schemas: syntax, package, imports, file options of the common kinds, messages
(nested, oneofs, maps, proto3 optional, reserved ranges and names), enums and services.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
            F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64", F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool",
            F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
            F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64"}
_FILE_OPTIONS = ("java_package", "java_outer_classname", "go_package", "csharp_namespace", "objc_class_prefix",
                 "php_namespace", "ruby_package", "swift_prefix")
_BOOL_FILE_OPTIONS = ("java_multiple_files",)


def proto_text(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    syntax = fdp.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if fdp.package:
        lines.append(f"package {fdp.package};")
    for dep in fdp.dependency:
        lines.append(f'import "{dep}";')
    for option, value in fdp.options.ListFields():
        if option.name in _FILE_OPTIONS:
            lines.append(f'option {option.name} = "{value}";')
        elif option.name in _BOOL_FILE_OPTIONS:
            lines.append(f"option {option.name} = {str(value).lower()};")
    lines.append("")
    for message in fdp.message_type:
        lines += _message(message, syntax, 0)
    for enum in fdp.enum_type:
        lines += _enum(enum, 0)
    for service in fdp.service:
        lines.append(f"service {service.name} {{")
        for method in service.method:
            client = "stream " if method.client_streaming else ""
            server = "stream " if method.server_streaming else ""
            lines.append(f"  rpc {method.name}({client}{method.input_type}) returns "
                         f"({server}{method.output_type});")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _field_type(field: F, maps: dict[str, descriptor_pb2.DescriptorProto]) -> str:
    if field.type in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP):
        entry = maps.get(field.type_name.rsplit(".", 1)[-1])
        if entry is not None and field.label == F.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            return f"map<{_field_type(key, {})}, {_field_type(value, {})}>"
        return field.type_name      # fully qualified (a leading dot): the same type in any scope
    return _SCALARS[field.type]


def _field(field: F, syntax: str, maps: dict, indent: str, in_oneof: bool) -> str:
    type_text = _field_type(field, maps)
    label = ""
    if not in_oneof and not type_text.startswith("map<"):
        if field.label == F.LABEL_REPEATED:
            label = "repeated "
        elif field.label == F.LABEL_REQUIRED:
            label = "required "
        elif syntax == "proto2" or field.proto3_optional:
            label = "optional "
    options = []
    if field.HasField("default_value"):
        default = f'"{field.default_value}"' if field.type in (F.TYPE_STRING, F.TYPE_BYTES) else field.default_value
        options.append(f"default = {default}")
    if field.options.HasField("packed"):
        options.append(f"packed = {str(field.options.packed).lower()}")
    if field.options.deprecated:
        options.append("deprecated = true")
    if field.json_name and field.json_name != _default_json_name(field.name):
        options.append(f'json_name = "{field.json_name}"')
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{indent}{label}{type_text} {field.name} = {field.number}{suffix};"


def _default_json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _message(message: descriptor_pb2.DescriptorProto, syntax: str, depth: int) -> list[str]:
    pad, inner = "  " * depth, "  " * (depth + 1)
    lines = [f"{pad}message {message.name} {{"]
    maps = {m.name: m for m in message.nested_type if m.options.map_entry}
    real_oneofs = {f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional}
    emitted_oneofs: set[int] = set()
    for field in message.field:
        if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
            index = field.oneof_index
            if index in emitted_oneofs:
                continue
            emitted_oneofs.add(index)
            lines.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
            for member in message.field:
                if member.HasField("oneof_index") and member.oneof_index == index:
                    lines.append(_field(member, syntax, maps, inner + "  ", True))
            lines.append(f"{inner}}}")
        else:
            lines.append(_field(field, syntax, maps, inner, False))
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message(nested, syntax, depth + 1)
    for enum in message.enum_type:
        lines += _enum(enum, depth + 1)
    for reserved in message.reserved_range:
        end = reserved.end - 1
        lines.append(f"{inner}reserved {reserved.start}{'' if end == reserved.start else f' to {end}'};")
    if message.reserved_name:
        lines.append(f"{inner}reserved {', '.join(repr(n).replace(chr(39), chr(34)) for n in message.reserved_name)};")
    lines.append(f"{pad}}}")
    return lines


def _enum(enum: descriptor_pb2.EnumDescriptorProto, depth: int) -> list[str]:
    pad, inner = "  " * depth, "  " * (depth + 1)
    lines = [f"{pad}enum {enum.name} {{"]
    if enum.options.HasField("allow_alias"):
        lines.append(f"{inner}option allow_alias = {str(enum.options.allow_alias).lower()};")
    lines += [f"{inner}{value.name} = {value.number};" for value in enum.value]
    lines.append(f"{pad}}}")
    return lines
