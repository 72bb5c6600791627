"""Feature levels and broker registrations on a cluster of brokers sharing one PostgreSQL + S3 store.

A level one broker finalizes is the level every broker reports (the store's
settings are the cluster's), and `kafka-cluster unregister` removes a
killed broker's registration, as Kafka's controller removes a dead
broker's; the id is then unknown, as on Kafka. A live broker unregistered
loses its lease and registers again at its next heartbeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing.cluster import TEST_LEASE_MS, BrokerCluster
from tests.cluster.test_membership import metadata
from tests.cluster.test_shared_store import wait_until
from tests.test_features import SAFE_DOWNGRADE, features, update
from tests.wire import Wire, request_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

@pytest.fixture
def cluster(cloud_args: list[str]) -> Iterator[BrokerCluster]:
    with BrokerCluster(2, cloud_args) as running:
        yield running


def registered(database: str, node_id: int) -> bool:
    """Whether the broker holds a live registration (its lease) in the cluster's database."""
    async def query() -> bool:
        conn = await asyncpg.connect(database)
        try:
            return bool(await conn.fetchval("SELECT count(*) FROM kc_brokers WHERE node_id = $1 "
                                            "AND lease_until > now()", node_id))
        finally:
            await conn.close()
    return asyncio.run(query())


def unregister(bootstrap: str, node_id: int) -> tuple[ErrorCode, str | None]:
    with Wire(bootstrap) as wire:
        answer = wire.request(64, 0, make(request_class(64, 0), broker_id=node_id))
    return answer.error_code, answer.error_message


def levels(bootstrap: str) -> tuple[dict[str, int], int]:
    with Wire(bootstrap) as wire:
        return features(wire)


def test_a_level_set_at_one_broker_is_every_brokers_and_a_dead_one_is_unregistered(
        cluster: BrokerCluster, cloud_args: list[str]) -> None:
    first, second = cluster.broker(1), cluster.broker(2)
    before, epoch = levels(second.bootstrap)
    assert before["transaction.version"] == 1  # transactions v2 needs every leader able to join a transaction
    with Wire(first.bootstrap) as wire:
        assert update(wire, ("group.version", 0, SAFE_DOWNGRADE)).error_code == ErrorCode.none
        beyond = update(wire, ("transaction.version", 2, 1))
    assert beyond.error_message.endswith("Local controller 1 only supports versions 0-1")
    after = ({k: v for k, v in before.items() if k != "group.version"}, epoch + 1)
    wait_until("broker 2 reports the level broker 1 finalized", lambda: levels(second.bootstrap) == after,
               timeout=10)
    cluster.restart(1)
    assert levels(first.bootstrap) == after  # kept in the store
    second.kill()
    wait_until("broker 2 dropped from the live list", lambda: metadata(first.bootstrap) == ({1}, 1),
               timeout=TEST_LEASE_MS / 1000 + 10)
    assert unregister(first.bootstrap, 2) == (ErrorCode.none, None)
    assert unregister(first.bootstrap, 2) == (ErrorCode.broker_id_not_registered,
                                              "Broker ID 2 is not currently registered")
    assert unregister(first.bootstrap, 9)[0] == ErrorCode.broker_id_not_registered
    assert metadata(first.bootstrap) == ({1}, 1)
    # A live broker unregistered registers again, as a Kafka broker does once fenced
    assert unregister(first.bootstrap, 1) == (ErrorCode.none, None)
    wait_until("broker 1 registered again", lambda: registered(cloud_args[1], 1), timeout=10)
    assert metadata(first.bootstrap) == ({1}, 1)
