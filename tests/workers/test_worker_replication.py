"""A replica link of a stream served by `serve --workers N` ships every worker's partitions.

Links run in worker 0, which opens only the partitions it owns. Before stop
56 a link of a stream with a partition on worker 1 failed on it ("partition
... belongs to another worker") and shipped nothing at all, worker 0's
partitions included. Worker 0 now reads the other workers' partitions
through them (kafkacompat/workers/peer_partition.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.storage.disk.shared import owner_of

from kafkacompat.admin.client import AdminClient
from kafkacompat.testing import Broker
from tests.replication.helpers import end_offset, replica, wait_for
from tests.workers.test_workers import Workers

pytestmark = pytest.mark.slow


def test_a_link_from_workers_ships_every_workers_partitions_and_cursors(tmp_path: Path) -> None:
    source = Workers(tmp_path / "source", 2)
    try:
        with Broker(str(tmp_path / "dest")) as dest:
            controller = AdminClient(f"127.0.0.1:{source.ports[0]}", timeout=30)
            controller.call("stream.create", path="/s", policy={"default_partitions": 4})
            AdminClient(dest.bootstrap_servers, timeout=30).call("stream.create", path="/s")
            controller.call("replica.add", path="/s", replica=replica(dest, "/s"))
            owners = {owner_of(2, "/default", "/s", "t", i) for i in range(4)}
            assert owners == {0, 1}  # the link reads both workers' partitions

            producer = Producer({"bootstrap.servers": source.bootstrap})
            for index in range(4):
                for n in range(10 * (index + 1)):
                    producer.produce("/s:t", value=f"{index}-{n}".encode(), partition=index)
            assert producer.flush(30) == 0
            wait_for(lambda: [end_offset(dest, "/s", "t", i) for i in range(4)] == [10, 20, 30, 40], 60,
                     "every partition shipped")
            consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "app"})
            consumer.commit(offsets=[TopicPartition("/s:t", i, 5) for i in range(4)], asynchronous=False)
            consumer.close()
            wait_for(lambda: sorted((c.partition, c.offset) for c in dest.server.store.get_cursors("/s", "app"))
                     == [(i, 5) for i in range(4)], 30, "the group's cursors shipped")
            (link,) = wait_for(lambda: [s for s in link_state_at(controller) if s["state"] == "in-sync"], 30,
                               "the link in sync")
            assert link["lag_messages"] == 0

            producer.produce("/s:t", value=b"later", partition=next(i for i in range(4)
                                                                      if owner_of(2, "/default", "/s", "t", i) == 1))
            assert producer.flush(30) == 0
            wait_for(lambda: sum(end_offset(dest, "/s", "t", i) for i in range(4)) == 101, 30,
                     "a record written later to worker 1 shipped")
    finally:
        source.kill()


def link_state_at(admin: AdminClient) -> list[dict]:
    return admin.call("replica.list", path="/s")
