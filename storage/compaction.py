"""Log compaction rules shared by the engines: Kafka's log cleaner, record by record.

A compacted partition keeps, for every key, at least its last record. The
cleaner builds an offset map (key -> last offset) over the dirty part of the
log, then rewrites older batches keeping only records that are still the
last of their key. Offsets never move: a batch keeps its baseOffset and
lastOffsetDelta, so offsets of removed records become gaps, as on Kafka.

The store never imports the Kafka protocol: the broker injects a
`RecordCodec` (split a batch into encoded records, rebuild a batch from
some of them with the batch's own codec), as it injects record_timestamps.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from typing import Protocol

from . import batch_format as bf

# What one map entry costs in CPython (a 16-byte digest, an int, a dict
# slot, with the slack of dict growth), measured with tracemalloc: the
# configured buffer size divided by this bounds the keys a pass maps.
ENTRY_BYTES = 160


class RecordView(Protocol):
    """One record of a batch as the cleaner sees it (the protocol's RawRecord)."""

    @property
    def offset_delta(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def tombstone(self) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class RecordCodec:
    """Record-level access the cleaner needs, injected by the broker."""

    split: Callable[[bytes | memoryview], Sequence[RecordView]]  # batch -> its records
    rebuild: Callable[[bytes | memoryview, Sequence[RecordView]], bytes]  # batch, kept records -> new batch


def _slot(key: bytes) -> bytes:
    """The map key for a record key: itself up to 16 bytes, else its MD5 (with a marker
    byte so no short key equals a digest)."""
    return key if len(key) < 16 else b"\x00" + hashlib.md5(key).digest()


class OffsetMap:
    """Key digest -> last offset, bounded like Kafka's log.cleaner.dedupe.buffer.size.

    Keys longer than a digest are stored as their MD5 digest, as Kafka's
    SkimpyOffsetMap does, so long keys cost no more than short ones;
    shorter keys are stored as they are (exact, and no hashing).
    """

    def __init__(self, buffer_bytes: int) -> None:
        self.capacity = max(1, buffer_bytes // ENTRY_BYTES)
        self._map: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._map)

    def put(self, key: bytes, offset: int) -> bool:
        """Map key to offset; False (nothing changed) when the map is full and the key is new."""
        digest = _slot(key)
        if digest not in self._map and len(self._map) >= self.capacity:
            return False
        self._map[digest] = offset
        return True

    def get(self, key: bytes) -> int:
        """The last offset mapped for key, or -1."""
        return self._map.get(_slot(key), -1)


def is_untouchable(attributes: int) -> bool:
    """Control and transactional batches are kept as they are.

    Their fate depends on transaction markers; keeping them is always
    safe (compaction promises at least the last record per key).
    """
    return bool(attributes & (bf.ATTR_CONTROL | bf.ATTR_TRANSACTIONAL))


@dataclasses.dataclass(slots=True)
class FilterStats:
    records_read: int = 0
    records_kept: int = 0
    tombstones_kept: int = 0


def filter_batch(
    batch: memoryview, header: tuple, codec: RecordCodec, offsets: OffsetMap, upper: int,
    drop_tombstones: bool, keep_empty: bool, stats: FilterStats,
) -> bytes | memoryview | None:
    """What of one batch a cleaning keeps: the batch itself, a rebuilt one, or None.

    A record stays when it is at or past `upper` (beyond what the map
    covers), or is the last of its key and is not a tombstone whose delete
    horizon has passed. Records without a key are dropped, as Kafka does.
    `keep_empty` keeps an emptied batch as a bare header: it is its
    producer's last batch, whose sequence numbers idempotence needs.
    `header` is batch_format.HEADER unpacked.
    """
    base, attributes, last_delta, count = header[0], header[5], header[6], header[12]
    if is_untouchable(attributes) or base >= upper:
        stats.records_read += count
        stats.records_kept += count
        return batch
    records = codec.split(batch)
    kept = []
    for r in records:
        offset = base + r.offset_delta
        if offset >= upper:
            keep = True
        elif r.key is None:
            keep = False
        else:
            keep = offset >= offsets.get(r.key) and not (r.tombstone and drop_tombstones)
        if keep:
            kept.append(r)
            if r.tombstone:
                stats.tombstones_kept += 1
    stats.records_read += len(records)
    stats.records_kept += len(kept)
    if len(kept) == len(records):
        return batch
    if not kept and not keep_empty:
        return None
    return codec.rebuild(batch, kept)


def map_batch(batch: memoryview, header: tuple, codec: RecordCodec, offsets: OffsetMap, start: int) -> int | None:
    """Add the keys of a batch's records from offset `start` on to the map.

    Returns the first offset whose key did not fit, or None if all did.
    """
    base, attributes, last_delta = header[0], header[5], header[6]
    if is_untouchable(attributes) or base + last_delta < start:
        return None
    for r in codec.split(batch):
        offset = base + r.offset_delta
        if r.key is not None and offset >= start and not offsets.put(r.key, offset):
            return offset
    return None
