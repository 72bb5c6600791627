"""Record batch v2: a header view, validation, and record (de)coding.

The broker's hot path only reads the 61-byte header, checks the CRC-32C and
lets the store patch baseOffset / partitionLeaderEpoch (both outside the
CRC). Records are decoded only where a feature needs them: exact timestamp
search, LogAppendTime, and the test broker's produce/consume helpers.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c

from .compression import Codec, compress, decompress

# The store keeps its own copy (storage/batch_format.py; protocol imports no storage):
# tests/storage/test_batch_header_agrees.py holds the two to one layout.
HEADER = struct.Struct(">qiiBIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede what batchLength counts
CRC_START = 21
MAGIC_V2 = 2

ATTR_CODEC_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_LENGTH = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class InvalidBatchError(ValueError):
    """A batch that must be refused with CORRUPT_MESSAGE / INVALID_RECORD."""

    def __init__(self, message: str, *, corrupt: bool = True) -> None:
        super().__init__(message)
        self.corrupt = corrupt  # False: well-formed but not acceptable here


@dataclasses.dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def codec(self) -> int:
        return self.attributes & ATTR_CODEC_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidBatchError(f"record batch shorter than its {HEADER_SIZE}-byte header")
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def split_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Validate a producer's records field; return (position, header) per batch.

    Every batch must be a complete magic-2 batch with a matching CRC-32C and
    lastOffsetDelta + 1 == recordCount > 0. Control batches are refused.
    """
    view = memoryview(buf)
    out: list[tuple[int, BatchHeader]] = []
    pos = 0
    if len(view) == 0:
        raise InvalidBatchError("empty records")
    while pos < len(view):
        if len(view) - pos < HEADER_SIZE:
            raise InvalidBatchError("truncated record batch header")
        header = read_header(view, pos)
        if header.magic != MAGIC_V2:
            raise InvalidBatchError(f"record batch magic {header.magic} is not supported (only v2)")
        end = pos + header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or end > len(view):
            raise InvalidBatchError("record batch length does not match the bytes sent")
        if crc32c.crc32c(view[pos + CRC_START : end]) != header.crc:
            raise InvalidBatchError("record batch CRC-32C mismatch")
        if header.record_count <= 0 or header.last_offset_delta + 1 != header.record_count:
            raise InvalidBatchError(
                f"record batch counts disagree: lastOffsetDelta {header.last_offset_delta}, "
                f"recordCount {header.record_count}"
            )
        if header.is_control:
            raise InvalidBatchError("clients may not produce control batches", corrupt=False)
        out.append((pos, header))
        pos = end
    return out


def set_log_append_time(batch: bytes | memoryview, timestamp: int) -> bytes:
    """Mark a batch LogAppendTime with maxTimestamp = timestamp, re-signing it."""
    out = bytearray(batch)
    attrs = struct.unpack_from(">h", out, 21)[0] | ATTR_LOG_APPEND_TIME
    struct.pack_into(">h", out, 21, attrs)
    _I64.pack_into(out, 35, timestamp)
    _U32.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# --- records inside a batch ------------------------------------------------


@dataclasses.dataclass(slots=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = dataclasses.field(default_factory=list)
    timestamp: int = 0
    offset: int = -1  # set when decoded from a stored batch


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zigzag
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf):
            raise InvalidBatchError("truncated varint in record")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidBatchError("varint too long in record")
    return (value >> 1) ^ -(value & 1), pos


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buf):
        raise InvalidBatchError("truncated field in record")
    return buf[pos : pos + length], pos + length


def _encode_record(record: Record, offset_delta: int, base_timestamp: int) -> bytes:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, record.timestamp - base_timestamp)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode())
        _write_bytes(body, value)
    out = bytearray()
    _write_varint(out, len(body))
    return bytes(out + body)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: str | Codec = Codec.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Encode records as one v2 batch, as a producer would send it."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    codec = Codec[compression.upper()] if isinstance(compression, str) else Codec(compression)
    base_ts = min(r.timestamp for r in records)
    max_ts = max(r.timestamp for r in records)
    body = b"".join(_encode_record(r, i, base_ts) for i, r in enumerate(records))
    payload = compress(codec, body)
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, base_offset, batch_length, partition_leader_epoch, MAGIC_V2, 0, int(codec),
        len(records) - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(records),
    )
    out += payload
    _U32.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def _decode_records(batch: bytes | memoryview, header: BatchHeader) -> Iterator[Record]:
    return decode_payload(decompress(header.codec, memoryview(batch)[HEADER_SIZE : header.size]), header)


def decode_payload(payload: bytes, header: BatchHeader) -> Iterator[Record]:
    """The records of a batch whose records section (after the header) is already decompressed."""
    pos = 0
    log_append = header.attributes & ATTR_LOG_APPEND_TIME
    for _ in range(header.record_count):
        length, pos = read_varint(payload, pos)
        stop = pos + length
        if stop > len(payload):
            raise InvalidBatchError("truncated record")
        pos += 1  # attributes
        ts_delta, pos = read_varint(payload, pos)
        offset_delta, pos = read_varint(payload, pos)
        key, pos = _read_bytes(payload, pos)
        value, pos = _read_bytes(payload, pos)
        count, pos = read_varint(payload, pos)
        headers = []
        for _ in range(count):
            name, pos = _read_bytes(payload, pos)
            hval, pos = _read_bytes(payload, pos)
            headers.append(((name or b"").decode("utf-8", "replace"), hval))
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        yield Record(key, value, headers, timestamp, header.base_offset + offset_delta)
        pos = stop


class RawRecord(NamedTuple):
    """One record of a stored batch, still encoded: what log compaction filters."""

    offset_delta: int
    timestamp: int
    key: bytes | None
    tombstone: bool  # a null value: "delete this key"
    raw: bytes | memoryview  # the record's bytes, length prefix included


def split_records(batch: bytes | memoryview) -> list[RawRecord]:
    """The records of one batch (decompressed), each with its encoded bytes.

    Headers are not decoded: compaction only needs key, value-is-null,
    offset and timestamp, and copies the rest untouched.
    """
    header = read_header(batch)
    payload = memoryview(decompress(header.codec, memoryview(batch)[HEADER_SIZE : header.size]))
    log_append = header.attributes & ATTR_LOG_APPEND_TIME
    out: list[RawRecord] = []
    pos = 0
    for _ in range(header.record_count):
        start = pos
        length, pos = read_varint(payload, pos)
        stop = pos + length
        if stop > len(payload):
            raise InvalidBatchError("truncated record")
        pos += 1  # attributes
        ts_delta, pos = read_varint(payload, pos)
        offset_delta, pos = read_varint(payload, pos)
        key_len, pos = read_varint(payload, pos)
        key = None if key_len < 0 else bytes(payload[pos : pos + key_len])
        pos += max(key_len, 0)
        value_len, pos = read_varint(payload, pos)
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        out.append(RawRecord(offset_delta, timestamp, key, value_len < 0, payload[start:stop]))
        pos = stop
    return out


def rebuild_batch(batch: bytes | memoryview, kept: Sequence[RawRecord]) -> bytes:
    """The batch holding only `kept` of its records, as Kafka's log cleaner writes it.

    baseOffset, lastOffsetDelta (so a producer's last sequence survives),
    baseTimestamp, producer fields and the codec stay; the records are
    recompressed with the batch's own codec, maxTimestamp is that of the
    records kept, and the CRC-32C is recomputed. With no record kept the
    batch is an empty header, as Kafka keeps a producer's last batch.
    """
    header = read_header(batch)
    body = b"".join(r.raw for r in kept)
    payload = compress(header.codec, body) if kept else b""
    log_append = header.attributes & ATTR_LOG_APPEND_TIME
    max_ts = header.max_timestamp if log_append or not kept else max(r.timestamp for r in kept)
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), header.partition_leader_epoch,
        MAGIC_V2, 0, header.attributes, header.last_offset_delta, header.base_timestamp, max_ts,
        header.producer_id, header.producer_epoch, header.base_sequence, len(kept),
    )
    out += payload
    _U32.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def empty_batch(base_offset: int, last_offset_delta: int, timestamp: int) -> bytes:
    """A batch of no records spanning offsets [base_offset, base_offset + last_offset_delta].

    What Kafka's log cleaner leaves of a batch whose every record went: a
    header whose offsets consumers step over. A replica holds one where
    its source's cleaner removed whole batches, so the offsets after it
    stay the source's.
    """
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD, -1, MAGIC_V2, 0, 0, last_offset_delta,
                     timestamp, timestamp, -1, -1, -1, 0)
    _U32.pack_into(out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def keyless_records(batch: bytes | memoryview) -> list[int]:
    """Indexes in the batch of records without a key: what a compacted topic refuses."""
    header = read_header(batch)
    return [i for i, r in enumerate(_decode_records(batch, header)) if r.key is None]


def record_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]]:
    """(offset delta, timestamp) of every record of one batch: for exact time search."""
    header = read_header(batch)
    return [(r.offset - header.base_offset, r.timestamp) for r in _decode_records(batch, header)]


def whole_batches(data: bytes | memoryview) -> Iterator[BatchHeader]:
    """The headers of the whole batches in a fetched byte string (a truncated tail is left out).

    Reads 61 header bytes per batch and no record: cheap enough to count
    the records a Fetch sends.
    """
    view = memoryview(data)
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        header = read_header(view, pos)
        if pos + header.size > len(view):
            return
        yield header
        pos += header.size


# batchLength (offset 8), attributes (21) and recordCount (57) of a batch header, in one unpack
_COUNT_FIELDS = struct.Struct(">8xi9xh34xi")


def count_records(data: bytes | memoryview) -> int:
    """Records in the whole, non-control batches of a fetched byte string.

    The Fetch path counts what it sends with this: one unpack of three
    header fields per batch (about 0.2 µs), no record decoded.
    """
    total, pos, end = 0, 0, len(data)
    unpack = _COUNT_FIELDS.unpack_from
    while end - pos >= HEADER_SIZE:
        length, attributes, records = unpack(data, pos)
        pos += LOG_OVERHEAD + length
        if pos > end:
            break
        if not attributes & ATTR_CONTROL:
            total += records
    return total


def iter_records(data: bytes | memoryview) -> Iterator[Record]:
    """Records of the whole batches in a fetched byte string (a truncated tail is skipped)."""
    view = memoryview(data)
    pos = 0
    for header in whole_batches(view):
        if not header.is_control:
            yield from _decode_records(view[pos : pos + header.size], header)
        pos += header.size

