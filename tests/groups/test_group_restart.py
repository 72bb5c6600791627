"""Committed offsets are cursors on disk: a group resumes where it left off after a restart."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.groups.helpers import GROUP_SETTINGS
from tests.groups.child_members import Member, produce

PARTITIONS = 3


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def consume(client: str, bootstrap: str, topic: str, group: str, values: list[str]) -> list[str]:
    member = Member(client, bootstrap, topic, group)
    try:
        member.wait(lambda: {v for _p, _o, v in member.records()} >= set(values), 60, "consuming")
        member.close()
    finally:
        member.stop_quietly()
    return [v for _p, _o, v in member.records()]


@pytest.mark.parametrize("client", ["confluent", "aiokafka", "kafka-python"])
def test_new_consumer_resumes_from_committed_offsets_after_restart(tmp_path, topic_name, client):
    group = f"g-{topic_name}"
    first = [f"a-{i}" for i in range(30)]
    second = [f"b-{i}" for i in range(30)]
    with Broker(data_dir=str(tmp_path), **GROUP_SETTINGS) as broker:
        create_topic(broker.bootstrap_servers, topic_name, PARTITIONS)
        produce(broker.bootstrap_servers, topic_name, first, PARTITIONS)
        assert sorted(consume(client, broker.bootstrap_servers, topic_name, group, first)) == sorted(first)
        before = committed(broker.bootstrap_servers, group, topic_name)
    assert before == {p: 10 for p in range(PARTITIONS)}
    cursors = tmp_path / "streams" / "default" / ".cursors"  # in the topic's stream's data path
    assert group in cursors.read_text()

    with Broker(data_dir=str(tmp_path), **GROUP_SETTINGS) as broker:
        assert committed(broker.bootstrap_servers, group, topic_name) == before
        # the group is known again from its cursors, empty until members rejoin
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = admin.list_consumer_groups().result(15).valid
        assert [(g.group_id, g.state.name) for g in listed] == [(group, "EMPTY")]
        produce(broker.bootstrap_servers, topic_name, second, PARTITIONS)
        # only what came after the commits: nothing of the first batch again
        assert sorted(consume(client, broker.bootstrap_servers, topic_name, group, second)) == sorted(second)
