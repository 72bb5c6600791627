"""The record batch header is written down twice, by the wire protocol and by the store: the two must agree.

protocol/ and storage/ are independent (neither imports the other, nor
anything of the broker), and no third package sits beneath both, so each
keeps the few lines of header layout it needs: protocol/records.py (wire
batches: build, decode, rebuild) and storage/batch_format.py (what the
store reads of a stored batch: size, offsets, timestamps, CRC). This test
is the contract between them: the same layout, constants and field values
for every kind of batch a producer sends, and the same verdict on a
damaged one.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafkacompat.protocol import records as wire
from kafkacompat.protocol.records import Record, build_batch, read_header, set_log_append_time
from kafkacompat.storage import batch_format as stored
from kafkacompat.storage.errors import CorruptBatchError


def test_same_layout_and_constants() -> None:
    # The store reads magic as a signed byte, the protocol as unsigned: the same for magic 2 (and any
    # magic below 128); every other field has the same width, order and sign.
    assert stored.HEADER.format.replace("b", "B") == wire.HEADER.format
    assert stored.HEADER_SIZE == wire.HEADER_SIZE == 61
    assert (stored.LOG_OVERHEAD, stored.CRC_START, stored.MAGIC) == (wire.LOG_OVERHEAD, wire.CRC_START, wire.MAGIC_V2)
    assert (stored.ATTR_LOG_APPEND_TIME, stored.ATTR_TRANSACTIONAL, stored.ATTR_CONTROL) == (
        wire.ATTR_LOG_APPEND_TIME, wire.ATTR_TRANSACTIONAL, wire.ATTR_CONTROL)
    # the prefix the store rewrites (baseOffset, batchLength, partitionLeaderEpoch) is the header's start
    assert wire.HEADER.format.startswith(">" + stored.PREFIX.format[1:])


def _batches() -> dict[str, bytes]:
    records = [Record(key=b"k%d" % i, value=b"v" * (i + 1), timestamp=1_700_000_000_000 + i, headers=[])
               for i in range(5)]
    batches = {codec: build_batch(records, base_offset=40, compression=codec, partition_leader_epoch=7)
               for codec in ("none", "gzip", "snappy", "lz4", "zstd")}
    batches["idempotent"] = build_batch(records[:2], producer_id=9, producer_epoch=3, base_sequence=11)
    batches["log append time"] = set_log_append_time(batches["none"], 1_800_000_000_000)
    transactional = bytearray(batches["idempotent"])
    struct.pack_into(">h", transactional, 21, wire.ATTR_TRANSACTIONAL)
    struct.pack_into(">I", transactional, 17, crc32c.crc32c(memoryview(transactional)[wire.CRC_START:]))
    batches["transactional"] = bytes(transactional)
    return batches


@pytest.mark.parametrize("kind", list(_batches()))
def test_same_fields_for_every_kind_of_batch(kind: str) -> None:
    batch = _batches()[kind]
    ours, theirs = stored.parse_header(batch), read_header(batch)
    fields = list(ours.__dataclass_fields__)
    assert fields == list(theirs.__dataclass_fields__)
    assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert (ours.size, ours.last_offset) == (theirs.size, theirs.last_offset) == (len(batch), theirs.last_offset)
    assert ours.log_append_time == bool(theirs.attributes & wire.ATTR_LOG_APPEND_TIME)
    assert stored.check_append(memoryview(batch), theirs.record_count) == (theirs.batch_length, theirs.max_timestamp)
    assert stored.leader_epoch(batch) == theirs.partition_leader_epoch
    assert wire.split_batches(batch) == [(0, theirs)]


def test_same_verdict_on_a_damaged_batch() -> None:
    batch = bytearray(_batches()["none"])
    batch[-1] ^= 0x01  # a flipped bit in the last record
    with pytest.raises(CorruptBatchError, match="CRC"):
        stored.check_append(memoryview(batch), 5)
    with pytest.raises(wire.InvalidBatchError, match="CRC"):
        wire.split_batches(batch)
    batch[16] = 1  # magic 1
    with pytest.raises(CorruptBatchError, match="magic"):
        stored.parse_header(batch)
    with pytest.raises(wire.InvalidBatchError, match="magic"):
        wire.split_batches(batch)
