"""The classic group coordinator: Kafka's JoinGroup/SyncGroup state machine.

This broker coordinates every group. The behaviour follows Apache Kafka's
classic protocol (GroupCoordinator / ClassicGroup): the initial rebalance
delay, rebalance and session timeouts, generation fencing, static members
(group.instance.id), the MEMBER_ID_REQUIRED round trip, the leader kept
across generations while it rejoins. Assignments are relayed as bytes, so
eager and cooperative assignors both work.

Everything runs on the broker's event loop: state changes happen between
awaits, so no locks are needed. Membership lives in memory (clients
rejoin after a restart); committed offsets are cursors in the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode

from storage import Store

from ..config import BrokerConfig
from .consumer_protocol import subscribed_topics
from .offsets import GroupOffsets
from .state import Group, GroupState, JoinResult, Member, Protocols, SyncResult

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
CONSUMER_PROTOCOL_TYPE = "consumer"

E = GroupState


def now_ms() -> int:
    return int(time.time() * 1000)


def _done(value: object) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


class GroupCoordinator:
    def __init__(
        self, config: BrokerConfig, store: Store, resolve_topic: Callable[[str], tuple[str, str] | None]
    ) -> None:
        """`resolve_topic` maps a Kafka topic name to (stream, topic), None if invalid."""
        self.config = config
        self._resolve_topic = resolve_topic
        self.offsets = GroupOffsets(store)
        self.groups: dict[str, Group] = {}
        self._expiry_task: asyncio.Task[None] | None = None

    # lifetime -------------------------------------------------------------------

    def start(self) -> None:
        """Know the groups that have cursors (Empty, as Kafka loads them) and start expiry."""
        for group_id in self.offsets.group_ids():
            group = self.groups.setdefault(group_id, Group(group_id, now_ms()))
            group.state_since_ms = None  # when it became empty is not stored
        self._expiry_task = asyncio.create_task(self._expire_periodically(), name="offset expiry")

    async def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            try:
                await self._expiry_task
            except asyncio.CancelledError:
                pass
            self._expiry_task = None
        for group in self.groups.values():
            group.cancel_timers()

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def _get_or_create(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, now_ms())
        return group

    # timers -----------------------------------------------------------------------

    def _later(self, delay_ms: int, callback: object, *args: object) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)  # type: ignore[arg-type]

    def _schedule_expiry(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        member.cancel_expiry()
        member.expiry = self._later(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            self._on_member_expired, group, member,
        )

    def _on_member_expired(self, group: Group, member: Member) -> None:
        member.expiry = None
        if group.members.get(member.member_id) is not member or self.groups.get(group.group_id) is not group:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return  # members in a rebalance are covered by its timeout
        log.info(
            "group %s: member %s expired after %d ms without a heartbeat",
            group.group_id, member.member_id,
            NEW_MEMBER_JOIN_TIMEOUT_MS if member.is_new else member.session_timeout_ms,
        )
        self._remove_member_and_update(group, member, "session timeout")

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is None:
            return
        log.info("group %s: pending member %s never rejoined", group.group_id, member_id)
        self._maybe_complete_join(group)

    # rebalancing ------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(E.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        delay = self.config.group_initial_rebalance_delay_ms
        if group.is_(E.EMPTY):
            group.initial_join = True
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self._later(delay, self._on_initial_join_timer, group, remaining)
        else:
            group.initial_join = False
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._on_join_timeout, group)
        log.info(
            "group %s: preparing to rebalance in state %s with old generation %d (%s)",
            group.group_id, group.state.value, group.generation, reason,
        )
        group.transition(E.PREPARING_REBALANCE, now_ms())

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(E.STABLE, E.COMPLETING_REBALANCE, E.EMPTY):
            self._prepare_rebalance(group, reason)

    def _on_initial_join_timer(self, group: Group, remaining_ms: int) -> None:
        group.join_timer = None
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = self._later(
                delay, self._on_initial_join_timer, group, max(remaining_ms - delay, 0)
            )
            return
        self._complete_join(group)

    def _on_join_timeout(self, group: Group) -> None:
        group.join_timer = None
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        """Finish the join phase early once every member has rejoined (not during the initial delay)."""
        if group.is_(E.PREPARING_REBALANCE) and not group.initial_join and group.all_joined():
            if group.join_timer is not None:
                group.join_timer.cancel()
                group.join_timer = None
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if self.groups.get(group.group_id) is not group or not group.is_(E.PREPARING_REBALANCE):
            return
        for member in [m for m in group.members.values() if not m.awaiting_join and m.instance_id is None]:
            log.info("group %s: removing member %s which did not rejoin", group.group_id, member.member_id)
            group.remove(member.member_id)
        if not group.elect_joined_leader() and group.members:
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            group.initial_join = False
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._on_join_timeout, group)
            return
        group.generation += 1
        group.initial_join = False
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = None
            group.transition(E.EMPTY, now_ms())
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = self._subscribed_topics(group)
        group.transition(E.COMPLETING_REBALANCE, now_ms())
        log.info(
            "group %s: stabilized generation %d (protocol %s) with %d member(s), leader %s",
            group.group_id, group.generation, group.protocol_name, len(group.members), group.leader_id,
        )
        for member in group.members.values():
            member.answer_join(group.join_result(member, with_members=group.is_leader(member.member_id)))
            self._schedule_expiry(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = self._later(group.rebalance_timeout_ms(), self._on_sync_timeout, group)

    def _on_sync_timeout(self, group: Group) -> None:
        group.sync_timer = None
        if not group.is_(E.COMPLETING_REBALANCE, E.STABLE) or not group.pending_sync:
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            member = group.remove(member_id)
            if member is not None:
                member.answer_join(JoinResult(ErrorCode.unknown_member_id, member_id))
                member.answer_sync(SyncResult(ErrorCode.unknown_member_id))
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _subscribed_topics(self, group: Group) -> frozenset[str] | None:
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for member in group.members.values():
            found = subscribed_topics(member.metadata(group.protocol_name))
            if found is None:
                return None
            topics |= found
        return frozenset(topics)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        for member in group.members.values():
            result = SyncResult(
                error, member.assignment if ok else b"",
                group.protocol_type if ok else None, group.protocol_name if ok else None,
            )
            if member.answer_sync(result):
                self._schedule_expiry(group, member)

    def _remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        member.answer_join(JoinResult(ErrorCode.unknown_member_id, member.member_id))
        member.answer_sync(SyncResult(ErrorCode.unknown_member_id))
        group.remove(member.member_id)
        if group.is_(E.STABLE, E.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_(E.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # JoinGroup --------------------------------------------------------------------

    def join(
        self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str, protocols: Protocols,
        require_known_member_id: bool, support_skip_assignment: bool,
    ) -> asyncio.Future[JoinResult]:
        if not group_id:
            return _done(JoinResult(ErrorCode.invalid_group_id, member_id))
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return _done(JoinResult(ErrorCode.invalid_session_timeout, member_id))
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                return _done(JoinResult(ErrorCode.unknown_member_id, member_id))
            group = self._get_or_create(group_id)
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if not self._accept_joining_member(group, member_id):
            group_removed = group.remove(member_id)
            if group_removed is not None:
                group_removed.answer_join(JoinResult(ErrorCode.group_max_size_reached, ""))
                self._maybe_complete_join(group)
            future.set_result(JoinResult(ErrorCode.group_max_size_reached, ""))
            return future
        names = [name for name, _ in protocols]
        if group.is_(E.DEAD):
            future.set_result(JoinResult(ErrorCode.coordinator_not_available, member_id))
        elif not group.supports(protocol_type, names):
            future.set_result(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
        elif unknown:
            new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
            if instance_id is not None:
                old_id = group.static_member_id(instance_id)
                if old_id is not None:
                    self._update_static_member(
                        group, old_id, new_id, instance_id, protocols, rebalance_timeout_ms,
                        session_timeout_ms, future, support_skip_assignment,
                    )
                else:
                    self._add_member(
                        group, new_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, protocols, future,
                    )
            elif require_known_member_id:
                group.pending_members[new_id] = self._later(
                    session_timeout_ms, self._on_pending_member_expired, group, new_id
                )
                future.set_result(JoinResult(ErrorCode.member_id_required, new_id))
            else:
                self._add_member(
                    group, new_id, None, client_id, client_host, rebalance_timeout_ms,
                    session_timeout_ms, protocol_type, protocols, future,
                )
        elif member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            self._add_member(
                group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, future,
            )
        else:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                future.set_result(JoinResult(error, member_id))
            else:
                self._current_member_join(
                    group, group.members[member_id], protocols, rebalance_timeout_ms,
                    session_timeout_ms, future,
                )
        if group.is_(E.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        return future

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.group_max_size
        if group.is_(E.EMPTY, E.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_(E.PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) or group.awaiting_join_count < limit
        return member is not None or len(group.members) < limit

    def _validate_member(self, group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: static id mapped to this member, member known."""
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return None

    def _add_member(
        self, group: Group, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: Protocols,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = Member(
            member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, protocol_type, protocols,
        )
        member.is_new = True
        if group.is_(E.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member, future)
        self._schedule_expiry(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member(
        self, member: Member, protocols: Protocols, rebalance_timeout_ms: int, session_timeout_ms: int,
        future: asyncio.Future[JoinResult] | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        # a JoinGroup superseding one still pending: the old request is answered, not left hanging
        member.answer_join(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.join_future = future

    def _current_member_join(
        self, group: Group, member: Member, protocols: Protocols, rebalance_timeout_ms: int,
        session_timeout_ms: int, future: asyncio.Future[JoinResult],
    ) -> None:
        def rebalance(reason: str) -> None:
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
            self._maybe_prepare_rebalance(group, reason)

        is_leader = group.is_leader(member.member_id)
        if group.is_(E.PREPARING_REBALANCE):
            rebalance(f"member {member.member_id} joining during {group.state.value}")
        elif group.is_(E.COMPLETING_REBALANCE):
            if member.matches(protocols):
                future.set_result(group.join_result(member, with_members=is_leader))
            else:
                rebalance(f"member {member.member_id} changed its metadata")
        elif group.is_(E.STABLE):
            if is_leader or not member.matches(protocols):
                # the leader rejoining forces a rebalance (e.g. for topic metadata changes)
                rebalance(f"{'leader' if is_leader else 'member'} {member.member_id} rejoined")
            else:
                future.set_result(group.join_result(member, with_members=False))
        else:
            future.set_result(JoinResult(ErrorCode.unknown_member_id, member.member_id))

    def _update_static_member(
        self, group: Group, old_id: str, new_id: str, instance_id: str, protocols: Protocols,
        rebalance_timeout_ms: int, session_timeout_ms: int, future: asyncio.Future[JoinResult],
        support_skip_assignment: bool,
    ) -> None:
        """A static member rejoining with an unknown member id replaces its old incarnation."""
        old_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_expiry(group, member)
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        log.info("group %s: static member %s rejoined as %s", group.group_id, instance_id, new_id)
        if group.is_(E.STABLE):
            if group.select_protocol() == group.protocol_name:
                # no rebalance: the member keeps its assignment. A leader on JoinGroup v9+
                # gets the members to watch metadata with skip_assignment; older clients
                # are told the old leader id so they act as followers.
                is_leader = group.is_leader(new_id)
                skip = is_leader and support_skip_assignment
                member.answer_join(
                    group.join_result(
                        member, with_members=skip, leader=None if support_skip_assignment else old_leader,
                        skip_assignment=skip,
                    )
                )
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed the protocol")
        elif group.is_(E.COMPLETING_REBALANCE):
            # the leader may be assigning under the old member id: start over
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during sync")

    # SyncGroup --------------------------------------------------------------------

    def sync(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
    ) -> asyncio.Future[SyncResult]:
        if not group_id:
            return _done(SyncResult(ErrorCode.invalid_group_id))
        group = self.groups.get(group_id)
        if group is None:
            return _done(SyncResult(ErrorCode.unknown_member_id))
        if group.is_(E.DEAD):
            return _done(SyncResult(ErrorCode.coordinator_not_available))
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return _done(SyncResult(error))
        if generation != group.generation:
            return _done(SyncResult(ErrorCode.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return _done(SyncResult(ErrorCode.inconsistent_group_protocol))
        member = group.members[member_id]
        if group.is_(E.EMPTY):
            return _done(SyncResult(ErrorCode.unknown_member_id))
        if group.is_(E.PREPARING_REBALANCE):
            return _done(SyncResult(ErrorCode.rebalance_in_progress))
        if group.is_(E.STABLE):
            group.pending_sync.discard(member_id)
            self._schedule_expiry(group, member)
            return _done(
                SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
            )
        # CompletingRebalance: wait for the leader's assignment
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.answer_sync(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_future = future
        group.pending_sync.discard(member_id)
        if group.is_leader(member_id):
            unknown = set(assignments) - set(group.members)
            if unknown:
                log.warning("group %s: leader assigned to unknown members %s", group_id, sorted(unknown))
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            log.info(
                "group %s: assignment received from leader %s for generation %d (%d members)",
                group_id, member_id, group.generation, len(group.members),
            )
            self._propagate_assignment(group, ErrorCode.none)
            group.transition(E.STABLE, now_ms())
        return future

    # Heartbeat, LeaveGroup -------------------------------------------------------------

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(E.DEAD):
            return ErrorCode.coordinator_not_available
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.is_(E.EMPTY):
            return ErrorCode.unknown_member_id
        self._schedule_expiry(group, group.members[member_id])
        if group.is_(E.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, leaving: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(request error, one error per leaving (member id, instance id))."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in leaving]
        if group.is_(E.DEAD):
            return ErrorCode.coordinator_not_available, []
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # administrative removal by group.instance.id
                current = group.static_member_id(instance_id)
                if current is None:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                self._remove_member_and_update(group, group.members[current], "removed by instance id")
                errors.append(ErrorCode.none)
            elif member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                self._maybe_complete_join(group)
                errors.append(ErrorCode.none)
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error is None:
                    self._remove_member_and_update(group, group.members[member_id], "left the group")
                    errors.append(ErrorCode.none)
                else:
                    errors.append(error)
        return ErrorCode.none, errors

    # offsets ------------------------------------------------------------------------

    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """Whether this member may commit now; creates the group of a simple consumer."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                return ErrorCode.illegal_generation
            group = self._get_or_create(group_id)
        if group.is_(E.DEAD):
            return ErrorCode.coordinator_not_available
        if generation >= 0 or member_id != "" or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation != group.generation:
                return ErrorCode.illegal_generation
        elif not group.is_(E.EMPTY):
            return ErrorCode.unknown_member_id  # only members commit for a non-empty group
        if group.is_(E.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        member = group.members.get(member_id)
        if member is not None and group.is_(E.STABLE, E.PREPARING_REBALANCE):
            self._schedule_expiry(group, member)
        return ErrorCode.none

    def list_groups(self) -> list[Group]:
        return list(self.groups.values())

    async def delete_group(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or group.is_(E.DEAD):
            return ErrorCode.group_id_not_found
        if not group.is_(E.EMPTY):
            return ErrorCode.non_empty_group
        group.transition(E.DEAD, now_ms())
        group.cancel_timers()
        del self.groups[group_id]
        await self.offsets.delete_group(group_id)
        log.info("group %s deleted", group_id)
        return ErrorCode.none

    # offset expiry ----------------------------------------------------------------------

    async def _expire_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            try:
                await self.expire_offsets()
            except Exception:  # noqa: BLE001 - try again at the next interval
                log.exception("offset expiry failed")

    async def expire_offsets(self, at_ms: int | None = None) -> int:
        """Kafka's offsets.retention.minutes: drop old cursors of empty groups
        (and of topics a consumer group no longer subscribes to); forget groups left
        with nothing. Returns how many cursors were removed."""
        now = now_ms() if at_ms is None else at_ms
        retention = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group_id in sorted(set(self.groups) | self.offsets.group_ids()):
            group = self.groups.get(group_id)
            stored = self.offsets.of_group(group_id)
            if group is None or group.is_(E.EMPTY):
                since = group.state_since_ms if group is not None else None
                expired = [
                    s for s in stored
                    if (since if since is not None else s.cursor.commit_time_ms) + retention <= now
                ]
            elif group.is_(E.STABLE) and group.subscribed_topics is not None:
                subscribed = group.subscribed_topics
                expired = [
                    s for s in stored
                    if s.cursor.commit_time_ms + retention <= now
                    and not self._subscribed(subscribed, s.stream, s.cursor.topic)
                ]
            else:
                expired = []
            if expired:
                await self.offsets.delete(group_id, expired)
                removed += len(expired)
                log.info("group %s: expired %d committed offset(s)", group_id, len(expired))
            self.forget_if_unused(group_id)
        return removed

    def forget_if_unused(self, group_id: str) -> None:
        """An empty group without committed offsets ceases to exist (Kafka: Dead, removed)."""
        group = self.groups.get(group_id)
        if group is not None and group.is_(E.EMPTY) and not self.offsets.has_any(group_id):
            group.transition(E.DEAD, now_ms())
            group.cancel_timers()
            del self.groups[group_id]
            log.info("group %s is empty and has no offsets left: removed", group_id)

    def _subscribed(self, topics: frozenset[str], stream: str, topic: str) -> bool:
        return any(self._resolve_topic(name) == (stream, topic) for name in topics)

    def is_subscribed(self, group: Group, stream: str, topic: str) -> bool:
        """Whether a consumer group's members subscribe to the topic (False when unknown)."""
        topics = group.subscribed_topics
        return topics is not None and self._subscribed(topics, stream, topic)
