"""The server-side assignors of KIP-848 consumer groups: `uniform` and `range`.

They follow Kafka 4.1's UniformAssignor and RangeAssignor: pure functions
from the members' subscriptions (topic ids), their current target
assignments and the topics' partition counts to a new target assignment.
Where Kafka iterates a Java HashMap (member and topic order of the uniform
assignor), members go in member-id order and topics in topic-id order, so
the result is deterministic here; the shape (balance, contiguous chunks,
stickiness) is Kafka's.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

# topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]
TopicKey = Any  # a topic id, or its number while assigning

UNIFORM, RANGE = "uniform", "range"
ASSIGNORS = (UNIFORM, RANGE)


@dataclasses.dataclass(frozen=True, slots=True)
class MemberSpec:
    instance_id: str | None
    topics: frozenset[uuid.UUID]  # subscribed topics that exist
    current: Assignment  # the member's current target assignment, for stickiness


def assign(
    assignor: str, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """The new target assignment of every member (members without partitions map to {}).

    Topics are numbered in topic-id order while assigning: hashing UUIDs
    (done in Python) was most of the time for large groups.
    """
    if not members:
        return {}
    ids = sorted(partitions)
    number = {topic: i for i, topic in enumerate(ids)}
    numbered: dict[frozenset[uuid.UUID], frozenset[int]] = {}  # members mostly share one subscription
    for spec in members.values():
        if spec.topics not in numbered:
            numbered[spec.topics] = frozenset(number[t] for t in spec.topics if t in number)
    specs = {
        member_id: MemberSpec(
            spec.instance_id,
            numbered[spec.topics],
            {number[t]: parts for t, parts in spec.current.items() if t in number},
        )
        for member_id, spec in members.items()
    }
    counts = {number[t]: n for t, n in partitions.items()}
    if assignor == RANGE:
        result = _range(specs, counts)
    elif len({spec.topics for spec in specs.values()}) == 1:
        result = _uniform_homogeneous(specs, counts)
    else:
        result = _uniform_heterogeneous(specs, counts)
    return {member_id: {ids[t]: parts for t, parts in mine.items()} for member_id, mine in result.items()}


def _freeze(assignment: dict[uuid.UUID, set[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}


def _range(members: Mapping[str, MemberSpec], partitions: Mapping[TopicKey, int]) -> dict[str, dict[TopicKey, frozenset[int]]]:
    """Per topic, consecutive ranges to the subscribed members in (instance id, member id) order.

    Static members come first, ordered by instance id, so their ranges
    survive restarts; co-partitioned topics give each member the same
    partition numbers.
    """
    order = sorted(
        members,
        key=lambda m: (0, members[m].instance_id, "") if members[m].instance_id is not None else (1, "", m),
    )
    subscribers: dict[uuid.UUID, int] = {}
    for member_id in order:
        for topic in members[member_id].topics:
            subscribers[topic] = subscribers.get(topic, 0) + 1
    next_start = {topic: 0 for topic in subscribers}
    extra = {topic: partitions[topic] % count for topic, count in subscribers.items()}
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member_id in order:
        mine: dict[uuid.UUID, set[int]] = {}
        for topic in sorted(members[member_id].topics):
            total = partitions[topic]
            start = next_start[topic]
            if start >= total:
                continue
            end = min(start + total // subscribers[topic], total)
            if extra[topic] > 0:
                end += 1
                extra[topic] -= 1
            next_start[topic] = end
            mine[topic] = set(range(start, end))
        out[member_id] = _freeze(mine)
    return out


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicKey, int]
) -> dict[str, dict[TopicKey, frozenset[int]]]:
    """Kafka's UniformHomogeneousAssignmentBuilder: balance first, then keep what members have.

    Each member keeps its current partitions up to its quota; the rest of
    the partitions go, in topic then partition order, to the members below
    quota, a contiguous run each.
    """
    order = sorted(members)
    topics = sorted(next(iter(members.values())).topics)
    if not topics:
        return {member_id: {} for member_id in order}
    total = sum(partitions[t] for t in topics)
    minimum, extra = divmod(total, len(order))
    kept: set[tuple[uuid.UUID, int]] = set()
    result: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    revoked: list[tuple[uuid.UUID, int]] = []
    for member_id in order:
        quota = minimum
        if extra > 0:
            quota += 1
            extra -= 1
        mine: dict[uuid.UUID, set[int]] = {}
        for topic, parts in sorted(members[member_id].current.items()):
            if topic not in partitions or topic not in members[member_id].topics:
                continue
            for p in sorted(parts):
                if p >= partitions[topic]:
                    continue
                if quota > 0:
                    quota -= 1
                    mine.setdefault(topic, set()).add(p)
                    kept.add((topic, p))
                else:
                    revoked.append((topic, p))
        if quota > 0:
            unfilled.append((member_id, quota))
        result[member_id] = mine
    unassigned = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in kept]
    index = 0
    for member_id, quota in unfilled:
        for _ in range(quota):
            if index >= len(unassigned):
                break
            topic, p = unassigned[index]
            index += 1
            result[member_id].setdefault(topic, set()).add(p)
    return {member_id: _freeze(mine) for member_id, mine in result.items()}


def _uniform_heterogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[TopicKey, int]
) -> dict[str, dict[TopicKey, frozenset[int]]]:
    """Members subscribe to different topics: each partition goes to a subscriber with the fewest.

    Current owners keep a partition while they have no more than the
    smallest subscriber plus one, so reassignments stay sticky and balanced
    across each topic's subscribers.
    """
    order = sorted(members)
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in order}
    load = {m: 0 for m in order}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    for member_id in order:
        spec = members[member_id]
        for topic, parts in spec.current.items():
            if topic in spec.topics and topic in partitions:
                for p in parts:
                    if p < partitions[topic] and (topic, p) not in owner:
                        owner[(topic, p)] = member_id
    # topics with fewer subscribers first: they have the fewest choices
    topics = sorted(
        {t for spec in members.values() for t in spec.topics if t in partitions},
        key=lambda t: (sum(1 for s in members.values() if t in s.topics), t),
    )
    for topic in topics:
        subscribers = [m for m in order if topic in members[m].topics]
        for p in range(partitions[topic]):
            current = owner.get((topic, p))
            lightest = min(subscribers, key=lambda m: (load[m], m))
            chosen = current if current is not None and load[current] <= load[lightest] else lightest
            result[chosen].setdefault(topic, set()).add(p)
            load[chosen] += 1
    _even_out(members, result, load)
    return {member_id: _freeze(mine) for member_id, mine in result.items()}


def _even_out(
    members: Mapping[str, MemberSpec], result: dict[str, dict[uuid.UUID, set[int]]], load: dict[str, int]
) -> None:
    """Move partitions from heavier to lighter subscribers while two differ by more than one.

    The greedy pass can strand load on members whose topics others cannot
    take; a partition moves only to a member subscribed to its topic.
    """
    moved = True
    while moved:
        moved = False
        for heavy in sorted(load, key=lambda m: (-load[m], m)):
            for light in sorted(load, key=lambda m: (load[m], m)):
                if load[heavy] - load[light] <= 1:
                    break
                topic = next((t for t in sorted(result[heavy]) if t in members[light].topics and result[heavy][t]), None)
                if topic is None:
                    continue
                p = max(result[heavy][topic])
                result[heavy][topic].discard(p)
                result[light].setdefault(topic, set()).add(p)
                load[heavy] -= 1
                load[light] += 1
                moved = True
                break
            if moved:
                break
