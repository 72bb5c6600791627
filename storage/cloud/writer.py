"""The produce path: batches buffered for `flush_ms`, uploaded as one object, committed in one transaction.

    append(p1, b1) ─┐
    append(p7, b2) ─┼─> buffer ──(flush_ms or flush_bytes)──> PUT object ──> kc_commit(...) ──> offsets
    append(p1, b3) ─┘    (this process)                      (S3, once)      (PostgreSQL, once)

Inside an object a partition's batches sit next to each other, so a reader
fetches them with one ranged GET. The object is written before any offset
exists, so stored batches keep the producer's baseOffset field; readers
write the assigned offset (and leader epoch) into the copy they hand out
(both fields lie outside the CRC-32C). Appends resolve only after the
commit: an answer to the producer means its batch is in the object store
and its offsets are in the database.

When to flush (group commit): with no upload under way, at once (the
batches of this event-loop turn, so one produce request's partitions share
an object); while one is under way, appends gather and go as soon as it
ends, or after `flush_ms`, or at `flush_bytes`, whichever comes first. So
at a trickle an acknowledgement waits for one PUT and one commit, not for
a timer, and under load the upload in flight is the window that fills the
next object. Flushes run concurrently (bounded); while every slot is taken,
appends gather until a write ends, then go as one object: a flush made on
the timer would only wait for a slot, and a producer with many requests in
flight (librdkafka without idempotence) queued one tiny object per
flush_ms behind the slots, each acknowledgement seconds late. Their commits
serialise on the rows of the partitions they share. Offsets stay dense per partition because only
kc_commit assigns them, under the partition row's lock.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..api import AppendResult
from ..batch_format import ATTR_CONTROL, HEADER, HEADER_SIZE, LOG_OVERHEAD, PREFIX, parse_header
from ..errors import (
    NotLeaderError,
    OffsetMismatchError,
    RequesterGoneError,
    StorageError,
    StorageUnavailableError,
    TransactionEndedError,
    UnknownTopicError,
)
from ..namespace import now_ms

log = logging.getLogger(__name__)

FENCED = -2  # kc_commit's base offset for a batch whose leader epoch was superseded
AT_MISMATCH = -3  # kc_commit's base offset for a batch whose stated offset was not the next one
TXN_ENDED = -4  # kc_commit's base offset for a transactional batch whose producer's transaction ended meanwhile


class CommittedPartition(Protocol):
    """What the writer needs of a partition whose batches it commits (declared here: partitions import this module)."""

    pid: int
    name: str

    def segment_roll(self) -> tuple[int, int]: ...

    def committed(self, object_id: int, key: str, base: int, count: int, epoch: int, position: int,
                  data: memoryview, max_ts: int) -> None: ...


class _Pending:
    __slots__ = ("partition", "data", "count", "max_ts", "fence", "guard", "at", "since", "future", "prior",
                 "abandoned", "submitted", "gone")

    def __init__(self, partition: CommittedPartition, data: bytes, count: int, max_ts: int, fence: int, guard: int,
                 at: int, since: int, future: asyncio.Future[AppendResult],
                 prior: asyncio.Future[set[int]] | None, gone: Callable[[], bool] | None) -> None:
        self.partition, self.data, self.count, self.max_ts, self.future = partition, data, count, max_ts, future
        self.fence = fence  # the leader epoch the commit must still find, -1: none
        self.guard = guard  # the partition id whose leader `fence` names, -1: the batch's own
        self.at = at  # the offset the batch must get (a replica's copy), -1: the next one
        self.since = since  # no marker of the batch's producer may be stored from here on (its transaction's), -1: none
        self.prior = prior  # the write of the partition's batches submitted before this one, if under way
        self.abandoned = False  # refused before its commit began (`Writer.abandon`): never committed
        self.submitted = time.monotonic()
        self.gone = gone  # whether the client that sent the batch closed its connection; None: not asked


Commit = Callable[[str, int, list[int], list[int], list[int], list[int], list[int], list[int], list[int], list[int],
                   list[int], list[int], list[bytes | None], list[int]], Awaitable[list[tuple[int, int, int, int]]]]


def _drop_gone(items: list[_Pending]) -> None:
    """Refuse the batches whose client closed its connection while they waited to be committed (a broker
    paused past the client's request timeout, a slow object store): the client resends them, and this copy
    stored as well would be a duplicate. Asked as the commit begins, the last moment a batch can be left out:
    a paused broker woke to commit what its clients had given up on (the cloud campaign's plain producer
    had records stored twice, ~200 offsets apart, after each pause). Each request is asked once."""
    asked: dict[Callable[[], bool], bool] = {}
    for item in items:
        if item.gone is None or item.abandoned or item.future.done():
            continue
        if item.gone not in asked:
            asked[item.gone] = item.gone()
        if asked[item.gone]:
            item.abandoned = True
            item.future.set_exception(RequesterGoneError(
                f"{item.partition.name}: the client closed its connection before the batch was committed; "
                "not appended"))


def batch_head(data: bytes) -> bytes | None:
    """What the index keeps of a batch for a new leader's tail scan (producer and transaction
    state) so it reads no object: a data batch's header, a control batch (a marker) whole; None
    for several batches appended as one (a replica's copy), which the scan reads from the object."""
    if len(data) < HEADER_SIZE or PREFIX.unpack_from(data)[1] + LOG_OVERHEAD != len(data):
        return None
    return data if HEADER.unpack_from(data)[5] & ATTR_CONTROL else data[:HEADER_SIZE]


class Writer:
    """Buffers appends of every partition of this process and writes them out together."""

    def __init__(self, put: Callable[[str, bytes], Awaitable[None]], new_key: Callable[[], str], commit: Commit,
                 flush_ms: int, flush_bytes: int, max_in_flight: int = 8) -> None:
        self._put = put
        self._new_key = new_key
        self._commit = commit
        self.flush_ms = flush_ms
        self.flush_bytes = flush_bytes
        self._buffer: list[_Pending] = []
        self._buffered_bytes = 0
        self._timer: asyncio.Handle | None = None
        self._putting = 0  # writes whose object is being uploaded: while any is, appends gather for the next
        self._slots = asyncio.Semaphore(max_in_flight)
        self._max_in_flight = max_in_flight
        self._tasks: set[asyncio.Task] = set()  # writes made and not yet ended (holding a slot or waiting for one)
        # partition id -> the latest write holding its batches: resolves, once that write's commit is
        # done, to the partitions whose batches it did not store (later writes must not store theirs)
        self._latest: dict[int, asyncio.Future[set[int]]] = {}
        self._open: set[_Pending] = set()  # batches no commit has taken yet: `abandon` may still refuse them
        self.flushes = 0  # objects committed (= database transactions on the produce path)
        self.batches = 0  # batches committed
        self.closed = False

    def submit(self, partition: CommittedPartition, data: bytes, count: int, max_ts: int,
               fence: int = -1, at: int = -1, guard: int = -1, since: int = -1,
               gone: Callable[[], bool] | None = None) -> asyncio.Future[AppendResult]:
        """Buffer one batch; the future resolves once it is committed. Batches of a partition
        are committed in the order they were submitted (one object keeps them in that order).
        With `at` >= 0 the batch is stored only if that is the partition's next offset then
        (else OffsetMismatchError carrying the next offset). With `fence` >= 0 it is stored only
        while that is the leader epoch of its partition (or of partition id `guard`). With `since` >= 0
        (a transactional batch) it is stored only while no marker of its producer is stored at or
        after that offset (else TransactionEndedError). With `gone`, it is stored only if that says
        no when its commit begins (else RequesterGoneError: the client closed the connection)."""
        if self.closed:
            raise StorageUnavailableError("the store is closing")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        # the write before it is taken now, not at flush: one that fails in between still counts
        pending = _Pending(partition, data, count, max_ts, fence, guard, at, since, future,
                           self._latest.get(partition.pid), gone)
        self._buffer.append(pending)
        self._open.add(pending)
        self._buffered_bytes += len(data)
        if self._buffered_bytes >= self.flush_bytes:
            self.flush()
        elif self._timer is None and not self._putting:
            self._timer = loop.call_soon(self.flush)  # nothing being written: this loop turn's batches go now
        elif self._timer is None:
            self._timer = loop.call_later(self.flush_ms / 1000, self.flush)
        return future

    def flush(self, force: bool = False) -> None:
        """Start writing what is buffered now; while every slot is taken, only at `flush_bytes` or with
        `force` (the batches gather meanwhile, and the next write to end starts them)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buffer:
            return
        if len(self._tasks) >= self._max_in_flight and self._buffered_bytes < self.flush_bytes and not force:
            return
        items, self._buffer, self._buffered_bytes = self._buffer, [], 0
        loop = asyncio.get_running_loop()
        pids = {item.partition.pid for item in items}
        after = {item.prior for item in items if item.prior is not None}
        done: asyncio.Future[set[int]] = loop.create_future()
        for pid in pids:
            self._latest[pid] = done
        task = loop.create_task(self._write(items, after, done, time.monotonic()))
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task) -> None:
        """A write ended: its slot is free, so what gathered while every slot was taken goes now."""
        self._tasks.discard(task)
        if self._buffer and self._timer is None and not self.closed:
            self.flush()

    def _forget(self, pids: set[int], done: asyncio.Future[set[int]]) -> None:
        """The write `done` is over for these partitions: batches appended from now on do not
        follow it. Called before any of its batches' answers can be read, so a producer's
        resend of a refused batch is never refused again for the same failure."""
        for pid in pids:
            if self._latest.get(pid) is done:
                del self._latest[pid]

    def abandon(self, pid: int, error: StorageError) -> int:
        """Refuse now, with `error`, every produced batch of partition `pid` that no commit has taken
        yet (its broker stopped leading it): its producer hears at once instead of when the object is written
        and the commit is fenced, and since it is never committed, a retry cannot store it twice. A
        batch whose commit is under way is answered as that commit decides. Returns how many."""
        refused = [item for item in self._open if item.partition.pid == pid and not item.future.done()
                   and item.guard < 0 and item.at < 0]  # a coordinator's marker, a replica's copy: not the leader's
        for item in refused:
            item.abandoned = True
            item.future.set_exception(error)
        return len(refused)

    async def close(self) -> None:
        """Write what is buffered and wait for every write in flight."""
        self.flush(force=True)
        self.closed = True
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write(self, items: list[_Pending], after: set[asyncio.Future[set[int]]],
                     done: asyncio.Future[set[int]], flushed: float) -> None:
        """Write one object; commit it once the writes before it holding the same partitions are
        committed, so a partition's batches get offsets in the order they were submitted. A batch
        whose partition an earlier write failed to store is not stored either (no gap in what one
        producer sent, which its retry then resends in order)."""
        failed: set[int] = set()
        try:
            async with self._slots:
                await self._write_object(items, after, failed, done, flushed)
        except BaseException as exc:
            self._open.difference_update(items)
            failed.update(item.partition.pid for item in items)
            error = exc if isinstance(exc, StorageError) else StorageUnavailableError(f"write failed: {exc}")
            if not isinstance(exc, StorageError):
                log.exception("writing %d batches failed", len(items))
            for item in items:
                if not item.future.done():
                    item.future.set_exception(error)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._forget({item.partition.pid for item in items}, done)
            if not done.done():
                done.set_result(failed)

    async def _upload(self, key: str, body: bytes) -> None:
        """PUT one object; when the last upload under way ends and batches wait, they go at once
        (group commit: the upload in flight is the window that gathers the next object)."""
        self._putting += 1
        try:
            await self._put(key, body)
        finally:
            self._putting -= 1
            if not self._putting and self._buffer and not self.closed:
                self.flush()

    async def _write_object(self, items: list[_Pending], after: set[asyncio.Future[set[int]]],
                            failed: set[int], done: asyncio.Future[set[int]], flushed: float) -> None:
        started = time.monotonic()
        order: dict[int, list[_Pending]] = {}
        for item in items:
            order.setdefault(item.partition.pid, []).append(item)
        ranked = [item for group in order.values() for item in group]
        positions, pos = [], 0
        for item in ranked:
            positions.append(pos)
            pos += len(item.data)
        body = b"".join(item.data for item in ranked)
        key = self._new_key()
        await self._upload(key, body)
        uploaded = time.monotonic()
        for earlier in await asyncio.gather(*after):
            failed |= earlier & order.keys()
        ordered = time.monotonic()
        _drop_gone(ranked)
        self._open.difference_update(ranked)  # from here on the commit decides
        if failed or any(item.abandoned for item in ranked):
            self._forget(failed, done)  # answered below, while the rest of this object is committed
            for item in ranked:
                if item.partition.pid in failed and not item.future.done():
                    item.future.set_exception(StorageUnavailableError(
                        f"{item.partition.name}: a batch appended before this one was not stored; nor is this one"))
            kept = [(item, position) for item, position in zip(ranked, positions)
                    if item.partition.pid not in failed and not item.abandoned]
            if not kept:
                return  # the object is an orphan, swept after the grace time
            ranked, positions = [item for item, _ in kept], [position for _, position in kept]
        rolls = [item.partition.segment_roll() for item in ranked]
        rows = await self._commit(key, len(body), [i.partition.pid for i in ranked], [i.count for i in ranked],
                                  positions, [len(i.data) for i in ranked], [i.max_ts for i in ranked],
                                  [i.fence for i in ranked], [r[0] for r in rolls], [r[1] for r in rolls],
                                  [i.at for i in ranked], [i.guard for i in ranked],
                                  [batch_head(i.data) for i in ranked], [i.since for i in ranked])
        self.flushes += 1
        self.batches += len(ranked)
        if log.isEnabledFor(logging.DEBUG):  # where an acknowledgement's time went (the bench reads these)
            end = time.monotonic()
            log.debug("flush batches=%d bytes=%d buffered_ms=%.1f slot_ms=%.1f put_ms=%.1f prior_ms=%.1f "
                      "commit_ms=%.1f", len(ranked), len(body),
                      statistics.median(flushed - item.submitted for item in ranked) * 1000,
                      (started - flushed) * 1000, (uploaded - started) * 1000, (ordered - uploaded) * 1000,
                      (end - ordered) * 1000)
        stamp = now_ms()
        view = memoryview(body)
        for item, position, (object_id, base, epoch, next_offset) in zip(ranked, positions, rows):
            if base == AT_MISMATCH:  # a replica's copy: the link compares and resends; nothing depends on it here
                item.future.set_exception(OffsetMismatchError(
                    f"{item.partition.name}: append at offset {item.at} but the next offset is {next_offset}",
                    next_offset))
                continue
            if base < 0:
                failed.add(item.partition.pid)
            if base == FENCED:
                item.future.set_exception(NotLeaderError(
                    f"{item.partition.name}: leader epoch {item.fence} was superseded by {epoch}; not appended",
                    epoch))
                continue
            if base == TXN_ENDED:
                item.future.set_exception(TransactionEndedError(
                    f"{item.partition.name}: a marker of producer {parse_header(item.data).producer_id} was stored at or after "
                    f"offset {item.since} while this transactional batch waited; not appended"))
                continue
            if base < 0:
                item.future.set_exception(UnknownTopicError(f"partition {item.partition.name} was deleted"))
                continue
            item.partition.committed(object_id, key, base, item.count, epoch, position,
                                     view[position:position + len(item.data)], item.max_ts)
            if not item.future.done():
                item.future.set_result(AppendResult(base, base + item.count - 1, stamp))
