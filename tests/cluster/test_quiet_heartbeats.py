"""A heartbeat that finds nothing changed reads no leader rows and plans no partition.

Every heartbeat (1 s by default) fetched every row of kc_partition_leaders
and planned every partition on the event loop; with 8,000 topics on the
cloud engine that was about a tenth of the broker's time, and it grows with
the topics (issue 32). Now a heartbeat first reads the partitions' change
stamp, the brokers and a fingerprint of the table (its rows and the sum of
their epochs: a move raises an epoch); when all match a tick that changed
nothing, it stops there. Here two cluster views share a real PostgreSQL:
quiet heartbeats fetch no rows, and a move, a new partition or a broker
leaving is still seen within a few heartbeats.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkacompat.cluster import leadership
from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.cluster.membership import Member, PartitionKey
from kafkacompat.cluster.postgres_cluster import PostgresCluster
from kafkacompat.testing.services import Postgres

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LEASE_MS, HEARTBEAT_MS = 1000, 100


def key_led_by(node_id: int, nodes: list[int], start: int = 0) -> PartitionKey:
    return next(k for k in (("/s", f"t{i}", 0) for i in range(start, start + 100)) if preferred_leader(nodes, k) == node_id)


async def _until(check, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        await asyncio.sleep(0.02)


async def test_quiet_heartbeats_fetch_no_rows_and_changes_are_still_seen(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres.create_database()
    one, two = key_led_by(1, [1, 2]), key_led_by(2, [1, 2])
    known = [one, two]
    fetched: list[int] = []
    read_leaders = leadership.read_leaders

    async def counted(conn):
        rows = await read_leaders(conn)
        fetched.append(len(rows))
        return rows

    monkeypatch.setattr(leadership, "read_leaders", counted)
    first = PostgresCluster(Member(1, "127.0.0.1", 9001), url, lambda: list(known), LEASE_MS, HEARTBEAT_MS)
    second = PostgresCluster(Member(2, "127.0.0.1", 9002), url, lambda: list(known), LEASE_MS, HEARTBEAT_MS)
    try:
        for view in (first, second):
            await view.start()
            await view.serving()
        await _until(lambda: first.leads(one) and second.leads(two), "each broker leads its own partition")

        await asyncio.sleep(5 * HEARTBEAT_MS / 1000)  # the ticks after the last change: a quiet one each
        fetched.clear()
        await asyncio.sleep(10 * HEARTBEAT_MS / 1000)
        assert fetched == [], f"quiet heartbeats fetched the leader table {len(fetched)} times"

        three = key_led_by(1, [1, 2], start=100)
        known.append(three)  # a topic made: its partition is placed at the next heartbeat
        await _until(lambda: first.leads(three), "the new partition led by its preferred broker")
        assert second.leader_of(three) is not None, "the other broker never read the new row"
        assert fetched, "a change was placed without reading the table"

        await second.leave()  # a clean stop: its partition moves to broker 1
        await second.close()
        await _until(lambda: first.leads(two), "broker 1 leads what broker 2 led once it left")
    finally:
        await second.close()
        await first.close()
