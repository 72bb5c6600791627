"""Group tests run against a broker with short group timers so the suite stays fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat_tests.reference import ReferenceKafka, kafka_home, kafka_tools  # noqa: F401 - kafka_tools: a fixture
from kafkacompat.testing import Broker
from tests.conftest import module_broker
from tests.groups.helpers import GROUP_SETTINGS
from tests.groups.kip848 import KIP848_KAFKA, coordinator_ready


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    yield from module_broker(request, **GROUP_SETTINGS)


@pytest.fixture(scope="session")
def kafka41() -> Iterator[ReferenceKafka]:
    """A real Kafka 4.1 with the KIP-848 timers of tests/groups/kip848.py, shared by the group tests that compare with it."""
    with ReferenceKafka(kafka_home(), **{"group.initial.rebalance.delay.ms": 0, **KIP848_KAFKA}) as running:
        coordinator_ready(running.bootstrap_servers, "warm-up")
        yield running
