"""Group administration from each client's admin API: list, describe, offsets, delete."""

from __future__ import annotations

import asyncio

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from tests.conftest import create_topic
from tests.groups.child_members import Member, covers, produce, wait_until

PARTITIONS = 4


def test_admin_apis_of_each_client_see_and_manage_the_group(broker, topic_name):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic_name, PARTITIONS)
    group = f"g-{topic_name}"
    members = [Member("confluent", bootstrap, topic_name, group) for _ in range(2)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        wait_until(lambda: covers(members, PARTITIONS) and all(m.assignment() for m in members), 60,
                   "two members sharing the topic")
        values = [f"v-{i}" for i in range(40)]
        produce(bootstrap, topic_name, values, PARTITIONS)
        wait_until(lambda: sum(len(m.records()) for m in members) >= 40, 30, "consuming")

        # confluent-kafka (librdkafka)
        listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(15)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert described.state == ConsumerGroupState.STABLE and described.partition_assignor == "range"
        owned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(PARTITIONS)) and {m.host for m in described.members} == {"/127.0.0.1"}
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, p) for p in range(PARTITIONS)])
        offsets = admin.list_consumer_group_offsets([request])[group].result(15)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {p: 10 for p in range(PARTITIONS)}

        # kafka-python: decodes member metadata and assignments
        kdescribed = kadmin.describe_groups([group])[group]
        assert kdescribed["group_state"] == "Stable" and kdescribed["protocol_type"] == "consumer"
        for member in kdescribed["members"]:
            assert member["member_metadata"]["topics"] == [topic_name]
            assert member["member_assignment"]["assigned_partitions"][0]["topic"] == topic_name
        assert group in {g["group_id"] for g in kadmin.list_groups()}
        subscribed = kadmin.delete_group_offsets(group, [KTopicPartition(topic_name, 0)])
        assert "GroupSubscribedToTopic" in str(subscribed), subscribed

        # aiokafka
        async def aio() -> tuple[list, list]:
            from aiokafka.admin import AIOKafkaAdminClient

            client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await client.start()
            try:
                return (await client.list_consumer_groups(),
                        await client.describe_consumer_groups([group]))
            finally:
                await client.close()

        aio_listed, aio_described = asyncio.run(aio())
        assert (group, "consumer") in [tuple(g)[:2] for g in aio_listed]
        _error, _name, state, protocol_type, protocol, aio_members = aio_described[0].groups[0]
        assert (state, protocol_type, protocol, len(aio_members)) == ("Stable", "consumer", "range", 2)

        for m in members:
            m.close()
        wait_until(lambda: admin.describe_consumer_groups([group])[group].result(15).state
                   == ConsumerGroupState.EMPTY, 15, "the group emptying")
        # an empty group's offsets can be rewritten and deleted by admins
        rewind = ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 3)])
        admin.alter_consumer_group_offsets([rewind])[group].result(15)
        after = admin.list_consumer_group_offsets([request])[group].result(15)
        assert {tp.partition: tp.offset for tp in after.topic_partitions}[0] == 3
        kadmin.delete_group_offsets(group, [KTopicPartition(topic_name, 1)])
        after = admin.list_consumer_group_offsets([request])[group].result(15)
        assert {tp.partition: tp.offset for tp in after.topic_partitions}[1] == -1001  # no offset
        admin.delete_consumer_groups([group])[group].result(15)
        assert group not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    finally:
        kadmin.close()
        for m in members:
            m.stop_quietly()
