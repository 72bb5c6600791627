"""What happens on the source while a link runs: retention gaps, compaction, topics deleted and recreated."""

from __future__ import annotations

import pytest

from kafkacompat.testing import Broker

from .helpers import admin, batches, end_offset, link_state, replica, values, wait_for


@pytest.fixture
def pair(tmp_path):
    a = Broker(str(tmp_path / "a"), cluster_name="a").start()
    b = Broker(str(tmp_path / "b"), cluster_name="b").start()
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    yield a, b
    b.stop()
    a.stop()


def log_start(broker: Broker, topic: str, partition: int = 0) -> int:
    return broker.server.store.partition("/s", topic, partition).log_start_offset


def delete_records(broker: Broker, topic: str, before: int) -> None:
    """DeleteRecords as a stock admin client sends it."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [future] = client.delete_records([TopicPartition(f"/s:{topic}", 0, before)], request_timeout=10).values()
    assert future.result(timeout=15).low_watermark == before


def in_sync(broker: Broker) -> bool:
    return all(link["state"] == "in-sync" for link in link_state(broker, "/s"))


def test_retention_gap_while_paused_is_skipped_keeping_offsets(pair):
    a, b = pair
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    for i in range(5):
        a.produce("/s:t", f"early-{i}".encode())
    wait_for(lambda: end_offset(b, "/s", "t") == 5, what="first messages replicated")
    admin(a).call("replica.pause", path="/s", replica=replica(b, "/s"))
    for i in range(5, 20):
        a.produce("/s:t", f"m-{i}".encode())
    delete_records(a, "t", 12)  # offsets 5..11 go before the replica got them
    admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "t") == 20 and in_sync(a), what="replica caught up past the gap")
    assert log_start(b, "t") == 12
    assert batches(b, "/s", "t") == batches(a, "/s", "t")
    assert values(b, "/s:t") == values(a, "/s:t") == [(i, f"m-{i}".encode()) for i in range(12, 20)]
    [link] = link_state(a, "/s")
    assert link["state"] == "in-sync" and link["last_error"] is None
    a.produce("/s:t", b"after")
    wait_for(lambda: end_offset(b, "/s", "t") == 21, what="the link goes on after the gap")
    assert values(b, "/s:t")[-1] == (20, b"after")


def test_new_replica_of_a_source_whose_log_start_moved(pair):
    a, b = pair
    for i in range(10):
        a.produce("/s:t", f"m-{i}".encode())
    delete_records(a, "t", 7)
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "t") == 10 and in_sync(a), what="replica copied what the source holds")
    assert log_start(b, "t") == 7 and values(b, "/s:t") == values(a, "/s:t")


def test_compacted_topic_keeps_its_offset_gaps(tmp_path):
    """A compacted source ships its cleaned batches (holes included) and the replica never cleans them otherwise."""
    a = Broker(str(tmp_path / "a"), cluster_name="a", log_cleaner_backoff_ms=50).start()
    b = Broker(str(tmp_path / "b"), cluster_name="b", log_cleaner_backoff_ms=50).start()
    try:
        for broker in (a, b):
            admin(broker).call("stream.create", path="/s", policy={"partitionlet_bytes": 2048})
        admin(a).call("topic.create", name="/s:state", partitions=1,
                      configs={"cleanup.policy": "compact", "segment.bytes": "2048",
                               "min.cleanable.dirty.ratio": "0.01"})
        for i in range(200):
            a.produce("/s:state", f"v{i}".encode() * 8, key=f"k{i % 5}".encode())
        wait_for(lambda: len(values(a, "/s:state")) < 150, what="the source compacted")
        admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
        wait_for(lambda: end_offset(b, "/s", "state") == 200 and in_sync(a), what="compacted topic replicated")
        source = values(a, "/s:state")
        assert values(b, "/s:state") == source  # the same offsets, gaps included
        assert batches(b, "/s", "state") == batches(a, "/s", "state")
        offsets = [offset for offset, _ in source]
        assert offsets != list(range(offsets[0], offsets[0] + len(offsets)))  # there are gaps
        assert b.server.store.get_topic("/s", "state").configs["cleanup.policy"] == "compact"
        # the replica's own cleaner keeps the latest value of each key at the same offset as the source's
        latest = {}
        for offset, value in source:
            latest[value[:2]] = offset
        for i in range(200, 260):
            a.produce("/s:state", f"w{i}".encode() * 8, key=f"k{i % 5}".encode())
        wait_for(lambda: end_offset(b, "/s", "state") == 260, what="more replicated")
        tail_a = {o: v for o, v in values(a, "/s:state") if o >= 255}
        tail_b = {o: v for o, v in values(b, "/s:state") if o >= 255}
        assert tail_a == tail_b and len(tail_b) == 5
    finally:
        b.stop()
        a.stop()
