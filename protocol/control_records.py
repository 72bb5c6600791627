"""Transaction markers: the control batches that end a transaction in a partition.

A marker is a v2 batch flagged transactional and control, carrying the
producer id and epoch of the transaction, base sequence -1 and one record
whose key is (version 0, type) with type 0 = ABORT, 1 = COMMIT and whose
value is (version 0, coordinator epoch) -- Kafka's EndTransactionMarker.
Consumers recognise the batch by its attributes and never hand it to users.
"""

from __future__ import annotations

import enum
import struct

import crc32c

from .records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    CRC_START,
    HEADER_SIZE,
    InvalidBatchError,
    Record,
    build_batch,
    read_header,
    read_varint,
)

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_ATTRIBUTES_AT = 21


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def build_marker(
    producer_id: int, producer_epoch: int, control: ControlType, timestamp: int, coordinator_epoch: int = 0
) -> bytes:
    """One end-transaction marker batch, as a transaction coordinator writes it."""
    record = Record(_KEY.pack(0, control), _VALUE.pack(0, coordinator_epoch), [], timestamp)
    batch = build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1)
    return set_attributes(batch, ATTR_TRANSACTIONAL | ATTR_CONTROL)


def set_attributes(batch: bytes, flags: int) -> bytes:
    """The batch with attribute flags added and its CRC-32C recomputed."""
    out = bytearray(batch)
    attrs = struct.unpack_from(">h", out, _ATTRIBUTES_AT)[0] | flags
    struct.pack_into(">h", out, _ATTRIBUTES_AT, attrs)
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def marker_type(batch: bytes | memoryview) -> ControlType | None:
    """COMMIT or ABORT for an uncompressed end-transaction marker batch; None for anything else."""
    found = _marker_record(batch)
    return None if found is None else found[0]


def marker_coordinator_epoch(batch: bytes | memoryview) -> int | None:
    """The coordinator epoch an end-transaction marker carries (what a partition's leader fences older
    coordinators by, after a restart too); None for anything else."""
    found = _marker_record(batch)
    return None if found is None else found[1]


def _marker_record(batch: bytes | memoryview) -> tuple[ControlType, int] | None:
    header = read_header(batch)
    if not header.is_control:
        return None
    view = memoryview(batch)[HEADER_SIZE : header.size]
    # record: length, attributes (one byte), timestamp delta, offset delta, key length (varints:
    # the timestamp delta is long once Kafka's cleaner set a delete horizon in the base
    # timestamp), the 4-byte key, value length, then the 6-byte value.
    try:
        _, pos = read_varint(view, 0)
        _, pos = read_varint(view, pos + 1)
        _, pos = read_varint(view, pos)
        key_length, pos = read_varint(view, pos)
        if key_length != _KEY.size or len(view) < pos + _KEY.size:
            return None
        _, kind = _KEY.unpack_from(view, pos)
        value_length, pos = read_varint(view, pos + _KEY.size)
    except InvalidBatchError:
        return None
    if kind not in (0, 1):
        return None
    epoch = _VALUE.unpack_from(view, pos)[1] if value_length >= _VALUE.size and len(view) >= pos + _VALUE.size else 0
    return ControlType(kind), epoch
