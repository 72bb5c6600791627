"""Stream replication between clusters: brokers on loopback, each its own cluster on disk."""

from __future__ import annotations

import pytest

from kafkacompat.testing import Broker
from kafkacompat.testing.services import TEST_STORE_VARIABLE, ServiceUnavailable

from .helpers import admin, batches, end_offset, link_state, replica, values, wait_for


@pytest.fixture
def clusters(tmp_path, monkeypatch):
    started = []

    def make(name: str, engine: str = "disk") -> Broker:
        """A one-broker cluster on disk, or on the cloud engine (PostgreSQL + S3)."""
        if engine == "cloud":
            with monkeypatch.context() as env:
                env.setenv(TEST_STORE_VARIABLE, "cloud")
                try:
                    broker = Broker(cluster_name=name)
                except ServiceUnavailable as exc:
                    pytest.skip(str(exc))
        else:
            broker = Broker(str(tmp_path / name), cluster_name=name)
        started.append(broker.start())
        return broker

    yield make
    for broker in reversed(started):
        broker.stop()


def in_sync(broker: Broker, path: str, count: int = 1) -> bool:
    links = link_state(broker, path)
    return len(links) == count and all(entry["state"] == "in-sync" for entry in links)


@pytest.mark.parametrize("destination", ["disk", "cloud"])
def test_one_way_copies_existing_data_byte_for_byte(clusters, destination):
    a, b = clusters("sanjose"), clusters("newyork", destination)
    admin(a).call("stream.create", path="/s", policy={"default_partitions": 2})
    admin(b).call("stream.create", path="/s")
    for i in range(30):
        a.produce("/s:metrics", f"m{i}".encode(), partition=i % 2)
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: in_sync(a, "/s"), what="link in sync")
    for p in (0, 1):
        assert batches(b, "/s", "metrics", p) == batches(a, "/s", "metrics", p)
    assert values(b, "/s:metrics", 0) == values(a, "/s:metrics", 0)
    # and what comes later follows
    a.produce("/s:metrics", b"late", partition=1)
    wait_for(lambda: end_offset(b, "/s", "metrics", 1) == 16, what="late message replicated")
    assert batches(b, "/s", "metrics", 1) == batches(a, "/s", "metrics", 1)
    [link] = link_state(a, "/s")
    assert link["replica"] == replica(b, "/s") and link["lag_messages"] == 0 and link["cluster"] == "newyork"


def _clusters_with_stream(clusters, path: str = "/s") -> tuple[Broker, Broker]:
    """Clusters a and b, each holding the stream `path`."""
    a, b = clusters("a"), clusters("b")
    for broker in (a, b):
        admin(broker).call("stream.create", path=path)
    return a, b


def _link(src: Broker, dst: Broker, path: str = "/s", **options) -> None:
    admin(src).call("replica.add", path=path, replica=replica(dst, path), **options)


def _everywhere_same(brokers, topic: str, count: int, partition: int = 0) -> None:
    wait_for(lambda: all(end_offset(b, "/s", topic, partition) == count for b in brokers),
             what=f"{topic} at {count} everywhere")
    first = batches(brokers[0], "/s", topic, partition)
    assert sum(len(values(brokers[0], f"/s:{topic}", partition)) for _ in [0]) == count
    for other in brokers[1:]:
        assert batches(other, "/s", topic, partition) == first


def test_chain_a_b_c(clusters):
    a, b, c = clusters("a"), clusters("b"), clusters("c")
    for broker in (a, b, c):
        admin(broker).call("stream.create", path="/s")
    _link(a, b)
    _link(b, c)
    for i in range(20):
        a.produce("/s:t", f"v{i}".encode())
    _everywhere_same([a, b, c], "t", 20)


@pytest.mark.parametrize("topology", ["ring", "mesh"])
def test_ring_and_full_mesh_keep_every_message_once(clusters, topology):
    brokers = [clusters(n) for n in ("a", "b", "c")]
    for broker in brokers:
        admin(broker).call("stream.create", path="/s")
    pairs = [(0, 1), (1, 2), (2, 0)] if topology == "ring" else [(i, j) for i in range(3) for j in range(3) if i != j]
    for i, j in pairs:
        _link(brokers[i], brokers[j])
    # each cluster is the master of its own topic (topic names unique per master)
    for n, broker in enumerate(brokers):
        for i in range(15):
            broker.produce(f"/s:from{n}", f"{n}-{i}".encode())
    for n in range(3):
        _everywhere_same(brokers, f"from{n}", 15)
    for broker in brokers:
        wait_for(lambda: all(entry["state"] == "in-sync" for entry in link_state(broker, "/s")), what="links in sync")
        assert all(entry["last_error"] is None for entry in link_state(broker, "/s"))
    # still exactly once after more writes go round
    brokers[1].produce("/s:from1", b"more")
    _everywhere_same(brokers, "from1", 16)


def test_multimaster_disjoint_topics(clusters):
    a, b = _clusters_with_stream(clusters)
    _link(a, b)
    _link(b, a)
    for i in range(10):
        a.produce("/s:sj", f"a{i}".encode())
        b.produce("/s:ny", f"b{i}".encode())
    _everywhere_same([a, b], "sj", 10)
    _everywhere_same([a, b], "ny", 10)


def test_multimaster_collision_breaks_the_link_and_keeps_both_sides(clusters):
    a, b = _clusters_with_stream(clusters)
    _link(a, b, paused=True)
    a.produce("/s:t", b"from-a")
    b.produce("/s:t", b"from-b")  # b writes the same partition while the link is paused: offset 0 on both
    admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["state"] == "broken"], what="broken link")
    assert "topic t partition 0" in link["reason"] and "offset 0" in link["reason"]
    assert values(a, "/s:t") == [(0, b"from-a")] and values(b, "/s:t") == [(0, b"from-b")]


def test_pause_and_resume(clusters):
    a, b = _clusters_with_stream(clusters)
    _link(a, b)
    a.produce("/s:t", b"one")
    wait_for(lambda: end_offset(b, "/s", "t") == 1, what="first message replicated")
    state = admin(a).call("replica.pause", path="/s", replica=replica(b, "/s"))
    assert state["state"] == "paused"
    a.produce("/s:t", b"two")
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["lag_messages"] == 1], what="lag of 1")
    assert link["state"] == "paused" and end_offset(b, "/s", "t") == 1
    admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "t") == 2, what="resumed")
    assert batches(b, "/s", "t") == batches(a, "/s", "t")


def test_new_topics_partitions_configs_and_deletions_follow(clusters):
    a, b = _clusters_with_stream(clusters)
    _link(a, b)
    admin(a).call("topic.create", name="/s:grows", partitions=1, configs={"retention.ms": "3600000"})
    wait_for(lambda: b.server.store.get_topic("/s", "grows"), what="topic created on replica")
    admin(a).call("topic.edit", name="/s:grows", partitions=3)
    wait_for(lambda: b.server.store.get_topic("/s", "grows").partitions == 3, what="partitions added on replica")
    assert b.server.store.get_topic("/s", "grows").configs == {"retention.ms": "3600000"}
    a.produce("/s:grows", b"p2", partition=2)
    wait_for(lambda: end_offset(b, "/s", "grows", 2) == 1, what="new partition replicated")
    admin(a).call("topic.delete", name="/s:grows")
    wait_for(lambda: b.server.store.get_topic("/s", "grows") is None, what="deletion replicated")


def test_unreachable_replica_is_pending_with_an_error(clusters, caplog):
    a = clusters("a")
    admin(a).call("stream.create", path="/s")
    a.produce("/s:t", b"x")
    admin(a).call("replica.add", path="/s", replica="127.0.0.1:1/s")
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["last_error"]], what="an error")
    assert link["state"] == "pending" and "cannot reach 127.0.0.1:1" in link["last_error"]
    assert link["lag_messages"] == 1
    assert any("cannot reach 127.0.0.1:1" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


def test_different_partition_counts_break_the_link(clusters):
    a, b = _clusters_with_stream(clusters)
    admin(a).call("topic.create", name="/s:t", partitions=1)
    admin(b).call("topic.create", name="/s:t", partitions=2)
    _link(a, b)
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["state"] == "broken"], what="broken link")
    assert "partition counts differ" in link["reason"]
    assert b.server.store.get_topic("/s", "t").partitions == 2


def test_non_empty_destination_with_other_data_breaks_the_link(clusters):
    a, b = _clusters_with_stream(clusters)
    a.produce("/s:t", b"mine")
    a.produce("/s:t", b"mine too")
    b.produce("/s:t", b"theirs")
    _link(a, b)
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["state"] == "broken"], what="broken link")
    assert "collision in topic t partition 0" in link["reason"]
    assert values(b, "/s:t") == [(0, b"theirs")]


def test_missing_destination_stream_is_reported(clusters):
    a, b = clusters("a"), clusters("b")
    admin(a).call("stream.create", path="/s")
    admin(a).call("replica.add", path="/s", replica=replica(b, "/elsewhere"))
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["state"] == "broken"], what="broken link")
    assert "stream /elsewhere does not exist on cluster b" in link["reason"]


def test_destination_path_may_differ_and_links_survive_restart(tmp_path):
    a = Broker(str(tmp_path / "a"), cluster_name="a").start()
    b = Broker(str(tmp_path / "b"), cluster_name="b").start()
    try:
        admin(a).call("stream.create", path="/src")
        admin(b).call("stream.create", path="/copy/of/src")
        admin(a).call("replica.add", path="/src", replica=replica(b, "/copy/of/src"))
        a.produce("/src:t", b"before")
        wait_for(lambda: end_offset(b, "/copy/of/src", "t") == 1, what="replicated")
        b_port = b.port
        b.stop()
        a.produce("/src:t", b"while b is down")
        a.stop()
        a = Broker(str(tmp_path / "a")).start()
        b = Broker(str(tmp_path / "b"), port=b_port).start()
        assert admin(a).call("cluster.info")["name"] == "a"
        a.produce("/src:t", b"after")
        wait_for(lambda: end_offset(b, "/copy/of/src", "t") == 3, what="resumed after restarts")
        assert batches(b, "/copy/of/src", "t") == batches(a, "/src", "t")
    finally:
        a.stop()
        b.stop()


def test_throttle_is_honoured_and_compression_keeps_bytes(clusters):
    import time

    a, b = _clusters_with_stream(clusters)
    payload = bytes(range(256)) * 40  # 10 KiB, compressible
    for i in range(250):  # about 2.5 MB
        a.produce("/s:bulk", payload + str(i).encode())
    started = time.monotonic()
    _link(a, b, throttle=1, compression="zstd")  # 1 MB/s
    wait_for(lambda: end_offset(b, "/s", "bulk") == 250, timeout=30, what="bulk replicated")
    elapsed = time.monotonic() - started
    assert elapsed >= 1.4, f"2.5 MB crossed a 1 MB/s link in {elapsed:.2f}s"
    assert batches(b, "/s", "bulk") == batches(a, "/s", "bulk")
    [link] = link_state(a, "/s")
    assert link["throttle_mb_s"] == 1 and link["compression"] == "zstd"
    edited = admin(a).call("replica.edit", path="/s", replica=replica(b, "/s"), throttle=0, compression="lz4")
    assert (edited["throttle_mb_s"], edited["compression"]) == (0, "lz4")
    a.produce("/s:bulk", payload)
    wait_for(lambda: end_offset(b, "/s", "bulk") == 251, what="after edit")
    assert batches(b, "/s", "bulk") == batches(a, "/s", "bulk")


def test_lost_destination_shows_in_replica_list_while_idle(clusters):
    a, b = _clusters_with_stream(clusters)
    _link(a, b)
    a.produce("/s:t", b"x")
    wait_for(lambda: in_sync(a, "/s"), what="in sync")
    b.stop()
    [link] = wait_for(lambda: [entry for entry in link_state(a, "/s") if entry["state"] == "pending"], what="pending")
    assert "cannot reach" in link["last_error"]


def test_deleting_the_stream_ends_its_links(clusters):
    a, b = _clusters_with_stream(clusters)
    _link(a, b)
    a.produce("/s:t", b"x")
    wait_for(lambda: in_sync(a, "/s"), what="in sync")
    admin(a).call("stream.delete", path="/s")
    wait_for(lambda: not a.server.cluster.replication.links, what="link gone")
    assert admin(a).call("cluster.info")["replica_links"] == 0
    assert values(b, "/s:t") == [(0, b"x")]  # the replica keeps its data
