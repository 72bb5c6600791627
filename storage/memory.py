"""The in-memory engine: for unit tests and the in-process test broker.

Same rules as the on-disk engine (it shares the namespace and partition
logic); batches live in Python lists and vanish with the process.

Compacted topics are cleaned as on disk: batches are grouped in segments
that roll by segment.bytes and segment.ms like partitionlets, and a
cleaner pass (every cleaner_backoff_ms, or `clean_logs`) applies the same
rules (storage/compaction.py) to the sealed ones, keeping offsets.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence

from . import batch_format as bf
from .activity import StoreActivity
from .api import AppendResult, Cursor, Partition, PartitionletInfo, TimestampHit
from .compaction import (
    DEFAULT_BACKOFF_MS,
    DEFAULT_DEDUPE_BUFFER_BYTES,
    CleanResult,
    FilterStats,
    MarkerTracker,
    OffsetMap,
    RecordCodec,
    SegmentStats,
    clean_range,
    cleaner_loop,
    drops_tombstones,
    due,
    filter_batch,
    map_dirty,
    scan_log,
)
from .errors import OffsetMismatchError, OffsetOutOfRangeError
from .namespace import NamespaceStore, Settings, StreamState, TopicState, now_ms
from .partition_base import PartitionBase, RecordTimestamps

MEMORY_VOLUME = "memory"  # the one "volume" of a memory store

log = logging.getLogger(__name__)


class MemoryPartition(PartitionBase):
    """Batches in a list, indexed by base offset."""

    def __init__(self, topic: TopicState, index: int, record_timestamps: RecordTimestamps | None,
                 activity: StoreActivity) -> None:
        super().__init__(f"{topic.stream.path}:{topic.name}/{index}", 0, record_timestamps)
        self._topic = topic
        self._activity = activity
        self._batches: list[bytearray] = []
        self._bases: list[int] = []
        self._max_ts: list[int] = []
        self._segments: list[SegmentStats] = []
        self._note_epoch(0, 0)

    @property
    def settings(self) -> Settings:
        """The topic's effective rules (stream policy with its configs applied)."""
        return self._topic.settings

    async def append(
        self, batch: bytes | bytearray | memoryview, record_count: int, *, at: int | None = None,
        leader_epoch: int | None = None, fenced_by: Partition | None = None, txn_since: int | None = None,
        client_gone: Callable[[], bool] | None = None,
    ) -> AppendResult:
        self._check_open()
        length, max_ts = bf.check_append(memoryview(batch).cast("B"), record_count)
        stored = bytearray(batch)
        base = self._hw
        if at is not None and at != base:
            raise OffsetMismatchError(f"{self.name}: append at offset {at} but the next offset is {base}", base)
        bf.PREFIX.pack_into(stored, 0, base, length, self._leader_epoch)
        now = now_ms()
        active = self._segments[-1] if self._segments else None
        settings = self.settings
        if active is None or (active.size > 0 and (active.size + len(stored) > settings.partitionlet_bytes
                                                   or now - active.created_ms >= settings.partitionlet_age_ms)):
            active = SegmentStats(base, now, base)
            self._segments.append(active)
        self._batches.append(stored)
        self._bases.append(base)
        self._max_ts.append(max_ts)
        self._hw = base + record_count
        active.size += len(stored)
        active.max_ts = max(active.max_ts, max_ts)
        active.next_offset = self._hw
        self._wake()
        return AppendResult(base, self._hw - 1, now)

    async def wait_durable(self, offset: int) -> None:
        return None

    def _check_offset(self, offset: int) -> None:
        if offset < self._log_start or offset > self._hw:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start}, {self._hw}] of {self.name}"
            )

    async def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        self._check_open()
        self._check_offset(offset)
        if offset == self._hw:
            return b""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        if bf.parse_header(self._batches[i]).last_offset < offset:
            i += 1  # the offset lies in a gap the cleaner left: the next batch
        if i == len(self._batches):
            return b""
        out = [self._batches[i]]
        total = len(out[0])
        for j in range(i + 1, len(self._batches)):
            batch = self._batches[j]
            if total + len(batch) > max_bytes:
                break
            out.append(batch)
            total += len(batch)
        return b"".join(out)

    def _span(self, i: int) -> tuple[bytearray, int, int, int, bool]:
        batch = self._batches[i]
        header = bf.parse_header(batch)
        return batch, self._bases[i], header.last_offset, header.max_timestamp, header.log_append_time

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        self._check_open()
        for i, max_ts in enumerate(self._max_ts):
            if max_ts >= timestamp:
                batch, base, last, mts, log_append = self._span(i)
                hit = self._first_at_or_after(batch, base, last, mts, log_append, timestamp, self._log_start)
                if hit is not None:
                    return hit
        return None

    async def max_timestamp(self) -> TimestampHit | None:
        self._check_open()
        if not self._batches:
            return None
        # the batches kept are those of kept segments, below the log start or not: the first with the
        # greatest max timestamp lies in the segment Kafka picks, and is the batch it finds there
        best = max(range(len(self._max_ts)), key=lambda i: (self._max_ts[i], -i))
        return self._offset_of_max(*self._span(best))

    async def delete_records(self, before_offset: int) -> int:
        self._check_open()
        before_offset = self._deletion_point(before_offset)
        if before_offset > self._log_start:
            self._log_start = before_offset
            self._drop_below(before_offset)
        return self._log_start

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_open()
        if offset < self._hw:
            raise OffsetOutOfRangeError(f"cannot restart {self.name} at {offset}: it ends at {self._hw}")
        self._log_start = self._hw = offset
        self._drop_below(offset)
        self._wake()

    def _drop_below(self, offset: int) -> None:
        """Forget the segments whose every offset is below `offset`, with their batches.

        A segment the log start only passed into keeps all its batches, as
        a Kafka segment (and a partitionlet on disk) does until it is
        deleted whole: ListOffsets -3 still sees its max timestamp.
        """
        if offset >= self._hw:
            self._segments = []
            cut = len(self._bases)
        else:
            self._segments = [seg for seg in self._segments if seg.next_offset > offset]
            cut = bisect.bisect_left(self._bases, self._segments[0].base) if self._segments else 0
        if cut > 0:
            del self._batches[:cut], self._bases[:cut], self._max_ts[:cut]
        self._drop_epochs_before(offset)

    def _first_live(self) -> int:
        """The index of the first batch not wholly below the log start (those before it are kept, deleted)."""
        i = max(bisect.bisect_right(self._bases, self._log_start) - 1, 0)
        if i < len(self._batches) and bf.parse_header(self._batches[i]).last_offset < self._log_start:
            i += 1
        return i

    def enforce_retention(self, now: int) -> int:
        """Drop leading batches past the ttl or the size cap; returns how many."""
        settings = self._topic.settings
        if not settings.retains:
            return 0
        first = drop = self._first_live()
        if settings.ttl_ms >= 0:
            cutoff = now - settings.ttl_ms
            while drop < len(self._max_ts) and self._max_ts[drop] < cutoff:
                drop += 1
        if settings.retention_bytes >= 0:
            total = sum(len(b) for b in self._batches[drop:])
            while drop < len(self._batches) - 1 and total - len(self._batches[drop]) >= settings.retention_bytes:
                total -= len(self._batches[drop])
                drop += 1
        if drop > first:
            self._activity.retained(drop - first, sum(len(b) for b in self._batches[first:drop]))
            start = self._bases[drop] if drop < len(self._bases) else self._hw
            self._log_start = max(self._log_start, start)
            self._drop_below(self._log_start)
        return drop - first

    def sealed_chain(self) -> list[SegmentStats]:
        """The segments no longer appended to, oldest first (the cleaner's candidates)."""
        return self._segments[:-1]

    def clean(self, codec: RecordCodec, buffer_bytes: int, now: int) -> CleanResult | None:
        """Compact the sealed segments if a cleaning is due (storage/compaction.py's rules); None if not."""
        settings = self.settings
        found = due(self.sealed_chain(), settings, now) if settings.compact else None
        if found is None:
            return None
        count, first_dirty = found
        cleanable = self._segments[:count]
        first = bisect.bisect_left(self._bases, cleanable[0].base)
        batches = [(memoryview(b), bf.HEADER.unpack_from(b)) for b in self._batches[first:]]
        scan = scan_log(batches, codec.is_abort_marker)
        bounds = clean_range(cleanable, first_dirty, scan)
        if bounds is None:
            return None
        offsets = OffsetMap(buffer_bytes)
        upper = map_dirty(batches, codec, offsets, bounds[0], bounds[1], scan.aborted)
        markers, stats = MarkerTracker(scan.aborted), FilterStats()
        kept_batches: list[bytearray] = []
        sizes = [0] * len(cleanable)
        for (batch, header), stored in zip(batches, self._batches[first:]):
            base = header[0]
            seg = bisect.bisect_right([c.base for c in cleanable], base) - 1
            if base >= upper or seg >= len(cleanable):
                kept_batches.append(stored)
                continue
            kept = filter_batch(batch, header, codec, offsets, upper,
                                drops_tombstones(cleanable[seg].cleaned_ms, settings, now),
                                header[9] >= 0 and scan.last_batches.get(header[9]) == base,
                                base in scan.aborted, stats, markers)
            if kept is not None:
                kept_batches.append(stored if kept is batch else bytearray(kept))
                sizes[seg] += len(kept)
        for seg, size in zip(cleanable, sizes):
            if seg.base < upper:
                seg.clean_to, seg.cleaned_ms, seg.size = min(seg.next_offset, upper), seg.cleaned_ms or now, size
        self._batches[first:] = kept_batches
        self._bases[first:] = [bf.HEADER.unpack_from(b)[0] for b in kept_batches]
        self._max_ts[first:] = [bf.HEADER.unpack_from(b)[8] for b in kept_batches]
        log.debug("%s: cleaned to offset %d: %d of %d records kept", self.name, upper, stats.records_kept,
                  stats.records_read)
        return CleanResult(self.name, sum(seg.base < upper for seg in cleanable),
                           sum(len(b) for b, _ in batches), sum(len(b) for b in kept_batches),
                           stats.records_read, stats.records_kept, len(offsets), upper)

    def purge(self) -> None:
        self._log_start = self._hw
        self._drop_below(self._hw)

    async def partitionlets(self) -> list[PartitionletInfo]:
        if not self._batches:
            return []
        size = sum(len(b) for b in self._batches)
        return [PartitionletInfo(self._bases[0], self._hw, size, MEMORY_VOLUME, False, max(self._max_ts))]


class MemoryStore(NamespaceStore):
    """A store that keeps everything in memory."""

    counts_partitions = True

    def __init__(
        self, default_stream: str = "/default", record_timestamps: RecordTimestamps | None = None,
        record_codec: RecordCodec | None = None, cleaner_dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
        cleaner_backoff_ms: int = DEFAULT_BACKOFF_MS,
    ) -> None:
        super().__init__(default_stream)
        self._record_timestamps = record_timestamps
        self.record_codec = record_codec  # without it compacted topics are never cleaned
        self.cleaner_dedupe_buffer_bytes = cleaner_dedupe_buffer_bytes
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self._cleaner_task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await self._ensure_default_stream()
        if self.record_codec is not None:
            cleaner = cleaner_loop(self.clean_logs, self.cleaner_backoff_ms)
            self._cleaner_task = asyncio.get_running_loop().create_task(cleaner)

    async def close(self) -> None:
        if self._cleaner_task is not None:
            self._cleaner_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._cleaner_task
            self._cleaner_task = None
        for part in self._opened_partitions():
            part._wake()

    async def clean_logs(self, now: int | None = None) -> list[CleanResult]:
        """Clean every compacted partition in use whose cleaning is due."""
        if self.record_codec is None:
            return []
        now = now_ms() if now is None else now
        results = [p.clean(self.record_codec, self.cleaner_dedupe_buffer_bytes, now)
                   for p in self._opened_partitions() if not p._closed]
        return [r for r in results if r is not None]

    async def _persist_stream(self, stream: StreamState, created: bool) -> None:
        pass

    async def _persist_settings(self, settings: dict[str, str]) -> None:
        pass

    def data_dirs(self) -> list[str]:
        return [MEMORY_VOLUME]

    async def _persist_stream_deleted(self, stream: StreamState) -> None:
        for part in self._opened_partitions([stream]):
            part._mark_closed()

    async def _persist_topics(self, stream: StreamState, topics: Sequence[TopicState]) -> None:
        pass

    async def _persist_topic_deleted(self, stream: StreamState, topic: TopicState) -> None:
        for part in (topic.partitions or {}).values():
            part._mark_closed()

    async def _persist_cursors(
        self, stream: StreamState, group: str, cursors: Sequence[Cursor], deleted: Sequence[tuple[str, int]]
    ) -> None:
        pass

    async def _persist_state(
        self, stream: StreamState, table: str, records: Mapping[str, dict | None], durable: bool
    ) -> None:
        pass

    async def _purge_topic(self, stream: StreamState, topic: TopicState) -> None:
        for part in (topic.partitions or {}).values():
            part.purge()

    def _new_partition(self, topic: TopicState, index: int) -> MemoryPartition:
        return MemoryPartition(topic, index, self._record_timestamps, self.activity)

    async def enforce_retention(self, now: int | None = None) -> int:
        """Apply ttl and size caps to the partitions in use (no background task here)."""
        now = now_ms() if now is None else now
        self.activity.retention_passes += 1
        return sum(p.enforce_retention(now) for p in self._opened_partitions() if not p._closed)
