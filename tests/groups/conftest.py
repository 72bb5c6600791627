"""A broker tuned for group tests: short initial rebalance delay, short sessions allowed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

GROUP_SETTINGS = dict(group_initial_rebalance_delay_ms=300, group_min_session_timeout_ms=500)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**GROUP_SETTINGS) as running:
        yield running
