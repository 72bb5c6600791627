"""The group coordinator, following Apache Kafka's GroupCoordinator: one entry for every kind of group.

Every group lives in memory on the broker's event loop (no locks: all
calls run on that loop). A group id names a classic group (its rebalance
protocol is in classic_protocol.py), a KIP-848 consumer group
(consumer_coordinator.py) or a Streams group (streams_coordinator.py); this
module finds which, and owns what they share: loading and saving their
state, committed offsets and their expiry, listing and deletion. Committed offsets are not here but in the store
(see offsets.py); a group known only by its offsets appears as an Empty
group, as Kafka shows groups loaded from __consumer_offsets. Each group's
state is also written to the store (durable.py) and loaded by the broker
that coordinates the group next: after a restart, or on another broker
of a cluster, members go on with their generation and assignment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from kafkacompat.storage import Cursor, NotLeaderError, StateFence, Store

from ..catalog import group_configs
from ..config import BrokerConfig
from . import durable
from .classic_api import JoinRequest, JoinResult, SyncResult
from .classic_protocol import ClassicGroupProtocol
from .consumer_coordinator import ConsumerGroupCoordinator
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE
from .group import Group, GroupState
from .offset_retention import classic_subscribed_topics, expired_of_classic_group, expired_unless_kept, topic_keys
from .offsets import CommittedOffsets
from .streams_coordinator import STREAMS_PROTOCOL_TYPE, StreamsGroupCoordinator

log = logging.getLogger(__name__)

Empty, Stable, Dead = GroupState.EMPTY, GroupState.STABLE, GroupState.DEAD


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[MemberSummary, ...]


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, store: Store, clock: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.store = store  # with config, the ConfigSource group configs are read from
        self.offsets = CommittedOffsets(store)
        self.groups: dict[str, Group] = {}
        self._clock = clock
        self.classic = ClassicGroupProtocol(config, clock, self._save)
        self._expiry_task: asyncio.Task[None] | None = None
        # KIP-848 groups share this coordinator's offsets, listing and deletion; a group id is one or the other
        self.consumer = ConsumerGroupCoordinator(config, store, clock, self._group, self._hand_over, self._take_back,
                                                 self._save, self._group_setting)
        self.streams = StreamsGroupCoordinator(config, clock, self.partitions_of, self._is_classic_or_consumer,
                                               self._save, self._group_setting)
        self.durable = durable.GroupStateWriter(store)
        # this broker coordinates every group (alone); in a cluster the groups of each
        # __consumer_offsets partition it leads are loaded by take_over as it gains them
        self.owns_all = True
        # Set by a cluster whose store fences writes by leader epoch (kafkacompat/broker/cluster.py): what
        # a commit for a group or transactional id is fenced by (Store.commit_cursors); None: not fenced.
        self.commit_fence: Callable[[str], StateFence | None] = lambda key: None

    # lifetime ---------------------------------------------------------------
    def start(self) -> None:
        if self.owns_all:
            self.load(self.durable.stored(), lambda group_id: True)
        self._expiry_task = asyncio.get_running_loop().create_task(
            self._expire_periodically(), name="group offsets expiry"
        )

    async def close(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            try:
                await self._expiry_task
            except asyncio.CancelledError:
                pass
            self._expiry_task = None
        await self.durable.close()
        self.unload(lambda group_id: True)

    # durable state ------------------------------------------------------------
    def _save(self, group_id: str) -> None:
        """Queue the group's state for the store; a classic group in a rebalance keeps its last stable state."""
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            self.durable.save(group_id, durable.consumer_record(consumer_group))
            return
        streams_group = self.streams.groups.get(group_id)
        if streams_group is not None:
            self.durable.save(group_id, durable.streams_record(streams_group))
            return
        group = self.groups.get(group_id)
        if group is None or group.is_(Dead):
            self.durable.save(group_id, None)
        elif group.state in (Stable, Empty):
            self.durable.save(group_id, durable.classic_record(group))

    def load(self, records: Mapping[str, durable.Record], owned: Callable[[str], bool]) -> int:
        """Restore the stored groups this broker now coordinates (Kafka's loading of
        __consumer_offsets): members keep their ids, generation or epochs and assignments,
        and have one session timeout from now to heartbeat here. Returns how many."""
        loaded = 0
        for group_id, record in records.items():
            if not owned(group_id):
                continue
            self._drop(group_id)
            try:
                if record.get("type") == "consumer":
                    self.consumer.adopt(durable.consumer_group(group_id, record))
                elif record.get("type") == "streams":
                    self.streams.adopt(durable.streams_group(group_id, record))
                else:
                    group = self.groups[group_id] = durable.classic_group(group_id, record)
                    self.classic.resume(group)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("group %s: its stored state cannot be read (%s); its members rejoin", group_id, exc)
                self._drop(group_id)
                continue
            self.durable.loaded(group_id, record)
            loaded += 1
        return loaded

    async def take_over(self, owned: Callable[[str], bool], reload: bool = True) -> None:
        """This broker became the coordinator of the groups `owned` selects: load their latest state
        (read afresh from the store, unless the caller did that a moment ago: `reload` False)."""
        self.unload(owned)  # whatever is in memory from an earlier term is stale
        if reload:
            await self.read_stored()
        loaded = self.load(self.durable.stored(), owned)
        if loaded:
            log.info("took over %d group(s) with their members and assignments", loaded)

    async def read_stored(self) -> None:
        """Read the groups' table afresh, as other brokers may have written it (StorageError: not read)."""
        await self.durable.reload()

    def unload(self, owned: Callable[[str], bool]) -> None:
        """Forget the groups `owned` selects (another broker coordinates them now): stop their timers,
        answer parked JoinGroup and SyncGroup requests with NOT_COORDINATOR so members look again."""
        dropped = [g for g in [*self.groups, *self.consumer.groups, *self.streams.groups] if owned(g)]
        for group_id in dropped:
            self._drop(group_id)
        self.durable.forget(dropped)

    def _drop(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            self.classic.stop(group, ErrorCode.not_coordinator)
        self.consumer.drop(group_id)
        self.streams.drop(group_id)

    # lookup -----------------------------------------------------------------
    def _group(self, group_id: str, create: bool = False) -> Group | None:
        """The classic group; None when there is none or the id belongs to a consumer or streams group."""
        if group_id in self.consumer.groups or group_id in self.streams.groups:
            return None
        group = self.groups.get(group_id)
        if group is None and (create or self.offsets.has_offsets(group_id)):
            group = self.groups[group_id] = Group(group_id, self._clock())
        return group

    def _group_setting(self, group_id: str, name: str) -> int:
        """A group's value of an int group config (kafka-configs --entity-type groups), else the broker's."""
        return group_configs.group_int(self, group_id, name)

    def partitions_of(self, name: str) -> int | None:
        """A topic's partition count by its Kafka name, None when it does not exist (Streams topologies)."""
        info = self.consumer.lookup_topic(name)
        return info.partitions if info is not None else None

    def _is_classic_or_consumer(self, group_id: str) -> bool:
        """Whether the id names a live classic or consumer group (a Streams member cannot join it)."""
        if group_id in self.consumer.groups:
            return True
        group = self.groups.get(group_id)
        return group is not None and group.state.value not in ("Empty", "Dead")

    def _hand_over(self, group_id: str) -> None:
        """Let go of a classic group that becomes a consumer group: parked members are told to rejoin."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self.classic.stop(group, ErrorCode.rebalance_in_progress)
        if not group.is_(Dead):
            group.transition(Dead, self._clock())

    def _take_back(self, group: Group) -> None:
        """A consumer group of classic members only becomes classic again: its members rejoin."""
        self.groups[group.group_id] = group
        self.classic.resume(group)
        self.classic.rebalance(group, f"Downgrade group {group.group_id} from consumer to classic.")

    def _all_groups(self) -> list[Group]:
        """The classic groups this broker coordinates, those that only have offsets among them. In a
        cluster another broker's groups are its own to list and to expire: a worker of `serve
        --workers N` counted a live KIP-848 group of another worker as an empty classic one, and
        would have expired its offsets."""
        for group_id in self.offsets.groups():
            if self.durable.may_write(group_id):
                self._group(group_id)
        return list(self.groups.values())

    # JoinGroup ----------------------------------------------------------------
    def join(self, req: JoinRequest) -> asyncio.Future[JoinResult]:
        answer: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

        def fail(code: ErrorCode) -> asyncio.Future[JoinResult]:
            answer.set_result(JoinResult(code, req.member_id))
            return answer

        if not req.group_id:
            return fail(ErrorCode.invalid_group_id)
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return fail(ErrorCode.invalid_session_timeout)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None and not self.consumer.drop_if_empty(req.group_id):
            answer.set_result(self.consumer.classic.join(consumer_group, req))  # a classic member of a consumer group
            self._save(req.group_id)
            return answer
        is_unknown = req.member_id == ""
        group = self._group(req.group_id, create=is_unknown)
        if group is None:
            return fail(ErrorCode.unknown_member_id)
        self.classic.join(group, req, answer)
        return answer


    # SyncGroup ----------------------------------------------------------------
    def sync(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: Mapping[str, bytes],
    ) -> asyncio.Future[SyncResult]:
        answer: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            answer.set_result(  # hands back what the member's JoinGroup stored: nothing to write
                self.consumer.classic.sync(consumer_group, generation, member_id, instance_id, protocol_type, protocol_name)
            )
            return answer
        group = self._group(group_id) if group_id else None
        self.classic.sync(group, group_id, generation, member_id, instance_id, protocol_type, protocol_name,
                          assignments, answer)
        return answer

    # Heartbeat / LeaveGroup ---------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.consumer.classic.heartbeat(consumer_group, generation, member_id, instance_id)
        group = self._group(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return self.classic.heartbeat(group, generation, member_id, instance_id)

    def leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, one error per (member id, instance id))."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            errors = self.consumer.classic.leave(consumer_group, leaving)
            self._save(group_id)
            return ErrorCode.none, errors
        group = self._group(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(leaving)
        return self.classic.leave(group, leaving)

    # offsets ------------------------------------------------------------------
    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None, version: int,
        transactional: bool = False,
    ) -> ErrorCode:
        """Whether an OffsetCommit (or a TxnOffsetCommit, `transactional`) may be stored, as Kafka decides it."""
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.consumer.validate_commit(consumer_group, member_id, generation, version, transactional)
        streams_group = self.streams.groups.get(group_id)
        if streams_group is not None:
            return self.streams.validate_commit(streams_group, member_id, generation, version, transactional)
        group = self._group(group_id)
        if group is None:
            if generation < 0:
                self._group(group_id, create=True)  # a "simple" group: offsets only
                return ErrorCode.none
            return ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
        return self.classic.validate_commit(group, generation, member_id, instance_id)

    async def commit(
        self, group_id: str, cursors: Sequence[tuple[str, Cursor]], coordinated_by: str | None = None
    ) -> None:
        """Store a group's offsets, fenced by the epoch of the coordinator that writes them: the
        group's (OffsetCommit), or the transaction's for offsets a transaction commits at EndTxn
        (`coordinated_by`, its transactional id). NotLeaderError, and nothing stored, once that
        coordinator was replaced."""
        fence = self.commit_fence(group_id if coordinated_by is None else coordinated_by)
        await self.offsets.commit(group_id, cursors, fence)

    async def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, str, int]] | None = None) -> None:
        """Delete the group's offsets (all, or those of (stream, topic, partition)), fenced as commit
        fences them: a deposed coordinator's DeleteGroups, OffsetDelete or expiry sweep removes nothing
        its successor committed (NotLeaderError instead)."""
        await self.offsets.delete(group_id, partitions, self.commit_fence(group_id))

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """Topics the members of a consumer group subscribe to; None when unknown."""
        group = self.groups.get(group_id)
        return classic_subscribed_topics(group) if group is not None else None

    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str] | None]:
        """(group error, topics whose offsets must stay) for OffsetDelete."""
        if not group_id:
            return ErrorCode.invalid_group_id, None
        streams_group = self.streams.groups.get(group_id)
        if streams_group is not None:  # as Kafka: offsets of a streams group go only while it is empty
            return (ErrorCode.none, set()) if streams_group.is_empty() else (ErrorCode.non_empty_group, None)
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.is_empty():
                return ErrorCode.none, set()
            return ErrorCode.none, self.consumer.subscribed_topic_names(group_id) or set()
        group = self._group(group_id)
        if group is None or group.is_(Dead):
            return ErrorCode.group_id_not_found, None
        if group.is_(Empty):
            return ErrorCode.none, set()
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.none, self.subscribed_topics(group_id) or set()
        return ErrorCode.non_empty_group, None

    async def expire_offsets(self, now: int | None = None) -> int:
        """Kafka's offsets.retention.minutes sweep; returns how many cursors expired."""
        now = self._clock() if now is None else now
        retention = self.config.offsets_retention_minutes * 60_000
        expired_total = 0
        default_stream = self.offsets.store.default_stream
        for group in self._all_groups():
            expired = expired_of_classic_group(group, self.offsets.all(group.group_id), now, retention, default_stream)
            if expired:
                if not await self._expire(group.group_id, expired):
                    continue
                log.info("group %s: %d committed offset(s) expired", group.group_id, len(expired))
                expired_total += len(expired)
            if group.is_(Empty) and not self.offsets.has_offsets(group.group_id):
                group.transition(Dead, now)
                self.groups.pop(group.group_id, None)
                self._save(group.group_id)
        for group_id in list(self.consumer.groups):
            expired_total += await self._expire_consumer_group_offsets(group_id, now, retention)
        return expired_total

    async def _expire_consumer_group_offsets(self, group_id: str, now: int, retention: int) -> int:
        """Kafka's rule for consumer groups: by commit time, never for topics the members subscribe to."""
        kept = topic_keys(self.consumer.subscribed_topic_names(group_id) or set(), self.offsets.store.default_stream)
        expired = expired_unless_kept(self.offsets.all(group_id), kept, now, retention)
        if expired:
            if not await self._expire(group_id, expired):
                return 0
            log.info("consumer group %s: %d committed offset(s) expired", group_id, len(expired))
        if not self.offsets.has_offsets(group_id) and self.consumer.drop_if_empty(group_id):
            self._save(group_id)
        return len(expired)

    async def _expire(self, group_id: str, expired: Sequence[tuple[str, str, int]]) -> bool:
        """Delete expired offsets; False when this broker no longer coordinates the group (its
        successor sweeps them), which does not stop the sweep of the groups it still has."""
        try:
            await self.delete_offsets(group_id, expired)
        except NotLeaderError:
            log.info("group %s: offsets not expired here, its coordinator moved", group_id)
            return False
        return True

    async def _expire_periodically(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except Exception:  # noqa: BLE001 - keep sweeping; the next run may succeed
                log.exception("expiring committed offsets failed")

    # admin --------------------------------------------------------------------
    def describe(self, group_id: str) -> GroupSummary:
        group = self._group(group_id)
        if group is None or group.is_(Dead):
            return GroupSummary(group_id, Dead.value, "", "", ())
        stable = group.is_(Stable)
        members = tuple(
            MemberSummary(
                m.member_id, m.instance_id, m.client_id, m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupSummary(
            group_id, group.state.value, group.protocol_type or "",
            (group.protocol_name or "") if stable else "", members,
        )

    def not_found(self, group_id: str) -> str | None:
        """Why DescribeGroups v6+ answers GROUP_ID_NOT_FOUND for this id (Kafka's message), or None
        when it names a classic group; older versions describe such an id as Dead instead."""
        if group_id in self.consumer.groups or group_id in self.streams.groups:
            return f"Group {group_id} is not a classic group."
        group = self._group(group_id)
        return f"Group {group_id} not found." if group is None or group.is_(Dead) else None

    def list_groups(
        self, states: Sequence[str] = (), types: Sequence[str] = ()
    ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of live groups, filtered case-insensitively."""
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        found = [(g.group_id, g.protocol_type or "", g.state.value, "classic") for g in self._all_groups() if not g.is_(Dead)]
        found += [(group_id, CONSUMER_PROTOCOL_TYPE, state, "consumer") for group_id, state in self.consumer.list_groups()]
        found += [(group_id, STREAMS_PROTOCOL_TYPE, state, "streams") for group_id, state in self.streams.list_groups()]
        return [
            row for row in found
            if (not wanted_states or row[2].lower() in wanted_states)
            and (not wanted_types or row[3] in wanted_types)
        ]

    async def delete_group(self, group_id: str) -> ErrorCode:
        if group_id in self.streams.groups:
            error = self.streams.delete(group_id)
            if error == ErrorCode.none:
                self._save(group_id)
                await self.delete_offsets(group_id)
            return error
        if group_id in self.consumer.groups:
            error = self.consumer.delete(group_id)
            if error == ErrorCode.none:
                self._save(group_id)
                await self.delete_offsets(group_id)
            return error
        group = self._group(group_id)
        if group is None or group.is_(Dead):
            return ErrorCode.group_id_not_found
        if not group.is_(Empty):
            return ErrorCode.non_empty_group
        group.transition(Dead, self._clock())
        self.groups.pop(group_id, None)
        self._save(group_id)
        await self.delete_offsets(group_id)
        log.info("group %s deleted", group_id)
        return ErrorCode.none

