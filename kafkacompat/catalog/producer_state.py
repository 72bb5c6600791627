"""Idempotent producing: per (producer id, partition) the last five batches.

Mirrors Kafka's ProducerStateManager: a retried batch inside the window is
answered with its original offsets, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
an older epoch is fenced, and sequences wrap at 2^31-1. State lives in
memory and, after a restart, is rebuilt per partition from the batch
headers at the log's tail (the records themselves are never decoded), so a
retry that spans a restart is still answered with its original offsets. A
producer the broker has no state for may start at any sequence, as on
Kafka after its state expired. Two differences from Kafka: batches being
written stay in the window until they are stored or fail (a failure takes
out the batches after it, and the window still knows the sequence before
them), and after a transaction aborted under the same epoch the next batch
may reuse the aborted batches' sequences (librdkafka gives a purged
record's sequence to the next one; Kafka answers it as a duplicate).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import time
from collections.abc import Callable, Hashable
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType, marker_coordinator_epoch, marker_type
from kafkacompat.protocol.records import ATTR_CONTROL, ATTR_LOG_APPEND_TIME, BatchHeader

from .log_tail import tail_batches

WINDOW = 5
# The coordinator epoch this broker's transaction coordinator writes into its markers: Kafka's is the
# leader epoch of the __transaction_state partition, 0 on a single node. The log-tail rebuild reads the
# one a marker carries (an operator's WriteTxnMarkers may have given another).
COORDINATOR_EPOCH = 0
INT32_MAX = 2**31 - 1
DEFAULT_EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms
REFUSAL_KEPT_S = 30.0  # how long a refused batch's pipelined followers are answered alike
# Refusals after which the producer resends the batch, and those behind it, in order (nothing was stored)
RESENT_AFTER = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error,
                          ErrorCode.leader_not_available, ErrorCode.not_enough_replicas})


def last_sequence(base_sequence: int, record_count: int) -> int:
    increment = record_count - 1
    if base_sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - base_sequence) - 1
    return base_sequence + increment


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


def follows(sequence: int, earlier: int) -> bool:
    """Whether `sequence` comes after `earlier` (sequences wrap at INT32_MAX)."""
    return 0 < (sequence - earlier) % (INT32_MAX + 1) < 2**30


@dataclasses.dataclass(slots=True)
class _Batch:
    first_seq: int
    last_seq: int
    base_offset: int  # -1 while the batch is being written (`written` then resolves)
    log_append_time: int
    max_timestamp: int = -1  # of the batch (DescribeProducers' last timestamp)
    written: asyncio.Future[bool] | None = None  # True once stored (base_offset set), False if it was not
    store: asyncio.Future[Any] | None = None  # the store's write of it (a store whose appends answer later)


def _failed(store: asyncio.Future[Any] | None) -> bool:
    """Whether a store's write has ended without storing (its exception is retrieved here)."""
    return store is not None and store.done() and (store.cancelled() or store.exception() is not None)


@dataclasses.dataclass(slots=True)
class _Entry:
    epoch: int
    last_write: float = 0.0  # monotonic seconds of the last append
    marker_timestamp: int | None = None  # of a transaction marker written after the batches (DescribeProducers)
    coordinator_epoch: int = -1  # of the last transaction marker (-1: none yet), kept across producer epochs
    # The last WINDOW stored batches, and after them those being written (never dropped before they are:
    # a failed write takes them out with all after it, and what preceded them must still be known).
    batches: collections.deque[_Batch] = dataclasses.field(default_factory=collections.deque)
    # The last sequence before the window: of the newest stored batch that left it, or, while the window
    # holds its first batches, the one before them (None: only a marker is known of the producer here).
    stored_before: int | None = None
    # The window's batches are of a transaction aborted under this epoch (transactions v1): the next batch
    # may take their sequences. librdkafka's abort gives a record it purged from its queue (it may have
    # been sent and stored) the next record's sequence; answered as a duplicate of the aborted one, that
    # record of the next transaction was never stored, though its transaction committed.
    aborted: bool = False


def _last_known(entry: _Entry) -> int | None:
    """The sequence the producer's next batch follows: its newest batch's in the window, or the one before
    the window (None: the state cannot tell)."""
    return entry.batches[-1].last_seq if entry.batches else entry.stored_before


def _after_abort(entry: _Entry, base_seq: int) -> Verdict:
    """The first batch after an aborted transaction: no duplicate of the aborted batches (their sequences
    may be given to new records), but no gap either. The producer resumes at the sequence after its last
    batch stored, or earlier where it purged batches that were stored."""
    last = _last_known(entry)
    if last is not None and follows(base_seq, next_sequence(last)):
        return Verdict(ErrorCode.out_of_order_sequence_number)
    return ACCEPT


def _unplaced(entry: _Entry | None) -> bool:
    """Whether the state kept cannot tell which sequence comes next (any is taken)."""
    return entry is None or entry.aborted or _last_known(entry) is None


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    error: ErrorCode = ErrorCode.none
    duplicate_of: int | None = None  # base offset of the original batch
    log_append_time: int = -1
    in_flight: asyncio.Future[bool] | None = None  # the original is being written: judge again once it is


ACCEPT = Verdict()


@dataclasses.dataclass(slots=True)
class _Refusal:
    """A producer's batch refused with nothing stored (see ProducerStates.refused)."""

    epoch: int
    first_seq: int
    error: ErrorCode
    at: float  # monotonic seconds
    followers: int = WINDOW - 1  # pipelined batches behind it still to be answered alike


class ProducerStates:
    """Per (producer id, partition) state; idle producers expire as on Kafka.

    Without expiry every producer ever seen would stay in memory. A
    producer idle for `expiration_ms` is forgotten; if it comes back it is
    treated as one the broker has no state for.
    """

    def __init__(
        self, expiration_ms: int = DEFAULT_EXPIRATION_MS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        # Unique across restarts as long as the clock does not go back.
        self._ids = itertools.count(int(time.time() * 1000) * 1000)
        self._entries: dict[tuple[int, Hashable], _Entry] = {}
        self._expiration = expiration_ms / 1000
        self._clock = clock
        self._next_sweep = clock() + min(self._expiration, 60.0)
        self._restored: set[Hashable] = set()
        self._restoring: dict[Hashable, asyncio.Future[None]] = {}
        self._refused: dict[tuple[int, Hashable], _Refusal] = {}
        self.issued = 0  # producer ids handed out by InitProducerId, read by /metrics

    def spread(self, index: int, count: int) -> None:
        """Hand out only ids equal to `index` modulo `count`: one of `count` workers sharing a store."""
        start = next(self._ids)
        self._ids = itertools.count(start - start % count + count + index, count)

    def new_producer_id(self) -> int:
        self.issued += 1
        return next(self._ids)

    def producer_ids(self) -> int:
        """How many distinct producer ids have state kept (on any partition)."""
        return len({producer_id for producer_id, _ in self._entries})

    @property
    def expiration_ms(self) -> int:
        return int(self._expiration * 1000)

    @expiration_ms.setter
    def expiration_ms(self, value: int) -> None:
        """producer.id.expiration.ms is a dynamic broker config: it applies from the next sweep."""
        self._expiration = value / 1000
        self._next_sweep = min(self._next_sweep, self._clock() + min(self._expiration, 60.0))

    def check(
        self, producer_id: int, epoch: int, partition: Hashable, base_seq: int, count: int
    ) -> Verdict:
        """Judge an idempotent batch before it is appended."""
        entry = self._entries.get((producer_id, partition))
        verdict = self._judge(entry, epoch, base_seq, count)
        refusal = self._refused.get((producer_id, partition))
        if refusal is None:
            return verdict
        if self._follows_refusal(refusal, entry, verdict, epoch, base_seq):
            refusal.followers -= 1
            return Verdict(refusal.error)
        if verdict.error == ErrorCode.none and verdict.in_flight is None:  # the producer resends in order
            del self._refused[(producer_id, partition)]
        return verdict

    def _judge(self, entry: _Entry | None, epoch: int, base_seq: int, count: int) -> Verdict:
        if entry is None:
            return ACCEPT
        if epoch < entry.epoch:
            return Verdict(ErrorCode.invalid_producer_epoch)
        if epoch > entry.epoch:
            return ACCEPT if base_seq == 0 else Verdict(ErrorCode.out_of_order_sequence_number)
        if entry.aborted:
            return _after_abort(entry, base_seq)
        last = last_sequence(base_seq, count)
        for batch in entry.batches:
            if batch.first_seq == base_seq and batch.last_seq == last:
                if batch.written is not None:
                    return Verdict(in_flight=batch.written)
                return Verdict(duplicate_of=batch.base_offset, log_append_time=batch.log_append_time)
        before = _last_known(entry)  # with an empty window (its writes failed), the last one stored
        if before is None:
            return ACCEPT
        if base_seq != next_sequence(before):
            return Verdict(ErrorCode.out_of_order_sequence_number)
        previous = entry.batches[-1] if entry.batches else None
        if previous is not None and previous.written is not None and _failed(previous.store):
            # its write failed and its producer is not told yet (not_written): stored now, this batch would
            # follow one that is not, and the window, cut back to before it, would refuse the next as a gap
            return Verdict(in_flight=previous.written)
        return ACCEPT

    def _follows_refusal(self, refusal: _Refusal, entry: _Entry | None, verdict: Verdict, epoch: int,
                         base_seq: int) -> bool:
        """A batch sent behind a refused one before its producer read the refusal: it cannot be
        stored ahead of it. Answered as the refused batch was (the producer resends both in order),
        not OUT_OF_ORDER_SEQUENCE_NUMBER, after which librdkafka bumps its epoch and resends under
        new sequence numbers whatever it could not tell was stored (duplicating it; librdkafka
        issue 4953). Only where the window cannot place the batch: a gap, or no state at all."""
        if refusal.epoch != epoch or refusal.followers <= 0 or not follows(base_seq, refusal.first_seq):
            return False
        if self._clock() - refusal.at > REFUSAL_KEPT_S:
            return False
        return verdict.error == ErrorCode.out_of_order_sequence_number or (verdict is ACCEPT and _unplaced(entry))

    def refused(self, producer_id: int, epoch: int, partition: Hashable, base_seq: int, error: ErrorCode) -> None:
        """A batch was refused with nothing stored, with an error after which the producer resends
        it (RESENT_AFTER). The batches the producer pipelined behind it on the same connection
        arrive before it has read the refusal; check() answers them alike. Kept across a change
        of leadership (forget_partition): the refusal may be "not the leader" from a broker that
        became the leader before the next request."""
        if error not in RESENT_AFTER:
            return
        key = (producer_id, partition)
        known = self._refused.get(key)
        now = self._clock()
        if (known is not None and known.epoch == epoch and follows(base_seq, known.first_seq)
                and now - known.at <= REFUSAL_KEPT_S):
            return  # a follower of a refusal already kept
        self._refused[key] = _Refusal(epoch, base_seq, error, now)

    def record(
        self,
        producer_id: int,
        epoch: int,
        partition: Hashable,
        base_seq: int,
        count: int,
        base_offset: int,
        log_append_time: int,
        max_timestamp: int = -1,
    ) -> None:
        self._add(producer_id, epoch, partition,
                  _Batch(base_seq, last_sequence(base_seq, count), base_offset, log_append_time, max_timestamp))

    def appending(
        self, producer_id: int, epoch: int, partition: Hashable, base_seq: int, count: int, max_timestamp: int,
        store: Any = None,
    ) -> _Batch:
        """Take a batch into the window as it is handed to the store, before its offset is known,
        so the producer's next batch (pipelined behind it) is judged after it. Then `written`
        or `not_written`: the store stores a producer's batches in order or not at all after a
        failure, so a failed batch and the ones after it leave the window together. `store`: what
        the store's append returned; a future that fails holds the next batch back until
        `not_written` (a store may take that next batch as soon as the failure is known to it)."""
        batch = _Batch(base_seq, last_sequence(base_seq, count), -1, -1, max_timestamp,
                       asyncio.get_running_loop().create_future(),
                       store if isinstance(store, asyncio.Future) else None)
        self._add(producer_id, epoch, partition, batch)
        return batch

    def written(self, batch: _Batch, base_offset: int, log_append_time: int) -> None:
        batch.base_offset, batch.log_append_time = base_offset, log_append_time
        if batch.written is not None and not batch.written.done():
            batch.written.set_result(True)
        batch.written = None

    def not_written(self, producer_id: int, partition: Hashable, batch: _Batch) -> None:
        entry = self._entries.get((producer_id, partition))
        at = next((i for i, b in enumerate(entry.batches) if b is batch), None) if entry is not None else None
        if entry is not None and at is not None:
            for _ in range(len(entry.batches) - at):
                entry.batches.pop()
        if batch.written is not None and not batch.written.done():
            batch.written.set_result(False)

    def _add(self, producer_id: int, epoch: int, partition: Hashable, batch: _Batch) -> None:
        key = (producer_id, partition)
        entry = self._entries.get(key)
        if entry is None or epoch != entry.epoch:
            entry = self._entries[key] = _Entry(epoch, coordinator_epoch=entry.coordinator_epoch if entry else -1)
        if entry.aborted or _last_known(entry) is None:  # a window starts here
            entry.batches.clear()  # after an abort, the aborted transaction's batches leave it
            entry.aborted = False
            entry.stored_before = (batch.first_seq - 1) % (INT32_MAX + 1)
        entry.batches.append(batch)
        while len(entry.batches) > WINDOW and entry.batches[0].written is None:
            entry.stored_before = entry.batches.popleft().last_seq
        entry.marker_timestamp = None
        now = self._clock()
        entry.last_write = now
        if now >= self._next_sweep:
            self._expire(now)

    def end_marker(self, producer_id: int, epoch: int, partition: Hashable, timestamp: int = -1,
                   coordinator_epoch: int = COORDINATOR_EPOCH, aborted: bool = False) -> None:
        """A transaction marker was written: its epoch becomes the producer's here, as Kafka's
        ProducerStateManager does, so a zombie of an older epoch is refused even when idempotent.
        With transactions v2 (and when a coordinator fences a producer) the marker carries the
        bumped epoch; the batches of the next transaction (sequence restarting at 0) follow under
        it. The marker's timestamp and coordinator epoch become the producer's, as DescribeProducers
        shows. After an abort under the same epoch the next batch may reuse the aborted batches'
        sequences (_Entry.aborted)."""
        key = (producer_id, partition)
        entry = self._entries.get(key)
        if entry is None or epoch > entry.epoch:
            entry = self._entries[key] = _Entry(epoch, self._clock())
        entry.aborted = entry.aborted or aborted
        entry.marker_timestamp = timestamp
        entry.coordinator_epoch = coordinator_epoch

    def marker_refusal(self, producer_id: int, epoch: int, partition: Hashable, coordinator_epoch: int) -> ErrorCode:
        """Why a marker sent with WriteTxnMarkers may not be written here, as Kafka's partition leader
        checks one (ProducerAppendInfo.appendEndTxnMarker): an epoch older than the producer's is
        INVALID_PRODUCER_EPOCH, a coordinator epoch older than its last marker's is
        TRANSACTION_COORDINATOR_FENCED (a deposed coordinator, or an operator's stale abort). A producer
        with no state here takes any marker."""
        entry = self._entries.get((producer_id, partition))
        if entry is None:
            return ErrorCode.none
        if epoch < entry.epoch:
            return ErrorCode.invalid_producer_epoch
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.transaction_coordinator_fenced
        return ErrorCode.none

    def _expire(self, now: float) -> None:
        """Forget producers idle longer than the expiration; checked at most once a minute."""
        cutoff = now - self._expiration
        for key in [k for k, e in self._entries.items() if e.last_write < cutoff]:
            del self._entries[key]
        for key in [k for k, r in self._refused.items() if r.at < now - REFUSAL_KEPT_S]:
            del self._refused[key]
        self._next_sweep = now + min(self._expiration, 60.0)

    def active(self, partition: Hashable) -> list[tuple[int, int, int, int, int]]:
        """(producer id, epoch, last sequence, last timestamp, coordinator epoch) of producers with state here
        (DescribeProducers).

        As Kafka: a producer whose epoch a marker bumped has no batch of that epoch yet (last
        sequence -1), and a marker's timestamp is the last one of its producer.
        """
        out = []
        for (pid, key), entry in self._entries.items():
            if key != partition or not (entry.batches or entry.marker_timestamp is not None):
                continue
            last = entry.batches[-1] if entry.batches else None
            timestamp = entry.marker_timestamp if entry.marker_timestamp is not None else last.max_timestamp
            out.append((pid, entry.epoch, last.last_seq if last else -1, timestamp, entry.coordinator_epoch))
        return out

    def epoch_of(self, producer_id: int, partition: Hashable) -> int | None:
        """The producer's epoch in the partition; None when no state is kept for it there."""
        entry = self._entries.get((producer_id, partition))
        return None if entry is None else entry.epoch

    def __len__(self) -> int:
        """How many (producer, partition) states are kept."""
        return len(self._entries)

    def forget_partition(self, partition: Hashable) -> None:
        """Drop the state of a partition (deleted, or led again: rebuilt from the log at next use)."""
        self._restored.discard(partition)
        pending = self._restoring.pop(partition, None)
        if pending is not None and not pending.done():
            pending.set_result(None)  # its waiters rebuild afresh
        for key in [k for k in self._entries if k[1] == partition]:
            del self._entries[key]

    async def restore(self, key: Hashable, partition: storage.Partition) -> None:
        """Rebuild the state of every producer from the partition's tail, once.

        Concurrent callers (producers on other connections) wait for the one
        rebuilding it: judged against a half-read window, a retry of a batch
        already stored would be stored again. What is read is applied at once
        at the end, and only if the partition was not forgotten meanwhile.
        """
        while key not in self._restored:
            pending = self._restoring.get(key)
            if pending is None:
                await self._rebuild(key, partition)
            else:
                await asyncio.shield(pending)

    async def _rebuild(self, key: Hashable, partition: storage.Partition) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._restoring[key] = done
        found: list[tuple[BatchHeader, int, bool]] = []  # with a marker's coordinator epoch, and whether an abort
        try:
            async for header, batch in tail_batches(partition):
                if header.producer_id >= 0:
                    epoch = marker_coordinator_epoch(batch) if header.is_control else None
                    aborted = header.is_control and marker_type(batch) == ControlType.ABORT
                    found.append((header, COORDINATOR_EPOCH if epoch is None else epoch, aborted))
        finally:
            current = self._restoring.get(key) is done
            if current:
                del self._restoring[key]
            if not done.done():
                done.set_result(None)
        if not current:
            return
        for header, coordinator_epoch, aborted in found:
            self.note_batch(key, header, header.base_offset, coordinator_epoch, aborted)
        self._restored.add(key)

    def note_batch(self, partition: Hashable, header: Any, base_offset: int,
                   coordinator_epoch: int = COORDINATOR_EPOCH, aborted: bool = False) -> None:
        """Take a stored batch into its producer's state as its append did: a transaction marker
        sets the epoch (and the coordinator epoch it carries), an idempotent batch enters the window.
        For the rebuild from a log tail and for a replica's receiver (`header`: a batch header of
        protocol.records or storage's batch_format, which share these fields)."""
        if header.producer_id < 0:
            return
        if header.attributes & ATTR_CONTROL:
            self.end_marker(header.producer_id, header.producer_epoch, partition, header.max_timestamp,
                            coordinator_epoch, aborted)
        elif header.base_sequence >= 0:
            log_append = header.max_timestamp if header.attributes & ATTR_LOG_APPEND_TIME else -1
            self.record(
                header.producer_id, header.producer_epoch, partition, header.base_sequence,
                header.last_offset_delta + 1, base_offset,  # the log cleaner may empty a batch
                log_append, header.max_timestamp,
            )
