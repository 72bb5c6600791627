"""Partition behaviour shared by the engines: long-poll waiters, leader
epoch history, and the exact timestamp rules over batch headers.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable

from . import batch_format as bf
from .api import Partition, TimestampHit
from .errors import OffsetOutOfRangeError, UnknownTopicError

RecordTimestamps = Callable[[bytes | memoryview], list[tuple[int, int]]]

_PRUNE_AT = 256


class PartitionBase(Partition):
    """Offsets, waiters woken on append and the leader epoch history of one partition."""

    def __init__(self, name: str, leader_epoch: int, record_timestamps: RecordTimestamps | None) -> None:
        self.name = name  # "<stream>:<topic>/<index>", for messages and logs
        self._leader_epoch = leader_epoch
        self._record_timestamps = record_timestamps
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset), epochs ascending
        self._closed = False
        self._log_start = 0
        self._hw = 0

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def high_watermark(self) -> int:
        return self._hw

    def _check_open(self) -> None:
        if self._closed:
            raise UnknownTopicError(f"partition {self.name} was deleted")

    # epochs ----------------------------------------------------------------

    def _deletion_point(self, before_offset: int) -> int:
        """Where DeleteRecords cuts: -1 is the high watermark; an offset outside [0, high watermark] is refused."""
        if before_offset == -1:
            before_offset = self._hw
        if not 0 <= before_offset <= self._hw:
            raise OffsetOutOfRangeError(f"cannot delete records below {before_offset}: {self.name} ends at {self._hw}")
        return before_offset

    def _note_epoch(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; False if already known.

        An earlier epoch that starts at the same offset never got a record
        (as after a restart without appends): the new one replaces it, so
        the history does not grow with every restart.
        """
        epochs = self._epochs
        if epochs and epochs[-1][0] >= epoch:
            return False
        while epochs and epochs[-1][1] >= start_offset:
            epochs.pop()
        epochs.append((epoch, start_offset))
        return True

    def _drop_epochs_before(self, offset: int) -> None:
        """Forget epochs wholly below `offset`, keeping the one that covers it."""
        keep = 0
        for i, (_, start) in enumerate(self._epochs):
            if start <= offset:
                keep = i
        del self._epochs[:keep]

    async def end_offset_for_epoch(self, epoch: int, current: int | None = None) -> tuple[int, int]:
        epochs = self._epochs
        if epoch < 0 or not epochs or epoch > epochs[-1][0]:
            return (-1, -1)
        if epoch == epochs[-1][0]:
            return (epoch, self.high_watermark)
        i = bisect.bisect_right(epochs, (epoch, float("inf")))
        higher_start = epochs[i][1]
        if i == 0:
            return (epoch, higher_start)
        return (epochs[i - 1][0], higher_start)

    # waiters ---------------------------------------------------------------

    def wait_for_data(self, offset: int) -> asyncio.Future[None]:
        future = asyncio.get_running_loop().create_future()
        if self._closed or self.high_watermark > offset:
            future.set_result(None)
            return future
        if len(self._waiters) >= _PRUNE_AT:
            self._waiters = [w for w in self._waiters if not w[1].done()]
        self._waiters.append((offset, future))
        return future

    def _wake(self) -> None:
        if not self._waiters:
            return
        hw = self.high_watermark
        keep = []
        for offset, future in self._waiters:
            if future.done():
                continue
            if hw > offset or self._closed:
                future.set_result(None)
            else:
                keep.append((offset, future))
        self._waiters = keep

    def _mark_closed(self) -> None:
        """The partition is gone (topic deleted): fail later calls, release pollers."""
        self._closed = True
        self._wake()

    # timestamps ------------------------------------------------------------

    def _first_at_or_after(
        self, batch: bytes | memoryview, base: int, last: int, max_ts: int, log_append: bool,
        timestamp: int, min_offset: int,
    ) -> TimestampHit | None:
        """The first record >= timestamp at offset >= min_offset in a batch whose max_ts >= timestamp,
        with the batch's leader epoch (as Kafka's FileRecords.searchForTimestamp answers it).

        Without a record decoder the answer is the batch's first live offset
        with the batch's max timestamp (batch granularity).
        """
        if last < min_offset:
            return None
        epoch = bf.leader_epoch(batch)
        decode = self._record_timestamps
        if decode is None or log_append:
            return TimestampHit(max(base, min_offset), max_ts, epoch)
        for delta, ts in decode(batch):
            offset = base + delta
            if offset >= min_offset and ts >= timestamp:
                return TimestampHit(offset, ts, epoch)
        return None

    def _offset_of_max(self, batch: bytes | memoryview, base: int, last: int, max_ts: int,
                       log_append: bool) -> TimestampHit:
        """Where in a batch its max timestamp sits, as Kafka's RecordBatch.offsetOfMaxTimestamp: the first
        record carrying it (every record of a LogAppendTime batch does; its last offset without a decoder),
        with the batch's leader epoch. The log start does not bound it: see Partition.max_timestamp."""
        epoch = bf.leader_epoch(batch)
        decode = self._record_timestamps
        if decode is not None and not log_append:
            for delta, ts in decode(batch):
                if ts == max_ts:
                    return TimestampHit(base + delta, ts, epoch)
        return TimestampHit(last if decode is None else base, max_ts, epoch)
