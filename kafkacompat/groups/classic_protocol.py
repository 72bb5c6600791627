"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), after Kafka's GroupCoordinator.

A classic group's rebalance in memory on the broker's event loop: JoinGroup
and SyncGroup answers are futures resolved when the rebalance reaches the
point Kafka would answer; timers enforce session timeouts, rebalance
timeouts and the initial rebalance delay. The group coordinator
(coordinator.py) finds the group (classic, consumer or streams) and hands
the classic ones here; this module knows nothing of the other kinds, of
committed offsets or of the store: it calls `save` when a group's state
changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from ..config import BrokerConfig
from .classic_api import JoinRequest, JoinResult, SyncResult
from .group import Group, GroupState, Member

log = logging.getLogger(__name__)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs

Empty, Preparing, Completing, Stable, Dead = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


class ClassicGroupProtocol:
    def __init__(self, config: BrokerConfig, clock: Callable[[], int], save: Callable[[str], None]) -> None:
        self.config = config
        self._clock = clock
        self._save = save  # queue a group's state for the store after it changed

    # JoinGroup ----------------------------------------------------------------
    def join(self, group: Group, req: JoinRequest, answer: asyncio.Future[JoinResult]) -> None:
        """A JoinGroup to a classic group (created already for a new member): answer now or park it."""
        if not self._accept_joining_member(group, req.member_id):
            # as Kafka: a member refused while the group is full is dropped from it
            refused = group.members.get(req.member_id)
            if refused is not None:
                self._remove_member_and_update(group, refused, "group.max.size reached")
            answer.set_result(JoinResult(ErrorCode.group_max_size_reached, ""))
            return
        if req.member_id == "":
            self._join_new_member(group, req, answer)
        else:
            self._join_current_member(group, req, answer)
        self._try_complete_join(group)
        self._save(req.group_id)

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
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
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
        self.schedule_heartbeat(group, member)
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
                self.schedule_heartbeat(group, member)
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
                self.schedule_heartbeat(group, member)

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
    def schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
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
            self.schedule_heartbeat(group, member)  # parked in a rebalance: the rebalance timers rule
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
        self, group: Group | None, group_id: str, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: Mapping[str, bytes],
        answer: asyncio.Future[SyncResult],
    ) -> None:
        """A SyncGroup to a classic group (None: there is none): answer now or park it for the leader's."""
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
            return
        member = group.members[member_id]
        self._remove_pending_sync(group, member_id)
        if group.is_(Stable):
            answer.set_result(SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment))
            self.schedule_heartbeat(group, member)
            return
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

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel(group, "sync_timer")

    # Heartbeat / LeaveGroup ---------------------------------------------------
    def heartbeat(self, group: Group, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        if group.is_(Dead):
            return ErrorCode.coordinator_not_available
        if (member_error := self._member_error(group, member_id, instance_id)) is not None:
            return member_error
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.is_(Empty):
            return ErrorCode.unknown_member_id
        self.schedule_heartbeat(group, group.members[member_id])
        if group.is_(Preparing):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group: Group, leaving: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, one error per (member id, instance id))."""
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
            log.info("member %s leaves group %s", member_id, group.group_id)
            self._remove_member_and_update(group, group.members[member_id], f"member {member_id} left")
            errors.append(ErrorCode.none)
        self._save(group.group_id)
        return ErrorCode.none, errors

    # OffsetCommit -------------------------------------------------------------
    def validate_commit(self, group: Group, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """Whether a member of a classic group may commit offsets, as Kafka decides it."""
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
        self.schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.none

    # hand-overs ---------------------------------------------------------------
    def stop(self, group: Group, error: ErrorCode) -> None:
        """Stop a group's timers and answer its parked JoinGroup and SyncGroup requests with `error`."""
        for name in ("join_timer", "sync_timer"):
            self._cancel(group, name)
        for timer in group.pending_members.values():
            timer.cancel()
        for member in group.members.values():
            self._answer_join(member, JoinResult(error, member.member_id))
            self._answer_sync(member, SyncResult(error))
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()

    def resume(self, group: Group) -> None:
        """A group loaded or taken back: each member has one session timeout from now to heartbeat."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member)

    def rebalance(self, group: Group, reason: str) -> None:
        self._prepare_rebalance(group, reason)
