"""Per partition: open transactions, the last stable offset, aborted transactions.

The last stable offset (LSO) is the first offset of the oldest transaction
still open in the partition, or the high watermark when none is open;
read_committed consumers are served only below it. Aborted transactions
(producer id, first offset, marker offset) are what a read_committed Fetch
lists so the client can drop their records, as Kafka's transaction index.

Open transactions are rebuilt from the log tail after a restart (a
transactional batch with no marker after it is still open). Aborted
transactions are kept durably in the stream's `aborted_txns` state table,
keyed by topic id, so they outlive restarts and never leak into a topic
recreated under the same name.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
from collections.abc import Hashable

from kafkacompat import storage
from kafkacompat.protocol.control_records import ControlType, marker_type
from kafkacompat.protocol.records import HEADER_SIZE, BatchHeader, read_header

from ..catalog.log_tail import tail_batches

ABORTED_TABLE = "aborted_txns"


class StoreAbortedEntries:
    """Where the aborted transactions' entries are kept: the stream's `aborted_txns` state table."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store

    async def read(self, stream: str, prefix: str) -> dict[str, dict]:
        return {key: rec for key, rec in self.store.get_state(stream, ABORTED_TABLE).items() if key.startswith(prefix)}

    async def put(self, stream: str, records: dict[str, dict | None], durable: bool = True) -> None:
        await self.store.put_state(stream, ABORTED_TABLE, records, durable=durable)


def stable_prefix(data: bytes | memoryview, limit: int) -> int:
    """How many bytes of fetched batches lie wholly below offset `limit` (the LSO).

    Transactions end at markers, so a batch never straddles the LSO: it
    starts at or above it, or ends below it.
    """
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        header = read_header(data, pos)
        if header.base_offset >= limit:
            break
        pos = min(pos + header.size, len(data))
    return pos


@dataclasses.dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the abort marker


class AbortedBatches:
    """Which data batches of a read range an aborted transaction wrote: what read_committed never shows.

    A Fetch lists the aborted transactions of its range and the consumer
    drops their batches; a share group's broker (which hands records to
    share consumers that cannot) decides it itself from the same list. A
    batch is aborted when its producer has an aborted transaction that began
    at or before it and whose abort marker comes after it.
    """

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._spans: dict[int, list[tuple[int, int]]] = {}  # producer id -> (first offset, marker offset)
        for txn in aborted:
            self._spans.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def holds(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset and header.last_offset < marker
                   for first, marker in self._spans.get(header.producer_id, ()))


class PartitionTxns:
    """Transaction bookkeeping of one partition."""

    def __init__(
        self, store: storage.Store, stream: str, topic_id: str, index: int, partition: storage.Partition
    ) -> None:
        self.store = store
        self.stream = stream
        self.topic_id = topic_id
        self.index = index
        self.partition = partition
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # producer id -> the high watermark before each of its transactional batches being appended here
        # (oldest first), until `appended` or `not_appended`: a batch lands at or above it and is readable
        # before its writer learns its offset, so the LSO must already be held there
        self.appending_at: dict[int, list[int]] = {}
        self.aborted: list[AbortedTxn] = []  # ordered by last_offset
        self._stable_waiters: list[tuple[int, asyncio.Future[None]]] = []
        # What the log has told: each producer's last marker (a batch or marker at or below it is
        # old news, so noting one twice changes nothing) and how far the log was read.
        self.ended: dict[int, int] = {}
        self.scanned = 0
        self._catching_up = asyncio.Lock()
        self.follow_log = False  # set by the registry: markers may be appended by another broker
        self.entries = StoreAbortedEntries(store)

    @property
    def last_stable_offset(self) -> int:
        """On a cluster (follow_log) never past what this state has read of the log: another broker's
        transactional batch, or this broker's produced through a state read before a hand-over,
        may be stored after the last look and before the answer (a read_committed Fetch was served
        an open transaction's first batch 0.1 s after it was written, right after a restart)."""
        read = self.scanned if self.follow_log else self.partition.high_watermark
        return min([*self.ongoing.values(), *(at[0] for at in self.appending_at.values()),
                    self.partition.high_watermark, read])

    def first_offset_of(self, producer_id: int) -> int | None:
        """Where the producer's open transaction starts here (DescribeProducers)."""
        return self.ongoing.get(producer_id)

    def appending(self, producer_id: int) -> None:
        """A transactional batch is handed to the store; `appended` or `not_appended` follows. Readers are
        woken as soon as the store has it, before its writer hears where it is: without this hold a
        read_committed Fetch in between was served an open transaction's first batch."""
        self.appending_at.setdefault(producer_id, []).append(self.partition.high_watermark)

    def appended(self, producer_id: int, base_offset: int) -> None:
        """A transactional batch was appended at base_offset.

        On a cluster the log is noted in its order: a batch this broker appended past what the state
        has read waits for the next `catch_up`, which reads it where it lies (the LSO is held at what
        was read meanwhile). Noted first, the batches below it were taken for old news or its
        transaction's start: the partition's previous leader had stored the transaction's first batch
        just before the move, and read_committed was served it (chaos, cloud: an aborted read).
        """
        if not (self.follow_log and base_offset > self.scanned):
            self._begun(producer_id, base_offset)

    def _begun(self, producer_id: int, base_offset: int) -> None:
        if base_offset > self.ended.get(producer_id, -1):
            self.ongoing.setdefault(producer_id, base_offset)

    def not_appended(self, producer_id: int) -> None:
        """An append `appending` announced is over: stored (`appended` first said where) or not."""
        marks = self.appending_at.get(producer_id)
        if not marks:
            return
        marks.pop()
        if not marks:
            del self.appending_at[producer_id]
            self._wake()

    async def note_batch(self, header: BatchHeader, batch: memoryview) -> None:
        """Take one transactional batch or marker as read from the log (at a rebuild, or one another
        broker appended: a transaction coordinator elsewhere in the cluster writes the markers)."""
        if not header.is_transactional:
            return
        if not header.is_control:
            self._begun(header.producer_id, header.base_offset)
            return
        if header.base_offset <= self.ended.get(header.producer_id, -1):
            return  # noted already
        first = self.ongoing.get(header.producer_id)
        if first is not None and marker_type(batch) is ControlType.ABORT and not any(
                a.producer_id == header.producer_id and a.first_offset == first for a in self.aborted):
            # The marker was written but its writer stopped before the index entry was (or wrote it elsewhere).
            await self._index_abort(header.producer_id, first, header.base_offset)
            bisect.insort(self.aborted, AbortedTxn(header.producer_id, first, header.base_offset),
                          key=lambda a: a.last_offset)
        await self._end(header.producer_id, header.base_offset, ControlType.COMMIT)

    async def catch_up(self) -> None:
        """Read what was appended since the log was last read: on a cluster a transaction's markers
        are written by its coordinator's broker, and its first batches may have been by the
        partition's previous leader, after this state was read (a read begun before a hand-over
        ended after it, or before the new leader's offsets were refreshed). Read only while a
        transaction was open here, such batches were never seen: the LSO passed an open
        transaction's records and its abort was never listed (chaos, cloud: aborted reads after
        leadership moves)."""
        if self.partition.high_watermark <= self.scanned:
            return
        async with self._catching_up:
            start = self.scanned
            end = self.partition.high_watermark
            async for header, batch in tail_batches(self.partition, start):
                await self.note_batch(header, batch)
            self.scanned = max(self.scanned, end)

    def _abort_key(self, producer_id: int, first_offset: int) -> str:
        return f"{self.topic_id}:{self.index}:{producer_id}:{first_offset}"

    async def _index_abort(self, producer_id: int, first: int, last: int) -> None:
        """Store an aborted transaction's entry: the log tail read at a load does not reach an abort older
        than RESTORE_RECORDS."""
        await self.entries.put(self.stream, {
            self._abort_key(producer_id, first): {"pid": producer_id, "first": first, "last": last},
        })

    async def marker_written(self, producer_id: int, marker_offset: int, control: ControlType) -> None:
        """End the producer's open transaction here; an abort is remembered durably.

        The open transaction keeps holding the LSO until its aborted entry is
        stored: readers must never see the LSO pass aborted records that the
        aborted list does not name yet. On a cluster the log is read up to the
        marker first: the transaction's batches may have been appended by the
        partition's leader after this state last looked (this broker being the
        coordinator's), and once the marker is noted they would be old news,
        their abort never listed here (chaos, cloud: aborted reads).
        """
        if self.follow_log:
            await self.catch_up()
        await self._end(producer_id, marker_offset, control)

    async def _end(self, producer_id: int, marker_offset: int, control: ControlType) -> None:
        if marker_offset <= self.ended.get(producer_id, -1):
            return  # read from the log already
        self.ended[producer_id] = marker_offset
        first = self.ongoing.get(producer_id)
        if first is not None and control is ControlType.ABORT and not self._listed(producer_id, marker_offset):
            await self._index_abort(producer_id, first, marker_offset)
            bisect.insort(self.aborted, AbortedTxn(producer_id, first, marker_offset), key=lambda a: a.last_offset)
        self.ongoing.pop(producer_id, None)
        self._wake()

    def _listed(self, producer_id: int, marker_offset: int) -> bool:
        """Whether the abort ending at `marker_offset` is listed already (loaded from the table, then
        found again in the log tail: not stored twice)."""
        at = bisect.bisect_left(self.aborted, marker_offset, key=lambda a: a.last_offset)
        return at < len(self.aborted) and self.aborted[at].last_offset == marker_offset \
            and self.aborted[at].producer_id == producer_id

    def restarted_at(self, offset: int, open_txns: dict[int, int]) -> None:
        """The partition now starts at `offset` with nothing stored (a replica skipping a retention gap).

        `open_txns` (producer id -> first offset) are the transactions open
        at the source: one that began below `offset` is open here from
        `offset` on, so its abort marker, when it comes, names the records
        this partition holds.
        """
        self.ongoing = {pid: max(first, offset) for pid, first in open_txns.items()}
        self._wake()

    def _wake(self) -> None:
        stable = self.last_stable_offset
        keep = []
        for offset, waiter in self._stable_waiters:
            if waiter.done():
                continue
            if offset < stable:
                waiter.set_result(None)
            else:
                keep.append((offset, waiter))
        self._stable_waiters = keep

    def wait_stable(self, offset: int) -> asyncio.Future[None]:
        """Resolved once a read_committed consumer at `offset` has something to read."""
        if not self.ongoing and not self.appending_at:
            return self.partition.wait_for_data(offset)
        if self.follow_log and offset >= self.last_stable_offset:  # a marker from elsewhere moves the end
            return self.partition.wait_for_data(max(offset, self.partition.high_watermark))
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if offset < self.last_stable_offset:
            waiter.set_result(None)
        else:
            self._stable_waiters.append((offset, waiter))
        return waiter

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, end): what Fetch lists for that range."""
        at = bisect.bisect_left([a.last_offset for a in self.aborted], start)
        return [a for a in self.aborted[at:] if a.first_offset < end]

    def aborted_batches(self, start: int, end: int) -> AbortedBatches:
        """The aborted batches of [start, end), as read_committed drops them."""
        return AbortedBatches(self.aborted_between(start, end))


class PartitionTxnRegistry:
    """The PartitionTxns of every partition in use, each rebuilt once on first use."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store
        self.follow_log = False  # brokers of one cluster: markers may come from another broker (catch_up)
        # Kept in the stream's table (before stop 55 a worker other than 0 of `serve --workers N` rebuilt
        # them from the log tail alone, and a read_committed consumer was served every transaction
        # aborted before the last RESTORE_RECORDS, or 32 MiB)
        self.entries = StoreAbortedEntries(store)
        self._states: dict[Hashable, PartitionTxns] = {}
        self._loading: dict[Hashable, asyncio.Future[PartitionTxns]] = {}

    async def get(self, stream: str, topic: str, index: int) -> PartitionTxns:
        key = (stream, topic, index)
        state = self._states.get(key)
        if state is not None:
            if self.follow_log:
                await state.catch_up()
            return state
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[PartitionTxns] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            state = await self._load(stream, topic, index)
            self._states[key] = state
            future.set_result(state)
            return state
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a later caller retries
            raise
        finally:
            del self._loading[key]

    async def _load(self, stream: str, topic: str, index: int) -> PartitionTxns:
        info = self.store.get_topic(stream, topic)
        if info is None:
            raise storage.UnknownTopicError(f"topic {topic!r} does not exist in stream {stream!r}")
        partition = self.store.partition(stream, topic, index)
        state = PartitionTxns(self.store, stream, info.topic_id.hex, index, partition)
        state.follow_log = self.follow_log
        mine = await self.entries.read(stream, f"{state.topic_id}:{index}:")
        start = partition.log_start_offset
        state.aborted = sorted(
            (AbortedTxn(rec["pid"], rec["first"], rec["last"]) for rec in mine.values() if rec["last"] >= start),
            key=lambda a: a.last_offset,
        )
        expired = {key: None for key, rec in mine.items() if rec["last"] < start}  # deleted by retention
        if expired:
            await self.entries.put(stream, expired, durable=False)
        end = partition.high_watermark
        async for header, batch in tail_batches(partition):
            await state.note_batch(header, batch)
        state.scanned = end
        return state

    def forget_partition(self, key: Hashable) -> None:
        """Drop a deleted topic partition's state."""
        self._states.pop(key, None)
