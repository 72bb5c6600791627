"""One classic consumer group: its state, generation, leader and members.

Pure bookkeeping, as in Kafka's ClassicGroup/GroupMetadata: which member
joined with which protocols, who leads, which protocol the group settles
on. Timers and answers to clients live in the coordinator.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import uuid
from collections import Counter
from typing import Any


class GroupState(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# the states a group may come from, per Kafka's state machine
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclasses.dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None  # group.instance.id of a static member
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    is_new: bool = False
    join_waiter: asyncio.Future[Any] | None = None
    sync_waiter: asyncio.Future[Any] | None = None
    heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those everyone supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order decides the next leader
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle] = {}  # told MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.join_timer: asyncio.TimerHandle | None = None
        self.initial_delay_running = False
        self.sync_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"<Group {self.group_id} {self.state.value} gen {self.generation} {len(self.members)} members>"

    # state
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # members
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        timer = self.pending_members.pop(member.member_id, None)
        if timer is not None:
            timer.cancel()

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member came back with a new member id: it keeps its place and assignment."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.is_leader(old_id):
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did.

        False when no member has rejoined (only static members that stay
        until their session ends are left).
        """
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # protocols
    def candidate_protocols(self) -> set[str]:
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update({name for name, _ in member.protocols})
        return {name for name, n in counts.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol with most first-choice votes among those all members support."""
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes.items(), key=lambda item: item[1])[0]

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, metadata) for the leader's JoinGroup answer."""
        assert self.protocol_name is not None
        return [
            (m.member_id, m.instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]
