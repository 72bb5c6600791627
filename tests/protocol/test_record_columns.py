"""record_columns hands out exactly the records a decoder reads, as Arrow buffers, in C and in Python alike."""

from __future__ import annotations

import random
import struct

import pytest
from kafkacompat.protocol import record_columns as rc
from kafkacompat.protocol.compression import Codec
from kafkacompat.protocol.record_columns import Columns, Records, record_columns
from kafkacompat.protocol.records import InvalidBatchError, Record, build_batch, empty_batch, set_log_append_time

from tests import poison_batches as poison


@pytest.fixture(params=["c", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "c":
        if rc._c_columns is None:
            pytest.skip("the C record walk (_record_scan) is not built here; the Python decoder is tested")
    else:
        monkeypatch.setattr(rc, "_c_columns", None)
    return request.param


def _batches() -> list[bytes]:
    """Batches of every codec with null and empty keys and values, headers (null values too), both time types,
    and a batch of no records."""
    rnd = random.Random(7)
    out, offset = [], 100
    for n, codec in enumerate([*Codec, Codec.NONE]):
        records = []
        for i in range(1 + n * 3):
            key = None if i % 3 == 0 else rnd.randbytes(rnd.randrange(0, 40))
            value = None if i % 5 == 4 else rnd.randbytes(rnd.randrange(0, 3000))
            headers = [(f"h{j}é", None if j == 1 else rnd.randbytes(j * 3)) for j in range(i % 4)]
            records.append(Record(key, value, headers, 1_700_000_000_000 + rnd.randrange(-5000, 5000)))
        batch = build_batch(records, base_offset=offset, compression=codec)
        out.append(set_log_append_time(batch, 1_800_000_000_000) if n == 2 else batch)
        offset += len(records)
    out.append(empty_batch(offset, 4, 1_700_000_000_000))  # what a compacted topic's replica holds for a cleaned batch
    return out


def _rows(columns: Columns, with_headers: bool) -> list[tuple]:
    """The rows the buffers spell, read back independently of either decoder."""

    def binary(valid: bytes, offsets: bytes, data: bytes, i: int) -> bytes | None:
        if not valid[i >> 3] >> (i & 7) & 1:
            return None
        start, end = struct.unpack_from("<ii", offsets, i * 4)
        return data[start:end]

    n = columns.rows
    offsets = struct.unpack(f"<{n}q", columns.offsets)
    stamps = struct.unpack(f"<{n}q", columns.timestamps)
    types = struct.unpack(f"<{n}i", columns.types)
    rows = []
    for i in range(n):
        row = [binary(columns.key_valid, columns.key_offsets, columns.key_data, i),
               binary(columns.value_valid, columns.value_offsets, columns.value_data, i),
               offsets[i], stamps[i], types[i]]
        if with_headers and not columns.header_valid[i >> 3] >> (i & 7) & 1:
            row.append(None)
        elif with_headers:
            first, last = struct.unpack_from("<ii", columns.header_offsets, i * 4)
            count = len(columns.header_key_offsets) // 4 - 1
            every = b"\xff" * (count // 8 + 1)
            row.append([(binary(every, columns.header_key_offsets, columns.header_key_data, h).decode(),
                         binary(columns.header_value_valid, columns.header_value_offsets, columns.header_value_data, h))
                        for h in range(first, last)])
        rows.append(tuple(row))
    return rows


def _expected(batches: list[bytes], start: int, end: int, with_headers: bool) -> list[tuple]:
    from kafkacompat.protocol.records import iter_records, read_header

    rows = []
    for batch in batches:
        log_append = read_header(batch).attributes & 0x08
        for r in iter_records(batch):
            if start <= r.offset < end:
                rows.append((r.key, r.value, r.offset, r.timestamp * 1000, 1 if log_append else 0,
                             *([list(r.headers) or None] if with_headers else [])))
    return rows


@pytest.mark.parametrize("with_headers", [True, False])
@pytest.mark.parametrize(("start", "end"), [(0, 1 << 62), (103, 131), (117, 118), (500, 600)])
def test_columns_hold_the_records_a_decoder_reads(decoder: str, with_headers: bool, start: int, end: int) -> None:
    batches = _batches()
    columns = record_columns([Records.of(memoryview(b)) for b in batches], start, end, with_headers)
    assert _rows(columns, with_headers) == _expected(batches, start, end, with_headers)
    assert (columns.header_offsets is None) == (not with_headers)


def test_c_and_python_buffers_are_byte_for_byte_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    if rc._c_columns is None:
        pytest.skip("the C record walk (_record_scan) is not built here")
    records = [Records.of(memoryview(b)) for b in _batches()]
    in_c = record_columns(records, 105, 140, True)
    monkeypatch.setattr(rc, "_c_columns", None)
    assert record_columns(records, 105, 140, True) == in_c


@pytest.mark.parametrize("name", ["junk_records", "count_more_than_records", "count_fewer_than_records", "same_offset_delta",
                                  "trailing_bytes_after_records", "record_length_past_the_end"])
def test_records_that_do_not_parse_are_an_error_not_rows(name: str) -> None:
    if rc._c_columns is None:
        pytest.skip("the C record walk (_record_scan) is not built here")
    batch = poison.POISON[name]()
    with pytest.raises(InvalidBatchError, match="do not parse"):
        record_columns([Records.of(memoryview(batch))], 0, 1 << 62, True)
