"""Shared fixtures: a real broker per test module, in memory, on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

# The plugin users get by entry point once kafkacompat is installed; named
# here too so the suite runs from a checkout that is not pip-installed.
pytest_plugins = ["kafkacompat.pytest_plugin"]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
