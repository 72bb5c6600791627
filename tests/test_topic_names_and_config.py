"""Topic naming across streams, and the typed configuration."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from kafkacompat.config import BrokerConfig, ConfigError, load_config
from kafkacompat.testing import Broker
from kafkacompat.broker.topic_names import canonical_name, is_kafka_legal, kafka_alias, split_name
from tests.test_clients_produce_consume import consume_all, kafka_python_poll


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
