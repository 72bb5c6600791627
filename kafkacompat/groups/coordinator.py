"""The classic group coordinator, following Apache Kafka's GroupCoordinator.

Every group lives in memory on the broker's event loop (no locks: all
calls run on that loop). JoinGroup and SyncGroup answers are futures that
the coordinator resolves when the rebalance reaches the point Kafka would
answer; timers enforce session timeouts, rebalance timeouts and the
initial rebalance delay. Committed offsets are not here but in the store
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

from kafkacompat.storage import Cursor, Store

from ..config import BrokerConfig
from ..topic_names import TopicNameError, split_name
from .classic_api import JoinRequest, JoinResult, SyncResult
from .consumer_coordinator import ConsumerGroupCoordinator
from .streams_coordinator import STREAMS_PROTOCOL_TYPE, StreamsGroupCoordinator
from . import durable
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from .group import Group, GroupState, Member
from .offsets import CommittedOffsets

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs

Empty, Preparing, Completing, Stable, Dead = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


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
        self.offsets = CommittedOffsets(store)
        self.groups: dict[str, Group] = {}
        self._clock = clock
        self._expiry_task: asyncio.Task[None] | None = None
        # KIP-848 groups share this coordinator's offsets, listing and deletion; a group id is one or the other
        self.consumer = ConsumerGroupCoordinator(config, store, clock, self._group, self._hand_over, self._take_back,
                                                 self._save)
        self.streams = StreamsGroupCoordinator(config, clock, self.partitions_of, self._is_classic_or_consumer)
        self.durable = durable.GroupStateWriter(store)
        # this broker coordinates every group (alone); in a cluster the groups of each
        # __consumer_offsets partition it leads are loaded by take_over as it gains them
        self.owns_all = True

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
                else:
                    group = self.groups[group_id] = durable.classic_group(group_id, record)
                    for member in group.members.values():
                        self._schedule_heartbeat(group, member)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("group %s: its stored state cannot be read (%s); its members rejoin", group_id, exc)
                self._drop(group_id)
                continue
            self.durable.loaded(group_id, record)
            loaded += 1
        return loaded

    async def take_over(self, owned: Callable[[str], bool]) -> None:
        """This broker became the coordinator of the groups `owned` selects: load their latest state."""
        self.unload(owned)  # whatever is in memory from an earlier term is stale
        loaded = self.load(await self.durable.reload(), owned)
        if loaded:
            log.info("took over %d group(s) with their members and assignments", loaded)

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
            for timer in (group.join_timer, group.sync_timer, *group.pending_members.values()):
                if timer is not None:
                    timer.cancel()
            for member in group.members.values():
                if member.heartbeat_timer is not None:
                    member.heartbeat_timer.cancel()
                self._answer_join(member, JoinResult(ErrorCode.not_coordinator, member.member_id))
                self._answer_sync(member, SyncResult(ErrorCode.not_coordinator))
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
        for name in ("join_timer", "sync_timer"):
            self._cancel(group, name)
        for timer in group.pending_members.values():
            timer.cancel()
        for member in group.members.values():
            self._answer_join(member, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
            self._answer_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
        if not group.is_(Dead):
            group.transition(Dead, self._clock())

    def _take_back(self, group: Group) -> None:
        """A consumer group of classic members only becomes classic again: its members rejoin."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        self._prepare_rebalance(group, f"Downgrade group {group.group_id} from consumer to classic.")

    def _all_groups(self) -> list[Group]:
        for group_id in self.offsets.groups():
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
        if not self._accept_joining_member(group, req.member_id):
            # as Kafka: a member refused while the group is full is dropped from it
            refused = group.members.get(req.member_id)
            if refused is not None:
                self._remove_member_and_update(group, refused, "group.max.size reached")
            answer.set_result(JoinResult(ErrorCode.group_max_size_reached, ""))
            return answer
        if is_unknown:
            self._join_new_member(group, req, answer)
        else:
            self._join_current_member(group, req, answer)
        self._try_complete_join(group)
        self._save(req.group_id)
        return answer

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.state in (Empty, Dead):
            return True
        if group.is_(Preparing):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.awaiting_join_count() < limit
        return group.has(member_id) or len(group.members) < limit

    @staticmethod
    def _member_error(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateMember: a given instance id must map to this member, which must exist."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        return None if group.has(member_id) else ErrorCode.unknown_member_id

    def _join_new_member(self, group: Group, req: JoinRequest, answer: asyncio.Future[JoinResult]) -> None:
        if group.is_(Dead):
            answer.set_result(JoinResult(ErrorCode.coordinator_not_available, ""))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            answer.set_result(JoinResult(ErrorCode.inconsistent_group_protocol, ""))
            return
        new_id = group.new_member_id(req.client_id, req.instance_id)
        if req.instance_id is not None:
            old_id = group.static_members.get(req.instance_id)
            if old_id is not None:
                log.info(
                    "static member %s of group %s rejoins with a new member id %s (was %s) in state %s",
                    req.instance_id, group.group_id, new_id, old_id, group.state.value,
                )
                self._replace_static_member(group, req, old_id, new_id, answer)
            else:
                self._add_member_and_rebalance(group, req, new_id, answer)
        elif req.require_known_member_id:
            group.pending_members[new_id] = asyncio.get_running_loop().call_later(
                req.session_timeout_ms / 1000, self._pending_member_expired, group, new_id
            )
            answer.set_result(JoinResult(ErrorCode.member_id_required, new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, answer)

    def _join_current_member(self, group: Group, req: JoinRequest, answer: asyncio.Future[JoinResult]) -> None:
        member_id = req.member_id
        if group.is_(Dead):
            answer.set_result(JoinResult(ErrorCode.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            answer.set_result(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, req, member_id, answer)
            return
        if (member_error := self._member_error(group, member_id, req.instance_id)) is not None:
            answer.set_result(JoinResult(member_error, member_id))
            return
        member = group.members[member_id]
        reason = f"member {member_id} rejoins group in state {group.state.value} ({req.reason})"
        if group.is_(Preparing):
            self._update_member_and_rebalance(group, member, req, answer, reason)
        elif group.is_(Completing):
            if member.matches(req.protocols):
                # it missed the JoinGroup answer: repeat it for this generation
                members = group.current_member_metadata() if group.is_leader(member_id) else []
                answer.set_result(self._join_result(group, member_id, members))
            else:
                self._update_member_and_rebalance(group, member, req, answer, reason)
        elif group.is_(Stable):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # a leader's JoinGroup forces a rebalance (e.g. topic metadata changed)
                self._update_member_and_rebalance(group, member, req, answer, reason)
            else:
                answer.set_result(self._join_result(group, member_id, []))
        else:
            answer.set_result(JoinResult(ErrorCode.unknown_member_id, member_id))

    def _join_result(
        self, group: Group, member_id: str, members: Sequence[tuple[str, str | None, bytes]],
        leader: str | None = None, skip_assignment: bool = False,
    ) -> JoinResult:
        return JoinResult(
            ErrorCode.none, member_id, group.generation, group.protocol_type, group.protocol_name,
            leader if leader is not None else (group.leader_id or ""), tuple(members), skip_assignment,
        )

    def _add_member_and_rebalance(
        self, group: Group, req: JoinRequest, member_id: str, answer: asyncio.Future[JoinResult]
    ) -> None:
        member = Member(
            member_id=member_id,
            instance_id=req.instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            is_new=True,
            join_waiter=answer,
        )
        if group.is_(Preparing) and group.generation == 0:
            group.new_member_added = True  # lets the initial delay wait a little longer
        group.add(member)
        # a new member has no id to heartbeat with; its parked JoinGroup times out instead
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} ({req.reason})")

    def _update_member(self, member: Member, req: JoinRequest, answer: asyncio.Future[JoinResult]) -> None:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        old = member.join_waiter
        if old is not None and old is not answer and not old.done():
            old.set_result(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.join_waiter = answer

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, answer: asyncio.Future[JoinResult], reason: str
    ) -> None:
        self._update_member(member, req, answer)
        self._maybe_prepare_rebalance(group, reason)

    def _replace_static_member(
        self, group: Group, req: JoinRequest, old_id: str, new_id: str, answer: asyncio.Future[JoinResult]
    ) -> None:
        assert req.instance_id is not None
        current_leader = group.leader_id or ""
        old = group.members[old_id]
        self._answer_join(old, JoinResult(ErrorCode.fenced_instance_id, old_id))
        self._answer_sync(old, SyncResult(ErrorCode.fenced_instance_id))
        member = group.replace_static_member(req.instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        self._update_member(member, req, answer)
        if group.is_(Stable):
            if group.protocol_name == group.select_protocol():
                # same protocol: no rebalance; the member gets its old assignment at SyncGroup
                # v9+: a rejoining leader is told it leads, with the members to watch but
                # skip_assignment set; older clients are given the old leader id, so the
                # rejoining leader acts as a follower (Kafka's KIP-814 behaviour)
                is_leader = group.is_leader(new_id)
                skip = is_leader and req.supports_skip_assignment
                members = group.current_member_metadata() if skip else []
                leader = None if req.supports_skip_assignment else current_leader
                self._answer_join(member, self._join_result(group, new_id, members, leader, skip))
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {req.instance_id} rejoined with another protocol"
                )
        elif group.is_(Completing):
            # the leader may be assigning to the old member id: start over
            self._prepare_rebalance(group, f"static member {req.instance_id} rejoined during CompletingRebalance")
        # PreparingRebalance: answered when the join phase completes

    def _pending_member_expired(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            log.info("pending member %s of group %s did not rejoin in time", member_id, group.group_id)
            self._try_complete_join(group)

    # rebalance ----------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(Completing):
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, ErrorCode.rebalance_in_progress)
        self._cancel(group, "sync_timer")
        group.pending_sync.clear()
        self._cancel(group, "join_timer")
        loop = asyncio.get_running_loop()
        if group.is_(Empty):
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.initial_delay_running = True
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_done, group, remaining)
        else:
            group.join_timer = loop.call_later(
                group.rebalance_timeout_ms() / 1000, self._complete_join, group
            )
        log.info(
            "preparing to rebalance group %s in state %s with old generation %d (%s)",
            group.group_id, group.state.value, group.generation, reason,
        )
        group.transition(Preparing, self._clock())
        self._try_complete_join(group)

    def _initial_delay_done(self, group: Group, remaining_ms: int) -> None:
        group.join_timer = None
        if not group.is_(Preparing):
            return
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._initial_delay_done, group, remaining_ms - delay
            )
            return
        group.initial_delay_running = False
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.is_(Preparing) and not group.initial_delay_running and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop members that did not rejoin, start the next generation."""
        self._cancel(group, "join_timer")
        group.initial_delay_running = False
        if not group.is_(Preparing):
            return
        for member in list(group.members.values()):
            if not member.awaiting_join and member.instance_id is None:
                log.info("member %s of group %s did not rejoin; removing it", member.member_id, group.group_id)
                self._answer_sync(member, SyncResult(ErrorCode.unknown_member_id))
                group.remove(member.member_id)
        if group.members and not group.elect_joined_leader():
            # only static members that have not rejoined are left: wait for them or their session end
            group.join_timer = asyncio.get_running_loop().call_later(
                group.rebalance_timeout_ms() / 1000, self._complete_join, group
            )
            return
        group.generation += 1
        group.pending_sync.clear()
        if not group.members:
            group.protocol_name = None
            group.transition(Empty, self._clock())
            log.info("group %s is empty at generation %d", group.group_id, group.generation)
            self._save(group.group_id)
            return
        group.protocol_name = group.select_protocol()
        group.transition(Completing, self._clock())
        log.info(
            "group %s: generation %d with %d member(s), protocol %s, leader %s",
            group.group_id, group.generation, len(group.members), group.protocol_name, group.leader_id,
        )
        everyone = group.current_member_metadata()
        for member in group.members.values():
            if member.awaiting_join:
                members = everyone if group.is_leader(member.member_id) else []
                self._answer_join(member, self._join_result(group, member.member_id, members))
                member.is_new = False
                self._schedule_heartbeat(group, member)
        group.pending_sync = set(group.members)
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._sync_expired, group, group.generation
        )

    def _sync_expired(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation or group.state not in (Completing, Stable) or not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for member_id in late:
            member = group.remove(member_id)
            if member is not None:
                self._answer_join(member, JoinResult(ErrorCode.unknown_member_id, member_id))
                self._answer_sync(member, SyncResult(ErrorCode.unknown_member_id))
        self._prepare_rebalance(group, f"members {late} sent no SyncGroup within the rebalance timeout")

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.awaiting_sync:
                self._answer_sync(
                    member, SyncResult(error, group.protocol_type, group.protocol_name, member.assignment)
                )
                # its session may have run out while it waited; count from now
                self._schedule_heartbeat(group, member)

    @staticmethod
    def _answer_join(member: Member, result: JoinResult) -> None:
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    @staticmethod
    def _answer_sync(member: Member, result: SyncResult) -> None:
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(result)

    @staticmethod
    def _cancel(group: Group, timer_name: str) -> None:
        timer = getattr(group, timer_name)
        if timer is not None:
            timer.cancel()
            setattr(group, timer_name, None)

    # sessions -----------------------------------------------------------------
    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = asyncio.get_running_loop().call_later(
            timeout / 1000, self._session_expired, group, member
        )

    def _session_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if (member.awaiting_join and not member.is_new) or member.awaiting_sync:
            self._schedule_heartbeat(group, member)  # parked in a rebalance: the rebalance timers rule
            return
        log.info("member %s of group %s: session timed out", member.member_id, group.group_id)
        self._remove_member_and_update(group, member, f"member {member.member_id} session expired")

    def _remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        self._answer_join(member, JoinResult(ErrorCode.unknown_member_id, ""))
        self._answer_sync(member, SyncResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.state in (Stable, Completing):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(Preparing):
            self._try_complete_join(group)

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
        error = ErrorCode.none
        if not group_id:
            error = ErrorCode.invalid_group_id
        elif group is None:
            error = ErrorCode.unknown_member_id
        elif group.is_(Dead):
            error = ErrorCode.coordinator_not_available
        elif (member_error := self._member_error(group, member_id, instance_id)) is not None:
            error = member_error
        elif generation != group.generation:
            error = ErrorCode.illegal_generation
        elif (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            error = ErrorCode.inconsistent_group_protocol
        elif group.is_(Empty):
            error = ErrorCode.unknown_member_id
        elif group.is_(Preparing):
            error = ErrorCode.rebalance_in_progress
        if error != ErrorCode.none or group is None:
            answer.set_result(SyncResult(error))
            return answer
        member = group.members[member_id]
        self._remove_pending_sync(group, member_id)
        if group.is_(Stable):
            answer.set_result(SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member)
            return answer
        # CompletingRebalance: park until the leader's assignment arrives
        self._answer_sync(member, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = answer
        if group.is_leader(member_id):
            missing = [m for m in group.members if m not in assignments]
            if missing:
                log.warning("group %s generation %d: empty assignment for %s", group_id, generation, missing)
            for m in group.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b""))
            self._propagate_assignment(group, ErrorCode.none)
            group.transition(Stable, self._clock())
            log.info("group %s is stable at generation %d", group_id, group.generation)
            self._save(group_id)
        return answer

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel(group, "sync_timer")

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
        if group.is_(Dead):
            return ErrorCode.coordinator_not_available
        if (member_error := self._member_error(group, member_id, instance_id)) is not None:
            return member_error
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.is_(Empty):
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(group, group.members[member_id])
        if group.is_(Preparing):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

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
        if group.is_(Dead):
            return ErrorCode.coordinator_not_available, []
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # administrative removal of a static member by its instance id
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                member_id = current
            elif member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                self._try_complete_join(group)
                errors.append(ErrorCode.none)
                continue
            elif (member_error := self._member_error(group, member_id, instance_id)) is not None:
                errors.append(member_error)
                continue
            log.info("member %s leaves group %s", member_id, group_id)
            self._remove_member_and_update(group, group.members[member_id], f"member {member_id} left")
            errors.append(ErrorCode.none)
        self._save(group_id)
        return ErrorCode.none, errors

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
        if group.is_(Dead):
            return ErrorCode.coordinator_not_available
        if generation < 0 and group.is_(Empty):
            return ErrorCode.none  # offsets only: admin tools and consumers without group management
        if (member_error := self._member_error(group, member_id, instance_id)) is not None:
            return member_error
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.is_(Completing):
            return ErrorCode.rebalance_in_progress
        self._schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.none

    async def commit(self, group_id: str, cursors: Sequence[tuple[str, Cursor]]) -> None:
        await self.offsets.commit(group_id, cursors)

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """Topics the members of a consumer group subscribe to; None when unknown."""
        group = self.groups.get(group_id)
        if group is None or group.protocol_type != CONSUMER_PROTOCOL_TYPE or group.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in group.members.values():
            try:
                found = subscribed_topics(member.metadata(group.protocol_name))
            except KeyError:
                return None
            if found is None:
                return None
            topics |= found
        return topics

    def _topic_keys(self, names: set[str]) -> set[tuple[str, str]]:
        """(stream, topic) of Kafka topic names in any of their spellings (plain, /path:topic, alias)."""
        keys = set()
        for name in names:
            try:
                keys.add(split_name(name, self.offsets.store.default_stream))
            except TopicNameError:
                continue
        return keys

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
        for group in self._all_groups():
            cursors = self.offsets.all(group.group_id)
            expired: list[tuple[str, str, int]] = []
            if group.protocol_type is not None and group.is_(Empty):
                if now - group.state_timestamp_ms >= retention:
                    expired = [(s, c.topic, c.partition) for s, c in cursors]
            elif group.protocol_type is None:
                expired = [(s, c.topic, c.partition) for s, c in cursors if now - c.commit_time_ms >= retention]
            elif group.is_(Stable) and (subscribed := self.subscribed_topics(group.group_id)) is not None:
                kept = self._topic_keys(subscribed)
                expired = [
                    (s, c.topic, c.partition) for s, c in cursors
                    if (s, c.topic) not in kept and now - c.commit_time_ms >= retention
                ]
            if expired:
                await self.offsets.delete(group.group_id, expired)
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
        kept = self._topic_keys(self.consumer.subscribed_topic_names(group_id) or set())
        expired = [
            (s, c.topic, c.partition) for s, c in self.offsets.all(group_id)
            if (s, c.topic) not in kept and now - c.commit_time_ms >= retention
        ]
        if expired:
            await self.offsets.delete(group_id, expired)
            log.info("consumer group %s: %d committed offset(s) expired", group_id, len(expired))
        if not self.offsets.has_offsets(group_id) and self.consumer.drop_if_empty(group_id):
            self._save(group_id)
        return len(expired)

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
                await self.offsets.delete(group_id)
            return error
        if group_id in self.consumer.groups:
            error = self.consumer.delete(group_id)
            if error == ErrorCode.none:
                self._save(group_id)
                await self.offsets.delete(group_id)
            return error
        group = self._group(group_id)
        if group is None or group.is_(Dead):
            return ErrorCode.group_id_not_found
        if not group.is_(Empty):
            return ErrorCode.non_empty_group
        group.transition(Dead, self._clock())
        self.groups.pop(group_id, None)
        self._save(group_id)
        await self.offsets.delete(group_id)
        log.info("group %s deleted", group_id)
        return ErrorCode.none

