"""Topic naming across streams, and the typed configuration."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from kafkacompat.config import BrokerConfig, ConfigError, load_config
from kafkacompat.testing import Broker
from kafkacompat.topic_names import canonical_name, is_kafka_legal, kafka_alias, split_name
from tests.test_clients_produce_consume import consume_all


@pytest.mark.parametrize(
    "name, expected",
    [
        ("orders", ("/default", "orders")),
        ("/apps/iot/oilpump_metrics:Pressure", ("/apps/iot/oilpump_metrics", "Pressure")),
        ("apps.iot.oilpump_metrics..Pressure", ("/apps/iot/oilpump_metrics", "Pressure")),
        ("a..b..c", ("/a", "b..c")),
    ],
)
def test_split_name(name: str, expected: tuple[str, str]) -> None:
    assert split_name(name, "/default") == expected


def test_alias_is_kafka_legal_and_round_trips() -> None:
    alias = kafka_alias("/apps/iot/oilpump_metrics", "Pressure", "/default")
    assert alias == "apps.iot.oilpump_metrics..Pressure" and is_kafka_legal(alias)
    assert split_name(alias, "/default") == ("/apps/iot/oilpump_metrics", "Pressure")
    assert canonical_name("/default", "orders", "/default") == "orders"


def test_canonical_name_and_alias_reach_the_same_topic() -> None:
    with Broker() as broker:
        broker.call(broker.server.store.create_stream("/apps/iot/oilpump_metrics"))
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("/apps/iot/oilpump_metrics:Pressure", b"from-canonical")
        assert producer.flush(10) == 0
        # kafka-python refuses '/' and ':' but takes the alias
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        kp.send("apps.iot.oilpump_metrics..Pressure", b"from-alias").get(timeout=10)
        kp.close()
        got = consume_all(broker.bootstrap_servers, "apps.iot.oilpump_metrics..Pressure", 1, 2)
        assert [m.value() for m in got] == [b"from-canonical", b"from-alias"]
        assert broker.server.store.get_topic("/apps/iot/oilpump_metrics", "Pressure") is not None
        assert broker.server.store.get_topic("/default", "apps.iot.oilpump_metrics..Pressure") is None


def test_config_precedence_file_env_flags(tmp_path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text('port = 9100\nvolumes = ["/a", "/b"]\nnode-id = 4\n')
    config = load_config(str(path), environ={"KAFKACOMPAT_PORT": "9200", "KAFKACOMPAT_AUTO_CREATE_TOPICS": "false"},
                         overrides={"node_id": 7})
    assert (config.port, config.volumes, config.node_id, config.auto_create_topics) == (9200, ["/a", "/b"], 7, False)
    assert BrokerConfig(host="0.0.0.0").advertised() == ("localhost", 9092)
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        path.write_text("colour = 'blue'\n")
        load_config(str(path), environ={})


@pytest.mark.parametrize("spelling", ["/apps/echo:temps", "apps.echo..temps"])
def test_every_answer_names_the_topic_as_the_client_spelled_it(spelling: str) -> None:
    """librdkafka's admin matches answers to requests by name: each must echo the client's spelling."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec

    with Broker() as broker:
        broker.create_topic("/apps/echo:temps", 2)
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(spelling, b"v", partition=1)
        assert producer.flush(10) == 0
        # librdkafka takes any name: listings give it the canonical one (Java tools and kafka-python get aliases)
        assert "/apps/echo:temps" in admin.list_topics(timeout=10).topics
        assert list(admin.list_topics(spelling, timeout=10).topics) == [spelling]
        offsets = admin.list_offsets({TopicPartition(spelling, 1): OffsetSpec.latest()})
        assert offsets[TopicPartition(spelling, 1)].result(timeout=10).offset == 1
        [described] = admin.describe_configs([ConfigResource("topic", spelling)]).values()
        assert described.result(timeout=10)["retention.ms"].name == "retention.ms"
        commit = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("echo", [TopicPartition(spelling, 1, 1)])])
        assert commit["echo"].result(timeout=10).topic_partitions[0].topic == spelling
        fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("echo", [TopicPartition(spelling, 1)])])
        [tp] = fetched["echo"].result(timeout=10).topic_partitions
        assert (tp.topic, tp.offset) == (spelling, 1)
        admin.delete_topics([spelling], operation_timeout=10)[spelling].result(timeout=10)
        assert broker.server.store.get_topic("/apps/echo", "temps") is None
