"""A partition of the cloud engine: offsets and the batch index in PostgreSQL, bytes in objects.

The high watermark, log start and leader epoch kept here are this process's
view; the database holds the truth and NOTIFY keeps every broker's view
current (a read past the local high watermark asks the database before
answering OFFSET_OUT_OF_RANGE). A short index of the newest batches is
kept in memory so consumers at the tail need no database round trip.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from .. import batch_format as bf
from ..api import AppendResult, PartitionletInfo, TimestampHit
from ..compaction import SegmentStats
from ..errors import OffsetOutOfRangeError, StorageError
from ..namespace import Settings, TopicState, now_ms
from ..partition_base import PartitionBase, RecordTimestamps
from .cleaner import read_snapshot
from .index import PARALLEL_GETS, BatchIndex, Entry
from .outage import database_step
from .writer import Writer

TAIL_ENTRIES = 2048  # batches of the tail index kept in memory per partition
READ_ROWS = 500  # index rows one read asks the database for
# Ranged GETs one read waits for: two rounds. A backlog of small objects (one batch each: a plain
# producer's single-record batches) made one read of 500 rows wait for 500 GETs, and the Fetch
# answered once every partition's read was done: a consumer starting on such a backlog with a
# cold cache got its first record after 5.1 s. It gets 32 batches now, and the rest in the
# fetches that follow.
READ_GETS = 2 * PARALLEL_GETS
HEAD_ROWS = 5000  # index rows with headers one step of a tail scan asks for


class PartitionStore(Protocol):
    """What a partition needs of the store that opened it (declared here: the store imports this module)."""

    epoch: int  # the store's open counter: no partition opens below it
    record_timestamps: RecordTimestamps | None
    writer: Writer
    index: BatchIndex

    async def refresh_partitions(self, parts: list[CloudPartition]) -> None: ...

    def data_dirs(self) -> list[str]: ...


class CloudPartition(PartitionBase):
    def __init__(self, store: PartitionStore, topic: TopicState, index: int, row: list[int]) -> None:
        pid, next_offset, log_start, epoch = row
        super().__init__(f"{topic.stream.path}:{topic.name}/{index}", max(epoch, store.epoch),
                         store.record_timestamps)
        self._store = store
        self._topic = topic
        self.pid = pid
        self._hw = next_offset
        self._log_start = log_start
        self._tail: list[Entry] = []  # contiguous batches ending at or below the high watermark
        self._tail_bases: list[int] = []

    @property
    def settings(self) -> Settings:
        """The topic's effective rules (stream policy with its configs applied)."""
        return self._topic.settings

    def segment_roll(self) -> tuple[int, int]:
        """(segment.bytes, segment.ms) by which kc_commit rolls this partition's segments, which
        the log cleaner works on; (-1, -1) when the topic is not compacted (no segments kept)."""
        settings = self._topic.settings
        return (settings.partitionlet_bytes, settings.partitionlet_age_ms) if settings.compact else (-1, -1)

    async def sealed_chain(self) -> list[SegmentStats]:
        """The sealed segments (all but the active one), oldest first, as the cleaner plans with them."""
        with database_step(f"reading the segments of {self.name}"):
            snapshot = await read_snapshot(self._store.index, self.pid, now_ms())
        return snapshot.segments[:-1] if snapshot is not None else []

    # views from elsewhere -----------------------------------------------------------

    def cleaned(self, below: int) -> None:
        """The cleaner replaced index rows below `below`: forget the tail entries there, which
        name objects that are deleted once no reader can need them."""
        cut = bisect.bisect_left(self._tail_bases, below)
        if cut:
            del self._tail[:cut], self._tail_bases[:cut]

    def moved(self, next_offset: int, log_start: int, epoch: int) -> None:
        """The database says the partition moved (our commit, another broker's, retention)."""
        if next_offset > self._hw:
            self._hw = next_offset
        if log_start > self._log_start:
            self._log_start = log_start
            self._trim_tail(log_start)
        if epoch > self._leader_epoch:
            self._leader_epoch = epoch
        self._wake()

    def committed(self, object_id: int, key: str, base: int, count: int, epoch: int, position: int,
                  data: memoryview, max_ts: int) -> None:
        """One of our batches got offsets [base, base + count)."""
        self._store.index.object_keys[object_id] = key
        self._store.index.cache.put(object_id, position, data)
        entry = (base, base + count - 1, object_id, position, len(data), epoch, max_ts)
        if self._tail and self._tail[-1][1] + 1 != base:
            self._tail, self._tail_bases = [], []
        self._tail.append(entry)
        self._tail_bases.append(base)
        if len(self._tail) > TAIL_ENTRIES:
            del self._tail[:TAIL_ENTRIES // 2], self._tail_bases[:TAIL_ENTRIES // 2]
        self.moved(base + count, self._log_start, epoch)

    def _trim_tail(self, log_start: int) -> None:
        cut = 0
        while cut < len(self._tail) and self._tail[cut][1] < log_start:
            cut += 1
        if cut:
            del self._tail[:cut], self._tail_bases[:cut]

    # the Partition interface ----------------------------------------------------------

    appends_in_call_order = True

    def append(  # type: ignore[override]  # a plain def: the batch takes its place when called
        self, batch: bytes | bytearray | memoryview, record_count: int, *, at: int | None = None,
        leader_epoch: int | None = None, fenced_by: "CloudPartition | None" = None, txn_since: int | None = None,
        client_gone: Callable[[], bool] | None = None,
    ) -> Awaitable[AppendResult]:
        """Buffer the batch now (its place in the partition is fixed by this call) and return
        what resolves once it is committed, so a broker may append a connection's next
        request before this one's object is written."""
        self._check_open()
        view = memoryview(batch).cast("B")
        _length, max_ts = bf.check_append(view, record_count)
        fence = -1 if leader_epoch is None else leader_epoch
        guard = -1 if fenced_by is None else fenced_by.pid
        return self._store.writer.submit(self, bytes(view), record_count, max_ts, fence, -1 if at is None else at,
                                         guard, -1 if txn_since is None else txn_since, client_gone)

    def abandon_appends(self, error: StorageError) -> int:
        """Refuse now, with `error`, this partition's appends no commit has taken yet (its broker
        stopped leading it); none of them is ever stored (Writer.abandon)."""
        return self._store.writer.abandon(self.pid, error)

    async def refresh(self) -> None:
        await self._store.refresh_partitions([self])

    async def wait_durable(self, offset: int) -> None:
        return None  # append answers after the database commit: nothing is pending

    async def _check_offset(self, offset: int) -> None:
        if self._log_start <= offset <= self._hw:
            return
        await self._store.refresh_partitions([self])
        if not self._log_start <= offset <= self._hw:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start}, {self._hw}] of {self.name}"
            )

    async def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        self._check_open()
        await self._check_offset(offset)
        if offset == self._hw:
            return b""
        entries = self._from_tail(offset, max_bytes)
        if not entries:
            entries = await self._store.index.index_rows(self.pid, offset, READ_ROWS)
            if not entries:  # retention moved the start meanwhile
                await self._check_offset(offset)
                return b""
        chosen = [entries[0]]
        total = entries[0][4]
        for entry in entries[1:]:
            if total + entry[4] > max_bytes:
                break
            chosen.append(entry)
            total += entry[4]
        return await self._store.index.batch_bytes(self._store.index.within_gets(chosen, READ_GETS))

    async def batch_heads(self, offset: int, budget: int) -> AsyncIterator[memoryview]:
        """Each batch from `offset` on, as far as `budget` bytes of the log, as a tail scan (a new
        leader's producer and transaction state) needs it: a data batch's header alone and a
        control batch whole, both from the index, with their offset and epoch written in. Rows
        the index keeps no header for (older versions, a replica's run of batches) are read from
        their objects, whole."""
        while offset < self._hw and budget > 0:
            rows = await self._store.index.head_rows(self.pid, offset, HEAD_ROWS)
            if not rows:
                return
            unknown = [entry for entry, head in rows if head is None]
            read = memoryview(await self._store.index.batch_bytes(unknown)) if unknown else memoryview(b"")
            for entry, head in rows:
                if head is None:
                    data, read = read[:entry[4]], read[entry[4]:]
                else:
                    buf = bytearray(head)
                    bf.PREFIX.pack_into(buf, 0, entry[0], entry[4] - bf.LOG_OVERHEAD, entry[5])
                    data = memoryview(buf)
                yield data
                budget -= entry[4]
                offset = entry[1] + 1
                if budget <= 0:
                    return

    def _from_tail(self, offset: int, max_bytes: int) -> list[Entry]:
        if not self._tail or offset < self._tail[0][0] or offset > self._tail[-1][1]:
            return []
        i = bisect.bisect_right(self._tail_bases, offset) - 1
        out, total = [], 0
        for entry in self._tail[i:]:
            if out and total + entry[4] > max_bytes:
                break
            out.append(entry)
            total += entry[4]
        return out

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        self._check_open()
        after = self._log_start
        while True:
            rows = await self._store.index.rows_by_timestamp(self.pid, timestamp, after)
            if not rows:
                return None
            for entry in rows:
                data = await self._store.index.batch_bytes([entry])
                header = bf.parse_header(data)
                hit = self._first_at_or_after(data, entry[0], entry[1], entry[6], header.log_append_time,
                                              timestamp, self._log_start)
                if hit is not None:
                    return hit
                after = entry[1] + 1

    async def max_timestamp(self) -> TimestampHit | None:
        """The max over the batches still indexed, the one holding the log start whole (its records
        below the start included). A partition here has no segments outside compaction, and moving the
        log start drops the index rows wholly below it at once: a max Kafka's segment would still show
        there is gone."""
        self._check_open()
        entry = await self._store.index.row_of_max_timestamp(self.pid)
        if entry is None:
            return None
        data = await self._store.index.batch_bytes([entry])
        header = bf.parse_header(data)
        return self._offset_of_max(data, entry[0], entry[1], entry[6], header.log_append_time)

    async def delete_records(self, before_offset: int) -> int:
        self._check_open()
        if before_offset == -1:
            await self._store.refresh_partitions([self])
            before_offset = self._hw
        if before_offset < 0:
            raise OffsetOutOfRangeError(f"cannot delete records below {before_offset} of {self.name}")
        start = await self._store.index.advance_start(self.pid, before_offset)
        if start is None:
            await self._store.refresh_partitions([self])
            raise OffsetOutOfRangeError(f"cannot delete records below {before_offset}: {self.name} ends at {self._hw}")
        self.moved(self._hw, start, self._leader_epoch)
        return self._log_start

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_open()
        restarted = await self._store.index.restart_at(self.pid, offset)
        if restarted is None:
            await self._store.refresh_partitions([self])
            raise OffsetOutOfRangeError(f"cannot restart {self.name} at {offset}: it ends at {self._hw}")
        self.moved(offset, offset, restarted[1])

    async def end_offset_for_epoch(self, epoch: int, current: int | None = None) -> tuple[int, int]:
        """From the epochs batches were stamped with. In a cluster (`current`: the leader table's
        epoch) only epochs up to it count: epochs the store's open counter stamped before
        schema version 4 are not leader epochs any client was told of."""
        self._check_open()
        epochs = await self._store.index.epochs(self.pid)
        leading = self._leader_epoch if current is None else current
        self._epochs = [e for e in epochs if e[0] <= leading]
        if leading > (self._epochs[-1][0] if self._epochs else -1):
            self._note_epoch(leading, self._hw)  # the epoch we lead in, before its first batch
        return await super().end_offset_for_epoch(epoch)

    async def partitionlets(self) -> list[PartitionletInfo]:
        size, max_ts = await self._store.index.partition_size(self.pid)
        if not size:
            return []
        return [PartitionletInfo(self._log_start, self._hw, size, self._store.data_dirs()[0], False, max_ts)]
