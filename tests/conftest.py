"""Shared fixtures: a real broker per test module, in memory, on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

# tests/groups and tests/parity import compat_tests.reference (its Kafka 4.1 and tools) before
# compat_tests/conftest.py registers it: registered here too, agree() keeps showing the differing steps
pytest.register_assert_rewrite("compat_tests.reference")

from kafkacompat.testing import Broker  # noqa: E402 - after the rewrite registration

# The plugin users get by entry point once kafkacompat is installed; named
# here too so the suite runs from a checkout that is not pip-installed.
pytest_plugins = ["kafkacompat.testing.pytest_plugin"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    """Create a topic the way users do: through the Admin API."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})], operation_timeout=10)
    futures[name].result(timeout=15)
    return name


@pytest.fixture
def topic(broker: Broker, topic_name: str) -> str:
    """A fresh single-partition topic on the module's broker."""
    return create_topic(broker.bootstrap_servers, topic_name)
