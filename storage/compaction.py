"""Log compaction rules shared by the engines: Kafka's log cleaner, record by record.

A compacted partition keeps, for every key, at least its last record. The
cleaner builds an offset map (key -> last offset) over the dirty part of the
log, then rewrites older batches keeping only records that are still the
last of their key. Offsets never move: a batch keeps its baseOffset and
lastOffsetDelta, so offsets of removed records become gaps, as on Kafka.

Transactions: records of aborted transactions are removed (their batch
kept as an empty header only when it is its producer's last data batch),
committed transactional records are compacted like any others, and an
end-transaction marker goes, as Kafka's cleaner removes it, once a
cleaning finds no batch of its transaction left before it and the delete
horizon (delete.retention.ms after the partitionlet was first cleaned,
as for tombstones) has passed. A cleaning never reaches a transaction
still open: Kafka's first unstable offset bounds it, since that
transaction may yet abort.

The store never imports the Kafka protocol: the broker injects a
`RecordCodec` (split a batch into encoded records, rebuild a batch from
some of them with the batch's own codec, tell an abort marker from a
commit), as it injects record_timestamps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from . import batch_format as bf
from .namespace import Settings

# What one map entry costs in CPython (a 16-byte digest, an int, a dict
# slot, with the slack of dict growth), measured with tracemalloc: the
# configured buffer size divided by this bounds the keys a pass maps.
ENTRY_BYTES = 160
DEFAULT_DEDUPE_BUFFER_BYTES = 128 << 20  # Kafka's log.cleaner.dedupe.buffer.size
DEFAULT_BACKOFF_MS = 15_000  # Kafka's log.cleaner.backoff.ms
log = logging.getLogger(__name__)


async def cleaner_loop(clean_logs: Callable[[], Awaitable[object]], backoff_ms: int) -> None:
    """An engine's background cleaner: a pass every backoff_ms; a failed pass is logged and the next one runs."""
    while True:
        await asyncio.sleep(backoff_ms / 1000)
        try:
            await clean_logs()
        except Exception:
            log.exception("log cleaner pass failed")


@dataclasses.dataclass(slots=True)
class CleanResult:
    """What one cleaning of one partition did (the benchmark prints these)."""

    partition: str
    partitionlets: int = 0  # rewritten (disk); segments cleaned (memory)
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    keys_mapped: int = 0
    clean_to: int = 0
    seconds: float = 0.0


class Segment(Protocol):
    """What planning needs of a sealed segment (a disk partitionlet, a memory or cloud engine segment)."""

    @property
    def base(self) -> int: ...
    @property
    def max_ts(self) -> int: ...
    @property
    def clean_to(self) -> int | None: ...  # deduplicated up to here, None if never cleaned
    @property
    def next_offset(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def created_ms(self) -> int: ...


def due(sealed: Sequence[Segment], settings: Settings, now: int) -> tuple[int, int] | None:
    """(how many of the oldest sealed segments are cleanable, index of the first dirty one) when a
    cleaning is due now, else None: Kafka's min.compaction.lag.ms, min.cleanable.dirty.ratio and
    max.compaction.lag.ms over segments (the active one is never passed in)."""
    cleanable = 0
    for seg in sealed:
        if settings.min_compaction_lag_ms > 0 and seg.max_ts > now - settings.min_compaction_lag_ms:
            break
        cleanable += 1
    if not cleanable:
        return None
    segments = sealed[:cleanable]
    first_dirty = next((i for i, seg in enumerate(segments) if seg.clean_to is None or seg.clean_to < seg.next_offset),
                       cleanable)
    clean_bytes = sum(seg.size for seg in segments[:first_dirty])
    dirty_bytes = sum(seg.size for seg in segments[first_dirty:])
    dirty = first_dirty < cleanable
    ratio = dirty_bytes / (clean_bytes + dirty_bytes) if clean_bytes + dirty_bytes else 0.0
    overdue = dirty and segments[first_dirty].created_ms <= now - settings.max_compaction_lag_ms
    if not (dirty and (ratio >= settings.min_cleanable_dirty_ratio or overdue)):
        return None
    return cleanable, first_dirty


@dataclasses.dataclass(slots=True)
class SegmentStats:
    """A segment as the memory and cloud engines keep it: a run of offsets the cleaner treats as Kafka
    treats a segment (the last one of a partition is active and never cleaned)."""

    base: int
    created_ms: int
    next_offset: int
    size: int = 0
    max_ts: int = -1
    clean_to: int | None = None  # deduplicated up to here
    cleaned_ms: int = 0  # first cleaned: the delete horizon of tombstones and markers counts from here


def drops_tombstones(cleaned_ms: int, settings: Settings, now: int) -> bool:
    """Whether a cleaning now removes a segment's tombstones (and emptied transactions' markers):
    delete.retention.ms has passed since the segment was first cleaned (`cleaned_ms`, 0: never)."""
    return cleaned_ms > 0 and cleaned_ms + settings.delete_retention_ms <= now


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
    is_abort_marker: Callable[[bytes | memoryview], bool]  # a control batch ending its transaction in an abort


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


@dataclasses.dataclass(slots=True)
class LogScan:
    """What a cleaning must know of the whole log beyond each batch on its own."""

    last_batches: dict[int, int] = dataclasses.field(default_factory=dict)  # producer id -> its last data batch
    aborted: set[int] = dataclasses.field(default_factory=set)  # base offsets of aborted transactional batches
    first_open: int | None = None  # first offset of a transaction with no marker yet


def scan_log(batches: Iterable[tuple[memoryview, tuple]], is_abort_marker: Callable[[memoryview], bool]) -> LogScan:
    """Each producer's last batch and every transaction's outcome, from (batch, header) in log order.

    Only control batches need their bytes (for `is_abort_marker`); for
    others the header alone will do.
    """
    scan = LogScan()
    open_batches: dict[int, list[int]] = {}  # producer id -> base offsets of its transaction so far
    for batch, header in batches:
        base, attributes, producer_id = header[0], header[5], header[9]
        if producer_id < 0:
            continue
        if attributes & bf.ATTR_CONTROL:
            ended = open_batches.pop(producer_id, [])
            if is_abort_marker(batch):
                scan.aborted.update(ended)
            continue
        scan.last_batches[producer_id] = base  # markers aside, as Kafka's lastDataOffset
        if attributes & bf.ATTR_TRANSACTIONAL:
            open_batches.setdefault(producer_id, []).append(base)
    scan.first_open = min((bases[0] for bases in open_batches.values()), default=None)
    return scan


class MarkerTracker:
    """Which markers a cleaning may remove, read in log order: Kafka's CleanedTransactionMetadata.

    A marker's transaction is empty when this cleaning met none of its
    batches before the marker: aborted batches are all removed by the
    cleaning that meets them, committed ones when compaction empties them,
    so a marker goes at the earliest in the cleaning after its last batch.
    """

    def __init__(self, aborted: set[int]) -> None:
        self._aborted = aborted
        self._seen: set[tuple[int, bool]] = set()  # (producer id, aborted) with a batch met since its marker

    def batch_read(self, header: tuple) -> None:
        base, attributes, producer_id = header[0], header[5], header[9]
        if producer_id >= 0 and attributes & bf.ATTR_TRANSACTIONAL and not attributes & bf.ATTR_CONTROL:
            self._seen.add((producer_id, base in self._aborted))

    def marker_read(self, header: tuple, abort: bool) -> bool:
        """True when the marker's transaction has nothing left in the log before it."""
        key = (header[9], abort)
        empty = key not in self._seen
        self._seen.discard(key)
        return empty


@dataclasses.dataclass(slots=True)
class FilterStats:
    records_read: int = 0
    records_kept: int = 0
    tombstones_kept: int = 0


def filter_batch(
    batch: memoryview, header: tuple, codec: RecordCodec, offsets: OffsetMap, upper: int,
    drop_tombstones: bool, keep_empty: bool, aborted: bool, stats: FilterStats, markers: MarkerTracker,
) -> bytes | memoryview | None:
    """What of one batch a cleaning keeps: the batch itself, a rebuilt one, or None.

    A record stays when it is at or past `upper` (beyond what the map
    covers), or is the last of its key and is not a tombstone whose delete
    horizon has passed (`drop_tombstones`). Records without a key are
    dropped, as Kafka does, and so is every record of an `aborted`
    transactional batch. A marker goes when its transaction has nothing
    left (`markers`, fed every batch in log order) and the delete horizon
    has passed. `keep_empty` keeps an emptied batch as a bare header: it is
    its producer's last data batch, whose sequence numbers idempotence
    needs. `header` is batch_format.HEADER unpacked.
    """
    base, attributes, count = header[0], header[5], header[12]
    if attributes & bf.ATTR_CONTROL:
        empty = markers.marker_read(header, codec.is_abort_marker(batch))
        stats.records_read += count
        if empty and drop_tombstones and base < upper:
            return None
        stats.records_kept += count
        return batch
    markers.batch_read(header)
    if base >= upper:
        stats.records_read += count
        stats.records_kept += count
        return batch
    records = codec.split(batch)
    kept = []
    for r in ([] if aborted else records):
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


def map_batch(
    batch: memoryview, header: tuple, codec: RecordCodec, offsets: OffsetMap, start: int, aborted: bool
) -> int | None:
    """Add the keys of a batch's records from offset `start` on to the map.

    Markers and aborted transactional batches add nothing: an aborted
    record must not hide the committed one before it.
    Returns the first offset whose key did not fit, or None if all did.
    """
    base, attributes, last_delta = header[0], header[5], header[6]
    if attributes & bf.ATTR_CONTROL or aborted or base + last_delta < start:
        return None
    for r in codec.split(batch):
        offset = base + r.offset_delta
        if r.key is not None and offset >= start and not offsets.put(r.key, offset):
            return offset
    return None


def clean_range(cleanable: Sequence[Segment], first_dirty: int, scan: LogScan) -> tuple[int, int] | None:
    """(Kafka's first dirty offset, the offset a cleaning stops before) for the segments `due` found,
    or None when every dirty record lies at or past a transaction still open (it may yet abort)."""
    upper = cleanable[-1].next_offset
    if scan.first_open is not None:
        upper = min(upper, scan.first_open)
    dirty = cleanable[first_dirty:]
    start = (dirty[0].clean_to or dirty[0].base) if dirty else upper
    return None if start >= upper else (start, upper)


def map_dirty(batches: Iterable[tuple[memoryview, tuple]], codec: RecordCodec, offsets: OffsetMap, start: int,
              upper: int, aborted: set[int]) -> int:
    """Map the keys of the dirty records (batches in log order, those before `start` skipped) up to
    `upper`; returns the offset the cleaning must stop before: `upper`, or the first record whose key
    no longer fitted the map (only what was mapped counts as cleaned this time)."""
    for batch, header in batches:
        if header[0] >= upper:
            break
        missed = map_batch(batch, header, codec, offsets, start, header[0] in aborted)
        if missed is not None:
            return missed
    return upper
