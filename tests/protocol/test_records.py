"""Record batch v2: validation, CRC coverage, codecs and record decoding."""

from __future__ import annotations

import struct

import pytest
from kafkacompat.protocol.compression import Codec, compress, decompress
from kafkacompat.protocol.records import (
    InvalidBatchError,
    Record,
    build_batch,
    iter_records,
    read_header,
    record_timestamps,
    set_log_append_time,
    split_batches,
)

RECORDS = [Record(b"k%d" % i, b"v" * i, [("h", b"%d" % i)], 1000 + 10 * i) for i in range(30)]


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip_every_codec(codec: Codec) -> None:
    batch = build_batch(RECORDS, base_offset=100, compression=codec)
    [(pos, header)] = split_batches(batch)
    assert (pos, header.record_count, header.last_offset, header.codec) == (0, 30, 129, codec)
    decoded = list(iter_records(batch))
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (100 + i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(RECORDS)
    ]
    assert record_timestamps(batch)[7] == (7, 1070)


def test_base_offset_and_epoch_are_outside_the_crc() -> None:
    batch = bytearray(build_batch(RECORDS))
    struct.pack_into(">q", batch, 0, 123456)
    struct.pack_into(">i", batch, 12, 9)
    [(_, header)] = split_batches(bytes(batch))
    assert header.base_offset == 123456 and header.partition_leader_epoch == 9


def test_any_flipped_byte_inside_the_crc_range_is_caught() -> None:
    batch = build_batch(RECORDS[:3], compression="lz4")
    for i in range(21, len(batch)):
        bad = bytearray(batch)
        bad[i] ^= 0x01
        with pytest.raises(InvalidBatchError):
            split_batches(bytes(bad))


def test_count_mismatch_and_truncation_are_refused() -> None:
    batch = bytearray(build_batch(RECORDS[:2]))
    with pytest.raises(InvalidBatchError, match="length"):
        split_batches(bytes(batch[:-1]))
    struct.pack_into(">i", batch, 57, 3)  # recordCount no longer lastOffsetDelta + 1 (CRC aside)
    with pytest.raises(InvalidBatchError):
        split_batches(bytes(batch))
    with pytest.raises(InvalidBatchError, match="empty"):
        split_batches(b"")


def test_log_append_time_restamps_and_re_signs() -> None:
    batch = set_log_append_time(build_batch(RECORDS[:3]), 5_000)
    [(_, header)] = split_batches(batch)
    assert header.max_timestamp == 5_000 and header.attributes & 0x08
    assert {r.timestamp for r in iter_records(batch)} == {5_000}


def test_iter_records_skips_a_truncated_trailing_batch() -> None:
    two = build_batch(RECORDS[:2]) + build_batch(RECORDS[2:4], base_offset=2)
    assert [r.offset for r in iter_records(two[:-5])] == [0, 1]


def test_snappy_reads_raw_blocks_and_xerial_frames() -> None:
    import cramjam

    data = b"snappy " * 10_000
    assert compress(Codec.SNAPPY, data).startswith(b"\x82SNAPPY\x00")
    assert decompress(Codec.SNAPPY, compress(Codec.SNAPPY, data)) == data
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_header_reader_needs_61_bytes() -> None:
    with pytest.raises(InvalidBatchError):
        read_header(b"\x00" * 60)
