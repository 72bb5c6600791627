"""The first group on a fresh cluster joins once (issue 37).

No __consumer_offsets exists yet: the broker a consumer asks FindCoordinator
creates it and names the leader of the group's partition, which learns of
the topic at its next heartbeat and catches up its partitions before it
coordinates. The consumer's JoinGroup came within milliseconds and was
answered NOT_COORDINATOR; librdkafka asked for the coordinator again and
joined about 3 s later, so the first group took a join (and a rebalance
delay) more than any later one. The named coordinator now waits for its
catch-up instead. The consumer here bootstraps from a broker that is not
the coordinator, the case where the race was lost (about half the runs
on the old code: it depends on which broker librdkafka asks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer

from kafkacompat.broker.cluster import OFFSETS_TOPIC
from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.cluster.membership import coordinator_partition
from kafkacompat.testing.cluster import BrokerCluster
from tests.cluster.test_shared_store import create_topic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

GROUP, OFFSETS_PARTITIONS = "first-group", 50


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def cluster(cloud_args: list[str]) -> Iterator[BrokerCluster]:
    with BrokerCluster(3, cloud_args) as running:
        yield running


def test_the_first_group_on_a_fresh_cluster_joins_once(cluster: BrokerCluster) -> None:
    topic = create_topic(cluster.bootstrap, 3)
    index = coordinator_partition(GROUP, OFFSETS_PARTITIONS)
    coordinator = preferred_leader([1, 2, 3], ("/default", OFFSETS_TOPIC, index))  # where the new row puts it
    asked = next(b for n, b in enumerate(cluster.brokers, 1) if n != coordinator)
    lines = _Lines()
    logger = logging.getLogger("rdkafka-first-group")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    consumer = Consumer({"bootstrap.servers": asked.bootstrap, "group.id": GROUP, "debug": "cgrp",
                         "logger": logger, "auto.offset.reset": "earliest"})
    assigned: list[int] = []
    try:
        consumer.subscribe([topic], on_assign=lambda _, parts: assigned.append(len(parts)))
        deadline = time.monotonic() + 60
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()
    joins = [line for line in lines.lines if "JoinGroup response" in line]
    assert assigned == [3], assigned
    assert any(f"coordinator is {cluster.broker(coordinator).bootstrap} id {coordinator}" in line
               for line in lines.lines), "the coordinator was not the broker predicted"
    assert not [line for line in joins if "Not coordinator" in line], joins

