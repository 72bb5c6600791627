"""A classic consumer group and its members, as Kafka's ClassicGroup keeps them.

Pure bookkeeping: which members there are, who leads, which protocols they
share, who still owes a JoinGroup or SyncGroup. Timers and the state
machine's transitions are driven by the coordinator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import Counter
from kio.schema.errors import ErrorCode


class GroupState(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# the states each state may be entered from (Kafka's validPreviousStates)
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


@dataclasses.dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata)


@dataclasses.dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference


class Member:
    __slots__ = (
        "member_id", "instance_id", "client_id", "client_host", "rebalance_timeout_ms",
        "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_future",
        "sync_future", "is_new", "expiry",
    )

    def __init__(
        self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_future: asyncio.Future[JoinResult] | None = None
        self.sync_future: asyncio.Future[SyncResult] | None = None
        self.is_new = False
        self.expiry: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def answer_join(self, result: JoinResult) -> bool:
        future, self.join_future = self.join_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def answer_sync(self, result: SyncResult) -> bool:
        future, self.sync_future = self.sync_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_since_ms: int | None = now_ms  # None: loaded from cursors, time unknown
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle] = {}  # MEMBER_ID_REQUIRED, not yet rejoined
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.join_timer: asyncio.TimerHandle | None = None
        self.initial_join = False  # the delayed join is the initial rebalance delay
        self.sync_timer: asyncio.TimerHandle | None = None
        self.subscribed_topics: frozenset[str] | None = None  # None: unknown

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation {self.generation})"

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.state_since_ms = now_ms

    # members ----------------------------------------------------------------

    def add(self, member: Member, join_future: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_future = join_future

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_expiry()
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a rejoining static member a new id; its old id is fenced."""
        member = self.members.pop(old_id)
        member.answer_join(JoinResult(ErrorCode.fenced_instance_id, old_id))
        member.answer_sync(SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_joined(self) -> bool:
        return self.awaiting_join_count == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # protocols ----------------------------------------------------------------

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            all(name in m.protocol_names for m in self.members.values()) for name in names
        )

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        members = list(self.members.values())
        candidates = set(members[0].protocol_names)
        for member in members[1:]:
            candidates &= set(member.protocol_names)
        votes = Counter(member.vote(candidates) for member in members)
        return max(votes, key=lambda name: votes[name])

    def member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple(
            (m.member_id, m.instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    def join_result(self, member: Member, with_members: bool, leader: str | None = None,
                    skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            error=ErrorCode.none,
            member_id=member.member_id,
            generation_id=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=(leader if leader is not None else self.leader_id) or "",
            skip_assignment=skip_assignment,
            members=self.member_metadata() if with_members else (),
        )

    def cancel_timers(self) -> None:
        for handle in (self.join_timer, self.sync_timer, *self.pending_members.values()):
            if handle is not None:
                handle.cancel()
        self.join_timer = self.sync_timer = None
        for member in self.members.values():
            member.cancel_expiry()


@dataclasses.dataclass(frozen=True, slots=True)
class GroupView:
    """What DescribeGroups shows of a group."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[tuple[str, str | None, str, str, bytes, bytes], ...]  # id, instance, client, host, metadata, assignment


def describe_state(group: Group | None) -> GroupView:
    """Kafka's group summary: metadata and assignments only once the group is Stable."""
    if group is None:
        return GroupView(GroupState.DEAD.value, "", "", ())
    stable = group.is_(GroupState.STABLE)
    members = tuple(
        (
            m.member_id, m.instance_id, m.client_id, m.client_host,
            m.metadata(group.protocol_name) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return GroupView(
        group.state.value, group.protocol_type or "", (group.protocol_name or "") if stable else "", members
    )
