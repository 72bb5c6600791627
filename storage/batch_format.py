"""The little the store must know about a v2 record batch: its header.

Batches are stored byte for byte. The store reads the header to learn a
batch's size, offsets and timestamps, checks the CRC-32C (which covers bytes
21..end) during recovery, and writes baseOffset and partitionLeaderEpoch,
which lie outside the CRC. Records are never decoded here.
"""

from __future__ import annotations

import dataclasses
import struct

import crc32c

from .errors import CorruptBatchError

# The wire protocol keeps its own copy (protocol/records.py; storage imports no protocol):
# tests/storage/test_batch_header_agrees.py holds the two to one layout.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength precede the bytes batchLength counts
CRC_START = 21
MAGIC = 2
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

# baseOffset, batchLength, partitionLeaderEpoch: the 16 bytes the store rewrites
# (batchLength is rewritten with its own value so one pack covers the prefix).
PREFIX = struct.Struct(">qii")
PREFIX_SIZE = PREFIX.size


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
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def log_append_time(self) -> bool:
        """Every record's timestamp is maxTimestamp (the broker's append time)."""
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)


def leader_epoch(batch: bytes | bytearray | memoryview) -> int:
    """The batch's partitionLeaderEpoch, read from the prefix the store rewrites (no full header parse)."""
    return PREFIX.unpack_from(batch)[2]


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header at `pos`; CorruptBatchError if it is short or not magic 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"record batch shorter than its {HEADER_SIZE}-byte header")
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptBatchError(f"record batch magic {header.magic} is not 2")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"record batch length {header.batch_length} is shorter than its header")
    return header


def check_append(batch: memoryview, record_count: int) -> tuple[int, int]:
    """Validate a batch handed to append: whole, magic 2, counts agree, CRC intact.

    Returns (batchLength, maxTimestamp): all the append path needs. Kept
    lean because it runs for every batch appended.
    """
    if len(batch) < HEADER_SIZE:
        raise CorruptBatchError(f"record batch shorter than its {HEADER_SIZE}-byte header")
    (_base, length, _epoch, magic, crc, _attrs, last_delta, _bts, max_ts, _pid, _pe, _seq,
     _count) = HEADER.unpack_from(batch)
    if magic != MAGIC:
        raise CorruptBatchError(f"record batch magic {magic} is not 2")
    if length + LOG_OVERHEAD != len(batch):
        raise CorruptBatchError(f"record batch says {length + LOG_OVERHEAD} bytes but {len(batch)} were given")
    if record_count < 1 or last_delta + 1 != record_count:
        raise CorruptBatchError(f"record count {record_count} disagrees with lastOffsetDelta {last_delta}")
    if crc32c.crc32c(batch[CRC_START:]) != crc:
        raise CorruptBatchError("record batch CRC-32C mismatch")
    return length, max_ts
