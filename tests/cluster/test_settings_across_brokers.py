"""Client quotas and dynamic broker configs set through one broker of a PostgreSQL + S3 cluster count at
the others.

Each broker built its quotas and applied the dynamic broker configs once,
from the settings it read at its start: a producer_byte_rate set through
broker 1 throttled nobody at broker 2, and a cluster-wide max.connections
set through broker 1 let broker 2 take any number of connections, until it
restarted. The store keeps every broker's settings current; the quotas and
the configs now follow them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import kio.schema.incremental_alter_configs.v1.request as alter_v1
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing.cluster import BrokerCluster
from tests.test_bad_input import PRODUCE_V, produce_request
from tests.test_client_quotas import set_quota
from tests.wire import Wire, request_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "metered"
CLIENT = "wire-test"  # the client id tests/wire.py sends


@pytest.fixture
def cluster(cloud_args: list[str]) -> Iterator[BrokerCluster]:
    with BrokerCluster(2, cloud_args) as running:
        yield running


def api_versions_request() -> object:
    return make(request_class(18, 3), client_software_name="t", client_software_version="1")


def led_by(bootstrap: str, broker: int, topic: str) -> int:
    """A partition of `topic` that `broker` leads."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    led = [p.id for p in metadata.topics[topic].partitions.values() if p.leader == broker]
    assert led, f"broker {broker} leads none of {topic}'s partitions"
    return led[0]


def throttle_ms(wire: Wire, partition: int) -> int | None:
    """The throttle time of a 64 KiB produce to `partition`; None when it was refused (not led yet)."""
    batch = build_batch([Record(None, b"x" * 65536, [], 0)])
    answer = wire.request(0, PRODUCE_V, produce_request(TOPIC, batch, partition=partition))
    if answer.responses[0].partition_responses[0].error_code != ErrorCode.none:
        return None
    return int(answer.throttle_time.total_seconds() * 1000)


def test_a_quota_set_through_one_broker_throttles_at_the_other(cluster: BrokerCluster) -> None:
    first, second = cluster.broker(1), cluster.broker(2)
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(30)
    partition = led_by(first.bootstrap, 2, TOPIC)
    with Wire(second.bootstrap) as at_second:
        deadline = time.monotonic() + 30
        while (throttled := throttle_ms(at_second, partition)) is None:  # until broker 2 serves it
            assert time.monotonic() < deadline, "broker 2 never took produce for its partition"
            time.sleep(0.2)
        assert throttled == 0, "throttled before any quota"
        with Wire(first.bootstrap) as at_first:
            assert set_quota(at_first, {"client-id": CLIENT}, producer_byte_rate=1024.0) == (ErrorCode.none, None)
        deadline = time.monotonic() + 20
        while not throttle_ms(at_second, partition):  # 64 KiB a request against 1 KiB/s
            assert time.monotonic() < deadline, "broker 2 never throttled the quota set through broker 1"
            time.sleep(0.2)


def test_a_dynamic_broker_config_set_through_one_broker_applies_at_the_other(cluster: BrokerCluster) -> None:
    first, second = cluster.broker(1), cluster.broker(2)
    change = make(alter_v1.AlterConfigsResource, resource_type=4, resource_name="", configs=(
        make(alter_v1.AlterableConfig, name="max.connections", config_operation=0, value="3"),))
    with Wire(first.bootstrap) as at_first:
        answer = at_first.request(44, 1, make(alter_v1.IncrementalAlterConfigsRequest, resources=(change,),
                                              validate_only=False))
    assert [r.error_code for r in answer.responses] == [ErrorCode.none]
    held: list[Wire] = []
    try:
        deadline = time.monotonic() + 20
        while True:  # broker 2 applies it once its store has the settings, before its next request
            with Wire(second.bootstrap) as probe:
                probe.request(18, 3, api_versions_request())
            held = [Wire(second.bootstrap) for _ in range(5)]
            answered = 0
            for wire in held:
                try:
                    wire.request(18, 3, api_versions_request())
                    answered += 1
                except (OSError, EOFError, ConnectionError):
                    pass
            if answered <= 3:
                break
            for wire in held:
                wire.close()
            assert time.monotonic() < deadline, f"broker 2 answered {answered} connections over max.connections=3"
            time.sleep(0.2)
    finally:
        for wire in held:
            wire.close()
