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


class SlowToOpen:
    """A TCP relay to PostgreSQL that holds each new connection `delay` seconds before relaying it:
    a database host so loaded that a session takes that long to open."""

    def __init__(self, port: int, delay: float) -> None:
        self.port, self.delay = port, delay
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> int:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(self.delay)
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.port)
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()


async def test_brokers_whose_sessions_were_cut_take_their_leases_back_on_a_slow_to_connect_database(
    postgres: Postgres,
) -> None:
    """Every session of the cluster's database is ended (as an administrator's pg_terminate_backend
    or a database restart does) while new sessions take 0.4 s to open. Both brokers renew again on
    new sessions, and neither counts the other dead. A reconnect used to give up after two heartbeats
    (0.2 s here): no attempt succeeded, and the leases went unrenewed until they lapsed."""
    url = postgres.create_database()
    name = url.rsplit("/", 1)[1]
    lease_ms = 2000
    admin = await asyncpg.connect(url)
    async with SlowToOpen(postgres.port, delay=0.4) as port:
        slow_url = postgres.url(name).replace(f":{postgres.port}/", f":{port}/")
        views = [PostgresCluster(Member(n, "127.0.0.1", 9000 + n), slow_url, lambda: [], lease_ms, HEARTBEAT_MS)
                 for n in (1, 2)]
        try:
            for view in views:
                await view.start()
                await view.serving()
            deadline = time.monotonic() + 10 * HEARTBEAT_MS / 1000
            while any(len(view.live()) < 2 for view in views) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE datname = $1 AND pid <> pg_backend_pid()", name)
            cut = await admin.fetchval("SELECT clock_timestamp()")
            renewed: list[int] = []
            deadline = time.monotonic() + lease_ms / 1000
            while time.monotonic() < deadline and len(renewed) < 2:
                renewed = [r["node_id"] for r in await admin.fetch(  # renewed on a session opened after the cut
                    "SELECT node_id FROM kc_brokers WHERE lease_until - make_interval(secs => $2::float8 / 1000) > $1",
                    cut, lease_ms)]
                for view in views:
                    assert [m.node_id for m in view.live()] == [1, 2], f"broker {view.me.node_id} dropped the other"
                await asyncio.sleep(0.02)
            assert sorted(renewed) == [1, 2], f"only {renewed} renewed within a lease of the cut"
        finally:
            for view in views:
                await view.close()
            await admin.close()
