"""What Kafka's LogValidator checks inside a batch, as pure functions.

The batch header and CRC (records.split_batches) say the bytes arrived as
sent; they say nothing of whether the records inside parse. A batch with a
valid CRC and junk records, a compression flag over a plain body, a record
count that disagrees with the records, or every record at offset delta 0 is
stored byte for byte and then stops (or, with repeated deltas, duplicates
records for) every consumer of the partition. So before a batch is
appended its records are walked once, without building objects:

- every record's length, fields, keys, values and headers fit exactly inside
  it, and the records end exactly at the batch's end;
- there are exactly recordCount records, with offset deltas 0..n-1 in order;
- CreateTime timestamps lie within message.timestamp.before.max.ms /
  after.max.ms of the broker's clock (INVALID_TIMESTAMP, per record, as
  Kafka reports them);
- compressed records decompress, within a size bound, to exactly that.

The walk is the broker's only per-record cost on produce. In Python it
costs about 3 us per record, 15 times the broker's whole CPU per 100-byte
message, so a C twin (_record_scan.c) walks valid batches at memory speed;
it only says valid or not, and the Python walk below, the reference, runs on
refused batches to say why (and wherever the C module was not built).
"""

from __future__ import annotations

from .compression import CompressionError, DecompressedTooLargeError, decompress_bounded
from .records import ATTR_LOG_APPEND_TIME, HEADER_SIZE, BatchHeader, InvalidBatchError

try:  # the C walk (protocol/_record_scan.c), built when the package is installed
    from ._record_scan import scan_records
except ImportError:  # no compiler where it was installed: the Python walk does it all
    scan_records = None

CORRUPT = "corrupt"  # CORRUPT_MESSAGE: the bytes do not decode
INVALID = "invalid"  # INVALID_RECORD: they decode, to something Kafka refuses
TIMESTAMP = "timestamp"  # INVALID_TIMESTAMP
TOO_LARGE = "too_large"  # INVALID_RECORD: compressed records inflate past the limit

DECOMPRESSED_LIMIT = 64 << 20  # largest decompressed records of one batch


class RecordValidationError(InvalidBatchError):
    """Why a batch's records are refused, and which record (for INVALID_TIMESTAMP)."""

    def __init__(self, message: str, kind: str, record_index: int = -1) -> None:
        super().__init__(message, corrupt=kind == CORRUPT)
        self.kind = kind
        self.record_index = record_index


def _varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint of at most 10 bytes that must end before `end`."""
    value = shift = 0
    while True:
        if pos >= end:
            raise RecordValidationError("record field runs past the end of its record", INVALID)
        byte = buf[pos]
        pos += 1
        if shift == 63 and byte > 1:
            raise RecordValidationError("varint longer than 64 bits in a record", CORRUPT)
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise RecordValidationError("varint longer than 10 bytes in a record", CORRUPT)


def _skip_bytes(buf: bytes | bytearray | memoryview, pos: int, end: int, nullable: bool) -> int:
    """Past a varint-length-prefixed field (key, value, header name or value)."""
    byte = buf[pos] if pos < end else 0x80
    if byte < 0x80:
        pos += 1
        length = (byte >> 1) ^ -(byte & 1)
    else:
        length, pos = _varint(buf, pos, end)
    if length < 0:
        if length == -1 and nullable:
            return pos
        raise RecordValidationError(f"invalid field length {length} in a record", INVALID)
    pos += length
    if pos > end:
        raise RecordValidationError("record field runs past the end of its record", INVALID)
    return pos


def walk_records(buf: bytes, pos: int, end: int, count: int) -> tuple[int, int]:
    """Check `count` records filling buf[pos:end] exactly; (min, max) timestamp delta."""
    lowest = highest = 0
    for index in range(count):
        if pos >= end:
            raise RecordValidationError(
                f"batch declares {count} records but holds {index}", INVALID
            )
        byte = buf[pos]
        if byte < 0x80:
            pos += 1
            length = (byte >> 1) ^ -(byte & 1)
        else:
            length, pos = _varint(buf, pos, end)
        stop = pos + length
        if length < 6 or stop > end:  # attributes, 3 varints, key and value lengths at least
            raise RecordValidationError(
                f"record {index} declares {length} bytes, {end - pos} are left in the batch", INVALID
            )
        pos += 1  # attributes (unused in v2)
        byte = buf[pos]
        if byte < 0x80:
            pos += 1
            ts_delta = (byte >> 1) ^ -(byte & 1)
        else:
            ts_delta, pos = _varint(buf, pos, stop)
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            pos += 1
            offset_delta = (byte >> 1) ^ -(byte & 1)
        else:
            offset_delta, pos = _varint(buf, pos, stop)
        if offset_delta != index:
            raise RecordValidationError(
                f"record {index} has offset delta {offset_delta}; deltas must run 0..{count - 1}", INVALID
            )
        if ts_delta < lowest:
            lowest = ts_delta
        elif ts_delta > highest:
            highest = ts_delta
        pos = _skip_bytes(buf, pos, stop, True)  # key
        pos = _skip_bytes(buf, pos, stop, True)  # value
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            pos += 1
            headers = (byte >> 1) ^ -(byte & 1)
        else:
            headers, pos = _varint(buf, pos, stop)
        if headers < 0 or headers > stop - pos:
            raise RecordValidationError(f"record {index} declares {headers} headers", INVALID)
        for _ in range(headers):
            pos = _skip_bytes(buf, pos, stop, False)
            pos = _skip_bytes(buf, pos, stop, True)
        if pos != stop:
            raise RecordValidationError(
                f"record {index} declares {length} bytes but its fields take {length - (stop - pos)}", INVALID
            )
    if pos != end:
        raise RecordValidationError(f"{end - pos} bytes follow the batch's {count} records", INVALID)
    return lowest, highest


def _timestamp_error(buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base: int, low: int, high: int) -> None:
    """Name the first record outside [low, high], as Kafka's per-record error does."""
    for index in range(count):
        length, pos = _varint(buf, pos, end)
        ts_delta, _ = _varint(buf, pos + 1, end)
        timestamp = base + ts_delta
        if not low <= timestamp <= high:
            raise RecordValidationError(
                f"Timestamp {timestamp} of message with offset {index} is out of range. "
                f"The timestamp should be within [{low}, {high}]",
                TIMESTAMP,
                index,
            )
        pos += length


def validate_records(
    batch: bytes | bytearray | memoryview,
    header: BatchHeader,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    *,
    check_timestamps: bool = True,
    decompressed_limit: int = DECOMPRESSED_LIMIT,
) -> None:
    """Raise RecordValidationError unless `batch` (one whole batch) holds valid records.

    Timestamps are checked unless the caller says not to (a LogAppendTime
    topic: the broker stamps those) or the batch is marked LogAppendTime.
    """
    buf: bytes | bytearray | memoryview
    if header.codec:
        try:
            buf = decompress_bounded(header.codec, memoryview(batch)[HEADER_SIZE : header.size], decompressed_limit)
        except DecompressedTooLargeError as exc:
            raise RecordValidationError(str(exc), TOO_LARGE) from None
        except CompressionError as exc:
            raise RecordValidationError(str(exc), CORRUPT) from None
        pos, end = 0, len(buf)
    else:
        buf = batch
        pos, end = HEADER_SIZE, header.size
    found = scan_records(buf, pos, end, header.record_count) if scan_records is not None else None
    if found is None:
        if not isinstance(buf, bytes):
            buf = bytes(buf)
        found = walk_records(buf, pos, end, header.record_count)
    lowest, highest = found
    if not check_timestamps or header.attributes & ATTR_LOG_APPEND_TIME:
        return
    low = now_ms - before_max_ms
    high = now_ms + after_max_ms
    base = header.base_timestamp
    if base + lowest < low or base + highest > high:
        _timestamp_error(buf, pos, end, header.record_count, base, low, high)
