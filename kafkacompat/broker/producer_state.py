"""Idempotent producing: per (producer id, partition) the last five batches.

Mirrors Kafka's ProducerStateManager: a retried batch inside the window is
answered with its original offsets, a gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
an older epoch is fenced, and sequences wrap at 2^31-1. State lives in
memory and, after a restart, is rebuilt per partition from the batch
headers at the log's tail (the records themselves are never decoded), so a
retry that spans a restart is still answered with its original offsets. A
producer the broker has no state for may start at any sequence, as on
Kafka after its state expired.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import time
from collections.abc import Callable, Hashable

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.protocol.records import ATTR_LOG_APPEND_TIME, HEADER_SIZE, read_header

WINDOW = 5
INT32_MAX = 2**31 - 1
RESTORE_RECORDS = 100_000  # how far back from the high watermark a restore looks
RESTORE_BYTES = 32 << 20  # and at most this much of the log it reads
DEFAULT_EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms


def last_sequence(base_sequence: int, record_count: int) -> int:
    increment = record_count - 1
    if base_sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - base_sequence) - 1
    return base_sequence + increment


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


@dataclasses.dataclass(slots=True)
class _Batch:
    first_seq: int
    last_seq: int
    base_offset: int
    log_append_time: int


@dataclasses.dataclass(slots=True)
class _Entry:
    epoch: int
    last_write: float = 0.0  # monotonic seconds of the last append
    batches: collections.deque[_Batch] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=WINDOW)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    error: ErrorCode = ErrorCode.none
    duplicate_of: int | None = None  # base offset of the original batch
    log_append_time: int = -1


ACCEPT = Verdict()


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

    def new_producer_id(self) -> int:
        return next(self._ids)

    def check(
        self, producer_id: int, epoch: int, partition: Hashable, base_seq: int, count: int
    ) -> Verdict:
        """Judge an idempotent batch before it is appended."""
        entry = self._entries.get((producer_id, partition))
        if entry is None:
            return ACCEPT
        if epoch < entry.epoch:
            return Verdict(ErrorCode.invalid_producer_epoch)
        if epoch > entry.epoch:
            return ACCEPT if base_seq == 0 else Verdict(ErrorCode.out_of_order_sequence_number)
        last = last_sequence(base_seq, count)
        for batch in entry.batches:
            if batch.first_seq == base_seq and batch.last_seq == last:
                return Verdict(duplicate_of=batch.base_offset, log_append_time=batch.log_append_time)
        if entry.batches and base_seq != next_sequence(entry.batches[-1].last_seq):
            return Verdict(ErrorCode.out_of_order_sequence_number)
        return ACCEPT

    def record(
        self,
        producer_id: int,
        epoch: int,
        partition: Hashable,
        base_seq: int,
        count: int,
        base_offset: int,
        log_append_time: int,
    ) -> None:
        key = (producer_id, partition)
        entry = self._entries.get(key)
        if entry is None or epoch != entry.epoch:
            entry = self._entries[key] = _Entry(epoch)
        entry.batches.append(_Batch(base_seq, last_sequence(base_seq, count), base_offset, log_append_time))
        now = self._clock()
        entry.last_write = now
        if now >= self._next_sweep:
            self._expire(now)

    def _expire(self, now: float) -> None:
        """Forget producers idle longer than the expiration; checked at most once a minute."""
        cutoff = now - self._expiration
        for key in [k for k, e in self._entries.items() if e.last_write < cutoff]:
            del self._entries[key]
        self._next_sweep = now + min(self._expiration, 60.0)

    def __len__(self) -> int:
        """How many (producer, partition) states are kept."""
        return len(self._entries)

    def forget_partition(self, partition: Hashable) -> None:
        """Drop state of a deleted topic partition."""
        self._restored.discard(partition)
        for key in [k for k in self._entries if k[1] == partition]:
            del self._entries[key]

    async def restore(self, key: Hashable, partition: storage.Partition) -> None:
        """Rebuild the state of every producer from the partition's tail, once."""
        if key in self._restored:
            return
        self._restored.add(key)
        offset = max(partition.log_start_offset, partition.high_watermark - RESTORE_RECORDS)
        budget = RESTORE_BYTES
        while offset < partition.high_watermark and budget > 0:
            try:
                data = memoryview(await partition.read(offset, min(budget, 1 << 20)))
            except storage.DamagedRangeError as exc:  # quarantined: no producer state to learn there
                offset = exc.resume_at
                continue
            budget -= len(data)
            pos = 0
            while len(data) - pos >= HEADER_SIZE:
                header = read_header(data, pos)
                if pos + header.size > len(data):
                    break
                if header.producer_id >= 0 and header.base_sequence >= 0:
                    log_append = header.attributes & ATTR_LOG_APPEND_TIME
                    self.record(
                        header.producer_id, header.producer_epoch, key, header.base_sequence,
                        header.record_count, header.base_offset,
                        header.max_timestamp if log_append else -1,
                    )
                offset = header.last_offset + 1
                pos += header.size
            if pos == 0:
                break  # nothing whole came back
