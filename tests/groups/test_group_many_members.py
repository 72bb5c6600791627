"""Fifty consumers joining one group converge in a single rebalance."""

from __future__ import annotations

import logging

from kafkacompat.testing import Broker
from tests.groups.converge import converge

log = logging.getLogger(__name__)


def test_fifty_members_converge_in_one_rebalance():
    # joins arriving within the initial rebalance delay extend it (Kafka default 3000 ms)
    with Broker(group_initial_rebalance_delay_ms=1000) as broker:
        figure = converge(broker, 50)
    log.warning("50 members converged in %.2fs: %s", figure["seconds"], figure)
    assert figure["generation"] == 1, figure
    assert figure["assign_callbacks"] == 50 and figure["revoke_callbacks"] == 0, figure
    assert figure["seconds"] < 20, figure
