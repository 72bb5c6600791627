"""The KIP-848 server-side assignors and reconciliation, without sockets.

Balance, completeness and stickiness of `uniform` and `range` over many
shapes, and a random churn of members through the coordinator checking
the protocol's promise: a partition is never owned by two members, and
once the churn stops every member converges to its target.
"""

from __future__ import annotations

import random
import uuid

import pytest
from kafkacompat.storage import open_store

from kafkacompat.config import BrokerConfig
from kafkacompat.groups.assignors import MemberSpec, assign
from kafkacompat.groups.consumer_coordinator import ConsumerGroupCoordinator, HeartbeatRequest

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def flat(assignment: dict) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for t, parts in assignment.items() for p in parts)


@pytest.mark.parametrize("seed", range(30))
def test_uniform_is_balanced_complete_and_sticky(seed: int) -> None:
    rng = random.Random(seed)
    partitions = {T1: rng.randint(1, 12), T2: rng.randint(0, 7)}
    total = sum(partitions.values())
    members = {f"m{i}": MemberSpec(None, frozenset(partitions), {}) for i in range(rng.randint(1, 6))}
    first = assign("uniform", members, partitions)
    sizes = [len(flat(a)) for a in first.values()]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(x for a in first.values() for x in flat(a)) == sorted((t, p) for t in partitions for p in range(partitions[t]))
    # one more member: everyone else keeps what fits its new quota
    grown = {**{m: MemberSpec(None, frozenset(partitions), first[m]) for m in members},
             "new": MemberSpec(None, frozenset(partitions), {})}
    second = assign("uniform", grown, partitions)
    quota = -(-total // len(grown))  # ceiling
    for m in members:
        kept = set(flat(first[m])) & set(flat(second[m]))
        assert len(kept) >= min(len(flat(first[m])), quota - 1)
    sizes = [len(flat(a)) for a in second.values()]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_with_different_subscriptions_gives_each_partition_to_a_subscriber() -> None:
    partitions = {T1: 4, T2: 4, T3: 2}
    members = {
        "a": MemberSpec(None, frozenset({T1}), {}),
        "b": MemberSpec(None, frozenset({T1, T2}), {}),
        "c": MemberSpec(None, frozenset({T2, T3}), {}),
    }
    result = assign("uniform", members, partitions)
    owners = {}
    for member, assignment in result.items():
        for t, p in flat(assignment):
            assert t in members[member].topics
            assert (t, p) not in owners
            owners[(t, p)] = member
    assert len(owners) == 10
    assert sorted(len(flat(a)) for a in result.values()) == [3, 3, 4]


def test_range_co_partitions_and_orders_static_members_by_instance_id() -> None:
    partitions = {T1: 3, T2: 3}
    members = {  # Kafka's RangeAssignor example: M0 gets T1P0,T1P1,T2P0,T2P1; M1 gets T1P2,T2P2
        "zzz": MemberSpec("I0", frozenset(partitions), {}),
        "aaa": MemberSpec("I1", frozenset(partitions), {}),
    }
    result = assign("range", members, partitions)
    assert result["zzz"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}
    assert result["aaa"] == {T1: frozenset({2}), T2: frozenset({2})}
    dynamic = assign("range", {"b": MemberSpec(None, frozenset({T1}), {}), "a": MemberSpec(None, frozenset({T1}), {})}, {T1: 3})
    assert dynamic == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2})}}


@pytest.mark.parametrize("assignor", ["uniform", "range"])
async def test_random_churn_never_gives_a_partition_to_two_members(assignor: str) -> None:
    store = open_store("memory://")
    await store.open()
    await store.create_topic(store.default_stream, "churn", 12)
    await store.create_topic(store.default_stream, "side", 5)
    config = BrokerConfig(group_consumer_session_timeout_ms=60_000)
    coordinator = ConsumerGroupCoordinator(config, store, lambda: 0, lambda _: None, lambda _: None, lambda _: None)
    rng = random.Random(7)
    owned: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    epochs: dict[str, int] = {}

    def beat(member_id: str, epoch: int | None = None) -> None:
        joining = member_id not in epochs
        sent = 0 if joining else epochs[member_id] if epoch is None else epoch
        answer = coordinator.heartbeat(HeartbeatRequest(
            group_id="g", member_id=member_id, member_epoch=sent, instance_id=None, rack_id=None,
            rebalance_timeout_ms=60_000 if joining else -1,
            subscribed_topic_names=("churn", "side") if joining else None, subscribed_topic_regex=None,
            server_assignor=assignor if joining else None, owned={} if joining else owned.get(member_id, {}),
            client_id="c", client_host="/127.0.0.1", version=1,
        ))
        if sent < 0:
            owned.pop(member_id, None)
            epochs.pop(member_id, None)
            return
        assert answer.error == 0, answer
        epochs[member_id] = answer.member_epoch
        if answer.assignment is not None:
            owned[member_id] = dict(answer.assignment)
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for m, assignment in owned.items():
            for key in flat(assignment):
                assert key not in seen, f"{key} owned by {seen[key]} and {m}"
                seen[key] = m

    for step in range(400):
        live = list(epochs)
        roll = rng.random()
        if roll < 0.08 or not live:
            beat(f"m{step}")
        elif roll < 0.12 and len(live) > 1:
            beat(rng.choice(live), epoch=-1)
        else:
            beat(rng.choice(live))
    for _ in range(10):  # churn stops: everyone converges
        for m in list(epochs):
            beat(m)
    group = coordinator.groups["g"]
    assert group.state.value == "Stable"
    assert {m: dict(group.target[m]) for m in epochs} == owned
    assert len([k for a in owned.values() for k in flat(a)]) == 17
    coordinator.close()
    await store.close()
