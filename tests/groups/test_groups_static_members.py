"""Static members (group.instance.id) of kafka-python and aiokafka restart without a rebalance.

(confluent-kafka's case is in test_groups_confluent.py.)
"""

from __future__ import annotations

import pytest

from kafkacompat.testing import Broker
from tests.groups import scenarios

SESSION_MS = 10_000  # room for a member to restart before its session ends


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
def test_static_member_restart_causes_no_rebalance(broker: Broker, topic_name: str, lib: str) -> None:
    scenarios.create_topic(broker.bootstrap_servers, topic_name, scenarios.PARTITIONS)
    group = scenarios.new_group()

    def start(i: int) -> scenarios.Member:
        return scenarios.Member(lib, broker.bootstrap_servers, topic_name, group,
                                group_instance_id=f"static-{i}", session_timeout_ms=SESSION_MS)

    members = [start(i) for i in range(3)]
    try:
        scenarios.wait_for(lambda: scenarios.spread(members, scenarios.PARTITIONS), 30, "three static members")
        coordinator = broker.server.cluster.groups
        generation = coordinator.groups[group].generation
        kept = [m.assigned for m in members[:2]]
        before = members[2].assigned
        members[2].stop()  # static members close without LeaveGroup
        members[2] = start(2)
        scenarios.wait_for(lambda: members[2].assigned, 20, "the restarted static member's assignment")
        assert members[2].assigned == before
        assert [m.assigned for m in members[:2]] == kept
        assert coordinator.groups[group].generation == generation, "the group went through a rebalance"
        scenarios.consume_exactly_once(broker.bootstrap_servers, topic_name, members, 60, 0)
    finally:
        for m in members:
            m.stop()
