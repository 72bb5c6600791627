"""Schema-framed keys and values for the message browser, decoded with the broker's own Schema Registry.

Confluent's serializers frame a key or value as byte 0, the schema's 4-byte
id, (Protobuf only: the message indexes, zigzag varints) and the payload.
The browser reads the schema in-process from the registry the HTTP app
already serves (kafkacompat.schemas.registry_of: no HTTP call, no second
authorization: reading the topic is what decoding needs) and shows the
payload as JSON: Avro by Apache Avro's own reader (the library the
registry parses Avro with), JSON Schema as the JSON it is, Protobuf by
`protobuf`'s json_format through a descriptor pool built from the file.

The schema's subject and version are named only when the principal may
read that subject (http/schema_registry.may, not audited): the id alone
otherwise, so a decoded record does not reveal another topic's subjects.
An id the registry does not hold shows the raw bytes and says so; a
payload that does not decode shows the raw bytes and why.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.io
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from ...schemas import formats
from ...schemas.registry import Registry, RegistryError, Version

FORMAT_NAMES = {formats.AVRO: "Avro", formats.JSON: "JSON Schema", formats.PROTOBUF: "Protobuf"}
Decode = Callable[[bytes], Any]  # a payload (after the frame) -> its JSON-able value
MayRead = Callable[[str], bool]  # subject -> whether the principal may read it


class Undecodable(ValueError):
    """A payload (or its schema) that cannot be turned into JSON."""


def framed(data: bytes | None) -> bool:
    return data is not None and len(data) >= 5 and data[0] == 0


def schema_id_of(data: bytes) -> int:
    return int.from_bytes(data[1:5], "big")


@dataclass
class Schema:
    """What a page needs of one schema id: how to decode, and what to name it by."""

    version: Version | None  # the version shown (None: the id is unknown)
    named: bool  # whether its subject and version may be shown
    decode: Decode | None
    problem: str | None = None  # why the schema itself cannot decode anything


class Decoder:
    """Decodes the framed keys and values of one page; one lookup and one parse per schema id."""

    def __init__(self, registry: Registry, topic_names: set[str], may_read: MayRead) -> None:
        self.registry, self.topic_names, self.may_read = registry, topic_names, may_read
        self._schemas: dict[tuple[int, str], Schema] = {}
        self._fresh = False
        self.decoded_count = 0  # payloads decoded (a page bounds it: decoding costs far more than reading)
        self._last: dict[str, tuple[bytes, dict[str, Any]]] = {}  # per key/value: a matched row isn't decoded twice

    async def ready(self, *parts: bytes | None) -> None:
        """Read the registry up to date once a page meets its first framed key or value."""
        if not self._fresh and any(framed(part) for part in parts):
            self._fresh = True
            await self.registry.refresh()

    def decoded(self, data: bytes, what: str) -> dict[str, Any]:
        """The page's view of a framed key or value (`what`: key or value, for the subject preferred)."""
        last = self._last.get(what)
        if last is not None and last[0] is data:
            return last[1]
        found = self._decoded(data, what)
        self._last[what] = (data, found)
        return found

    def _decoded(self, data: bytes, what: str) -> dict[str, Any]:
        schema_id = schema_id_of(data)
        schema = self._schema(schema_id, what)
        raw = base64.b64encode(data).decode()
        if schema.version is None:
            return {"kind": "schema-unknown", "schema_id": schema_id, "text": raw,
                    "problem": f"schema id {schema_id} unknown"}
        found = {"kind": "schema", "schema_id": schema_id, "format": FORMAT_NAMES[schema.version.schema_type],
                 "subject": schema.version.subject if schema.named else None,
                 "version": schema.version.version if schema.named else None}
        try:
            if schema.decode is None:
                raise Undecodable(schema.problem or "no decoder")
            self.decoded_count += 1
            value = schema.decode(data[5:])
        except Undecodable as exc:
            return found | {"kind": "schema-failed", "text": raw,
                            "problem": f"cannot decode with schema id {schema_id}: {exc}"}
        return found | {"text": json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable),
                        "compact": json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_jsonable)}

    def _schema(self, schema_id: int, what: str) -> Schema:
        if (schema_id, what) not in self._schemas:
            self._schemas[schema_id, what] = self._look_up(schema_id, what)
        return self._schemas[schema_id, what]

    def _look_up(self, schema_id: int, what: str) -> Schema:
        holding = self.registry.holding(schema_id)
        if not holding:
            return Schema(None, False, None)
        shown = self._shown_version(holding, what)
        try:
            return Schema(shown or holding[0], shown is not None, _decoder(self.registry, shown or holding[0]))
        except (formats.InvalidSchema, RegistryError, TypeError, KeyError, IndexError) as exc:
            return Schema(shown or holding[0], shown is not None, None, getattr(exc, "message", None) or str(exc))

    def _shown_version(self, holding: list[Version], what: str) -> Version | None:
        """The version to name: this topic's own subject first, live before soft-deleted; one the caller may read."""
        own = {f"{name}-{what}" for name in self.topic_names}
        ranked = sorted(holding, key=lambda v: (v.subject not in own, v.deleted, v.subject, v.version))
        return next((v for v in ranked if self.may_read(v.subject)), None)


def _jsonable(value: Any) -> Any:
    """Avro's bytes and fixed as Avro's JSON encoding writes them (one char a byte); decimals and the rest as text."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    return str(value)


def _decoder(registry: Registry, version: Version) -> Decode:
    if version.schema_type == formats.AVRO:
        return _avro(formats.parse_avro(version.schema, registry.referenced(version.references)))
    if version.schema_type == formats.JSON:
        return _json
    return _protobuf(registry, version)


def _avro(schema: Any) -> Decode:
    reader = avro.io.DatumReader(schema)

    def decode(payload: bytes) -> Any:
        try:
            return reader.read(avro.io.BinaryDecoder(io.BytesIO(payload)))
        except (avro.errors.AvroException, struct.error, ValueError, TypeError, IndexError, EOFError) as exc:
            raise Undecodable(f"not Avro of this schema ({exc or type(exc).__name__})") from None
    return decode


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError as exc:
        raise Undecodable(f"not JSON ({exc})") from None


def _protobuf(registry: Registry, version: Version) -> Decode:
    pool = descriptor_pool.DescriptorPool()
    for name, text in registry.referenced(version.references).items():
        imported = formats.parse_proto(text)
        imported.name = name
        pool.Add(imported)
    file = formats.parse_proto(version.schema)
    try:
        pool.Add(file)
    except TypeError as exc:
        raise formats.InvalidSchema(f"its descriptor does not load ({exc})") from None

    def decode(payload: bytes) -> Any:
        indexes, start = _message_indexes(payload)
        try:
            message = message_factory.GetMessageClass(pool.FindMessageTypeByName(_message_name(file, indexes)))()
            message.ParseFromString(payload[start:])
        except (DecodeError, KeyError, IndexError) as exc:
            raise Undecodable(f"not Protobuf of this schema ({exc})") from None
        return json_format.MessageToDict(message, preserving_proto_field_name=True)
    return decode


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zigzag varint (as Confluent writes message indexes) and the position after it."""
    value, shift = 0, 0
    while True:
        if position >= len(data) or shift > 63:
            raise Undecodable("the Protobuf message indexes are cut short")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), position


def _message_indexes(payload: bytes) -> tuple[list[int], int]:
    """The message indexes before a Protobuf payload ([0] when written as the single byte 0) and where it starts."""
    count, position = _varint(payload, 0)
    if count == 0:
        return [0], position
    if not 0 < count <= 100:
        raise Undecodable(f"{count} Protobuf message indexes")
    indexes = []
    for _ in range(count):
        index, position = _varint(payload, position)
        indexes.append(index)
    return indexes, position


def _message_name(file: Any, indexes: list[int]) -> str:
    """The full name of the message the indexes point at: top-level message, then nested ones."""
    messages, names = file.message_type, []
    for index in indexes:
        if not 0 <= index < len(messages):
            raise Undecodable(f"message index {index} is not in the schema")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(([file.package] if file.package else []) + names)
