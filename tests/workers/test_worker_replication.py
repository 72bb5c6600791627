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
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafkacompat.storage.disk.shared import owner_of

from kafkacompat.admin.client import AdminClient
from kafkacompat.chaos.link_proxy import LinkProxy
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
            owners = {owner_of(2, "/s", "t", i) for i in range(4)}
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
                                                                      if owner_of(2, "/s", "t", i) == 1))
            assert producer.flush(30) == 0
            wait_for(lambda: sum(end_offset(dest, "/s", "t", i) for i in range(4)) == 101, 30,
                     "a record written later to worker 1 shipped")
    finally:
        source.kill()


def link_state_at(admin: AdminClient) -> list[dict]:
    return admin.call("replica.list", path="/s")


def test_a_link_into_workers_writes_every_workers_partitions_and_a_ring_stops_there(tmp_path: Path) -> None:
    """Into `serve --workers 2`: the link reaches one worker, learns there which worker writes each
    partition and sends each partition's batches straight to it (its status lists both ports); each owner
    stores them and keeps their path (in worker 0's table); the link back does not ship them home again.
    Before stop 56 the link broke on worker 1's first partition; before stop 58 every batch for the
    other worker's partitions was relayed by the worker reached."""
    workers = Workers(tmp_path / "workers", 2)
    try:
        with Broker(str(tmp_path / "single")) as single:
            controller = AdminClient(f"127.0.0.1:{workers.ports[0]}", timeout=30)
            controller.call("stream.create", path="/s")
            AdminClient(single.bootstrap_servers, timeout=30).call("stream.create", path="/s",
                                                                   policy={"default_partitions": 4})
            AdminClient(single.bootstrap_servers, timeout=30).call(
                "replica.add", path="/s", replica=f"127.0.0.1:{workers.ports[1]}/s")  # any worker's port
            controller.call("replica.add", path="/s", replica=replica(single, "/s"))
            producer = Producer({"bootstrap.servers": single.bootstrap_servers})
            for index in range(4):
                for n in range(10):
                    producer.produce("/s:b", value=f"{index}-{n}".encode(), partition=index)
            assert producer.flush(30) == 0
            consumer = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": "reader",
                                 "auto.offset.reset": "earliest", "enable.auto.commit": False})
            consumer.assign([TopicPartition("/s:b", i, 0) for i in range(4)])
            read: list[tuple[int, bytes]] = []
            wait_for(lambda: read.extend((m.partition(), m.value()) for m in consumer.consume(40, 0.5)
                                         if m.error() is None) or len(read) >= 40, 60, "all 40 read at the workers")
            consumer.close()
            assert sorted(read) == sorted((i, f"{i}-{n}".encode()) for i in range(4) for n in range(10))
            (out,) = link_state_at(AdminClient(single.bootstrap_servers, timeout=30))
            assert out["ports"] == sorted(workers.ports), out
            (back,) = wait_for(lambda: [s for s in link_state_at(controller) if s["state"] == "in-sync"], 30,
                               "the link back in sync")
            assert back["shipped_bytes"] == 0, back  # every batch's path holds the single broker: none went home
    finally:
        workers.kill()


def high_marks(reader: Consumer, topic: str, partitions: int) -> list[int] | None:
    """Each partition's high watermark, or None while the topic is not known yet (the link makes it on
    the replica, and the reader's metadata may not list it yet: UNKNOWN_PARTITION)."""
    try:
        return [reader.get_watermark_offsets(TopicPartition(topic, i), timeout=5)[1] for i in range(partitions)]
    except KafkaException:
        return None


@pytest.mark.parametrize("forwarded_at", ["another port", "the same port at another address"])
def test_a_link_through_a_forwarded_port_sends_everything_through_it(tmp_path: Path, forwarded_at: str) -> None:
    """A link that reaches `serve --workers 2` through a relay or a forwarded port (a tunnel) cannot count
    on the other workers' ports being open at that address: on another port it keeps to the one address it
    was given; at worker 0's own port number on another address it tries worker 1's there, cannot connect,
    and sends worker 1's batches through the forwarded port. Every record arrives either way."""
    workers = Workers(tmp_path / "workers", 2)
    try:
        if forwarded_at == "another port":
            proxy = LinkProxy(workers.ports[0])
        else:
            proxy = LinkProxy(workers.ports[0], host="127.0.0.2", port=workers.ports[0])  # workers bind 127.0.0.1
        with Broker(str(tmp_path / "single")) as single:
            AdminClient(f"127.0.0.1:{workers.ports[0]}", timeout=30).call("stream.create", path="/s")
            source = AdminClient(single.bootstrap_servers, timeout=30)
            source.call("stream.create", path="/s", policy={"default_partitions": 4})
            source.call("replica.add", path="/s", replica=f"{proxy.server.getsockname()[0]}:{proxy.port}/s")
            producer = Producer({"bootstrap.servers": single.bootstrap_servers})
            for index in range(4):
                for n in range(10):
                    producer.produce("/s:f", value=f"{index}-{n}".encode(), partition=index)
            assert producer.flush(30) == 0
            assert {owner_of(2, "/s", "f", i) for i in range(4)} == {0, 1}  # both workers write
            reader = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": "ends"})
            try:
                wait_for(lambda: high_marks(reader, "/s:f", 4) == [10] * 4, 60, "every partition replicated")
            finally:
                reader.close()
            (link,) = link_state_at(source)
            assert link["ports"] == [proxy.port], link
    finally:
        workers.kill()
