"""Share groups on this broker: membership, share sessions and share-partition state, kept in the store.

Kafka splits this between the group coordinator (membership), the
SharePartitionManager (sessions, acquisition locks, acknowledgements) and the
share coordinator (the durable state in __share_group_state). Here one object
per broker holds all three. The state of each share-partition (its SPSO and
the delivery state and count of every record in flight) is one JSON record in
the `share_state` state table of the default stream; an acknowledgement is
answered once the state it made is written, so a restarted broker goes on
from the acknowledged progress (acquired records come back available, their
delivery counts kept, as in Kafka).

In a cluster, as in Kafka, a share-partition lives with its topic
partition's leader (the handlers answer NOT_LEADER_OR_FOLLOWER elsewhere) and
membership with the group's coordinator. A broker that gains or loses a
partition drops what it kept of its share-partitions; the leader reads them
afresh from the store at their first use, and writes them fenced by its
leader epoch, so a deposed leader's late write cannot overwrite the state its
successor serves.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.protocol.records import whole_batches

from ..catalog.group_configs import group_config, group_int
from ..catalog.views import ConfigSource
from ..transactions import PartitionTxns
from ..transactions.partition_state import stable_prefix
from .share_group import ShareGroupCoordinator
from .share_partition import Acquired, InvalidRecordState, InvalidRequest, SharePartition

if TYPE_CHECKING:
    from ..cluster import ClusterView
    from ..cluster.membership import PartitionKey as LeaderKey
    from ..groups import GroupCoordinator
    from ..transactions import TransactionCoordinator

log = logging.getLogger(__name__)

TABLE = "share_state"
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
PartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


class ShareSessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(slots=True)
class ShareSession:
    """What Kafka's ShareSessionCache keeps per (group, member): the partitions and the next epoch."""

    partitions: dict[PartitionKey, None]  # insertion-ordered set
    connection: str  # the client connection that opened it: its close ends the session
    epoch: int = 1


@dataclasses.dataclass(slots=True)
class Delivery:
    """What one ShareFetch hands one member from one share-partition."""

    records: bytes
    acquired: list[Acquired]


def state_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{topic_id.hex}:{partition}:{group_id}"


def parse_state_key(key: str) -> tuple[str, uuid.UUID, int]:
    topic, partition, group_id = key.split(":", 2)
    return group_id, uuid.UUID(hex=topic), int(partition)


class ShareHost(ConfigSource, Protocol):
    """What share groups read of the broker they run in (kafkacompat.broker.cluster.Cluster has it all):
    its topics, the other groups (one namespace of ids), leadership and the transactions' state."""

    @property
    def node_id(self) -> int: ...

    @property
    def groups(self) -> "GroupCoordinator": ...

    @property
    def transactions(self) -> "TransactionCoordinator": ...

    @property
    def view(self) -> "ClusterView": ...

    def topic_for(self, name: str) -> tuple[storage.TopicInfo | None, ErrorCode]: ...

    def by_id(self, topic_id: uuid.UUID) -> storage.TopicInfo | None: ...

    def append_epoch(self, key: "LeaderKey") -> int | None: ...

    def offsets_topic(self) -> storage.TopicInfo | None: ...

    def coordinates(self, key: str) -> bool: ...


class StoreTable:
    """The `share_state` table of the store's default stream, written by this broker itself (each
    worker of `serve --workers N` too: it follows what the others write, storage/disk/catalog.py)."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store

    def rows(self) -> dict[str, dict]:
        return self.store.get_state(self.store.default_stream, TABLE)

    async def reload(self) -> None:
        await self.store.reload_state(self.store.default_stream, TABLE)

    async def put(self, records: dict[str, dict | None], fence: storage.StateFence | None) -> None:
        await self.store.put_state(self.store.default_stream, TABLE, records, durable=False, fence=fence)


class ShareService:
    def __init__(self, cluster: ShareHost) -> None:
        self.cluster = cluster
        self.config = cluster.config
        self.store = cluster.store
        self.table = StoreTable(cluster.store)
        self.groups = ShareGroupCoordinator(
            session_timeout_ms=lambda g: group_int(cluster, g, "share.session.timeout.ms"),
            heartbeat_interval_ms=lambda g: group_int(cluster, g, "share.heartbeat.interval.ms"),
            topics=self._topics,
            is_other_group=self.is_other_group,
            on_member_gone=self.end_sessions,
            max_size=self.config.group_share_max_size,
        )
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self._locks: dict[tuple[str, uuid.UUID, int, int], asyncio.TimerHandle] = {}
        self._dirty: set[tuple[str, uuid.UUID, int]] = set()
        self._admin_dirty: set[tuple[str, uuid.UUID, int]] = set()  # written by the coordinator, not the leader
        self._unread: set[PartitionKey] = set()  # led anew: read from the store before the first use
        self._released: asyncio.Future[None] | None = None  # resolved when records become available again
        self._flush_task: asyncio.Task[None] | None = None
        # told of the share-partitions an admin request (alter or delete offsets) wrote, once written: a
        # worker of `serve --workers N` has their owner drop what it holds of them (workers/share_state.py)
        self.on_admin_written: Callable[[set[tuple[str, uuid.UUID, int]]], Awaitable[None]] | None = None

    # settings ---------------------------------------------------------------------
    def lock_duration_ms(self, group_id: str) -> int:
        return group_int(self.cluster, group_id, "share.record.lock.duration.ms")

    def _auto_offset_reset(self, group_id: str) -> str:
        return group_config(self.cluster, group_id, "share.auto.offset.reset")

    def _topics(self, names: tuple[str, ...]) -> dict[uuid.UUID, tuple[str, int]]:
        out = {}
        for name in names:
            info, error = self.cluster.topic_for(name)
            if info is not None and error == ErrorCode.none:
                out[info.topic_id] = (name, info.partitions)
        return out

    def is_other_group(self, group_id: str) -> bool:
        """Whether a classic or consumer group has this id (group ids are one namespace)."""
        groups = self.cluster.groups
        return group_id in groups.consumer.groups or group_id in groups.groups or groups.offsets.has_offsets(group_id)

    def is_empty(self, group_id: str) -> bool:
        group = self.groups.groups.get(group_id)
        return group is None or not group.members

    # listing ----------------------------------------------------------------------
    def stored(self) -> dict[str, dict]:
        return self.table.rows()

    def known_groups(self) -> dict[str, str]:
        """group id -> state of every share group: live ones and those only their stored state knows."""
        out = {group_id: "Empty" for group_id, _, _ in map(parse_state_key, self.stored())}
        out.update({g.group_id: g.state for g in self.groups.groups.values()})
        return out

    # share sessions ---------------------------------------------------------------
    def open_session(self, group_id: str, member_id: str, epoch: int, add: Iterable[PartitionKey],
                     forget: Iterable[PartitionKey], has_acks: bool,
                     connection: str) -> tuple[ShareSession | None, bool]:
        """Kafka's SharePartitionManager.newContext: (session, is_new); None for the final epoch."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise ShareSessionError(ErrorCode.invalid_request, "Acknowledge data present in initial fetch request.")
            if key in self.sessions:
                self.end_sessions(group_id, member_id)
            session = self.sessions[key] = ShareSession(dict.fromkeys(add), connection)
            return session, True
        session = self.sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found, "The share session was not found.")
        if epoch == FINAL_EPOCH:
            return None, False
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch, "The share session epoch is invalid.")
        for part in forget:
            session.partitions.pop(part, None)
        for part in add:
            session.partitions.setdefault(part, None)
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        return session, False

    def acknowledge_session(self, group_id: str, member_id: str, epoch: int) -> None:
        """Kafka's acknowledgeSessionUpdate (ShareAcknowledge)."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch, "The share session epoch is invalid.")
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found, "The share session was not found.")
        if epoch == FINAL_EPOCH:
            return
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch, "The share session epoch is invalid.")
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1

    def connection_closed(self, connection: str) -> None:
        """Kafka ends the share sessions a client connection opened when it closes (a consumer that died)."""
        for group_id, member_id in [k for k, s in self.sessions.items() if s.connection == connection]:
            log.info("share group %s: the connection of member %s closed; its share session ends", group_id,
                     member_id)
            self.end_sessions(group_id, member_id)
            self._schedule_flush()

    def end_sessions(self, group_id: str, member_id: str) -> None:
        """The member's share session ended (or it left the group): what it holds becomes available."""
        self.sessions.pop((group_id, member_id), None)
        for key, part in self.partitions.items():
            if key[0] == group_id and part.release_member(member_id):
                self._changed(key)

    # share-partitions -------------------------------------------------------------
    async def share_partition(self, group_id: str, topic_id: uuid.UUID, index: int,
                              partition: storage.Partition) -> SharePartition:
        """The share-partition, loaded from the store or started per share.auto.offset.reset."""
        key = (group_id, topic_id, index)
        if (topic_id, index) in self._unread and key not in self.partitions:
            # the previous leader wrote it until it was fenced: read what it wrote, not a notification behind
            await self.table.reload()
            self._unread.discard((topic_id, index))
        part = self.partitions.get(key)
        if part is None:
            record = self.stored().get(state_key(group_id, topic_id, index))
            limit = self.config.group_share_delivery_count_limit
            if record is not None:
                part = SharePartition.restore(record, limit)
            else:
                await self.cluster.view.catch_up_settings()  # share.auto.offset.reset as last set anywhere
                if (part := self.partitions.get(key)) is not None:  # another request started it meanwhile
                    part.skip_to(partition.log_start_offset)
                    return part
                earliest = self._auto_offset_reset(group_id) == "earliest"
                part = SharePartition(partition.log_start_offset if earliest else partition.high_watermark, limit)
                self._dirty.add(key)  # the start offset is fixed now, as Kafka initializes the state
            self.partitions[key] = part
        part.skip_to(partition.log_start_offset)
        return part

    async def _committed_txns(self, group_id: str, topic_id: uuid.UUID, index: int) -> PartitionTxns | None:
        """The partition's transactions when the group reads read_committed (share.isolation.level), else None."""
        if group_config(self.cluster, group_id, "share.isolation.level") != "read_committed":
            return None
        info = self.cluster.by_id(topic_id)
        if info is None:
            return None
        return await self.cluster.transactions.partitions.get(info.stream, info.name, index)

    async def new_records(self, group_id: str, topic_id: uuid.UUID, index: int,
                          partition: storage.Partition) -> asyncio.Future[None]:
        """Resolved when records past the share-partition's in-flight window may be there to acquire: new
        ones, or under read_committed, those of a transaction that ended (the last stable offset moved)."""
        part = self.partitions.get((group_id, topic_id, index))
        end = part.end_offset if part is not None else partition.high_watermark
        txns = await self._committed_txns(group_id, topic_id, index)
        return txns.wait_stable(end) if txns is not None else partition.wait_for_data(end)

    async def acquire(self, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                      partition: storage.Partition, max_records: int, max_bytes: int) -> Delivery | None:
        """Acquire up to `max_records` records (whole log batches) for a member, under a lock, while the
        share-partition holds fewer than group_share_partition_max_record_locks (Kafka's bound).

        Under share.isolation.level=read_committed, as Kafka 4.1: only records
        below the last stable offset are acquired, and those of aborted
        transactions are archived as they are acquired (they count towards
        `max_records`, as in Kafka) instead of being handed out."""
        part = await self.share_partition(group_id, topic_id, index, partition)
        max_records = min(max_records, self.config.group_share_partition_max_record_locks - part.held())
        start = part.first_available()
        txns = await self._committed_txns(group_id, topic_id, index)
        end = txns.last_stable_offset if txns is not None else partition.high_watermark
        if start >= end or max_records <= 0:
            return None
        data = await partition.read(start, max(max_bytes, 1))
        if end < partition.high_watermark:
            data = data[: stable_prefix(data, end)]
        aborted = txns.aborted_batches(start, end) if txns is not None else None
        view = memoryview(data)
        acquisition = part.next_acquisition()
        taken: list[int] = []
        archived = 0
        chunks: list[bytes] = []
        pos = 0
        for header in whole_batches(view):
            size = header.size
            if header.last_offset >= start:
                got = part.acquire_batch(header.base_offset, header.last_offset, member_id, acquisition)
                if got and aborted is not None and aborted.holds(header):
                    part.archive(got)
                    archived += len(got)
                elif got:
                    taken += got
                    chunks.append(bytes(view[pos:pos + size]))
            pos += size
            if len(taken) + archived >= max_records or (chunks and pos >= max_bytes):
                break
        key = (group_id, topic_id, index)
        if archived:
            self._dirty.add(key)
        if not taken:
            return None
        self._locks[(*key, acquisition)] = asyncio.get_running_loop().call_later(
            self.lock_duration_ms(group_id) / 1000, self._lock_expired, key, acquisition)
        return Delivery(b"".join(chunks), part.runs(taken))

    def _lock_expired(self, key: tuple[str, uuid.UUID, int], acquisition: int) -> None:
        self._locks.pop((*key, acquisition), None)
        part = self.partitions.get(key)
        if part is not None and part.expire(acquisition):
            log.info("share group %s: acquisition lock timed out on %s-%d; records available again", key[0],
                     key[1], key[2])
            self._changed(key)
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        """Write changed state soon, for changes no request waits for (lock timeouts, closed connections)."""
        if self._dirty and (self._flush_task is None or self._flush_task.done()):
            self._flush_task = asyncio.get_running_loop().create_task(self.flush(), name="share state flush")

    async def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, index: int,
                          partition: storage.Partition | None,
                          batches: Sequence[tuple[int, int, Sequence[int]]]) -> tuple[ErrorCode, str | None]:
        """Apply one partition's acknowledgement batches; the partition's acknowledge error."""
        part = self.partitions.get((group_id, topic_id, index))
        if part is None:
            if partition is None:
                return ErrorCode.unknown_topic_or_partition, None
            part = await self.share_partition(group_id, topic_id, index, partition)
        try:
            part.acknowledge(member_id, batches)
        except InvalidRecordState as exc:
            return ErrorCode.invalid_record_state, str(exc)
        except InvalidRequest as exc:
            return ErrorCode.invalid_request, str(exc)
        self._changed((group_id, topic_id, index))
        return ErrorCode.none, None

    def _changed(self, key: tuple[str, uuid.UUID, int]) -> None:
        self._dirty.add(key)
        if self._released is not None and not self._released.done():
            self._released.set_result(None)
        self._released = None

    def released(self) -> asyncio.Future[None]:
        """Resolved the next time records may become available again (a release, a lock timeout)."""
        if self._released is None:
            self._released = asyncio.get_running_loop().create_future()
        return self._released

    async def flush(self) -> set[PartitionKey]:
        """Write the state of every share-partition that changed (Kafka's persister write), each topic
        partition's under this broker's leader epoch; the topic partitions whose state was refused
        because this broker no longer leads them (it drops what it kept of them)."""
        refused: set[PartitionKey] = set()
        if not self._dirty:
            return refused
        dirty, self._dirty = self._dirty, set()
        admin, self._admin_dirty = self._admin_dirty, set()
        unwritten: set[tuple[str, uuid.UUID, int]] = set()
        by_partition: dict[PartitionKey, list[tuple[str, uuid.UUID, int]]] = {}
        for key in dirty:
            by_partition.setdefault((key[1], key[2]), []).append(key)
        for (topic_id, index), keys in by_partition.items():
            records = {state_key(*key): part.record() if (part := self.partitions.get(key)) is not None else None
                       for key in keys}
            try:
                fence = None if all(key in admin for key in keys) else self._fence(topic_id, index)
                await self.table.put(records, fence)
            except storage.NotLeaderError as exc:
                log.info("share-partition state of %s-%d not written: %s", topic_id, index, exc)
                self.drop(topic_id, index)
                refused.add((topic_id, index))
            except storage.StorageError as exc:
                log.warning("share-group state of %d share-partition(s) not written: %s", len(records), exc)
                self._dirty.update(keys)
                self._admin_dirty.update(key for key in keys if key in admin)
                unwritten.update(keys)
        if self.on_admin_written is not None and (written := admin - unwritten):
            await self.on_admin_written(written)
        return refused

    def _fence(self, topic_id: uuid.UUID, index: int) -> storage.StateFence | None:
        """(stream, topic, partition, leader epoch) a write of the share-partition state is made under;
        None where there is no epoch to fence by (one broker alone, a deleted topic); NotLeaderError
        when this broker does not lead the partition (any more)."""
        info = self.cluster.by_id(topic_id)
        if info is None:
            return None
        key = (info.stream, info.name, index)
        if not self.cluster.view.leads(key):
            raise storage.NotLeaderError(f"broker {self.cluster.node_id} does not lead {info.name}-{index}", -1)
        epoch = self.cluster.append_epoch(key)
        return None if epoch is None else (*key, epoch)

    # leadership -------------------------------------------------------------------
    def leadership_changed(self, stream: str, topic: str, index: int) -> None:
        """This broker gained or lost the leadership of a topic partition: what it kept of the
        partition's share-partitions may be behind what another leader wrote, so it is dropped,
        and read afresh from the store at its first use (Kafka's new leader initializes a
        share-partition from the share coordinator's state likewise). For a __consumer_offsets
        partition, the share groups it no longer coordinates are unloaded."""
        info = self.store.get_topic(stream, topic)
        if info is None:
            return
        offsets = self.cluster.offsets_topic()
        if offsets is not None and info.topic_id == offsets.topic_id:  # the coordinators of groups moved
            self.groups.unload(lambda group_id: not self.cluster.coordinates(group_id))
            return
        self.drop(info.topic_id, index)
        self._unread.add((info.topic_id, index))

    def drop(self, topic_id: uuid.UUID, index: int) -> None:
        """Forget the topic partition's share-partitions here: their state, lock timers and unwritten changes."""
        for key in [k for k in self.partitions if k[1:] == (topic_id, index)]:
            del self.partitions[key]
            self._dirty.discard(key)
            self._admin_dirty.discard(key)  # else a later leader's write of it would go unfenced
        for lock in [k for k in self._locks if k[1:3] == (topic_id, index)]:
            self._locks.pop(lock).cancel()

    def forget(self, keys: Iterable[tuple[str, uuid.UUID, int]]) -> None:
        """Drop what is held of these share-partitions (state, lock timers, unwritten changes): another
        process wrote their state, which their next use reads from the table."""
        for key in keys:
            self.partitions.pop(key, None)
            self._dirty.discard(key)
            self._admin_dirty.discard(key)
            for lock in [k for k in self._locks if k[:3] == key]:
                self._locks.pop(lock).cancel()

    # admin ------------------------------------------------------------------------
    def group_state_keys(self, group_id: str) -> list[tuple[uuid.UUID, int]]:
        """(topic id, partition) of every share-partition of a group, in memory or stored."""
        found = {(t, p) for g, t, p in self.partitions if g == group_id}
        found |= {(t, p) for g, t, p in map(parse_state_key, self.stored()) if g == group_id}
        return sorted(found)

    def start_offset(self, group_id: str, topic_id: uuid.UUID, index: int) -> int | None:
        """The SPSO as Kafka's DescribeShareGroupOffsets shows it (see SharePartition.written_start_offset)."""
        part = self.partitions.get((group_id, topic_id, index))
        if part is not None:
            return part.written_start_offset
        record = self.stored().get(state_key(group_id, topic_id, index))
        return record.get("written_start_offset", record["start_offset"]) if record is not None else None

    def set_start_offset(self, group_id: str, topic_id: uuid.UUID, index: int, offset: int) -> None:
        key = (group_id, topic_id, index)
        part = self.partitions.get(key)
        if part is None:
            record = self.stored().get(state_key(*key))
            part = SharePartition.restore(record, self.config.group_share_delivery_count_limit) if record else \
                SharePartition(offset, self.config.group_share_delivery_count_limit)
            self.partitions[key] = part
        part.reset(offset)
        self._dirty.add(key)
        self._admin_dirty.add(key)

    def forget_state(self, group_id: str, keys: Iterable[tuple[uuid.UUID, int]]) -> None:
        for topic_id, index in keys:
            key = (group_id, topic_id, index)
            self.partitions.pop(key, None)
            self._dirty.add(key)
            self._admin_dirty.add(key)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[tuple[str, str, str, str]]:
        """ListGroups rows (group id, protocol type, state, group type) of the share groups."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and "share" not in wanted_types:
            return []
        return [(group_id, "share", state, "share") for group_id, state in self.known_groups().items()
                if (not wanted_states or state.lower() in wanted_states)
                and self.cluster.coordinates(group_id)]  # each coordinator lists its own, as on Kafka

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of an empty share group: the group and the state of its share-partitions go."""
        if not self.cluster.coordinates(group_id):
            return ErrorCode.not_coordinator
        if not self.is_empty(group_id):
            return ErrorCode.non_empty_group
        self.groups.delete(group_id)
        self.forget_state(group_id, self.group_state_keys(group_id))
        await self.flush()
        log.info("share group %s deleted", group_id)
        return ErrorCode.none

    async def close(self) -> None:
        self.groups.close()
        for timer in self._locks.values():
            timer.cancel()
        self._locks.clear()
        if self._flush_task is not None:
            await asyncio.gather(self._flush_task, return_exceptions=True)
        await self.flush()
