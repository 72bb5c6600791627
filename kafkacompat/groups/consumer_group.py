"""One KIP-848 consumer group: epochs, members, target assignment and reconciliation.

Pure bookkeeping as in Kafka's ConsumerGroup, ConsumerGroupMember and
CurrentAssignmentBuilder: the group epoch moves whenever membership,
subscriptions or subscribed topics change; the target assignment is
computed for a group epoch; each member then walks from its current
assignment to its target in steps the coordinator hands out on
heartbeats: partitions to revoke first (the member keeps its epoch), then
the new epoch with the partitions that are free. A partition is never
owned by two members at once. Timers and answers live in the coordinator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import uuid
from collections import Counter
from typing import ClassVar

from .assignors import Assignment
from .heartbeat_group import HeartbeatMember

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupState(str, enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waits for the member to give partitions up
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for other members to give partitions up


EMPTY_ASSIGNMENT: dict[uuid.UUID, frozenset[int]] = {}


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicMembership:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer group."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, subscription) in the member's preference order


@dataclasses.dataclass(slots=True)
class ConsumerMember(HeartbeatMember):
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = dataclasses.field(default_factory=dict)
    pending_revocation: Assignment = dataclasses.field(default_factory=dict)
    classic: ClassicMembership | None = None
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None

    STABLE: ClassVar[MemberState] = MemberState.STABLE


def _pairs(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(topic, p) for topic, parts in assignment.items() for p in parts}


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member still reports owning any of `partitions` (None: it did not say)."""
    if owned is None:
        return True
    return bool(_pairs(owned) & _pairs(partitions))


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    """Whether the member reports owning only assigned partitions (None: it did not say, so no)."""
    return owned is not None and _pairs(owned) <= _pairs(assigned)


class ConsumerGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> target assignment
        self.partition_owner: dict[tuple[uuid.UUID, int], str] = {}  # owned or pending revocation
        self._owned_by: dict[str, set[tuple[uuid.UUID, int]]] = {}  # the same, by member
        self._names: set[str] | None = None  # subscribed_names(), until a subscription changes
        self._regexes: set[str] | None = None
        self.subscribed: dict[uuid.UUID, tuple[str, int]] = {}  # topic id -> (name, partitions), last seen
        self.state_timestamp_ms = now_ms  # when it last became Empty (offset expiry)

    def __repr__(self) -> str:
        return f"<ConsumerGroup {self.group_id} epoch {self.group_epoch} {len(self.members)} members>"

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if not member.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for, else the broker's first configured one."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return votes.most_common(1)[0][0] if votes else default

    def subscribed_names(self) -> set[str]:
        """Every topic name some member subscribes to (kept between heartbeats: each one asks)."""
        if self._names is None:
            self._names = {name for m in self.members.values() for name in m.subscribed_topic_names}
        return self._names

    def regexes(self) -> set[str]:
        if self._regexes is None:
            self._regexes = {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}
        return self._regexes

    def _subscriptions_changed(self, before: ConsumerMember | None, after: ConsumerMember | None) -> None:
        if (
            before is None or after is None
            or before.subscribed_topic_names != after.subscribed_topic_names
            or before.subscribed_topic_regex != after.subscribed_topic_regex
        ):
            self._names = self._regexes = None

    # membership ---------------------------------------------------------------
    def put(self, member: ConsumerMember) -> None:
        """Add or update a member, keeping partition ownership in step with its assignment."""
        before = self.members.get(member.member_id)
        if before is not None:
            self._release(member.member_id)
        self._subscriptions_changed(before, member)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        owned = _pairs(member.assigned) | _pairs(member.pending_revocation)
        for key in owned:
            self.partition_owner[key] = member.member_id
        self._owned_by[member.member_id] = owned

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timers()
        self._release(member_id)
        self._subscriptions_changed(member, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def replace_static(self, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member came back under a new member id: it takes over the old one's place.

        It keeps the old member's assignment and target, at epoch 0, so the
        next reconciliation hands the same partitions straight back.
        """
        target = self.target.get(old.member_id)
        self.remove(old.member_id)
        member = dataclasses.replace(
            old, member_id=new_id, member_epoch=0, previous_member_epoch=0,
            state=MemberState.STABLE, pending_revocation={}, session_timer=None, rebalance_timer=None,
        )
        self.put(member)
        if target is not None:
            self.target[new_id] = target
        return member

    def _release(self, member_id: str) -> None:
        for key in self._owned_by.pop(member_id, ()):
            if self.partition_owner.get(key) == member_id:
                del self.partition_owner[key]

    def owner_of(self, topic: uuid.UUID, partition: int) -> str | None:
        return self.partition_owner.get((topic, partition))


def reconcile(
    group: ConsumerGroup, member: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None
) -> ConsumerMember:
    """The member's next step towards its target, as Kafka's CurrentAssignmentBuilder.

    Returns a new member object (the caller stores it with group.put).
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(group, member, member.member_epoch, target_epoch, target, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(group, member, member.member_epoch + 1, target_epoch, target, owned)
    return _next_assignment(group, member, member.member_epoch, target_epoch, target, owned)


def _next_assignment(
    group: ConsumerGroup, member: ConsumerMember, epoch: int, target_epoch: int,
    target: Assignment, owned: Assignment | None,
) -> ConsumerMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    to_assign: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        keep = current & wanted
        gone = current - keep
        new = set()
        for p in wanted - keep:
            owner = group.owner_of(topic, p)
            if owner is not None and owner != member.member_id:
                unreleased = True  # another member still owns it or has yet to revoke it
            else:
                new.add(p)
        if keep:
            assigned[topic] = frozenset(keep)
        if gone:
            revoke[topic] = frozenset(gone)
        if new:
            to_assign[topic] = frozenset(new)
    if revoke and owns_any(owned, revoke):
        return dataclasses.replace(
            member, state=MemberState.UNREVOKED_PARTITIONS, member_epoch=epoch,
            previous_member_epoch=member.member_epoch,
            assigned=assigned, pending_revocation=revoke,
        )
    for topic, parts in to_assign.items():
        assigned[topic] = assigned.get(topic, frozenset()) | parts
    return dataclasses.replace(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        assigned=assigned, pending_revocation={},
    )
