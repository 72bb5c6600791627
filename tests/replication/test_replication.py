"""Stream replication between clusters: brokers on loopback, each its own cluster on disk."""

from __future__ import annotations

import pytest

from kafkacompat.testing import Broker

from .helpers import admin, batches, end_offset, link_state, replica, values, wait_for


@pytest.fixture
def clusters(tmp_path):
    started = []

    def make(name: str) -> Broker:
        broker = Broker(str(tmp_path / name), cluster_name=name).start()
        started.append(broker)
        return broker

    yield make
    for broker in reversed(started):
        broker.stop()


def in_sync(broker: Broker, path: str, count: int = 1) -> bool:
    links = link_state(broker, path)
    return len(links) == count and all(l["state"] == "in-sync" for l in links)


def test_one_way_copies_existing_data_byte_for_byte(clusters):
    a, b = clusters("sanjose"), clusters("newyork")
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
