"""A PostgreSQL server per test module for brokers that form one cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing.cluster import TEST_HEARTBEAT_MS, TEST_LEASE_MS, cloud_cluster_args
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
