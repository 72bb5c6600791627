"""Three members of one group over six partitions, for each Python client.

Each member runs in its own process (so it can be killed outright) and
commits every record synchronously before reporting it.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.conftest import create_topic

from tests.groups.child_members import Member, covers, produce, wait_until

CLIENTS = ["confluent", "aiokafka", "kafka-python"]
PARTITIONS = 6
SESSION_MS = 3000
REJOIN_S = 4.0  # heartbeat interval + JoinGroup/SyncGroup round trips after the coordinator acts


def consumed(members: list[Member]) -> Counter[str]:
    return Counter(value for m in members for _p, _o, value in m.records())


def assert_once(members: list[Member], values: list[str], timeout: float = 30) -> None:
    wait_until(lambda: set(values) <= set(consumed(members)), timeout, f"consuming {len(values)} records")
    counts = consumed(members)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, f"consumed more than once: {sorted(duplicates)[:10]}"


def assert_own_partitions(member: Member, values: set[str]) -> None:
    """A member only reads partitions the group gave it."""
    owned = member.assignment()
    assert all(p in owned for p, _o, v in member.records() if v in values)


@pytest.mark.parametrize("client", CLIENTS)
def test_three_members_share_then_survive_leave_and_crash(broker, topic_name, client):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    members = [Member(client, bootstrap, topic_name, group, session_ms=SESSION_MS) for _ in range(3)]
    try:
        wait_until(lambda: covers(members, PARTITIONS) and all(len(m.assignment()) == 2 for m in members),
                   60, "three members sharing six partitions")

        first = [f"a-{i}" for i in range(120)]
        produce(bootstrap, topic_name, first, PARTITIONS)
        assert_once(members, first)
        for m in members:
            assert m.records(), f"{m.name} got nothing: the group did not spread the work"
            assert_own_partitions(m, set(first))

        # a member leaving with LeaveGroup: the others take over at once
        leaving, rest = members[0], members[1:]
        start = time.monotonic()
        leaving.close()
        took = wait_until(lambda: covers(rest, PARTITIONS), REJOIN_S, "the two others taking over")
        assert time.monotonic() - start < SESSION_MS / 1000, f"rebalance after leave took {took:.1f}s"
        second = [f"b-{i}" for i in range(120)]
        produce(bootstrap, topic_name, second, PARTITIONS)
        assert_once(members, first + second)

        # a member killed (no LeaveGroup): its session expires, the last one takes over
        killed, last = rest
        start = time.monotonic()
        killed.kill()
        wait_until(lambda: covers([last], PARTITIONS), SESSION_MS / 1000 + REJOIN_S, "the last member taking over")
        took = time.monotonic() - start
        assert took >= SESSION_MS / 1000 * 0.8, f"took over after {took:.1f}s: before the session timed out?"
        third = [f"c-{i}" for i in range(120)]
        produce(bootstrap, topic_name, third, PARTITIONS)
        assert_once(members, first + second + third)
    finally:
        for m in members:
            m.stop_quietly()


@pytest.mark.parametrize("client", CLIENTS)
def test_static_member_restarts_without_a_rebalance(broker, topic_name, client):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    session_ms = 10_000  # room for a new process to start and rejoin before the session ends
    start = lambda i: Member(client, bootstrap, topic_name, group, instance_id=f"{group}-s{i}",  # noqa: E731
                             session_ms=session_ms)
    members = [start(i) for i in range(3)]
    try:
        wait_until(lambda: covers(members, PARTITIONS) and all(len(m.assignment()) == 2 for m in members),
                   60, "three static members sharing six partitions")
        first = [f"a-{i}" for i in range(60)]
        produce(bootstrap, topic_name, first, PARTITIONS)
        assert_once(members, first)

        others = members[1:]
        seen = [len(m.rebalance_events()) for m in others]
        before = members[0].assignment()
        members[0].close()  # static members do not send LeaveGroup
        again = start(0)
        members.append(again)
        again.wait(lambda: again.assignment() == before, session_ms / 1000, "getting its partitions back")

        second = [f"b-{i}" for i in range(60)]
        produce(bootstrap, topic_name, second, PARTITIONS)
        assert_once(members, first + second)
        assert [len(m.rebalance_events()) for m in others] == seen, "the other members went through a rebalance"
        assert {v for _p, _o, v in again.records()} == {v for p, _o, v in again.records() if p in before}
    finally:
        for m in members:
            m.stop_quietly()


def test_cooperative_sticky_rebalances_incrementally(broker, topic_name):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    start = lambda: Member("confluent", bootstrap, topic_name, group,  # noqa: E731
                           assignor="cooperative-sticky", session_ms=SESSION_MS)
    members = [start(), start()]
    try:
        wait_until(lambda: covers(members, PARTITIONS) and all(len(m.assignment()) == 3 for m in members),
                   60, "two members sharing six partitions")
        kept = [m.assignment() for m in members]
        marks = [len(m.events) for m in members]
        members.append(start())
        wait_until(lambda: covers(members, PARTITIONS) and all(len(m.assignment()) == 2 for m in members),
                   60, "three members sharing six partitions")
        for member, owned, mark in zip(members, kept, marks):
            revoked = [set(e["partitions"]) for e in member.events[mark:] if e["event"] == "revoked"]
            # incremental: a partition moves away, the rest stay with their owner throughout
            assert revoked and all(r < owned for r in revoked), f"{member.name} revoked {revoked} of {owned}"
            assert member.assignment() <= owned, "a sticky member kept its own partitions"
        values = [f"v-{i}" for i in range(60)]
        produce(bootstrap, topic_name, values, PARTITIONS)
        assert_once(members, values)
    finally:
        for m in members:
            m.stop_quietly()
