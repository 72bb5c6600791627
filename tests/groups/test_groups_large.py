"""A group of 50 consumers forms in one rebalance."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from kafkacompat.testing import Broker
from tests.groups.helpers import create_topic
from tests.groups.large_group import converge

MEMBERS = 50
DELAY_MS = 1000
log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(group_initial_rebalance_delay_ms=DELAY_MS, group_min_session_timeout_ms=500) as running:
        yield running


def test_fifty_consumers_converge_in_a_single_rebalance(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, MEMBERS)
    took, recorders = asyncio.run(converge(broker.bootstrap_servers, topic_name, MEMBERS))
    log.info("%d consumers converged in %.2fs (initial delay %dms)", MEMBERS, took, DELAY_MS)
    # one assignment each, one partition each, all partitions covered: a single rebalance
    assert [len(r.assigned) for r in recorders] == [1] * MEMBERS
    owned = [p for r in recorders for p in r.assigned[0]]
    assert sorted(owned) == list(range(MEMBERS))
