"""Broker, broker-logger and group configs: described with Kafka's sources, changed at once, kept by the store."""

from __future__ import annotations

import logging
import socket

import kio.schema.describe_configs.v4.request as dc
import kio.schema.incremental_alter_configs.v1.request as iac
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire

BROKER, BROKER_LOGGER, GROUP = 4, 8, 32
SET, DELETE = 0, 1


def describe(wire: Wire, kind: int, name: str) -> tuple[int, dict[str, tuple[str | None, int, list]]]:
    response = wire.request(32, 4, make(dc.DescribeConfigsRequest, resources=(make(
        dc.DescribeConfigsResource, resource_type=kind, resource_name=name, configuration_keys=None),),
        include_synonyms=True, include_documentation=False))
    [result] = response.results
    return result.error_code, {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
                               for c in result.configs}


def alter(wire: Wire, kind: int, name: str, *changes: tuple[str, int, str | None]) -> tuple[int, str | None]:
    response = wire.request(44, 1, make(iac.IncrementalAlterConfigsRequest, validate_only=False, resources=(make(
        iac.AlterConfigsResource, resource_type=kind, resource_name=name, configs=tuple(
            make(iac.AlterableConfig, name=n, config_operation=op, value=v) for n, op, v in changes)),)))
    [result] = response.responses
    return result.error_code, result.error_message


def test_dynamic_broker_config_applies_at_once_and_survives_a_restart(tmp_path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource("broker", "1", incremental_configs=[
            ConfigEntry("max.connections", "2", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=10)
        with Wire(broker.bootstrap_servers) as wire:
            _, configs = describe(wire, BROKER, "1")
            assert configs["max.connections"] == ("2", 2, [("max.connections", "2", 2),
                                                          ("max.connections", "10000", 5)])
            # the admin client's connection and this one are the two allowed: a third is closed
            with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as third:
                third.settimeout(5)
                assert third.recv(1) == b""
    with Broker(data_dir=str(tmp_path)) as again, Wire(again.bootstrap_servers) as wire:
        assert again.config.max_connections == 2
        assert alter(wire, BROKER, "1", ("max.connections", DELETE, None)) == (ErrorCode.none, None)
        _, configs = describe(wire, BROKER, "1")
        assert configs["max.connections"][:2] == ("10000", 5) and again.config.max_connections == 10000


def test_static_broker_configs_are_refused_as_kafka_refuses_them(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        error, message = alter(wire, BROKER, "1", ("auto.create.topics.enable", SET, "false"))
        assert error == ErrorCode.invalid_request
        assert message == "Cannot update these configs dynamically: Set(auto.create.topics.enable)"
        # a name Kafka does not know is kept, as Kafka keeps it (tests/parity/test_configs_parity.py)
        assert alter(wire, BROKER, "1", ("no.such.config", SET, "1")) == (ErrorCode.none, None)
        _, configs = describe(wire, BROKER, "1")
    assert configs["auto.create.topics.enable"][:2] == ("true", 5)
    # set at start (here: the test broker's own address), as Kafka shows its server.properties
    assert configs["listeners"][:2] == (f"PLAINTEXT://127.0.0.1:{broker.port}", 4)


def test_a_cluster_wide_default_applies_below_a_per_broker_value(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        assert alter(wire, BROKER, "", ("producer.id.expiration.ms", SET, "60000"))[0] == ErrorCode.none
        _, configs = describe(wire, BROKER, "1")
        assert configs["producer.id.expiration.ms"][:2] == ("60000", 3)
        assert broker.server.cluster.producers.expiration_ms == 60000
        assert alter(wire, BROKER, "1", ("producer.id.expiration.ms", SET, "120000"))[0] == ErrorCode.none
        _, configs = describe(wire, BROKER, "1")
        assert [s[2] for s in configs["producer.id.expiration.ms"][2]] == [2, 3, 5]
        assert broker.server.cluster.producers.expiration_ms == 120000
        alter(wire, BROKER, "1", ("producer.id.expiration.ms", DELETE, None))
        alter(wire, BROKER, "", ("producer.id.expiration.ms", DELETE, None))
    assert broker.server.cluster.producers.expiration_ms == 86_400_000


def test_broker_loggers_are_python_logging_levels(broker: Broker) -> None:
    name = "kafkacompat.handlers.fetch"
    with Wire(broker.bootstrap_servers) as wire:
        _, loggers = describe(wire, BROKER_LOGGER, "1")
        assert "root" in loggers and loggers[name][1] == 6
        assert alter(wire, BROKER_LOGGER, "1", (name, SET, "TRACE"))[0] == ErrorCode.none
        assert describe(wire, BROKER_LOGGER, "1")[1][name][0] == "TRACE"
        assert logging.getLogger(name).isEnabledFor(logging.DEBUG)
        assert alter(wire, BROKER_LOGGER, "1", (name, DELETE, None))[0] == ErrorCode.none
        assert logging.getLogger(name).level == logging.NOTSET
        assert alter(wire, BROKER_LOGGER, "1", (name, SET, "LOUD"))[0] == ErrorCode.invalid_config
        assert alter(wire, BROKER_LOGGER, "1", ("no.such.logger", SET, "INFO"))[0] == ErrorCode.invalid_config


@pytest.mark.parametrize(("value", "error"), [("50000", ErrorCode.none), ("1000", ErrorCode.invalid_config)])
def test_group_configs_within_kafkas_bounds(broker: Broker, value: str, error: ErrorCode) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        assert alter(wire, GROUP, f"g-{value}", ("consumer.session.timeout.ms", SET, value))[0] == error
        _, configs = describe(wire, GROUP, f"g-{value}")
    assert len(configs) == 10
    expected = (value, 8) if error == ErrorCode.none else ("45000", 5)
    assert configs["consumer.session.timeout.ms"][:2] == expected
