"""The three schema formats of Confluent's registry: parse (refuse what is not a schema) and compare two versions.

Avro: parsed by Apache Avro's own Python package (`avro`), whose
`avro.compatibility` is a port of Avro's Java SchemaCompatibility, the code
Confluent's registry runs: one reader/writer check, no rule written here.
JSON Schema: validity by `jsonschema` (the field's library: its meta-schema
check); compatibility is a small hand-written subset of Confluent's
documented JSON Schema rules (types, required properties, open and closed
content models, nested properties). Protobuf: a schema is `.proto` source
text (proto_text) or a base64 FileDescriptorProto, as confluent-kafka's
Python serializer registers it, read with `protobuf`; compatibility is
Confluent's rules for what old readers and writers can meet: a removed
message, a changed package, a field number whose type or label changed.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from . import proto_text

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
TYPES = (JSON, PROTOBUF, AVRO)  # GET /schemas/types, in Confluent's order


class InvalidSchema(ValueError):
    """Not a schema of its type (Confluent's 42201)."""


def canonical(schema_type: str, text: str, references: Mapping[str, str]) -> str:
    """The schema as stored and compared: checked, and compact JSON for Avro and JSON Schema.

    `references` maps each referenced name to the referenced schema's text
    (Avro named types, JSON `$ref` targets, Protobuf imports).
    """
    if schema_type == AVRO:
        parse_avro(text, references)
        return json.dumps(_json(text), separators=(",", ":"))
    if schema_type == JSON:
        document = _json(text)
        _check_json_schema(document)
        return json.dumps(document, separators=(",", ":"))
    if schema_type == PROTOBUF:
        parse_proto(text)
        return text.strip()
    raise InvalidSchema(f"Invalid schema type {schema_type}")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid schema: not JSON ({exc})") from None


def parse_avro(text: str, references: Mapping[str, str]) -> avro.schema.Schema:
    names = avro.name.Names()
    try:
        for referenced in references.values():
            avro.schema.make_avsc_object(json.loads(referenced), names)
        return avro.schema.make_avsc_object(_json(text), names)
    except InvalidSchema:
        raise
    except (avro.errors.AvroException, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None


def _check_json_schema(document: Any) -> None:
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    try:
        validator_for(document).check_schema(document)
    except SchemaError as exc:
        raise InvalidSchema(f"Invalid schema: {exc.message}") from None


def parse_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """A Protobuf schema as .proto source text, or as a base64 FileDescriptorProto (confluent-kafka's Python)."""
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(base64.b64decode(text.strip(), validate=True))
    except (binascii.Error, DecodeError, ValueError):
        try:
            proto = proto_text.parse(text)
        except proto_text.ProtoSyntaxError as exc:
            raise InvalidSchema(f"Invalid schema: neither .proto text ({exc}) nor a base64 "
                                "FileDescriptorProto") from None
    if not proto.message_type and not proto.enum_type:
        raise InvalidSchema("Invalid schema: the Protobuf file declares no message and no enum")
    return proto


def record_name(schema_type: str, text: str, references: Mapping[str, str]) -> str | None:
    """What RecordNameStrategy names a schema's subject after, as Confluent's serializers do.

    Avro: the named type's full name; JSON Schema: its `title`; Protobuf:
    the file's first message, with its package.
    """
    if schema_type == AVRO:
        return getattr(parse_avro(text, references), "fullname", None)
    if schema_type == JSON:
        document = _json(text)
        title = document.get("title") if isinstance(document, dict) else None
        return title if isinstance(title, str) else None
    proto = parse_proto(text)
    if not proto.message_type:
        return None
    first = proto.message_type[0].name
    return f"{proto.package}.{first}" if proto.package else first


def serialized(text: str) -> str:
    """A Protobuf schema as a base64 FileDescriptorProto (`?format=serialized`), however it was registered."""
    return base64.standard_b64encode(parse_proto(text).SerializeToString()).decode("ascii")


# --- compatibility: what a reader of one version makes of data written with another ------------------------------


def incompatibilities(schema_type: str, reader: str, writer: str, references: Mapping[str, str]) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (empty: it can)."""
    if schema_type == AVRO:
        result = ReaderWriterCompatibilityChecker().get_compatibility(parse_avro(reader, references),
                                                                     parse_avro(writer, references))
        if result.compatibility == SchemaCompatibilityType.compatible:
            return []
        return [f"{', '.join(sorted(map(str, result.messages)))} at {', '.join(sorted(result.locations))}"]
    if schema_type == JSON:
        return _json_differences(json.loads(reader), json.loads(writer), "#")
    return _proto_differences(parse_proto(reader), parse_proto(writer))


def _types(schema: Any) -> set[str]:
    declared = schema.get("type") if isinstance(schema, dict) else None
    if declared is None:
        return set()
    return {declared} if isinstance(declared, str) else set(declared)


def _json_differences(reader: Any, writer: Any, at: str) -> list[str]:
    """Confluent's JSON Schema rules (a subset): what the reader refuses of data the writer allows."""
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return [] if reader is True or reader == writer else [f"TYPE_CHANGED at {at}"]
    found: list[str] = []
    read_types, written_types = _types(reader), _types(writer)
    widened = read_types | ({"integer"} if "number" in read_types else set())
    if read_types and (not written_types or not written_types <= widened):
        found.append(f"TYPE_CHANGED at {at}: {sorted(written_types)} -> {sorted(read_types)}")
    for name in sorted(set(reader.get("required", [])) - set(writer.get("required", []))):
        found.append(f"REQUIRED_PROPERTY_ADDED at {at}/properties/{name}")
    found += _json_properties(reader, writer, at)
    if reader.get("additionalProperties", True) is False and writer.get("additionalProperties", True) is not False:
        found.append(f"ADDITIONAL_PROPERTIES_REMOVED at {at}")
    for key in ("items",):
        if isinstance(reader.get(key), dict) and isinstance(writer.get(key), dict):
            found += _json_differences(reader[key], writer[key], f"{at}/{key}")
    return found


def _json_properties(reader: dict, writer: dict, at: str) -> list[str]:
    found: list[str] = []
    read, written = reader.get("properties", {}), writer.get("properties", {})
    writer_open = writer.get("additionalProperties", True) is not False
    reader_closed = reader.get("additionalProperties", True) is False
    for name in sorted(set(read) - set(written)):
        if writer_open:  # old data may carry this name with any value
            found.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {at}/properties/{name}")
    for name in sorted(set(written) - set(read)):
        if reader_closed:
            found.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {at}/properties/{name}")
    for name in sorted(set(read) & set(written)):
        found += _json_differences(read[name], written[name], f"{at}/properties/{name}")
    return found


def _messages(proto: descriptor_pb2.FileDescriptorProto) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, messages: Any) -> None:
        for message in messages:
            name = f"{prefix}{message.name}"
            out[name] = message
            walk(name + ".", message.nested_type)

    walk("", proto.message_type)
    return out


def _proto_differences(reader: descriptor_pb2.FileDescriptorProto,
                       writer: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """Confluent's Protobuf rules (the subset kept): package, messages, and each field number's type and label."""
    found = [f"PACKAGE_CHANGED: {writer.package} -> {reader.package}"] if reader.package != writer.package else []
    read, written = _messages(reader), _messages(writer)
    for name in sorted(set(written) - set(read)):
        found.append(f"MESSAGE_REMOVED: {name}")
    for name in sorted(set(written) & set(read)):
        read_fields = {f.number: f for f in read[name].field}
        for field in written[name].field:
            other = read_fields.get(field.number)
            if other is None:
                continue  # a removed field is skipped by new readers, as Confluent allows
            if (other.type, other.type_name) != (field.type, field.type_name):
                found.append(f"FIELD_TYPE_CHANGED: {name}.{field.name} (number {field.number})")
            elif other.label != field.label:
                found.append(f"FIELD_LABEL_CHANGED: {name}.{field.name} (number {field.number})")
    return found
