"""Group tests run against a broker with short group timers so the suite stays fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker
from tests.groups.helpers import GROUP_SETTINGS


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(**GROUP_SETTINGS) as running:
        yield running
