"""The cloud engine's log cleaner: Kafka's compaction over the batch index and immutable objects.

The rules are storage/compaction.py's, as on the other engines; what is
this engine's own is where segments live, who cleans, and how the result
replaces the old index rows:

1. **Segments** are rows of `kc_segments`, rolled by `kc_commit` by
   segment.bytes and segment.ms like partitionlets (schema _V3); the last
   one is active and never cleaned. Sizes and max timestamps are summed from
   the batch index when a cleaning plans.
2. **Who cleans**: only the partition's leader (the store's `cleaner_fence`
   hook, set by the broker's cluster layer, names the leader epoch), and the
   swap is fenced by that epoch in the database as `kc_commit` fences
   appends, so a deposed leader's cleaning is refused whatever its timing.
   Independently of leadership, a swap applies only if no other swap of the
   partition came between its reading and its commit (`cleanings`), so two
   processes never both rewrite a range.
3. **Rewrite**: batches are read through the store (ranged GETs, the batch
   cache) in a worker thread; batches the cleaning keeps whole keep their
   index rows and objects; rebuilt ones (fewer records, or an empty batch
   kept for its producer's sequence numbers) are written to new objects
   holding only this partition's batches; removed ones lose their rows.
4. **Swap**: one PostgreSQL transaction inserts the new objects' rows,
   replaces the index rows of the rebuilt and removed batches, records how
   far each segment is deduplicated and notifies every broker. A reader
   before the commit sees the old rows, one after it the new ones: never a
   gap that was not a removed batch, never a torn range. Brokers drop the
   in-memory tail index entries below the cleaned range on the
   notification.
5. **Old objects** lose their last index row to the swap and are deleted by
   the retention pass after `object_grace_ms` (10 minutes), so a reader
   that took the old rows just before the swap still finds their bytes.
   Objects written for a swap that is refused are deleted at once; those
   of a cleaner killed before its swap are swept as orphans.

Offsets never change: a rebuilt batch keeps its base offset and
lastOffsetDelta, so removed records become gaps, as in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, Protocol, TypeVar

from .. import batch_format as bf
from ..compaction import (
    CleanResult,
    FilterStats,
    MarkerTracker,
    OffsetMap,
    RecordCodec,
    SegmentStats,
    clean_range,
    drops_tombstones,
    due,
    filter_batch,
    map_dirty,
    scan_log,
)
from ..errors import StorageError
from ..namespace import Settings, now_ms
from . import schema
from .index import BatchIndex, Entry

log = logging.getLogger(__name__)


class CleanerStore(Protocol):
    """What the cleaner needs of the store that runs it (declared here: the store imports this module)."""

    index: BatchIndex
    record_codec: RecordCodec | None
    cleaner_dedupe_buffer_bytes: int


class CleanedPartition(Protocol):
    """What the cleaner needs of the partition it cleans."""

    pid: int
    name: str

    @property
    def settings(self) -> Settings: ...

    def cleaned(self, below: int) -> None: ...

READ_ROWS = 500  # index rows (and their bytes) one read of the cleaner takes
OBJECT_BYTES = 8 << 20  # a cleaning's rebuilt batches are written in objects of about this size
_CALL_TIMEOUT_S = 120
T = TypeVar("T")


class Superseded(StorageError):
    """The partition changed under the cleaning (another swap, a move of leadership, a deletion)."""


@dataclasses.dataclass(slots=True)
class Snapshot:
    """A partition's segments and offsets as the database holds them when a cleaning plans."""

    segments: list[SegmentStats]  # every segment, oldest first; the last is active
    log_start: int
    next_offset: int
    cleanings: int  # swaps so far: a swap applies only if this has not moved


async def read_snapshot(index: BatchIndex, pid: int, now: int) -> Snapshot | None:
    """The partition's segments, each with its size and max timestamp summed from the index; None
    when the partition is gone. Segments wholly below the log start are dropped, and batches below
    the first segment (written before the topic was compacted) become one segment."""
    async with index.pool().acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT log_start, next_offset, cleanings FROM kc_partitions WHERE id = $1", pid)
        if row is None:
            return None
        await conn.execute(
            "DELETE FROM kc_segments WHERE pid = $1 AND base_offset < (SELECT max(base_offset) FROM kc_segments "
            "WHERE pid = $1 AND base_offset <= $2)", pid, row["log_start"])
        await conn.execute(
            "INSERT INTO kc_segments (pid, base_offset, created_ms) SELECT $1, min(b.base_offset), $2 "
            "FROM kc_batches b WHERE b.pid = $1 HAVING min(b.base_offset) < coalesce("
            "(SELECT min(base_offset) FROM kc_segments WHERE pid = $1), $3) ON CONFLICT DO NOTHING",
            pid, now, row["next_offset"] + 1)
        rows = await conn.fetch(
            "WITH s AS (SELECT base_offset, created_ms, clean_to, cleaned_ms, "
            "lead(base_offset) OVER (ORDER BY base_offset) AS next_base FROM kc_segments WHERE pid = $1) "
            "SELECT s.base_offset, s.created_ms, s.clean_to, s.cleaned_ms, s.next_base, "
            "coalesce(sum(b.length), 0) AS size, coalesce(max(b.max_ts), -1) AS max_ts "
            "FROM s LEFT JOIN kc_batches b ON b.pid = $1 AND b.base_offset >= s.base_offset "
            "AND (s.next_base IS NULL OR b.base_offset < s.next_base) "
            "GROUP BY s.base_offset, s.created_ms, s.clean_to, s.cleaned_ms, s.next_base ORDER BY s.base_offset", pid)
    segments = [SegmentStats(r["base_offset"], r["created_ms"],
                             row["next_offset"] if r["next_base"] is None else r["next_base"], r["size"], r["max_ts"],
                             r["clean_to"], r["cleaned_ms"]) for r in rows]
    return Snapshot(segments, row["log_start"], row["next_offset"], row["cleanings"])


class _Output:
    """Rebuilt batches gathered into new objects (worker thread); their future index rows."""

    def __init__(self, rewrite: "_Rewrite") -> None:
        self._rewrite = rewrite
        self.objects: list[tuple[str, int]] = []  # (key, size) of every object written
        self.keys: list[str] = []  # every key a PUT was tried with (to delete if the swap is refused)
        # (base, last, object index, position, length, max timestamp, epoch)
        self.rows: list[tuple[int, int, int, int, int, int, int]] = []
        self._parts: list[bytes] = []
        self._size = 0

    def add(self, entry: Entry, data: bytes) -> None:
        max_ts = bf.HEADER.unpack_from(data)[8]
        self.rows.append((entry[0], entry[1], len(self.objects), self._size, len(data), max_ts, entry[5]))
        self._parts.append(data)
        self._size += len(data)
        if self._size >= OBJECT_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._parts:
            return
        store = self._rewrite.store
        key = store.index.objects.new_key()
        self.keys.append(key)
        self._rewrite.call(store.index.objects.put(key, b"".join(self._parts)))
        self.objects.append((key, self._size))
        self._parts, self._size = [], 0


class _Rewrite:
    """Scan, map and filter one partition's cleanable segments (a worker thread, reading through the
    store on its event loop), as the disk cleaner does over files."""

    def __init__(self, store: CleanerStore, part: CleanedPartition, snapshot: Snapshot, cleanable: list[SegmentStats],
                 first_dirty: int, settings: Settings, now: int, result: CleanResult) -> None:
        self.store, self.part, self.snapshot = store, part, snapshot
        self.cleanable, self.first_dirty = cleanable, first_dirty
        self.settings, self.now, self.result = settings, now, result
        self.loop = asyncio.get_running_loop()
        self.stop = threading.Event()  # set when the cleaning is cancelled: the thread's next read fails
        self.output = _Output(self)
        self.removed: list[int] = []  # base offsets of batches whose index rows go (removed or rebuilt)
        self.cleaned: list[tuple[int, int]] = []  # (segment base, deduplicated up to)
        self.end = 0  # index rows may change below this offset (the end of the last segment cleaned)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the store's coroutines on its loop and wait for it (from the worker thread)."""
        if self.stop.is_set():
            coro.close()
            raise asyncio.CancelledError()
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(_CALL_TIMEOUT_S)

    def batches(self, start: int, end: int) -> Iterator[tuple[Entry, memoryview, tuple]]:
        """(index entry, batch bytes with its offsets written in, unpacked header) of every batch whose
        base offset is in [start, end), READ_ROWS at a time."""
        offset = start
        while offset < end:
            entries = self.call(self.store.index.rows_between(self.part.pid, offset, end, READ_ROWS))
            if not entries:
                return
            data = memoryview(self.call(self.store.index.batch_bytes(entries)))
            pos = 0
            for entry in entries:
                batch = data[pos:pos + entry[4]]
                pos += entry[4]
                yield entry, batch, bf.HEADER.unpack_from(batch)
            offset = entries[-1][0] + 1

    def run(self) -> bool:
        """Compute the cleaning and write its new objects; False when there is nothing to clean
        (every dirty record follows a transaction still open)."""
        codec: RecordCodec = self.store.record_codec
        cleanable, result = self.cleanable, self.result
        scan = scan_log(((b, h) for _, b, h in self.batches(cleanable[0].base, self.snapshot.next_offset)),
                        codec.is_abort_marker)
        bounds = clean_range(cleanable, self.first_dirty, scan)
        if bounds is None:
            return False
        offsets = OffsetMap(self.store.cleaner_dedupe_buffer_bytes)
        dirty = ((b, h) for _, b, h in self.batches(cleanable[self.first_dirty].base, bounds[1]))
        upper = map_dirty(dirty, codec, offsets, bounds[0], bounds[1], scan.aborted)
        result.keys_mapped = len(offsets)
        markers = MarkerTracker(scan.aborted)
        stats = FilterStats()
        for segment in cleanable:
            if segment.base >= upper:
                break
            drop = drops_tombstones(segment.cleaned_ms, self.settings, self.now)
            for entry, batch, header in self.batches(segment.base, segment.next_offset):
                result.bytes_read += len(batch)
                keep_empty = header[9] >= 0 and scan.last_batches.get(header[9]) == header[0]
                kept = filter_batch(batch, header, codec, offsets, upper, drop, keep_empty, header[0] in scan.aborted,
                                    stats, markers)
                if kept is batch:
                    result.bytes_written += len(batch)
                    continue
                self.removed.append(entry[0])
                if kept is not None:
                    self.output.add(entry, bytes(kept))
                    result.bytes_written += len(kept)
            self.cleaned.append((segment.base, min(segment.next_offset, upper)))
            self.end = segment.next_offset
        self.output.flush()
        result.records_read, result.records_kept = stats.records_read, stats.records_kept
        result.partitionlets, result.clean_to = len(self.cleaned), upper
        return True


async def _swap(store: CleanerStore, part: CleanedPartition, work: _Rewrite, fence: int) -> None:
    """Put the cleaning in the index in one transaction. Raises Superseded when another swap, a move
    of leadership or a deletion came first (nothing changes then)."""
    out = work.output
    async with store.index.pool().acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT log_start, cleanings FROM kc_partitions WHERE id = $1 FOR UPDATE",
                                  part.pid)
        if row is None or row["cleanings"] != work.snapshot.cleanings:
            raise Superseded(f"{part.name}: changed under the cleaner (deleted, or cleaned by another process)")
        if fence >= 0:  # locked after the partition row, as kc_commit locks them
            lead = await conn.fetchval(
                "SELECT l.epoch FROM kc_partition_leaders l JOIN kc_topics t ON t.stream = l.stream AND "
                "t.name = l.topic JOIN kc_partitions p ON p.topic_id = t.id AND p.idx = l.partition "
                "WHERE p.id = $1 FOR SHARE OF l", part.pid)
            if lead != fence:
                raise Superseded(f"{part.name}: leader epoch {fence} was superseded by {lead}; cleaning dropped")
        ids: list[int] = []
        if out.objects:
            made = await conn.fetch(
                "INSERT INTO kc_objects (key, size, created_ms) SELECT k, s, kc_now_ms() FROM "
                "unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS u(k, s, n) ORDER BY n RETURNING id, key",
                [k for k, _ in out.objects], [s for _, s in out.objects])
            by_key = {r["key"]: r["id"] for r in made}
            ids = [by_key[k] for k, _ in out.objects]
        if work.removed:
            await conn.execute("DELETE FROM kc_batches WHERE pid = $1 AND base_offset = ANY($2::bigint[])",
                               part.pid, work.removed)
        rows = [r for r in out.rows if r[1] >= row["log_start"]]  # retention may have moved the start meanwhile
        if rows:
            await conn.executemany("INSERT INTO kc_batches VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                                   [(part.pid, r[0], r[1], ids[r[2]], r[3], r[4], r[5], r[6]) for r in rows])
        await conn.execute(
            "UPDATE kc_segments s SET clean_to = u.c, cleaned_ms = CASE WHEN s.cleaned_ms = 0 THEN $4 "
            "ELSE s.cleaned_ms END FROM unnest($2::bigint[], $3::bigint[]) AS u(b, c) "
            "WHERE s.pid = $1 AND s.base_offset = u.b",
            part.pid, [b for b, _ in work.cleaned], [c for _, c in work.cleaned], work.now)
        await conn.execute("UPDATE kc_partitions SET cleanings = cleanings + 1 WHERE id = $1", part.pid)
        await conn.execute("SELECT pg_notify($1, $2)", schema.CLEANED_CHANNEL,
                           f"{store.index.origin} {part.pid}:{work.end}")
    for (key, _size), object_id in zip(out.objects, ids):
        store.index.object_keys[object_id] = key


async def clean_partition(store: CleanerStore, part: CleanedPartition, fence: int,
                          now: int | None = None) -> CleanResult | None:
    """Clean one partition if a cleaning is due; None if it was not (or the partition changed under it).
    `fence` is the leader epoch the swap must still find (-1: none)."""
    settings = part.settings
    if not settings.compact or store.record_codec is None:
        return None
    now = now_ms() if now is None else now
    snapshot = await read_snapshot(store.index, part.pid, now)
    if snapshot is None:
        return None
    sealed = snapshot.segments[:-1]
    found = due(sealed, settings, now)
    if found is None:
        return None
    result = CleanResult(part.name)
    started = time.perf_counter()
    work = _Rewrite(store, part, snapshot, sealed[:found[0]], found[1], settings, now, result)
    worker = asyncio.ensure_future(asyncio.to_thread(work.run))
    try:
        try:
            done = await asyncio.shield(worker)
        except asyncio.CancelledError:
            work.stop.set()  # the thread stops at its next read; its objects go with the orphans
            with contextlib.suppress(BaseException):
                await worker
            raise
        if not done:
            log.debug("%s: not cleaned: its dirty records follow a transaction still open", part.name)
            return None
        await _swap(store, part, work, fence)
    except BaseException as exc:
        if work.output.keys and not isinstance(exc, asyncio.CancelledError):
            with contextlib.suppress(Exception):  # never referenced; else the orphan sweep takes them
                await store.index.objects.delete(work.output.keys)
        if isinstance(exc, Superseded):
            log.info("%s", exc)
            return None
        raise
    part.cleaned(work.end)
    result.seconds = time.perf_counter() - started
    log.info("%s: cleaned %d segment(s) to offset %d: %d of %d records kept, %d -> %d bytes in %.3f s",
             part.name, result.partitionlets, result.clean_to, result.records_kept, result.records_read,
             result.bytes_read, result.bytes_written, result.seconds)
    return result
