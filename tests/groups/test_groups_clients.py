"""Consumer groups with each Python client: sharing, leaving, dying, and resuming after a broker restart."""

from __future__ import annotations

import logging

import pytest

from kafkacompat.testing import Broker
from tests.groups import scenarios
from tests.groups.helpers import SESSION_MS

log = logging.getLogger(__name__)

pytestmark = pytest.mark.parametrize("lib", ["confluent", "kafka-python", "aiokafka"])


@pytest.mark.also_on_cloud
def test_three_members_consume_each_message_once(lib: str, broker: Broker, topic_name: str) -> None:
    scenarios.three_members_share_exactly_once(lib, broker, topic_name)


@pytest.mark.also_on_cloud
def test_leaving_member_partitions_move_to_the_others(lib: str, broker: Broker, topic_name: str) -> None:
    took = scenarios.leaving_member_is_replaced(lib, broker, topic_name)
    log.info("%s: handover after LeaveGroup took %.2fs", lib, took)
    assert took < SESSION_MS / 1000


def test_killed_member_partitions_move_after_its_session_timeout(lib: str, broker: Broker, topic_name: str) -> None:
    took = scenarios.killed_member_is_replaced(lib, broker, topic_name)
    log.info("%s: handover after SIGKILL took %.2fs (session timeout %dms)", lib, took, SESSION_MS)
    # the dead member keeps its partitions until its session runs out, not longer than that plus a rebalance
    assert SESSION_MS / 2000 < took < SESSION_MS / 1000 + 3


def test_new_consumer_resumes_from_offsets_committed_before_restart(lib: str, tmp_path) -> None:
    scenarios.resume_after_restart(lib, str(tmp_path))
