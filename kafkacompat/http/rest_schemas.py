"""Schema-framed keys and values for REST v3 produce, as Confluent's REST proxy writes them.

A key or value of a produce request may name its schema as Confluent's
proxy takes it: `schema_id`, or `schema_version` (of `subject`, by default
`<topic>-key`/`<topic>-value`), or only a `type` of AVRO, JSONSCHEMA or
PROTOBUF (the subject's latest version). Its `data` is then encoded with
that schema (Avro binary by Apache Avro's writer, JSON checked by
`jsonschema`, Protobuf through `protobuf`'s json_format into the file's
first message) and framed as Confluent's serializers frame it: byte 0,
the 4-byte schema id, (Protobuf: the message index, 0) and the payload,
so stock deserializers read the records.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import avro.errors
import avro.io
from google.protobuf import descriptor_pool, json_format, message_factory
from jsonschema.exceptions import ValidationError
from jsonschema.validators import validator_for

from ..schemas import formats
from ..schemas.registry import Registry, RegistryError, Version
from .rest_errors import RestError, invalid_payload

SCHEMA_FIELDS = ("schema_id", "schema_version", "subject")
TYPES = {"AVRO": formats.AVRO, "JSONSCHEMA": formats.JSON, "PROTOBUF": formats.PROTOBUF}
_FRAME = struct.Struct(">bI")


def names_a_schema(part: Any) -> bool:
    """Whether a key or value object asks for schema framing."""
    return isinstance(part, dict) and (any(k in part for k in SCHEMA_FIELDS) or str(part.get("type", "")).upper()
                                       in TYPES)


class SchemaFraming:
    """Encodes the schema-framed keys and values of one request to one topic, from the registry's state."""

    def __init__(self, registry: Registry, topic: str) -> None:
        self.registry, self.topic = registry, topic

    def encode(self, part: dict[str, Any], what: str) -> tuple[bytes | None, str]:
        """(framed bytes, format) of a key or value object naming a schema; RestError when it cannot be."""
        version = self._schema(part, what)
        kind = next(name for name, schema_type in TYPES.items() if schema_type == version.schema_type)
        data = part.get("data")
        if data is None:
            return None, kind
        frame = _FRAME.pack(0, version.id)
        if version.schema_type == formats.AVRO:
            return frame + self._avro(version, data), kind
        if version.schema_type == formats.JSON:
            return frame + _json(version, data), kind
        return frame + b"\x00" + _protobuf(version, data), kind

    def _schema(self, part: dict[str, Any], what: str) -> Version:
        try:
            if "schema_id" in part:
                return self.registry.by_id(_integer(part["schema_id"], "schema_id"))
            subject = part.get("subject") or f"{self.topic}-{what}"
            if not isinstance(subject, str):
                raise invalid_payload(f"{what}.subject must be a string.")
            return self.registry.version(subject, part.get("schema_version", "latest"))
        except RegistryError as exc:
            raise RestError(exc.status, exc.code, exc.message) from None

    def _avro(self, version: Version, data: Any) -> bytes:
        schema = formats.parse_avro(version.schema, self.registry.referenced(version.references))
        out = io.BytesIO()
        try:
            avro.io.DatumWriter(schema).write(data, avro.io.BinaryEncoder(out))
        except (avro.errors.AvroException, TypeError, ValueError, AttributeError) as exc:
            raise invalid_payload(f"data does not match Avro schema {version.id}: {exc}") from None
        return out.getvalue()


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_payload(f"{name}={value} is not an integer.")
    return value


def _json(version: Version, data: Any) -> bytes:
    document = json.loads(version.schema)
    try:
        validator_for(document)(document).validate(data)
    except ValidationError as exc:
        raise invalid_payload(f"data does not match JSON schema {version.id}: {exc.message}") from None
    return json.dumps(data, separators=(",", ":")).encode()


def _protobuf(version: Version, data: Any) -> bytes:
    file = formats.parse_proto(version.schema)
    pool = descriptor_pool.DescriptorPool()
    try:
        pool.Add(file)
        first = file.message_type[0].name
        message = message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{file.package}.{first}" if file.package else first))()
        json_format.ParseDict(data, message)
    except (TypeError, KeyError, IndexError, json_format.ParseError) as exc:
        raise invalid_payload(f"data does not match Protobuf schema {version.id}: {exc}") from None
    return message.SerializeToString()
