"""Fixtures for parity tests: the same steps against kafkacompat and Apache Kafka 4.1.

One reference Kafka serves the whole session (it takes ~15 s to start), the
one compat_tests compares with; tests that need it skip, saying why, when the
distribution or Java is absent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compat_tests.reference import ReferenceKafka, session_reference_kafka
from kafkacompat.testing import Broker


@pytest.fixture(scope="session")
def kafka41() -> ReferenceKafka:
    """The Kafka 4.1 the compat suite compares with too (same settings): one start per session."""
    return session_reference_kafka()


@pytest.fixture(scope="module")
def ours() -> Iterator[Broker]:
    with Broker(data_dir="tmp") as running:
        yield running


@pytest.fixture(params=["kafkacompat", "kafka41"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The bootstrap servers of each broker in turn."""
    if request.param == "kafka41":
        return request.getfixturevalue("kafka41").bootstrap_servers
    return request.getfixturevalue("ours").bootstrap_servers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Parity tests start JVMs: outside the quick subset."""
    for item in items:
        if "tests/parity/" in str(item.path):
            item.add_marker(pytest.mark.slow)
