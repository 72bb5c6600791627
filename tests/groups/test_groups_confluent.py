"""What only librdkafka (confluent-kafka) offers: static members and cooperative-sticky rebalances."""

from __future__ import annotations

from kafkacompat.testing import Broker
from tests.groups import scenarios

LIB = "confluent"


def test_static_member_restart_causes_no_rebalance(broker: Broker, topic_name: str) -> None:
    scenarios.create_topic(broker.bootstrap_servers, topic_name, scenarios.PARTITIONS)
    group = scenarios.new_group()
    members = [
        scenarios.Member(LIB, broker.bootstrap_servers, topic_name, group,
                         **{"group.instance.id": f"static-{i}", "session.timeout.ms": 10_000})
        for i in range(3)
    ]
    scenarios.wait_for(lambda: scenarios.spread(members, scenarios.PARTITIONS), 30, "three static members")
    stayers = members[:2]
    callbacks_before = [(len(m.client.assigned_calls), len(m.client.revoked)) for m in stayers]
    before = members[2].assigned
    # a static member closes without LeaveGroup and comes back within its session timeout
    members[2].stop()
    members[2] = scenarios.Member(LIB, broker.bootstrap_servers, topic_name, group,
                                  **{"group.instance.id": "static-2", "session.timeout.ms": 10_000})
    try:
        scenarios.wait_for(lambda: members[2].assigned, 20, "the restarted static member's assignment")
        # a rebalance would have made the others revoke before the newcomer got its partitions
        assert members[2].assigned == before
        assert [(len(m.client.assigned_calls), len(m.client.revoked)) for m in stayers] == callbacks_before
        scenarios.consume_exactly_once(broker.bootstrap_servers, topic_name, members, 60, 0)
    finally:
        for m in members:
            m.stop()


def test_cooperative_sticky_moves_only_the_partitions_that_change_owner(broker: Broker, topic_name: str) -> None:
    scenarios.create_topic(broker.bootstrap_servers, topic_name, scenarios.PARTITIONS)
    group = scenarios.new_group()
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [scenarios.Member(LIB, broker.bootstrap_servers, topic_name, group, **conf) for _ in range(2)]
    try:
        scenarios.wait_for(lambda: scenarios.spread(members, scenarios.PARTITIONS), 30, "two members")
        owned = [m.assigned for m in members]
        revoked_before = [len(m.client.revoked) for m in members]
        members.append(scenarios.Member(LIB, broker.bootstrap_servers, topic_name, group, **conf))
        scenarios.wait_for(
            lambda: scenarios.spread(members, scenarios.PARTITIONS) and all(len(m.assigned) == 2 for m in members),
            30, "three members with two partitions each",
        )
        for m, had, n in zip(members, owned, revoked_before):
            revoked = set().union(*m.client.revoked[n:])
            # incremental: each old member gives up exactly the partition it loses and keeps the rest
            assert m.assigned < had
            assert revoked == had - m.assigned and len(revoked) == 1
        scenarios.consume_exactly_once(broker.bootstrap_servers, topic_name, members, 60, 0)
    finally:
        for m in members:
            m.stop()
