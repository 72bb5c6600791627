"""Groups as administrators see them, through each client's admin API, also after a restart."""

from __future__ import annotations

import asyncio

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from kafkacompat.testing import Broker
from tests.groups import scenarios
from tests.groups.helpers import GROUP_SETTINGS, wait_for

PARTITIONS = scenarios.PARTITIONS  # consume_exactly_once spreads over these


def committed(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_admin_apis_of_each_client_see_and_manage_a_group(broker: Broker, topic_name: str) -> None:
    bootstrap = broker.bootstrap_servers
    scenarios.create_topic(bootstrap, topic_name, PARTITIONS)
    group = scenarios.new_group()
    members = [scenarios.Member("confluent", bootstrap, topic_name, group) for _ in range(2)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_for(lambda: scenarios.spread(members, PARTITIONS), 30, "two members sharing the topic")
        scenarios.consume_exactly_once(bootstrap, topic_name, members, 60, 0)
        wait_for(lambda: committed(admin, group, topic_name) == {p: 10 for p in range(PARTITIONS)}, 10,
                 "the commits")

        # confluent-kafka (librdkafka) parses member assignments
        listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(15)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
        owned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(PARTITIONS)) and {m.host for m in described.members} == {"/127.0.0.1"}

        # kafka-python decodes subscriptions and assignments
        kdescribed = kadmin.describe_groups([group])[group]
        assert (kdescribed["group_state"], kdescribed["protocol_type"]) == ("Stable", "consumer")
        for member in kdescribed["members"]:
            assert member["member_metadata"]["topics"] == [topic_name]
            assert member["member_assignment"]["assigned_partitions"][0]["topic"] == topic_name
        refused = kadmin.delete_group_offsets(group, [KTopicPartition(topic_name, 0)])
        assert "GroupSubscribedToTopic" in str(refused), refused

        # aiokafka
        async def aio() -> tuple[list, list]:
            from aiokafka.admin import AIOKafkaAdminClient

            client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await client.start()
            try:
                return await client.list_consumer_groups(), await client.describe_consumer_groups([group])
            finally:
                await client.close()

        aio_listed, aio_described = asyncio.run(aio())
        assert (group, "consumer") in [tuple(g)[:2] for g in aio_listed]
        _error, _name, state, protocol_type, protocol, aio_members = aio_described[0].groups[0]
        assert (state, protocol_type, protocol, len(aio_members)) == ("Stable", "consumer", "range", 2)

        for m in members:
            m.stop()
        wait_for(lambda: admin.describe_consumer_groups([group])[group].result(15).state
                 == ConsumerGroupState.EMPTY, 15, "the group to empty")
        # an empty group's offsets can be rewound and deleted, then the group itself
        rewind = ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 3)])
        admin.alter_consumer_group_offsets([rewind])[group].result(15)
        kadmin.delete_group_offsets(group, [KTopicPartition(topic_name, 1)])
        assert committed(admin, group, topic_name) == {0: 3, 1: -1001, 2: 10, 3: 10, 4: 10, 5: 10}  # -1001: none
        admin.delete_consumer_groups([group])[group].result(15)
        assert group not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    finally:
        kadmin.close()
        for m in members:
            m.stop()


def test_offsets_sit_in_the_stream_and_the_group_is_listed_after_restart(tmp_path, topic_name: str) -> None:
    group = scenarios.new_group()
    with Broker(data_dir=str(tmp_path), **GROUP_SETTINGS) as broker:
        scenarios.create_topic(broker.bootstrap_servers, topic_name, PARTITIONS)
        members = [scenarios.Member("confluent", broker.bootstrap_servers, topic_name, group)]
        try:
            wait_for(lambda: scenarios.spread(members, PARTITIONS), 30, "the member's assignment")
            scenarios.consume_exactly_once(broker.bootstrap_servers, topic_name, members, 60, 0)
        finally:
            members[0].stop()
    # the cursors are in the data path of the topic's stream (plain names: the default stream)
    assert group in (tmp_path / "streams" / "default" / ".cursors").read_text()
    with Broker(data_dir=str(tmp_path), **GROUP_SETTINGS) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = admin.list_consumer_groups().result(15).valid
        assert [(g.group_id, g.state) for g in listed] == [(group, ConsumerGroupState.EMPTY)]
        assert committed(admin, group, topic_name) == {p: 10 for p in range(PARTITIONS)}
