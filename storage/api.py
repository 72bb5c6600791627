"""The storage interface the broker programs against.

Engines (in-memory, on-disk, later object store + SQL) implement these
abstract classes; `storage.open_store(url)` picks one by URL. Every call that
may touch a disk or a network is async so a remote backend fits behind it.
Nothing here knows the Kafka protocol: batches are opaque byte strings in
the v2 record-batch layout, which is this store's on-disk format.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import enum
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from .errors import StorageError

# (stream, topic, partition, leader epoch) a state or cursor write is made under (Store.put_state, commit_cursors)
StateFence = tuple[str, str, int, int]


@dataclasses.dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create (Store.create_topics): its name, partitions and the configs it sets."""

    name: str
    partitions: int
    configs: dict[str, str] | None = None


class FsyncPolicy(str, enum.Enum):
    """When appended bytes are forced to stable storage."""

    NONE = "none"  # leave it to the OS (Apache Kafka's default)
    INTERVAL = "interval"  # group commit every `fsync_interval_ms`
    ALWAYS = "always"  # fsync before `append` returns


@dataclasses.dataclass(frozen=True, slots=True)
class PermissionEntries:
    """MapR's access-control expressions, stored now and enforced later."""

    produce: str = ""
    consume: str = ""
    topic: str = ""
    admin: str = ""
    copy: str = ""


# MapR's default stream ttl (`maprcli stream create -ttl`, default 604800) and Kafka's
# log.retention.hours=168: a new stream keeps messages seven days unless told otherwise.
DEFAULT_TTL_SECONDS = 7 * 24 * 3600


@dataclasses.dataclass(frozen=True, slots=True)
class StreamPolicy:
    ttl_seconds: int = DEFAULT_TTL_SECONDS  # 0 keeps messages forever, as on MapR
    default_partitions: int = 1
    autocreate: bool = True
    fsync: FsyncPolicy = FsyncPolicy.INTERVAL
    fsync_interval_ms: int = 200
    partitionlet_bytes: int = 1 << 30
    partitionlet_age_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1  # per partition; -1 = no size cap
    cleanup_policy: str = "delete"  # Kafka's cleanup.policy for the stream's topics: delete, compact or compact,delete
    permissions: PermissionEntries = PermissionEntries()


@dataclasses.dataclass(frozen=True, slots=True)
class StreamInfo:
    path: str  # e.g. "/apps/iot/oilpump_metrics"
    policy: StreamPolicy
    created_ms: int
    topic_count: int


@dataclasses.dataclass(frozen=True, slots=True)
class TopicInfo:
    stream: str
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str]  # Kafka-style topic configs set explicitly
    created_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionletInfo:
    base_offset: int
    next_offset: int  # one past the last offset it holds
    size_bytes: int
    volume: str  # the data dir it sits on
    sealed: bool
    max_timestamp: int


@dataclasses.dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # ms; the time the store accepted the batch


@dataclasses.dataclass(frozen=True, slots=True)
class TimestampHit:
    offset: int
    timestamp: int
    # the leader epoch stamped on the batch holding it (-1: not known): what Kafka answers with a
    # hit by timestamp or max timestamp; not part of equality, which is about where the record is
    leader_epoch: int = dataclasses.field(default=-1, compare=False)


@dataclasses.dataclass(frozen=True, slots=True)
class Cursor:
    """A consumer group's committed position in one partition."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_time_ms: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionFigures:
    """A partition's offsets and, when asked, its partitionlets: what a view of many partitions shows."""

    log_start_offset: int
    high_watermark: int
    partitionlets: tuple[PartitionletInfo, ...] = ()


class ReadablePartition(Protocol):
    """What a reader of a partition's records and figures needs (the console, /metrics, views): every
    Partition is one, and so is a partition read through the process that owns it (a worker of
    `serve --workers N` reading another's, kafkacompat/workers/peer_partition.py)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    async def read(self, offset: int, max_bytes: int) -> bytes | memoryview: ...

    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None: ...

    async def partitionlets(self) -> list[PartitionletInfo]: ...

    def wait_for_data(self, offset: int) -> asyncio.Future[None]: ...

    async def refresh(self) -> None: ...


class Partition(abc.ABC):
    """One partition: a chain of partitionlets with dense offsets."""

    # True when append() takes the batch's place in the partition as it is called (the
    # awaitable then only waits for the write): a broker may call it for a connection's
    # next request before this one's answer. False: the place is fixed once it returns.
    appends_in_call_order: bool = False

    @property
    @abc.abstractmethod
    def log_start_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def high_watermark(self) -> int:
        """The offset the next appended record gets."""

    @property
    @abc.abstractmethod
    def leader_epoch(self) -> int: ...

    @abc.abstractmethod
    async def append(
        self, batch: bytes | bytearray | memoryview, record_count: int, *, at: int | None = None,
        leader_epoch: int | None = None, fenced_by: "Partition | None" = None, txn_since: int | None = None,
        client_gone: Callable[[], bool] | None = None,
    ) -> AppendResult:
        """Store one v2 record batch, assigning offsets [hw, hw + record_count).

        With `leader_epoch` (the epoch under which the calling broker leads
        the partition) a store shared by several brokers stores the batch
        only if that is still the partition's leader epoch when the batch is
        committed, and raises NotLeaderError otherwise, so a deposed leader
        cannot append. With `fenced_by` too, `leader_epoch` is that
        partition's instead (a transaction coordinator writing a marker
        leads its __consumer_offsets partition, not the one marked); the
        batch is still stamped with its own partition's leader epoch. A
        store only one process writes has no other leader and ignores both.

        With `at` (a copy from another cluster keeping its offsets) the batch
        is stored only if the high watermark is exactly `at` when it is
        written; otherwise OffsetMismatchError (carrying the high watermark)
        and nothing is written, so a replica never gets a gap or an overlap.

        With `txn_since` (a transactional batch) a store shared by several
        brokers stores the batch only if no transaction marker of its
        producer was stored in the partition at or after that offset, and
        raises TransactionEndedError otherwise: the producer's transaction
        ended while the batch waited (a marker written by the coordinator's
        broker, the batch held up by an outage), and stored after the marker
        the batch would join the producer's next transaction. A store only
        one process writes ignores it (its broker checks its own markers).

        With `client_gone` (whether the client that sent the batch closed its
        connection) a store that holds appends before committing them asks it
        as the commit begins and, when the client is gone, stores nothing and
        raises RequesterGoneError: the client resends the batch, elsewhere if
        the broker was paused past its lease, and a producer without
        idempotence would keep both copies. A store that writes at the call
        (asked by its broker just before) ignores it.

        The store writes the batch's baseOffset and partitionLeaderEpoch
        fields (bytes 0-8 and 12-16, outside the CRC) and keeps the rest byte
        for byte. Returns once the bytes are written (page cache); call
        `wait_durable` for the stream's fsync policy. Raises StorageFullError
        (nothing written) when the volume is full.
        """

    @abc.abstractmethod
    async def wait_durable(self, offset: int) -> None:
        """Return once every record below `offset` is durable per the fsync policy.

        none: at once. interval: at the next group commit (which starts
        early when someone waits). always: after an fsync (coalesced).
        acks=all producers wait on this.
        """

    @abc.abstractmethod
    async def read(self, offset: int, max_bytes: int) -> bytes | memoryview:
        """Whole batches starting with the one containing `offset`.

        At least one whole batch even if larger than max_bytes; b"" at or
        past the high watermark. Raises OffsetOutOfRange below the log start
        or above the high watermark, DamagedRangeError for an offset in a
        quarantined (damaged or lost) range unless the store skips those,
        and StorageUnavailableError when the files cannot be read.
        """

    @abc.abstractmethod
    async def offset_for_timestamp(self, timestamp: int) -> TimestampHit | None:
        """The first offset whose record timestamp is >= timestamp, exactly, with its batch's leader epoch."""

    @abc.abstractmethod
    async def max_timestamp(self) -> TimestampHit | None:
        """The record with the largest timestamp (ListOffsets -3), as Kafka's UnifiedLog finds it.

        Kafka keeps each segment's max timestamp until the segment itself is
        deleted, so the answer may lie below the log start (after
        DeleteRecords or retention within a partitionlet still kept). Of
        equal timestamps the first wins: first partitionlet, first batch,
        first record. The hit carries the batch's leader epoch.
        """

    @abc.abstractmethod
    async def delete_records(self, before_offset: int) -> int:
        """Advance the log start offset to before_offset; returns the new start."""

    async def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and go on at `offset` (at or past the high watermark): log start = hw = offset.

        What a replica does when its source no longer holds the offsets the
        replica lacks (retention or DeleteRecords moved the source's log
        start past them), as a Kafka follower does: the offsets the replica
        then receives are the source's. Engines that hold replicas (the ones
        whose `append` takes `at`) implement it.
        """
        raise StorageError(f"{type(self).__name__} cannot restart a partition at an offset")

    @abc.abstractmethod
    async def end_offset_for_epoch(self, epoch: int, current: int | None = None) -> tuple[int, int]:
        """(epoch, end offset) per OffsetForLeaderEpoch; (-1, -1) for a future epoch.

        `current` is the epoch the partition's leader leads in now, when brokers sharing the
        store keep leader epochs of their own (a cluster's leader table); the store's own
        epoch otherwise. A store only one process writes ignores it."""

    @abc.abstractmethod
    async def partitionlets(self) -> list[PartitionletInfo]: ...

    async def move_to_log_dir(self, log_dir: str) -> None:
        """Keep this partition in `log_dir`, one of the store's data_dirs() (Kafka's AlterReplicaLogDirs).

        Its new partitionlets start there and those sitting elsewhere are
        moved there in the background; returns once the move is under way
        (`log_dir()` names the target from then on, and `partitionlets()`
        shows where each one sits meanwhile). A store with one data dir holds
        every partition there already: nothing to do.
        """

    def log_dir(self) -> str | None:
        """The data dir chosen for this partition by move_to_log_dir, or None (new partitionlets go
        wherever there is most room, so a partition may span data dirs)."""
        return None

    @abc.abstractmethod
    def wait_for_data(self, offset: int) -> asyncio.Future[None]:
        """A future resolved once high_watermark > offset (fetch long polls)."""

    async def refresh(self) -> None:
        """Bring this process's view (high watermark, log start, epoch) up to the store's truth.

        A broker calls it when it becomes the partition's leader: in a store
        many brokers share, another may have appended since this process
        last looked. A store only this process writes is always current.
        """


class Store(abc.ABC):
    """A namespace of streams, their topics, partitions and cursors."""

    # How many bytes per second moving partitionlets between data dirs may copy (None: as fast as the
    # disks allow); the broker sets it from replica.alter.log.dirs.io.max.bytes.per.second.
    move_bytes_per_second: int | None = None

    default_stream: str

    @abc.abstractmethod
    async def open(self) -> None:
        """Load the namespace; run recovery if the last stop was unclean."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Flush everything and write the clean-shutdown marker."""

    @abc.abstractmethod
    def data_dirs(self) -> list[str]:
        """Where partitionlets sit (PartitionletInfo.volume names one), first the one new partitions start on."""

    # the store's own identity and settings
    store_id: uuid.UUID
    """Made when the store is first created and kept for its life (a memory store: per process)."""

    @abc.abstractmethod
    def settings(self) -> dict[str, str]:
        """Store-wide settings kept for whoever runs the store (e.g. a broker's dynamic configs)."""

    @abc.abstractmethod
    def settings_version(self) -> int:
        """A number that goes up whenever the settings change: set here, or read afresh from where
        other processes set them too (another broker of a cluster, worker 0 of `serve --workers N`).
        What a caller derived from settings() is current while the number has not moved."""

    @abc.abstractmethod
    async def set_settings(self, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Set (a value) or remove (None) settings durably; returns them all."""

    # streams
    @abc.abstractmethod
    async def create_stream(self, path: str, policy: StreamPolicy = StreamPolicy()) -> StreamInfo: ...

    @abc.abstractmethod
    async def edit_stream(self, path: str, policy: StreamPolicy) -> StreamInfo: ...

    @abc.abstractmethod
    def get_stream(self, path: str) -> StreamInfo | None: ...

    @abc.abstractmethod
    def list_streams(self) -> list[StreamInfo]: ...

    @abc.abstractmethod
    async def delete_stream(self, path: str) -> None:
        """Delete the stream with its topics and cursors."""

    @abc.abstractmethod
    async def purge_stream(self, path: str) -> None:
        """Delete every message and cursor; keep the stream and its topics."""

    # topics
    @abc.abstractmethod
    async def create_topic(
        self, stream: str, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> TopicInfo: ...

    async def create_topics(self, stream: str, topics: Sequence[NewTopic]) -> list[TopicInfo | StorageError]:
        """Several topics of one stream, in order: each one's info, or the StorageError that refused
        it. Engines that write a catalog write them together (one write for a CreateTopics request
        of a thousand topics, not a thousand); this default creates them one after another."""
        outcomes: list[TopicInfo | StorageError] = []
        for topic in topics:
            try:
                outcomes.append(await self.create_topic(stream, topic.name, topic.partitions, topic.configs))
            except StorageError as exc:
                outcomes.append(exc)
        return outcomes

    @abc.abstractmethod
    def get_topic(self, stream: str, name: str) -> TopicInfo | None: ...

    @abc.abstractmethod
    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None: ...

    @abc.abstractmethod
    def list_topics(self, stream: str | None = None) -> list[TopicInfo]:
        """Topics of one stream, or of all streams when stream is None."""

    @abc.abstractmethod
    def iter_topics(self) -> Iterator[TopicInfo]:
        """Every topic of every stream, as list_topics() at the call, for a caller that pauses between
        them: a store may build each topic's info only as it is reached."""

    @abc.abstractmethod
    async def delete_topic(self, stream: str, name: str) -> None: ...

    @abc.abstractmethod
    def topics_changed(self) -> int:
        """A number that grows whenever a topic or stream is created or deleted (here or, for a shared
        store, once this process learnt of it): a view of every topic built at one number holds until it moves."""

    def partition_count(self) -> int:
        """Partitions of every topic of every stream (what a per-broker partition limit counts)."""
        return sum(topic.partitions for topic in self.list_topics())

    @abc.abstractmethod
    async def add_partitions(self, stream: str, name: str, total: int) -> TopicInfo:
        """Grow to `total` partitions; never shrinks (InvalidPartitionsError)."""

    @abc.abstractmethod
    async def set_topic_configs(self, stream: str, name: str, configs: dict[str, str]) -> TopicInfo:
        """Replace the topic's explicit configs."""

    @abc.abstractmethod
    def partition(self, stream: str, name: str, index: int) -> Partition:
        """The partition object (opened lazily); UnknownTopicError if absent."""

    async def open_partition(self, stream: str, name: str, index: int) -> Partition:
        """partition(), for a caller on the event loop that can wait for it to open.

        A store whose partitions are costly to open (the disk store validates
        their tails after a crash) opens them off the loop; others answer at once.
        """
        return self.partition(stream, name, index)

    async def open_partitions(self, wanted: Iterable[tuple[str, str, int]]) -> None:
        """Open ahead the partitions (stream, topic, index) a request is about to use, together: a
        store that opens off the loop then hands them over one after another rather than one per
        round trip. Unknown ones are left out; a failed open's error is partition()'s to raise."""

    async def refresh_many(self, keys: Sequence[tuple[str, str, int]]) -> None:
        """Partition.refresh() of each partition (stream, topic, index), as a broker calls it for the
        partitions it has just become the leader of: a store many brokers share reads them in one go
        (a broker starting as the leader of 20,000 partitions read them one by one for 10 s). Unknown
        ones are left out."""
        for stream, name, index in keys:
            try:
                partition = self.partition(stream, name, index)
            except StorageError:
                continue
            await partition.refresh()

    def routing_epoch(self, stream: str, name: str, index: int) -> int:
        """The leader epoch Metadata and DescribeTopicPartitions answer for a partition.

        This opens the partition; a store whose partitions are costly to open
        (the disk store after a crash validates their tails) answers without.
        """
        return self.partition(stream, name, index).leader_epoch

    # cursors
    @abc.abstractmethod
    async def commit_cursors(
        self, stream: str, group: str, cursors: Sequence[Cursor], *, fence: "StateFence | None" = None
    ) -> None:
        """Store a group's committed offsets (cursors) in the stream.

        With `fence` (stream, topic, partition, leader epoch: the group
        coordinator's __consumer_offsets partition) they are written only
        while that leader epoch holds, checked in the write's own
        transaction as put_state's: else NotLeaderError and nothing is
        written, so a deposed coordinator's late commit cannot move a
        group's offsets back. A store only this process writes ignores it.
        """

    @abc.abstractmethod
    def get_cursors(self, stream: str, group: str) -> list[Cursor]: ...

    @abc.abstractmethod
    def get_cursor(self, stream: str, group: str, topic: str, partition: int) -> Cursor | None:
        """One committed cursor, or None; found by its key, not among all of the group's."""

    @abc.abstractmethod
    def list_cursor_groups(self, stream: str) -> list[str]: ...

    @abc.abstractmethod
    async def delete_cursors(
        self, stream: str, group: str, partitions: Sequence[tuple[str, int]] | None = None, *,
        fence: "StateFence | None" = None,
    ) -> None:
        """Delete a group's cursors: all of them, or those of (topic, partition).

        With `fence`, only while that leader epoch holds, as commit_cursors:
        a deposed coordinator's late delete or offset expiry cannot remove
        offsets its successor has committed since."""

    # state tables
    @abc.abstractmethod
    async def put_state(
        self, stream: str, table: str, records: Mapping[str, dict | None], *, durable: bool = True,
        fence: "StateFence | None" = None,
    ) -> None:
        """Set (a dict) or delete (None) keyed JSON records of a small table in the stream's data path.

        For broker features that keep state beside the stream's data, as
        cursors are kept (transaction state, aborted-transaction indexes).
        The store never interprets the records. Returns once they are
        durable per the stream's fsync policy; with durable=False once they
        are written (durable at the next group commit), for records whose
        loss in a crash the caller repairs. `table` is [a-z_]+.

        With `fence` (stream, topic, partition, leader epoch) the records are
        written only while that partition's leader epoch is still the one
        named, checked in the write's own transaction as appends are fenced:
        else NotLeaderError and nothing is written. A store only this process
        writes has no other leader to fence against and ignores it.
        """

    @abc.abstractmethod
    def get_state(self, stream: str, table: str) -> dict[str, dict]:
        """Every live record of a state table (empty when it was never written)."""

    @abc.abstractmethod
    def state_version(self, stream: str, table: str) -> int:
        """A number that goes up whenever the table changes: written here, or read afresh from where
        other processes write it too (another broker of a cluster, worker 0 of `serve --workers N`).
        What a caller derived from get_state is current while the number has not moved."""

    async def reload_state(self, stream: str, table: str) -> None:
        """Read a state table afresh from where it is kept, for a store that other processes
        write too (the cloud engine); get_state then returns what they wrote. A store only
        this process writes is always current: nothing to do."""
        return None
