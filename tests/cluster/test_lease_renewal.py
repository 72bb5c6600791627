"""A broker keeps its lease while it catches up a partition it gained, however long that takes;
it is handed partitions only once it serves.

On becoming a partition's leader a broker catches up before serving it: a
tail scan that may read objects from S3, group and transaction takeovers.
Under load that took longer than the lease. When the lease was renewed by
the same task, after that work, the new leader's lease lapsed meanwhile:
the old leader took the partition back, and leadership bounced between the
two (epochs 1, 2, 3, ...) while clients waited (issue 18: Java clients
resumed 12-23 s after kill -9 of a leader). Here two cluster views share a
real PostgreSQL; the gaining broker's catch-up is a database query that
runs for three leases.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.cluster.membership import Member, PartitionKey
from kafkacompat.cluster.postgres_cluster import PostgresCluster
from kafkacompat.testing.services import Postgres

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LEASE_MS, HEARTBEAT_MS = 1000, 100
CATCH_UP_S = 3 * LEASE_MS / 1000


def key_led_by(node_id: int, nodes: list[int]) -> PartitionKey:
    """A partition whose preferred leader among `nodes` is `node_id`."""
    return next(k for k in (("/s", f"t{i}", 0) for i in range(100)) if preferred_leader(nodes, k) == node_id)


async def test_a_slow_catch_up_on_gaining_a_partition_keeps_the_lease_and_leadership_moves_once(
    postgres: Postgres,
) -> None:
    url = postgres.create_database()
    key = key_led_by(2, [1, 2])
    first = PostgresCluster(Member(1, "127.0.0.1", 9001), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    second = PostgresCluster(Member(2, "127.0.0.1", 9002), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    gains: list[PartitionKey] = []
    served_while_catching_up: list[tuple[bool, bool]] = []

    async def slow_catch_up(gained: PartitionKey) -> None:
        gains.append(gained)
        served_while_catching_up.append((first.leads(gained), second.leads(gained)))
        scan = await asyncpg.connect(url)
        try:
            await scan.execute("SELECT pg_sleep($1)", CATCH_UP_S)
        finally:
            await scan.close()
        served_while_catching_up.append((first.leads(gained), second.leads(gained)))

    second.on_leadership_gained = slow_catch_up
    watcher = await asyncpg.connect(url)
    try:
        await first.start()
        await first.serving()  # as the server says once it listens
        assert first.leads(key)  # alone, it leads everything
        await second.start()
        await second.serving()  # broker 1 hands the partition on; broker 2 catches up for three leases
        live_seen: list[set[int]] = []
        deadline = time.monotonic() + CATCH_UP_S + 10 * LEASE_MS / 1000
        while not second.leads(key) and time.monotonic() < deadline:
            rows = await watcher.fetch("SELECT node_id FROM kc_brokers WHERE lease_until > now()")
            live_seen.append({r["node_id"] for r in rows})
            await asyncio.sleep(0.05)
        assert second.leads(key), "broker 2 never served the partition it gained"
        assert not first.leads(key)
        epoch = await watcher.fetchval(
            "SELECT epoch FROM kc_partition_leaders WHERE stream = $1 AND topic = $2 AND partition = $3", *key)
    finally:
        await watcher.close()
        await second.close()
        await first.close()

    assert all(seen == {1, 2} for seen in live_seen), f"a broker's lease lapsed: {live_seen}"
    assert epoch == 1, f"leadership moved {epoch} times (one hand-over expected)"
    assert gains == [key]
    # neither broker served the partition while the new leader caught up; the old one stopped first
    assert served_while_catching_up == [(False, False), (False, False)]


async def test_a_partition_gained_while_the_lease_lapses_is_not_served_under_it(postgres: Postgres) -> None:
    """The lease lapses (here its row is expired in the database, as a long pause ends it) while the
    broker catches up a partition: it lets go of that partition instead of serving it under a
    registration whose leadership others may have taken meanwhile, and takes it again afresh."""
    url = postgres.create_database()
    key = key_led_by(1, [1])
    view = PostgresCluster(Member(1, "127.0.0.1", 9001), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    events: list[tuple[str, bool]] = []
    admin = await asyncpg.connect(url)

    async def lapse_on_first_gain(gained: PartitionKey) -> None:
        events.append(("gained", view.leads(gained)))
        if len(events) > 1:
            return
        await admin.execute("UPDATE kc_brokers SET lease_until = now() - interval '1 second' WHERE node_id = 1")
        deadline = time.monotonic() + 10 * LEASE_MS / 1000
        while time.monotonic() < deadline:  # until the renewal noticed and registered again
            if await admin.fetchval("SELECT lease_until > now() FROM kc_brokers WHERE node_id = 1"):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the broker did not register again")

    async def lost(gone: PartitionKey) -> None:
        events.append(("lost", view.leads(gone)))

    view.on_leadership_gained, view.on_leadership_lost = lapse_on_first_gain, lost
    try:
        await view.start()  # gains the partition at its first picture; the lease lapses meanwhile
        assert not view.leads(key)
        deadline = time.monotonic() + 10 * LEASE_MS / 1000
        while not view.leads(key) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert view.leads(key), "the broker never took its partition again"
    finally:
        await admin.close()
        await view.close()
    # caught up once, let go (never served), caught up again under the new registration, then served
    assert events[:3] == [("gained", False), ("lost", False), ("gained", False)]


async def test_a_starting_broker_is_handed_its_partitions_only_once_it_serves(postgres: Postgres) -> None:
    """A broker registers before its listeners are open (catching up what it leads at once); the
    old leader handed it its partitions at that moment, and clients were refused by one broker
    and could not reach the other. Now the old leader keeps serving until the new one says it
    serves (the server does once its listeners are open), then hands the partition on."""
    url = postgres.create_database()
    key = key_led_by(2, [1, 2])
    first = PostgresCluster(Member(1, "127.0.0.1", 9001), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    second = PostgresCluster(Member(2, "127.0.0.1", 9002), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    try:
        await first.start()
        await first.serving()
        await second.start()  # registered, listeners not open yet
        seen_live = False
        deadline = time.monotonic() + 10 * HEARTBEAT_MS / 1000
        while time.monotonic() < deadline:  # ten heartbeats of broker 1 while broker 2 starts
            seen_live = seen_live or [m.node_id for m in first.live()] == [1, 2]
            assert first.leads(key) and not second.leads(key), "handed to a broker that does not serve yet"
            await asyncio.sleep(0.02)
        assert seen_live  # broker 1 knew broker 2 was there, and kept the partition
        await second.serving()
        deadline = time.monotonic() + 10 * HEARTBEAT_MS / 1000
        while not second.leads(key) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert second.leads(key) and not first.leads(key)
    finally:
        await second.close()
        await first.close()
