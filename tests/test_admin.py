"""Topic administration through confluent-kafka's AdminClient (librdkafka)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from kafkacompat.testing import Broker
from tests.conftest import create_topic


@pytest.fixture
def admin(broker: Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def error_code_of(future) -> str:
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=15)
    return caught.value.args[0].name()


def test_create_describe_and_delete(admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(timeout=15)
    assert error_code_of(admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name]) == "TOPIC_ALREADY_EXISTS"
    meta = admin.list_topics(timeout=10)
    assert len(meta.topics[topic_name].partitions) == 4
    cluster = admin.describe_cluster().result(timeout=15)
    assert cluster.controller.id == 1 and [n.id for n in cluster.nodes] == [1]
    admin.delete_topics([topic_name])[topic_name].result(timeout=15)
    assert topic_name not in admin.list_topics(timeout=10).topics
    assert error_code_of(admin.delete_topics([topic_name])[topic_name]) == "UNKNOWN_TOPIC_OR_PART"


@pytest.mark.parametrize(
    "topic, code",
    [
        (NewTopic("zero-parts", 0, 1), "INVALID_PARTITIONS"),
        (NewTopic("three-replicas", 1, 3), "INVALID_REPLICATION_FACTOR"),
        (NewTopic("bad name!", 1, 1), "TOPIC_EXCEPTION"),  # librdkafka's name for INVALID_TOPIC_EXCEPTION (17)
        (NewTopic("bad-config", 1, 1, config={"no.such.config": "1"}), "INVALID_CONFIG"),
        (NewTopic("/no/such/stream:t", 1, 1), "TOPIC_EXCEPTION"),  # librdkafka's name for INVALID_TOPIC_EXCEPTION (17)
    ],
)
def test_create_refusals(admin: AdminClient, topic: NewTopic, code: str) -> None:
    assert error_code_of(admin.create_topics([topic])[topic.topic]) == code
    assert topic.topic not in admin.list_topics(timeout=10).topics


def test_describe_and_alter_configs(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, configs={"max.message.bytes": "2000000"})
    resource = ConfigResource("topic", topic_name)
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    assert configs["max.message.bytes"].value == "2000000"
    # the default stream keeps messages 7 days, as Kafka's log.retention.hours and MapR's default ttl
    assert (configs["retention.ms"].value, configs["retention.ms"].is_default) == ("604800000", True)
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    change = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    admin.incremental_alter_configs([change])[change].result(timeout=15)
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    assert configs["retention.ms"].value == "3600000"
    assert configs["max.message.bytes"].value == "1048588"
    bad = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("message.timestamp.type", "Sometime", incremental_operation=AlterConfigOpType.SET)])
    assert error_code_of(admin.incremental_alter_configs([bad])[bad]) == "INVALID_CONFIG"
    broker_configs = admin.describe_configs([ConfigResource("broker", "1")])
    values = list(broker_configs.values())[0].result(timeout=15)
    assert values["broker.id"].value == "1"


def test_log_append_time_topics_stamp_the_broker_time(broker: Broker, topic_name: str) -> None:
    from tests.test_clients_produce_consume import consume_all

    create_topic(broker.bootstrap_servers, topic_name, configs={"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic_name, b"x", timestamp=1000)
    assert producer.flush(10) == 0
    [msg] = consume_all(broker.bootstrap_servers, topic_name, 1, 1)
    kind, stamp = msg.timestamp()
    assert kind == 2 and stamp > 1_600_000_000_000  # TIMESTAMP_LOG_APPEND_TIME, not the client's 1000


def test_config_changes_reach_the_next_produce(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    """Produce resolves a topic's configs once per version of the topic: a change must still count at once."""
    from tests.test_clients_produce_consume import consume_all

    create_topic(broker.bootstrap_servers, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    delivered: list[str | None] = []

    def produce(value: bytes) -> str | None:
        producer.produce(topic_name, value, timestamp=1000,
                         on_delivery=lambda err, _msg: delivered.append(err.name() if err else None))
        assert producer.flush(15) == 0
        return delivered[-1]

    assert produce(b"x" * 5000) is None
    resource = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET),
    ])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    assert produce(b"x" * 5000) == "MSG_SIZE_TOO_LARGE"
    assert produce(b"small") is None
    first, second = consume_all(broker.bootstrap_servers, topic_name, 1, 2)
    assert first.timestamp() == (1, 1000)  # CreateTime: the client's own stamp
    kind, stamp = second.timestamp()
    assert kind == 2 and stamp > 1_600_000_000_000  # LogAppendTime since the change


def test_create_partitions_grows_and_never_shrinks(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, partitions=2)
    admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(timeout=15)
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 5
    assert error_code_of(admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name]) == "INVALID_PARTITIONS"
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 5


def test_delete_records_moves_the_log_start(broker: Broker, admin: AdminClient, topic_name: str) -> None:
    from confluent_kafka import Consumer

    create_topic(broker.bootstrap_servers, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        producer.produce(topic_name, b"%d" % i)
        producer.flush(5)  # one batch per message, so offsets 0..9 are separate batches
    result = admin.delete_records([TopicPartition(topic_name, 0, 4)])
    deleted = list(result.values())[0].result(timeout=15)
    assert deleted.low_watermark == 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lw"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10) == (4, 10)
    finally:
        consumer.close()
    beyond = admin.delete_records([TopicPartition(topic_name, 0, 99)])
    assert error_code_of(list(beyond.values())[0]) == "OFFSET_OUT_OF_RANGE"
