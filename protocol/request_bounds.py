"""Check a request body's lengths against its frame before kio parses it.

kio's native reader (kio 0.6.5, `_kio_native::schema::read_field`) reserves
room for an array from the length it reads, before checking that the frame
holds that many elements: a 36-byte CreatePartitions v2 request whose nested
`assignments` array claims 2^31 entries makes it ask the allocator for 16 GB,
and Rust's allocation failure handler aborts the whole process (SIGABRT), so
no Python `try` can catch it. It also hands back None for a -1 length in an
array or string the schema says must not be null.

`check_request_body` walks the same schema (kio's dataclasses and their
field metadata) without building anything: every array, string and bytes
length is compared with the bytes actually left in the frame (each array
element takes at least one byte), tagged fields are walked inside the size
they announce, null where the schema forbids it is refused, and a request
holds at most a million array elements in all (see _Walk). Only a body
that passes is handed to kio, so kio never sees a length it could allocate
from beyond the frame.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)


class RequestBoundsError(ValueError):
    """A length or null in a request body that its frame or schema cannot hold."""


_FIXED_SIZES = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
    "uint64": 8, "float64": 8, "uuid": 16, "timedelta_i32": 4, "timedelta_i64": 8,
    "datetime_i64": 8, "error_code": 2,
}
_VARIABLE = {"string", "bytes", "records"}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

MAX_ELEMENTS = 1_000_000  # array elements one request may hold


class _Walk:
    """One request being checked: its bytes, and how many more array elements it may hold.

    The element cap bounds what a request may cost once decoded: kio builds
    an object per element, about 60 bytes for a 2-byte element, so a 100 MiB
    request of empty topic names would become 3 GB. A million elements is
    far more than any client sends (a Metadata request naming every topic of
    a 200,000-topic cluster) and at most ~64 MB decoded.
    """

    __slots__ = ("buf", "elements_left")

    def __init__(self, buf: bytes, max_elements: int) -> None:
        self.buf = buf
        self.elements_left = max_elements


# A step reads one field at `pos` of `w.buf` (never past `end`) and returns the new position.
Step = Callable[[_Walk, int, int], int]


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as Kafka's ByteUtils.readUnsignedVarint reads it."""
    value = shift = 0
    while True:
        if pos >= end:
            raise RequestBoundsError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise RequestBoundsError("varint longer than 5 bytes")


def _length(buf: bytes, pos: int, end: int, flexible: bool, legacy: struct.Struct) -> tuple[int, int]:
    """An array/string/bytes length; -1 for null (compact: stored as length + 1)."""
    if flexible:
        raw, pos = read_uvarint(buf, pos, end)
        return raw - 1, pos
    if pos + legacy.size > end:
        raise RequestBoundsError("truncated length")
    return legacy.unpack_from(buf, pos)[0], pos + legacy.size


def _null_or_negative(length: int, nullable: bool, what: str) -> None:
    if length == -1 and not nullable:
        raise RequestBoundsError(f"null {what} where the schema forbids null")
    if length < -1:
        raise RequestBoundsError(f"negative length {length} for {what}")


def _fixed_step(size: int) -> Step:
    def step(w: _Walk, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise RequestBoundsError("truncated field")
        return pos
    return step


def _variable_step(kafka_type: str, flexible: bool, nullable: bool, name: str) -> Step:
    legacy = _I16 if kafka_type == "string" else _I32

    def step(w: _Walk, pos: int, end: int) -> int:
        length, pos = _length(w.buf, pos, end, flexible, legacy)
        _null_or_negative(length, nullable, name)
        if length > end - pos:
            raise RequestBoundsError(f"{name} of {length} bytes but {end - pos} left in the request")
        return pos + max(length, 0)
    return step


def _primitive_step(field: dataclasses.Field[Any], flexible: bool, nullable: bool) -> Step:
    kafka_type = get_schema_field_type(field)
    if kafka_type in _FIXED_SIZES:
        return _fixed_step(_FIXED_SIZES[kafka_type])
    if kafka_type in _VARIABLE:
        return _variable_step(kafka_type, flexible, nullable, field.name)
    raise RequestBoundsError(f"field {field.name} has a type this check does not know: {kafka_type}")


def _array_step(item: Step, flexible: bool, nullable: bool, name: str) -> Step:
    def step(w: _Walk, pos: int, end: int) -> int:
        count, pos = _length(w.buf, pos, end, flexible, _I32)
        _null_or_negative(count, nullable, f"array {name}")
        if count > end - pos:  # every element takes at least one byte
            raise RequestBoundsError(f"array {name} of {count} elements but {end - pos} bytes left")
        w.elements_left -= count
        if w.elements_left < 0:
            raise RequestBoundsError(f"more than {MAX_ELEMENTS} array elements in one request")
        for _ in range(count):
            pos = item(w, pos, end)
        return pos
    return step


def _nullable_entity_step(entity: Step) -> Step:
    def step(w: _Walk, pos: int, end: int) -> int:
        if pos >= end:
            raise RequestBoundsError("truncated nullable struct marker")
        marker = w.buf[pos]
        if marker == 0xFF:  # int8 -1: null (KIP-893)
            return pos + 1
        if marker != 1:
            raise RequestBoundsError(f"nullable struct marker {marker} is neither -1 nor 1")
        return entity(w, pos + 1, end)
    return step


def _field_step(field: dataclasses.Field[Any], flexible: bool, tagged: bool) -> Step:
    nullable = False if tagged else is_optional(field)
    kind = classify_field(field)
    if isinstance(kind, PrimitiveField):
        return _primitive_step(field, flexible, nullable)
    if isinstance(kind, PrimitiveTupleField):
        return _array_step(_primitive_step(field, flexible, False), flexible, nullable, field.name)
    if isinstance(kind, EntityField):
        inner = entity_step(kind.type_)
        return _nullable_entity_step(inner) if nullable else inner
    if isinstance(kind, EntityTupleField):
        return _array_step(entity_step(kind.type_), flexible, nullable, field.name)
    raise RequestBoundsError(f"field {field.name} has a shape this check does not know")


@functools.cache
def entity_step(entity_type: type[Any]) -> Step:
    """The checking step for one kio entity class, built once per class."""
    flexible = entity_type.__flexible__
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        if tag is None:
            steps.append(_field_step(field, flexible, tagged=False))
        else:
            tagged[int(tag)] = _field_step(field, flexible, tagged=True)

    def step(w: _Walk, pos: int, end: int) -> int:
        for field_step in steps:
            pos = field_step(w, pos, end)
        if flexible:
            pos = _tagged_fields(w, pos, end, tagged)
        return pos
    return step


def _tagged_fields(w: _Walk, pos: int, end: int, known: dict[int, Step]) -> int:
    buf = w.buf
    count, pos = read_uvarint(buf, pos, end)
    if count > end - pos:  # each tagged field takes at least two bytes
        raise RequestBoundsError(f"{count} tagged fields but {end - pos} bytes left")
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise RequestBoundsError(f"tagged field {tag} of {size} bytes but {end - pos} left")
        inner = known.get(tag)
        if inner is not None and inner(w, pos, pos + size) != pos + size:
            raise RequestBoundsError(f"tagged field {tag} does not fill its {size} bytes")
        pos += size
    return pos


def check_request_body(schema: type, frame: bytes, offset: int, max_elements: int = MAX_ELEMENTS) -> None:
    """Raise RequestBoundsError unless the body at `offset` fits `frame` as `schema` says.

    Bytes after the body are allowed, as Kafka's own parser allows them.
    """
    entity_step(schema)(_Walk(frame, max_elements), offset, len(frame))
