"""The on-disk log cleaner: Kafka's log compaction over partitionlets.

For a partition whose cleanup.policy has `compact`, a cleaning:

1. plans: the sealed partitionlets older than min.compaction.lag.ms are
   cleanable (the active one never is); those not yet deduplicated are
   dirty. It runs when dirty bytes / cleanable bytes reach
   min.cleanable.dirty.ratio or when the oldest dirty partitionlet is older
   than max.compaction.lag.ms. Like Kafka 4.1 (checked side by side), a
   log with nothing dirty is not cleaned again just because its tombstones
   outlived delete.retention.ms: they go with the next cleaning;
2. maps the dirty partitionlets' keys to their last offsets in a bounded
   OffsetMap (log.cleaner.dedupe.buffer.size); when it fills, only the
   prefix mapped so far counts as cleaned this time;
3. rewrites every cleanable partitionlet up to that point into a new file
   generation (`<base>-g<n>.log` + indexes, fsynced), keeping the last
   record per key, tombstones (and markers of transactions with nothing
   left) until delete.retention.ms after their partitionlet was first
   cleaned, and each producer's last data batch (empty if need be) so
   idempotent producers keep their sequence numbers;
4. swaps: one atomic chain-manifest write puts the new files in the chain,
   then the old files are unlinked.

A cleaner killed anywhere leaves a valid log: before the manifest write
the old files are still the ones listed (the new ones are orphans, removed
when the partition is next opened after the unclean stop); after it, the
new ones are, and the old ones are the orphans.

The reading, filtering and writing run in a worker thread on file
descriptors of their own; the store's event loop only plans and swaps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .. import batch_format as bf
from ..compaction import (
    DEFAULT_DEDUPE_BUFFER_BYTES,
    CleanResult,
    FilterStats,
    MarkerTracker,
    OffsetMap,
    RecordCodec,
    clean_range,
    drops_tombstones,
    due,
    filter_batch,
    map_dirty,
    scan_log,
)
from ..namespace import Settings, now_ms
from .files import fsync_dir, unlink_files
from .partitionlet import Partitionlet

if TYPE_CHECKING:
    from .partition import DiskPartition

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20


def crash_point(name: str) -> None:
    """Called where a killed cleaner would leave work half done; tests stop the process here."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    cleanable: list[Partitionlet]  # live sealed partitionlets old enough, oldest first
    first_dirty: int  # index in cleanable of the first one not yet deduplicated
    tail: list[tuple[str, int]]  # (log path, size) of every partitionlet from cleanable[0] on


def plan(part: DiskPartition, settings: Settings, now: int) -> _Plan | None:
    """What a cleaning of `part` would rewrite now, or None if it is not due."""
    chain = part.sealed_chain()
    found = due(chain, settings, now)
    if found is None:
        return None
    cleanable = chain[:found[0]]
    tail = [(p.log_path, p.size) for p in part.chain_tail(cleanable[0])]
    return _Plan(cleanable, found[1], tail)


def _batches(path: str, size: int) -> Iterator[tuple[memoryview, tuple]]:
    """(batch bytes, unpacked header) of every batch in the first `size` bytes of a log."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        buf = memoryview(b"")
        buf_start = 0
        while pos < size:
            rel = pos - buf_start
            if rel + bf.HEADER_SIZE > len(buf):
                buf, buf_start, rel = memoryview(os.pread(fd, min(_READ_CHUNK, size - pos), pos)), pos, 0
            header = bf.HEADER.unpack_from(buf, rel)
            total = header[1] + bf.LOG_OVERHEAD
            if rel + total > len(buf):
                buf, buf_start, rel = memoryview(os.pread(fd, max(total, min(_READ_CHUNK, size - pos)), pos)), pos, 0
            yield buf[rel : rel + total], header
            pos += total
    finally:
        os.close(fd)


def _tail_batches(tail: list[tuple[str, int]]) -> Iterator[tuple[memoryview, tuple]]:
    for path, size in tail:
        yield from _batches(path, size)


class _Writer:
    """Writes one new partitionlet generation and indexes it as it goes."""

    def __init__(self, new: Partitionlet) -> None:
        self.new = new
        new.start_empty()
        self._fd = os.open(new.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0
        self._written = 0

    def add(self, batch: bytes | memoryview, header: tuple) -> None:
        if isinstance(batch, bytes):  # rebuilt: its own maxTimestamp
            header = bf.HEADER.unpack_from(batch)
        self.new.note_written(header[0], self.new.size, len(batch), header[0] + header[6] + 1, header[8])
        self._pending.append(batch)
        self._pending_bytes += len(batch)
        if self._pending_bytes >= _WRITE_CHUNK:
            self._flush()

    def _flush(self) -> None:
        data = b"".join(self._pending)
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, self._written)
            self._written += n
            view = view[n:]
        self._pending, self._pending_bytes = [], 0

    def finish(self, next_offset: int) -> None:
        """Flush, fsync and write the index files; the partitionlet keeps its offsets."""
        try:
            self._flush()
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
        self.new.next_offset = next_offset
        self.new.write_index_files(*self.new.index_bytes())

    def abandon(self) -> None:
        os.close(self._fd)


def _rewrite(
    work: _Plan, codec: RecordCodec, buffer_bytes: int, settings: Settings, now: int, result: CleanResult
) -> list[tuple[Partitionlet, Partitionlet]]:
    """Map, filter and write (worker thread); returns (old, new) pairs to swap in."""
    offsets = OffsetMap(buffer_bytes)
    cleanable = work.cleanable
    scan = scan_log(_tail_batches(work.tail), codec.is_abort_marker)
    bounds = clean_range(cleanable, work.first_dirty, scan)
    if bounds is None:
        return []  # everything dirty lies at or past an open transaction
    dirty = [(p.log_path, p.size) for p in cleanable[work.first_dirty:]]
    upper = map_dirty(_tail_batches(dirty), codec, offsets, bounds[0], bounds[1], scan.aborted)
    result.keys_mapped = len(offsets)
    crash_point("mapped")
    pairs: list[tuple[Partitionlet, Partitionlet]] = []
    written: list[Partitionlet] = []
    markers = MarkerTracker(scan.aborted)
    try:
        for p in cleanable:
            if p.base >= upper:
                break
            drop_tombstones = drops_tombstones(p.cleaned_ms, settings, now)
            stats = FilterStats()
            new = Partitionlet(
                p.directory, p.volume, p.base, p.handles, sealed=True, next_offset=p.base, size=0, max_ts=-1,
                max_ts_offset=p.base, created_ms=p.created_ms, generation=p.generation + 1,
                clean_to=min(p.next_offset, upper), cleaned_ms=p.cleaned_ms or now,
            )
            written.append(new)
            writer = _Writer(new)
            try:
                for batch, header in _batches(p.log_path, p.size):
                    result.bytes_read += len(batch)
                    keep_empty = header[9] >= 0 and scan.last_batches.get(header[9]) == header[0]
                    kept = filter_batch(batch, header, codec, offsets, upper, drop_tombstones, keep_empty,
                                        header[0] in scan.aborted, stats, markers)
                    if kept is not None:
                        writer.add(kept, header)
                    crash_point("writing")
            except BaseException:
                writer.abandon()
                raise
            writer.finish(p.next_offset)
            if new.size == 0:  # emptied: retention still ages it by the records it had
                new.max_ts, new.max_ts_offset = p.max_ts, p.max_ts_offset
            new.tombstones = stats.tombstones_kept
            result.bytes_written += new.size
            result.records_read += stats.records_read
            result.records_kept += stats.records_kept
            pairs.append((p, new))
        if written:
            fsync_dir(written[0].directory)
        crash_point("written")
    except BaseException:
        unlink_files([path for new in written for path in new.paths()])
        raise
    result.clean_to = upper
    return pairs


async def clean_partition(
    part: DiskPartition, codec: RecordCodec, buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES, now: int | None = None,
) -> CleanResult | None:
    """Clean one partition if a cleaning is due; None if it was not."""
    settings = part.settings
    if not settings.compact:
        return None
    now = now_ms() if now is None else now
    work = plan(part, settings, now)
    if work is None:
        return None
    result = CleanResult(part.name)
    started = time.perf_counter()
    pairs = await asyncio.to_thread(_rewrite, work, codec, buffer_bytes, settings, now, result)
    if not pairs:
        log.debug("%s: not cleaned: its dirty records follow a transaction still open", part.name)
        return None
    result.partitionlets = await part.replace_partitionlets(pairs)
    result.seconds = time.perf_counter() - started
    log.info("%s: cleaned %d partitionlet(s) to offset %d: %d of %d records kept, %d -> %d bytes in %.3f s",
             part.name, result.partitionlets, result.clean_to, result.records_kept, result.records_read,
             result.bytes_read, result.bytes_written, result.seconds)
    return result
