"""Group tests run against a broker with short group timers so the suite stays fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker

# Kafka's defaults are 3000 ms delay and a 6000 ms minimum session; tests shrink both
GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 300, "group_min_session_timeout_ms": 500}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**GROUP_SETTINGS) as running:
        yield running
