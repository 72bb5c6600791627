"""One KIP-1071 Streams group: epochs, members, the task assignor and reconciliation.

Pure bookkeeping as in Kafka's StreamsGroup, StreamsGroupMember,
StickyTaskAssignor and CurrentAssignmentBuilder. A task is a subtopology's
partition; a member holds tasks as active, standby or warm-up. The group
epoch moves when members come or go or the topology's task counts change;
the target assignment is computed for a group epoch (active tasks balanced
over members and sticky to their owners, standby tasks on other processes
than the task's active one); each member then walks to its target as in
KIP-848: tasks to revoke first (the member keeps its epoch), then the new
epoch with the tasks that are free. An active task is never held by two
members at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping
from typing import ClassVar

from .heartbeat_group import HeartbeatMember
from .streams_topology import Topology

ACTIVE, STANDBY, WARMUP = "active", "standby", "warmup"
Task = tuple[str, str, int]  # (role, subtopology id, partition)
Tasks = frozenset[Task]
NO_TASKS: Tasks = frozenset()


class StreamsGroupState(str, enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


class MemberState(enum.Enum):
    STABLE = "STABLE"
    UNREVOKED_TASKS = "UNREVOKED_TASKS"  # waits for the member to give tasks up
    UNRELEASED_TASKS = "UNRELEASED_TASKS"  # waits for other members to give active tasks up


@dataclasses.dataclass(slots=True)
class StreamsMember(HeartbeatMember):
    member_id: str
    process_id: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    topology_epoch: int = 0
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Tasks = NO_TASKS
    pending_revocation: Tasks = NO_TASKS
    reported: Tasks = NO_TASKS  # what the member last said it owns (it resends only changes)
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None

    STABLE: ClassVar[MemberState] = MemberState.STABLE


def by_role(tasks: Iterable[Task], role: str) -> dict[str, list[int]]:
    """subtopology id -> sorted partitions of the tasks in one role."""
    out: dict[str, list[int]] = {}
    for r, sub, p in tasks:
        if r == role:
            out.setdefault(sub, []).append(p)
    return {sub: sorted(parts) for sub, parts in sorted(out.items())}


class StreamsGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.topology: Topology | None = None
        self.tasks: dict[str, int] = {}  # subtopology id -> task count, as last configured
        self.members: dict[str, StreamsMember] = {}
        self.target: dict[str, Tasks] = {}
        self.standbys = 0  # standby copies of each task the target assignment was computed with
        self.active_owner: dict[tuple[str, int], str] = {}  # active tasks held or pending revocation
        self.state_timestamp_ms = now_ms

    def __repr__(self) -> str:
        return f"<StreamsGroup {self.group_id} epoch {self.group_epoch} {len(self.members)} members>"

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or not self.tasks:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def put(self, member: StreamsMember) -> None:
        """Add or update a member, keeping active-task ownership in step with its tasks."""
        self._release(member.member_id)
        self.members[member.member_id] = member
        for role, sub, p in member.assigned | member.pending_revocation:
            if role == ACTIVE:
                self.active_owner[(sub, p)] = member.member_id

    def remove(self, member_id: str) -> StreamsMember | None:
        self._release(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timers()
        self.target.pop(member_id, None)
        return member

    def _release(self, member_id: str) -> None:
        member = self.members.get(member_id)
        if member is None:
            return
        for role, sub, p in member.assigned | member.pending_revocation:
            if role == ACTIVE and self.active_owner.get((sub, p)) == member_id:
                del self.active_owner[(sub, p)]


def assign_tasks(
    members: Mapping[str, StreamsMember], tasks: Mapping[str, int], previous: Mapping[str, Tasks], standbys: int,
) -> dict[str, Tasks]:
    """The target assignment: active tasks balanced and sticky, then `standbys` copies of each on other processes."""
    if not members:
        return {}
    order = sorted(members)
    out: dict[str, set[Task]] = {m: set() for m in order}
    all_tasks = [(sub, p) for sub in sorted(tasks) for p in range(tasks[sub])]
    _place_active(order, all_tasks, previous, out)
    if standbys > 0:
        _place_standby(members, order, all_tasks, previous, standbys, out)
    return {m: frozenset(t) for m, t in out.items()}


def _place_active(order: list[str], all_tasks: list[tuple[str, int]], previous: Mapping[str, Tasks],
                  out: dict[str, set[Task]]) -> None:
    capacity = math.ceil(len(all_tasks) / len(order)) if all_tasks else 0
    prev_owner = {(sub, p): m for m, held in previous.items() for role, sub, p in held if role == ACTIVE and m in out}
    unplaced = []
    for task in all_tasks:
        owner = prev_owner.get(task)
        if owner is not None and len(out[owner]) < capacity:
            out[owner].add((ACTIVE, *task))
        else:
            unplaced.append(task)
    for task in unplaced:
        least = min(order, key=lambda m: (len(out[m]), order.index(m)))
        out[least].add((ACTIVE, *task))


def _place_standby(members: Mapping[str, StreamsMember], order: list[str], all_tasks: list[tuple[str, int]],
                   previous: Mapping[str, Tasks], standbys: int, out: dict[str, set[Task]]) -> None:
    active_of = {(sub, p): m for m, held in out.items() for role, sub, p in held if role == ACTIVE}
    had = {m: {(sub, p) for role, sub, p in held if role == STANDBY} for m, held in previous.items()}
    for task in all_tasks:
        used = {members[active_of[task]].process_id}
        for _ in range(standbys):
            candidates = [m for m in order if members[m].process_id not in used]
            if not candidates:
                break  # fewer processes than copies: Kafka leaves the rest unassigned too
            chosen = min(candidates, key=lambda m: (task not in had.get(m, ()), len(out[m]), order.index(m)))
            out[chosen].add((STANDBY, *task))
            used.add(members[chosen].process_id)


def reconcile(group: StreamsGroup, member: StreamsMember, target_epoch: int, target: Tasks,
              owned: Tasks) -> StreamsMember:
    """The member's next step towards its target (Kafka's CurrentAssignmentBuilder); a new object or `member`."""
    if member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    if member.state is MemberState.UNREVOKED_TASKS and owned & member.pending_revocation:
        return member
    keep = member.assigned & target
    revoke = member.assigned - target
    if revoke and owned & revoke:
        return dataclasses.replace(member, state=MemberState.UNREVOKED_TASKS, assigned=keep, pending_revocation=revoke,
                                   previous_member_epoch=member.member_epoch)
    new = set()
    unreleased = False
    for task in target - keep:
        role, sub, p = task
        owner = group.active_owner.get((sub, p))
        if role == ACTIVE and owner is not None and owner != member.member_id:
            unreleased = True  # another member still holds it, or has yet to revoke it
        else:
            new.add(task)
    return dataclasses.replace(
        member, state=MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE,
        member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
        assigned=keep | frozenset(new), pending_revocation=NO_TASKS,
    )
