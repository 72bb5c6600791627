"""A PostgreSQL server per test module for brokers that form one cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing.cluster import TEST_HEARTBEAT_MS, TEST_LEASE_MS, BrokerCluster, cloud_cluster_args
from kafkacompat.testing.ports import free_port
from kafkacompat.testing.services import Postgres, ServiceUnavailable, postgres_fixture


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    yield from postgres_fixture()


@pytest.fixture
def cloud_args() -> list[str]:
    """`serve` arguments for brokers of a new cluster on a fresh PostgreSQL + S3 store (its database URL
    second); skips where PostgreSQL or moto is missing."""
    try:
        return cloud_cluster_args(TEST_LEASE_MS, TEST_HEARTBEAT_MS)
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def store_and_cluster(cloud_args: list[str]) -> Iterator[tuple[str, BrokerCluster]]:
    """Three brokers of one cluster, and their store's database URL."""
    with BrokerCluster(3, cloud_args) as running:
        yield cloud_args[cloud_args.index("--store") + 1], running


@pytest.fixture
def http_cluster(cloud_args: list[str]) -> Iterator[BrokerCluster]:
    """Two brokers of one cluster, each with its HTTP port (REST, console) as `broker.http_port`."""
    running = BrokerCluster(2, cloud_args)
    for broker in running.brokers:
        broker.http_port = free_port()  # type: ignore[attr-defined]
        broker.extra = (*broker.extra, "--http-port", str(broker.http_port))  # type: ignore[attr-defined]
    with running:
        yield running
