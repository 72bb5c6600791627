"""Share group membership (ShareGroupHeartbeat), after Kafka 4.1's GroupMetadataManager share paths.

A share group has no reconciliation: records, not partitions, are what
members hold, so a member may be given a partition at once even while
others read it too. Each heartbeat may join (epoch 0, the client makes its
member id), update the subscription, or leave (epoch -1). The group epoch
moves when membership, subscriptions or the subscribed topics change; the
target assignment is then recomputed (`simple_assign`, Kafka's
SimpleAssignor: each partition to ceil(members / partitions) members) and
every member takes it with the new epoch at its next heartbeat. Members
that stop heartbeating are fenced after the session timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from ..groups.assignors import Assignment

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
ASSIGNOR = "simple"


class ShareHeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    assigned: Assignment = dataclasses.field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None


@dataclasses.dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = dataclasses.field(default_factory=dict)
    target: dict[str, Assignment] = dataclasses.field(default_factory=dict)
    subscribed: dict[uuid.UUID, tuple[str, int]] = dataclasses.field(default_factory=dict)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        return "Stable"  # every member takes its target at once: never Reconciling


@dataclasses.dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


@dataclasses.dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None


def simple_assign(members: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """Kafka's SimpleAssignor balance: a partition is shared by ceil(M / P) members, a member gets
    an even share of the P * sharing slots; members only get partitions of topics they subscribe to."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    ordered = sorted(members)
    if not ordered:
        return {}
    slots = [(topic, p) for topic in sorted(partitions) for p in range(partitions[topic])]
    if not slots:
        return {m: {} for m in ordered}
    sharing = -(-len(ordered) // len(slots))
    cursor = 0
    for topic, p in slots:
        given = 0
        tried = 0
        while given < sharing and tried < len(ordered):
            member = ordered[cursor % len(ordered)]
            cursor += 1
            tried += 1
            if topic in members[member]:
                out[member].setdefault(topic, set()).add(p)
                given += 1
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


class ShareGroupCoordinator:
    def __init__(
        self,
        session_timeout_ms: Callable[[str], int],
        heartbeat_interval_ms: Callable[[str], int],
        topics: Callable[[tuple[str, ...]], dict[uuid.UUID, tuple[str, int]]],
        is_other_group: Callable[[str], bool],
        on_member_gone: Callable[[str, str], None],
        max_size: int = 200,
    ) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self._session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._topics = topics  # subscribed names -> {topic id: (name, partitions)}
        self._is_other_group = is_other_group  # a classic or consumer group has this id
        self._on_member_gone = on_member_gone  # (group, member): its share sessions end
        self.max_size = max_size

    def close(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.session_timer is not None:
                    member.session_timer.cancel()

    def heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except ShareHeartbeatError as exc:
            return ShareHeartbeatResult(exc.code, str(exc))

    @staticmethod
    def _validate(req: ShareHeartbeat) -> None:
        invalid = ErrorCode.invalid_request
        if not req.group_id.strip():
            raise ShareHeartbeatError(invalid, "GroupId can't be empty.")
        if not req.member_id.strip():
            raise ShareHeartbeatError(invalid, "MemberId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise ShareHeartbeatError(invalid, "RackId can't be empty.")
        if req.member_epoch == 0 and not req.subscribed_topic_names:
            raise ShareHeartbeatError(invalid, "SubscribedTopicNames cannot be null or empty when MemberEpoch is 0.")
        if req.member_epoch < LEAVE_EPOCH:
            raise ShareHeartbeatError(invalid, "MemberEpoch is invalid.")

    def _heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            if self._is_other_group(req.group_id):
                raise ShareHeartbeatError(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a share group.")
            if req.member_epoch != 0:
                raise ShareHeartbeatError(ErrorCode.unknown_member_id,
                                          f"Member {req.member_id} is not a member of group {req.group_id}.")
            group = self.groups[req.group_id] = ShareGroup(req.group_id)
        member = group.members.get(req.member_id)
        if member is None:
            if req.member_epoch != 0:
                raise ShareHeartbeatError(ErrorCode.unknown_member_id,
                                          f"Member {req.member_id} is not a member of group {req.group_id}.")
            if len(group.members) >= self.max_size:
                raise ShareHeartbeatError(ErrorCode.group_max_size_reached,
                                          f"The share group has reached its maximum capacity of {self.max_size} members.")
            member = ShareMember(req.member_id)
            log.info("member %s joins share group %s", req.member_id, req.group_id)
        elif req.member_epoch != member.member_epoch and req.member_epoch != 0:
            raise ShareHeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a different member epoch ({req.member_epoch}) than the one known by "
                f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        bump = req.member_id not in group.members or group.group_epoch == 0
        if req.subscribed_topic_names is not None and tuple(req.subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(req.subscribed_topic_names)
            bump = True
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        group.members[member.member_id] = member
        subscribed = self._topics(self._subscribed_names(group))
        if subscribed != group.subscribed:
            group.subscribed = subscribed
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        self._schedule_session_timeout(group, member)
        target = group.target.get(member.member_id, {})
        changed = req.member_epoch == 0 or member.member_epoch != group.assignment_epoch or target != member.assigned
        member.member_epoch, member.assigned = group.assignment_epoch, target
        return ShareHeartbeatResult(
            member_id=member.member_id, member_epoch=member.member_epoch,
            assignment=member.assigned if changed else None,
        )

    @staticmethod
    def _subscribed_names(group: ShareGroup) -> tuple[str, ...]:
        return tuple(sorted({n for m in group.members.values() for n in m.subscribed_topic_names}))

    def _assign(self, group: ShareGroup) -> None:
        by_name = {name: topic for topic, (name, _) in group.subscribed.items()}
        wants = {
            m.member_id: frozenset(by_name[n] for n in m.subscribed_topic_names if n in by_name)
            for m in group.members.values()
        }
        group.target = simple_assign(wants, {t: count for t, (_, count) in group.subscribed.items()})
        group.assignment_epoch = group.group_epoch
        log.info("share group %s: target assignment for epoch %d over %d member(s)",
                 group.group_id, group.group_epoch, len(group.members))

    def _leave(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None or req.member_id not in group.members:
            raise ShareHeartbeatError(ErrorCode.unknown_member_id,
                                      f"Member {req.member_id} is not a member of group {req.group_id}.")
        log.info("member %s left share group %s", req.member_id, req.group_id)
        self.fence(group, req.member_id)
        return ShareHeartbeatResult(member_id=req.member_id, member_epoch=LEAVE_EPOCH)

    def fence(self, group: ShareGroup, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is None:
            return
        if member.session_timer is not None:
            member.session_timer.cancel()
        group.target.pop(member_id, None)
        group.group_epoch += 1
        group.subscribed = self._topics(self._subscribed_names(group))
        self._on_member_gone(group.group_id, member_id)

    def _schedule_session_timeout(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            self._session_timeout_ms(group.group_id) / 1000, self._session_expired, group.group_id, member.member_id)

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and member_id in group.members:
            group.members[member_id].session_timer = None
            log.info("member %s of share group %s: session timed out", member_id, group_id)
            self.fence(group, member_id)

    def unload(self, elsewhere: Callable[[str], bool]) -> None:
        """Forget the groups another broker coordinates now (this one lost their __consumer_offsets
        partition): their members heartbeat there, and no session timer left here may fence them."""
        for group_id in [g for g in self.groups if elsewhere(g)]:
            for member in self.groups.pop(group_id).members.values():
                if member.session_timer is not None:
                    member.session_timer.cancel()
            log.info("share group %s: coordinated by another broker now; unloaded", group_id)

    # admin ------------------------------------------------------------------------
    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none
