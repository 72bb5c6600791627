"""Consumers that stay up while the broker restarts go on from where they were.

Group state (members, generation or epochs, assignments) is kept in the
store as Kafka keeps it in __consumer_offsets, so after a restart the
members heartbeat to the broker again and keep their partitions. What was
committed before the restart is never read again.
"""

from __future__ import annotations

import pytest

from kafkacompat.testing import Broker
from tests.groups import scenarios
from tests.groups.group_continuity import keep_group_through
from tests.groups.helpers import GROUP_SETTINGS, produce, wait_for


@pytest.mark.parametrize("lib", ["confluent", "kafka-python", "aiokafka"])
def test_live_members_rejoin_after_a_broker_restart(tmp_path, topic_name: str, lib: str) -> None:
    group = scenarios.new_group()
    first = Broker(data_dir=str(tmp_path), **GROUP_SETTINGS).start()
    port = first.port
    members: list[scenarios.Member] = []
    try:
        scenarios.create_topic(first.bootstrap_servers, topic_name, scenarios.PARTITIONS)
        members = scenarios.start_group(lib, first.bootstrap_servers, topic_name, group, n=2)
        before = produce(first.bootstrap_servers, topic_name, 60, scenarios.PARTITIONS, 0)
        wait_for(lambda: sum(len(m.received) for m in members) >= 60, 30, "the first messages")
        wait_for(lambda: first.server.cluster.groups.offsets.all(group)
                 and sum(c.offset for _, c in first.server.cluster.groups.offsets.all(group)) == 60,
                 15, "the commits of the first messages")
    finally:
        first.stop()
    # same address, same data: the group's membership is gone, its commits are not
    with Broker(data_dir=str(tmp_path), port=port, **GROUP_SETTINGS) as second:
        try:
            seen = [len(m.received) for m in members]
            after = produce(second.bootstrap_servers, topic_name, 60, scenarios.PARTITIONS, 60)
            fresh: list[bytes] = []

            def got_all() -> bool:
                fresh[:] = [v for m, n in zip(members, seen) for _, v in m.received[n:]]
                return set(fresh) >= after

            wait_for(got_all, 60, "the members to consume after the restart")
            assert not set(fresh) & before, "records committed before the restart were read again"
            coordinator = second.server.cluster.groups
            wait_for(lambda: group in coordinator.groups and coordinator.groups[group].state.value == "Stable"
                     and len(coordinator.groups[group].members) == 2, 30, "the two members to form the group again")
        finally:
            for m in members:
                m.stop()


@pytest.mark.parametrize("client,protocol", [
    ("confluent", "classic"), ("confluent", "consumer"), pytest.param("java", "classic", marks=pytest.mark.slow)])
def test_a_stable_group_keeps_its_assignment_across_a_broker_restart(tmp_path, client: str, protocol: str) -> None:
    """The group's state is in the stream's data path: after the restart the members heartbeat
    with their generation (or epoch) and keep their partitions, as on Kafka; nothing is read twice."""
    brokers = [Broker(data_dir=str(tmp_path), **GROUP_SETTINGS).start()]
    port = brokers[0].port

    def restart(coordinator: int) -> str:
        brokers[0].stop()
        brokers.append(Broker(data_dir=str(tmp_path), port=port, **GROUP_SETTINGS).start())
        return brokers[-1].bootstrap_servers

    try:
        keep_group_through(brokers[0].bootstrap_servers, protocol, restart, client)
    finally:
        brokers[-1].stop()
