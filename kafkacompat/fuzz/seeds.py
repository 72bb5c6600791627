"""Well-formed request frames for every API version the broker serves, to start fuzzing from.

`sample_request` fills a kio request class with small typical values (one
element per array, short strings, tagged fields left at their defaults), so
a fuzzer begins from bytes that parse and reaches the handlers instead of
being refused at the first length. Frames captured from a real client run
(`python -m kafkacompat.fuzz.network capture`) are stored beside them.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

from kafkacompat.protocol.messages import encode_body, request_schema
from kafkacompat.protocol.records import Record, build_batch
from kafkacompat.protocol.versions import is_flexible

from ..handlers import SUPPORTED

_PRIMITIVES: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 1,
    "uint16": 1,
    "int32": 1,
    "int64": 1,
    "float64": 0.0,
    "string": "seed",
    "bytes": b"seed",
    "records": build_batch([Record(b"key", b"value", [("h", b"v")], 1_700_000_000_000)]),
    "uuid": uuid.UUID(int=1),
    "timedelta_i32": datetime.timedelta(milliseconds=100),
    "timedelta_i64": datetime.timedelta(milliseconds=100),
    "datetime_i64": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    "error_code": ErrorCode.none,
}


def sample_entity(entity_type: type) -> Any:
    """An instance of a kio entity class with every required field set."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        if get_field_tag(field) is not None:
            continue  # tagged fields keep their defaults
        kind = classify_field(field)
        if isinstance(kind, PrimitiveField):
            values[field.name] = _PRIMITIVES[get_schema_field_type(field)]
        elif isinstance(kind, PrimitiveTupleField):
            values[field.name] = (_PRIMITIVES[get_schema_field_type(field)],)
        elif isinstance(kind, EntityField):
            values[field.name] = sample_entity(kind.type_)
        elif isinstance(kind, EntityTupleField):
            values[field.name] = (sample_entity(kind.type_),)
    return entity_type(**values)


def request_frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    """A request frame without its size prefix: header v1 or v2, then the body."""
    client_id = b"fuzz-seed"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if is_flexible(api_key, version):
        header += b"\x00"
    return header + body


@functools.cache
def sample_frames() -> tuple[tuple[str, bytes], ...]:
    """(name, frame) for every served API version, built from kio's schemas."""
    out = []
    for api_key, (low, high) in sorted(SUPPORTED.items()):
        for version in range(low, high + 1):
            try:
                schema = request_schema(api_key, version)
            except Exception:  # noqa: BLE001 - a version kio has no schema for (the stream admin API)
                continue
            body = encode_body(sample_entity(schema))
            out.append((f"{schema.__name__}-v{version}", request_frame(api_key, version, body)))
    return tuple(out)


def load_corpus(directory: Path) -> Iterator[tuple[str, bytes]]:
    """(file name, bytes) of every file in a corpus directory, in name order."""
    for path in sorted(directory.glob("*")):
        if path.is_file():
            yield path.name, path.read_bytes()
