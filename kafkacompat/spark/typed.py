"""Typed rows: keys and values framed the Confluent way, decoded through the registry into Spark columns.

The reader takes schemas where it takes records: from the store. The
registry keeps every schema as a record of its stream's `_schemas` topic
(kafkacompat.schemas.log), so the driver and each task read that topic
from the data directories, as they read the records, with no broker and
no HTTP round trip in the data path; a replicated stream brings its
schemas along, so the same query reads a replica. The reader schema is
the subject's latest version (or the one `value.schemaVersion` names);
each record is decoded with the schema its id names and resolved to the
reader schema by fastavro (Avro's schema resolution: defaults for added
fields, dropped fields skipped, promotions), the library confluent-kafka's
own Avro deserializer uses. JSON Schema values are parsed as JSON and
projected onto the struct the reader schema describes; Protobuf values are
parsed with the reader version's first message (built by `protobuf` from
the registered descriptor), Protobuf's own evolution.

Records that cannot be decoded (not framed, unknown id, bad payload)
fail the task under `mode` FAILFAST (the default, as Spark's
`from_avro`), or under PERMISSIVE give a null column and a `valueError`
(`keyError`) column saying why, as Spark's readers keep a corrupt record.
"""

from __future__ import annotations

import dataclasses
import io
import json
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .options import OptionError, Options, TopicRef

SCHEMAS_TOPIC = "_schemas"  # the registry's topic in every stream (kafkacompat.broker.cluster.SCHEMAS_TOPIC)
_FIELDS = {"subject", "version", "id", "schema"}  # what a schema record needs to be read here
AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
DECODED = (AVRO, JSON, PROTOBUF)
_ID = struct.Struct(">I")


class DecodeError(ValueError):
    """A record that cannot be decoded under FAILFAST: which one, and why."""


@dataclasses.dataclass(frozen=True)
class Written:
    """One schema of the registry, as `_schemas` holds it."""

    id: int
    schema_type: str
    schema: str


@dataclasses.dataclass(frozen=True)
class ColumnSchema:
    """How one column (key or value) is decoded: the reader schema and every writer schema known."""

    column: str
    subject: str
    reader: Written
    writers: Mapping[int, Written]

    @property
    def error_column(self) -> str:
        return f"{self.column}Error"


# --- the registry's records, read from the store ----------------------------------------------------------------


def registry_records(opts: Options) -> list[dict[str, Any]]:
    """Every schema version (soft-deleted ones too: their records still decode) in the `_schemas` topics
    of the streams read and of the default stream."""
    from ..protocol.records import iter_records
    from ..storage.disk.reader import StoreReader, read_batches

    reader = StoreReader(opts.volumes)
    streams = {opts.default_stream, *(ref.stream for ref in opts.resolve(reader))}
    state: dict[str, Any] = {}
    for stream in sorted(streams):
        if SCHEMAS_TOPIC not in reader.topics(stream):
            continue
        snap = reader.snapshot(stream, SCHEMAS_TOPIC, 0)
        for batch in read_batches(snap, snap.log_start, snap.high_watermark):
            for record in iter_records(batch):
                key = (record.key or b"").decode("utf-8", "replace")
                if key.startswith("schema/"):  # the last record of a key is its state; no value: deleted
                    state[f"{stream} {key}"] = _state(record.value)
    return [v for v in state.values() if isinstance(v, dict) and _FIELDS <= v.keys()]


def _state(value: bytes | None) -> Any:
    """A record's JSON state; one that is not JSON (not the registry's: it skips them too) counts as none."""
    try:
        return None if value is None else json.loads(value)
    except ValueError:
        return None


def writers_of(records: Iterable[dict[str, Any]]) -> dict[int, Written]:
    return {r["id"]: Written(r["id"], r.get("schemaType") or AVRO, r["schema"]) for r in records}


def column_schemas(opts: Options, query: StructType | None = None) -> list[ColumnSchema]:
    """The decoding of each column `decode` names, found in the registry's records (on the driver).

    `query`: the schema Spark took when the query was defined. The reader
    schema is then the newest version of that type: a version registered
    since does not change the columns of a query already defined.
    """
    if not opts.decode:
        return []
    records = registry_records(opts)
    writers = writers_of(records)
    out = []
    for column in opts.decode:
        subject = opts.subjects.get(column) or _default_subject(opts, column, records)
        versions = {r["version"]: r for r in records if r["subject"] == subject and not r.get("deleted")}
        if not versions:
            raise OptionError(f"no schema is registered under subject {subject!r} in the streams read "
                              f"(set option '{column}.subject')")
        wanted = opts.schema_versions.get(column) or _newest(versions, writers, column, query)
        if wanted not in versions:
            raise OptionError(f"subject {subject!r} has no version {wanted} (it has {sorted(versions)})")
        chosen = versions[wanted]
        reader = writers[chosen["id"]]
        if reader.schema_type not in DECODED:
            raise OptionError(f"subject {subject!r} holds {reader.schema_type} schemas, not decoded into columns")
        out.append(ColumnSchema(column, subject, reader, writers))
    return out


def _newest(versions: dict[int, dict[str, Any]], writers: Mapping[int, Written], column: str,
            query: StructType | None) -> int:
    if query is None:
        return max(versions)
    wanted = query[column].dataType
    for version in sorted(versions, reverse=True):
        written = writers[versions[version]["id"]]
        if written.schema_type in DECODED and spark_type(written) == wanted:
            return version
    raise OptionError(f"no version of the {column}'s subject has the type the query was defined with any more: "
                      "define the query again")


def _default_subject(opts: Options, column: str, records: list[dict[str, Any]]) -> str:
    """TopicNameStrategy: `<topic>-<column>`, the topic spelled as its producer may have spelled it."""
    if opts.topics is None or len({(t.stream, t.name) for t in opts.topics}) != 1:
        raise OptionError(f"option '{column}.subject' is needed when the query reads several topics or a pattern")
    ref: TopicRef = opts.topics[0]
    known = {r["subject"] for r in records}
    spellings = [ref.label, f"{ref.stream}:{ref.name}"] + ([ref.name] if ref.stream == opts.default_stream else [])
    return next((f"{s}-{column}" for s in spellings if f"{s}-{column}" in known), f"{ref.label}-{column}")


# --- Spark types of a schema --------------------------------------------------------------------------------------


def spark_fields(base: list[StructField], columns: list[ColumnSchema], permissive: bool) -> list[StructField]:
    """The source's fields with each decoded column typed, and its error column under PERMISSIVE."""
    typed = {c.column: c for c in columns}
    out = []
    for field in base:
        column = typed.get(field.name)
        if column is None:
            out.append(field)
            continue
        out.append(StructField(field.name, spark_type(column.reader)))
        if permissive:
            out.append(StructField(column.error_column, StringType()))
    return out


def spark_type(schema: Written) -> DataType:
    if schema.schema_type == AVRO:
        return avro_type(json.loads(schema.schema), {})
    if schema.schema_type == PROTOBUF:
        return proto_type(proto_message(schema.schema, [0]).DESCRIPTOR)
    return json_schema_type(json.loads(schema.schema))


def proto_message(text: str, indexes: list[int]) -> Any:
    """The message class a Protobuf schema's message indexes name (Confluent's framing), built from its
    descriptor by `protobuf` as protoc's code would be; imports of other files are not resolved."""
    from google.protobuf import descriptor_pool, message_factory

    from ..schemas.formats import parse_proto

    file = parse_proto(text)
    file.name = file.name or "schema.proto"
    pool = descriptor_pool.DescriptorPool()
    try:
        pool.Add(file)
    except (TypeError, KeyError) as exc:
        raise DecodeError(f"the Protobuf schema cannot be loaded (imports are not resolved): {exc}") from None
    messages, descriptor = pool.FindFileByName(file.name).message_types_by_name, None
    for index in indexes:
        listing = list(messages.values()) if descriptor is None else list(descriptor.nested_types)
        if index >= len(listing):
            raise DecodeError(f"message index {indexes} is not in the Protobuf schema")
        descriptor = listing[index]
    return message_factory.GetMessageClass(descriptor)


_PROTO_SCALARS: dict[int, DataType] = {
    1: DoubleType(), 2: FloatType(), 3: LongType(), 4: DecimalType(20, 0), 5: IntegerType(), 6: DecimalType(20, 0),
    7: LongType(), 8: BooleanType(), 9: StringType(), 12: BinaryType(), 13: LongType(), 14: StringType(),
    15: IntegerType(), 16: LongType(), 17: IntegerType(), 18: LongType(),
}  # FieldDescriptor.TYPE_*: uint32 to bigint, uint64/fixed64 to decimal(20,0), enum to string, as Spark's from_protobuf


def proto_type(message: Any) -> DataType:
    fields = StructType()
    for field in message.fields:
        fields.add(StructField(field.name, _proto_field_type(field)))
    return fields


def _proto_field_type(field: Any) -> DataType:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return MapType(_proto_single(key), _proto_single(value))
    single = _proto_single(field)
    return ArrayType(single) if field.is_repeated else single


def _proto_single(field: Any) -> DataType:
    if field.message_type is not None:
        return proto_type(field.message_type)
    return _PROTO_SCALARS[field.type]


_AVRO_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(), "boolean": BooleanType(), "int": IntegerType(), "long": LongType(),
    "float": FloatType(), "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
_AVRO_LOGICAL: dict[str, DataType] = {
    "timestamp-millis": TimestampType(), "timestamp-micros": TimestampType(), "date": DateType(),
}


def avro_type(schema: Any, named: dict[str, DataType]) -> DataType:
    """Spark's type for an Avro schema, as Spark's own Avro reader maps them."""
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise OptionError(f"Avro type {schema!r} is not defined in the schema (references are not resolved)")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise OptionError(f"Avro union {json.dumps(schema)} has several non-null branches: not decoded yet")
        return avro_type(branches[0], named)
    logical = schema.get("logicalType")
    if logical == "decimal" and schema["type"] in ("bytes", "fixed"):
        return DecimalType(schema["precision"], schema.get("scale", 0))
    if logical in _AVRO_LOGICAL:
        return _AVRO_LOGICAL[logical]
    kind = schema["type"]
    if kind == "record":
        fields = StructType()
        named[schema["name"]] = fields  # a record may refer to itself by name only after this
        for f in schema["fields"]:
            fields.add(StructField(f["name"], avro_type(f["type"], named)))
        return fields
    if kind == "enum":
        named[schema["name"]] = StringType()
        return StringType()
    if kind == "fixed":
        named[schema["name"]] = BinaryType()
        return BinaryType()
    if kind == "array":
        return ArrayType(avro_type(schema["items"], named))
    if kind == "map":
        return MapType(StringType(), avro_type(schema["values"], named))
    return avro_type(kind, named)


_JSON_TYPES: dict[str, DataType] = {
    "string": StringType(), "integer": LongType(), "number": DoubleType(), "boolean": BooleanType(),
}


def json_schema_type(schema: Any) -> DataType:
    """Spark's type for a JSON Schema: objects with properties are structs; what has no one type is its JSON text."""
    if not isinstance(schema, dict):
        return StringType()
    declared = schema.get("type")
    kinds = [declared] if isinstance(declared, str) else [k for k in (declared or []) if k != "null"]
    if len(kinds) != 1:
        return StringType()
    kind = kinds[0]
    if kind == "object" and isinstance(schema.get("properties"), dict):
        return StructType([StructField(name, json_schema_type(sub)) for name, sub in schema["properties"].items()])
    if kind == "array":
        return ArrayType(json_schema_type(schema.get("items")))
    return _JSON_TYPES.get(kind, StringType())


# --- decoding a batch's column ------------------------------------------------------------------------------------


class ColumnDecoder:
    """Decodes one column of one task's batches: every writer schema parsed once, on first use."""

    def __init__(self, column: ColumnSchema, opts: Options, arrow_type: Any) -> None:
        self.column = column
        self.opts = opts
        self.arrow_type = arrow_type
        self.writers = dict(column.writers)
        self._decoders: dict[int, Callable[[bytes], Any]] = {}
        self._reread = False
        if column.reader.schema_type == AVRO:
            import fastavro

            self._reader_schema = fastavro.parse_schema(json.loads(column.reader.schema))
        else:
            self._spark_type = spark_type(column.reader)
        if column.reader.schema_type == PROTOBUF:
            self._reader_class = proto_message(column.reader.schema, [0])

    def decode(self, values: Any) -> tuple[Any, list[str | None]]:
        """(Arrow array of the decoded values, the error of each row or None)."""
        import pyarrow as pa

        decoded: list[Any] = []
        errors: list[str | None] = []
        for payload in values.to_pylist():
            if payload is None:
                decoded.append(None)
                errors.append(None)
                continue
            try:
                decoded.append(self._decode(payload))
                errors.append(None)
            except Exception as exc:  # noqa: BLE001 - any failure of a record's payload is that record's error
                decoded.append(None)
                errors.append(str(exc) if isinstance(exc, DecodeError) else
                              f"does not decode with its schema: {type(exc).__name__}: {exc}")
        try:
            return pa.array(decoded, type=self.arrow_type), errors
        except (pa.ArrowException, TypeError, ValueError):  # one row does not fit the type: find which
            return self._one_by_one(decoded, errors)

    def _one_by_one(self, decoded: list[Any], errors: list[str | None]) -> tuple[Any, list[str | None]]:
        import pyarrow as pa

        for i, value in enumerate(decoded):
            try:
                pa.array([value], type=self.arrow_type)
            except (pa.ArrowException, TypeError, ValueError) as exc:
                decoded[i], errors[i] = None, f"does not fit the reader schema: {exc}"
        return pa.array(decoded, type=self.arrow_type), errors

    def _decode(self, payload: bytes) -> Any:
        if len(payload) < 5 or payload[0] != 0:
            raise DecodeError("not Confluent-framed (magic byte 0 and a 4-byte schema id)")
        (schema_id,) = _ID.unpack_from(payload, 1)
        return self._decoder(schema_id)(payload[5:])

    def _decoder(self, schema_id: int) -> Callable[[bytes], Any]:
        found = self._decoders.get(schema_id)
        if found is not None:
            return found
        if schema_id not in self.writers and not self._reread:  # registered since the query was planned
            self._reread = True
            self.writers.update(writers_of(registry_records(self.opts)))
        writer = self.writers.get(schema_id)
        if writer is None:
            raise DecodeError(f"schema id {schema_id} is not registered in the streams read")
        if writer.schema_type != self.column.reader.schema_type:
            raise DecodeError(f"schema id {schema_id} is {writer.schema_type}, the subject's schema "
                              f"{self.column.reader.schema_type}")
        decoder = {AVRO: self._avro, PROTOBUF: self._proto}.get(writer.schema_type, lambda _: self._json)(writer)
        self._decoders[schema_id] = decoder
        return decoder

    def _avro(self, writer: Written) -> Callable[[bytes], Any]:
        import fastavro

        writer_schema = fastavro.parse_schema(json.loads(writer.schema))
        # resolving costs fastavro several times the decoding: records written with the reader schema skip it
        reader_schema = None if writer.id == self.column.reader.id else self._reader_schema

        def decode(body: bytes) -> Any:
            return fastavro.schemaless_reader(io.BytesIO(body), writer_schema, reader_schema)

        return decode

    def _proto(self, writer: Written) -> Callable[[bytes], Any]:
        """Decoded with the reader schema's message (Protobuf readers skip unknown fields, default missing ones)."""
        from google.protobuf.json_format import MessageToDict

        kind = self._spark_type

        def decode(body: bytes) -> Any:
            indexes, body = _message_indexes(body)
            if indexes != [0]:
                raise DecodeError(f"message index {indexes}: only a schema's first message is decoded")
            message = self._reader_class.FromString(body)
            return _proto_value(MessageToDict(message, preserving_proto_field_name=True,
                                              always_print_fields_with_no_presence=True), kind)

        return decode

    def _json(self, body: bytes) -> Any:
        return conform(json.loads(body), self._spark_type)


def _message_indexes(body: bytes) -> tuple[list[int], bytes]:
    """Confluent's Protobuf framing after the id: zigzag varints, a count then the indexes; 0 alone is [0]."""
    numbers, pos = [], 0
    count = None
    while count is None or len(numbers) < count:
        shift = value = 0
        while True:
            if pos >= len(body):
                raise DecodeError("the Protobuf message indexes are cut short")
            byte = body[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        value = (value >> 1) ^ -(value & 1)
        if count is None:
            count = value
        else:
            numbers.append(value)
    return (numbers or [0]), body[pos:]


def _proto_value(value: Any, kind: DataType) -> Any:
    """MessageToDict's JSON form (64-bit integers as text, bytes as base64, unset fields left out) as `kind`."""
    import base64
    import decimal

    if value is None:
        return None
    if isinstance(kind, StructType):
        return {f.name: _proto_value(value.get(f.name), f.dataType) for f in kind.fields}
    if isinstance(kind, ArrayType):
        return [_proto_value(v, kind.elementType) for v in value]
    if isinstance(kind, MapType):
        return {_proto_value(k, kind.keyType): _proto_value(v, kind.valueType) for k, v in value.items()}
    if isinstance(kind, (LongType, IntegerType)):
        return int(value)
    if isinstance(kind, DecimalType):
        return decimal.Decimal(value)
    if isinstance(kind, BinaryType):
        return base64.b64decode(value)
    if isinstance(kind, (DoubleType, FloatType)):
        return float(value)
    return value


def conform(value: Any, kind: DataType) -> Any:
    """A parsed JSON value as the struct the reader's JSON Schema describes (what has no one type: its text)."""
    if value is None:
        return None
    if isinstance(kind, StructType):
        if not isinstance(value, dict):
            raise DecodeError(f"does not fit the reader schema: {json.dumps(value)[:80]} is not an object")
        return {f.name: conform(value.get(f.name), f.dataType) for f in kind.fields}
    if isinstance(kind, ArrayType):
        if not isinstance(value, list):
            raise DecodeError(f"does not fit the reader schema: {json.dumps(value)[:80]} is not an array")
        return [conform(v, kind.elementType) for v in value]
    if isinstance(kind, StringType) and not isinstance(value, str):
        return json.dumps(value)
    return value


def decode_batch(batch: Any, decoders: list[ColumnDecoder], schema: Any, where: str, permissive: bool) -> Any:
    """The raw batch (key and value as bytes) with each decoded column typed, as `schema` names the fields."""
    import pyarrow as pa

    arrays = {name: batch.column(name) for name in batch.schema.names}
    for decoder in decoders:
        column = decoder.column
        values, errors = decoder.decode(arrays[column.column])
        if not permissive:
            bad = next((i for i, e in enumerate(errors) if e is not None), None)
            if bad is not None:
                offset = batch.column("offset")[bad].as_py()
                raise DecodeError(f"{where} offset {offset}: the {column.column} {errors[bad]} (subject "
                                  f"{column.subject!r}; mode PERMISSIVE gives null and {column.error_column})")
        arrays[column.column] = values
        arrays[column.error_column] = pa.array(errors, type=pa.string())
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def raw_arrow_schema(schema: Any, columns: list[ColumnSchema]) -> Any:
    """The Arrow schema of the records as stored: decoded columns as binary, no error columns."""
    import pyarrow as pa

    typed = {c.column for c in columns}
    errors = {c.error_column for c in columns}
    return pa.schema([pa.field(f.name, pa.binary()) if f.name in typed else f
                      for f in schema if f.name not in errors])
