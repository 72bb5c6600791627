"""The records of stored batches as column buffers in Arrow's layout.

Readers that hand whole columns on (the PySpark source) want each field
of many records side by side, not a Python object per record: building
those objects and converting them to Arrow cost more than the rest of a
Spark scan together. `record_columns` decodes a run of batches into the
buffers an Arrow array is made of (validity bitmaps, int32 offsets, data,
little-endian numbers), so a caller wraps them without copying.

The C walk (_record_scan.c) does it at memory speed; where it was not
built the same buffers come from the Python record decoder, and the two
are tested against each other (tests/protocol/test_record_columns.py).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence

from .compression import decompress
from .records import ATTR_LOG_APPEND_TIME, HEADER_SIZE, BatchHeader, InvalidBatchError, decode_payload, read_header

try:  # the C walk (protocol/_record_scan.c), built when the package is installed
    from ._record_scan import record_columns as _c_columns
except ImportError:  # no compiler where it was installed: the Python decoder does it
    _c_columns = None


@dataclasses.dataclass(frozen=True, slots=True)
class Records:
    """One batch's records, decompressed, with what their rows need from the batch header."""

    payload: bytes | memoryview
    header: BatchHeader

    @classmethod
    def of(cls, batch: memoryview, header: BatchHeader | None = None) -> Records:
        """The records of a whole, checked batch (`header`: its header, when the caller read it already)."""
        header = header or read_header(batch)
        payload = batch[HEADER_SIZE : header.size]
        return cls(decompress(header.codec, payload) if header.codec else payload, header)


@dataclasses.dataclass(frozen=True, slots=True)
class Columns:
    """Arrow buffers of `rows` records; the header buffers are None unless asked for.

    Binary columns are (validity bitmap, int32 offsets, data); offsets and
    timestamps (microseconds, as Spark counts them) are int64, timestamp
    types (0 CreateTime, 1 LogAppendTime) int32. Headers are a list column,
    null where a record has none (as Spark's Kafka source has it): validity,
    int32 offsets per row into (key offsets, key data) and (value validity,
    value offsets, value data).
    """

    rows: int
    key_valid: bytes
    key_offsets: bytes
    key_data: bytes
    value_valid: bytes
    value_offsets: bytes
    value_data: bytes
    offsets: bytes
    timestamps: bytes
    types: bytes
    header_valid: bytes | None
    header_offsets: bytes | None
    header_key_offsets: bytes | None
    header_key_data: bytes | None
    header_value_valid: bytes | None
    header_value_offsets: bytes | None
    header_value_data: bytes | None


def record_columns(batches: Sequence[Records], start: int, end: int, with_headers: bool) -> Columns:
    """The records at offsets [start, end) of `batches` as column buffers.

    Raises InvalidBatchError when records do not parse. Keys, values, header
    keys and header values must each stay under 2 GiB per call (Arrow's
    int32 offsets).
    """
    if _c_columns is None:
        return _python_columns(batches, start, end, with_headers)
    try:
        return Columns(*_c_columns(
            [(b.payload, b.header.base_offset, b.header.record_count, b.header.base_timestamp,
              b.header.max_timestamp, bool(b.header.attributes & ATTR_LOG_APPEND_TIME)) for b in batches],
            start, end, with_headers))
    except ValueError as exc:
        raise InvalidBatchError(str(exc)) from None


class _Binary:
    """A nullable binary column being built: validity bits, int32 offsets, data."""

    def __init__(self) -> None:
        self.valid = bytearray()
        self.offsets = [0]
        self.data = bytearray()
        self.rows = 0

    def add(self, value: bytes | None) -> None:
        if self.rows % 8 == 0:
            self.valid.append(0)
        if value is not None:
            self.valid[-1] |= 1 << (self.rows % 8)
            self.data += value
        self.offsets.append(len(self.data))
        self.rows += 1

    def buffers(self) -> tuple[bytes, bytes, bytes]:
        return bytes(self.valid), _pack("i", self.offsets), bytes(self.data)


def _python_columns(batches: Sequence[Records], start: int, end: int, with_headers: bool) -> Columns:
    keys, values, header_keys, header_values = _Binary(), _Binary(), _Binary(), _Binary()
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    header_offsets = [0]
    header_valid = bytearray()
    for batch in batches:
        ts_type = 1 if batch.header.attributes & ATTR_LOG_APPEND_TIME else 0
        for record in decode_payload(bytes(batch.payload), batch.header):
            if not start <= record.offset < end:
                continue
            keys.add(record.key)
            values.add(record.value)
            offsets.append(record.offset)
            timestamps.append(record.timestamp * 1000)
            types.append(ts_type)
            if with_headers:
                if len(header_offsets) % 8 == 1:
                    header_valid.append(0)
                if record.headers:
                    header_valid[-1] |= 1 << ((len(header_offsets) - 1) % 8)
                for name, value in record.headers:
                    header_keys.add(name.encode())
                    header_values.add(value)
                header_offsets.append(header_keys.rows)
    headers: tuple[bytes | None, ...] = (None,) * 7
    if with_headers:
        _, key_offsets, key_data = header_keys.buffers()
        headers = (bytes(header_valid), _pack("i", header_offsets), key_offsets, key_data, *header_values.buffers())
    return Columns(len(offsets), *keys.buffers(), *values.buffers(), _pack("q", offsets), _pack("q", timestamps),
                   _pack("i", types), *headers)


def _pack(code: str, numbers: list[int]) -> bytes:
    return struct.pack(f"<{len(numbers)}{code}", *numbers)

