"""Brokers of a cluster through an outage of their PostgreSQL: they lead again once it answers.

Found by the chaos campaign (cloud engine, seed 4, faults kill,pause,restart,
database-outage): after an outage a broker logged "renewing the cluster
lease failed (connection is closed)" and led nothing for minutes after the
database was back, and on SIGTERM exited 1 with "InternalClientError:
cannot switch to state 12; another operation (2) is in progress". asyncpg
raises that error for a session the server ended mid-statement; the
cluster's heartbeat did not expect it, died, and its error was raised again
when the broker stopped. Here cluster views share a real PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from kafkacompat.cluster import leases, postgres_cluster
from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.cluster.membership import Member, PartitionKey
from kafkacompat.cluster.postgres_cluster import PostgresCluster
from kafkacompat.testing.services import ServiceUnavailable, cloud_store, database_outage

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LEASE_MS, HEARTBEAT_MS = 1000, 100
REJOIN_S = 10 * HEARTBEAT_MS / 1000  # a couple of heartbeats, with room for the reconnect on a loaded host
ENDED_MID_STATEMENT = "cannot switch to state 12; another operation (2) is in progress"


@pytest.fixture
def url() -> str:
    try:
        return cloud_store()[0]
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))


def key_led_by(node_id: int, nodes: list[int]) -> PartitionKey:
    return next(k for k in (("/s", f"t{i}", 0) for i in range(100)) if preferred_leader(nodes, k) == node_id)


async def wait_for(condition, seconds: float) -> float:
    """Seconds until `condition()` held; fails after `seconds`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "condition not met in time"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def test_a_session_ended_mid_statement_does_not_end_the_heartbeat_or_the_lease(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One InternalClientError in the heartbeat and one in the lease renewal: the broker goes on
    (it still sees a broker joining and leads its partition) and stops without an error."""
    key = key_led_by(2, [1, 2])
    first = PostgresCluster(Member(1, "127.0.0.1", 9001), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    second = PostgresCluster(Member(2, "127.0.0.1", 9002), url, lambda: [key], LEASE_MS, HEARTBEAT_MS)
    await first.start()
    await first.serving()  # as the server says once it listens
    try:
        broken = {"members": 1, "renew": 1}
        members, renew = postgres_cluster.members, leases.BrokerLease.renew

        async def members_once_broken(conn: asyncpg.Connection):
            if broken["members"]:
                broken["members"] -= 1
                raise asyncpg.InternalClientError(ENDED_MID_STATEMENT)
            return await members(conn)

        async def renew_once_broken(self: leases.BrokerLease, conn: asyncpg.Connection) -> bool:
            if broken["renew"] and self.me.node_id == 1:
                broken["renew"] -= 1
                raise asyncpg.InternalClientError(ENDED_MID_STATEMENT)
            return await renew(self, conn)

        monkeypatch.setattr(postgres_cluster, "members", members_once_broken)
        monkeypatch.setattr(leases.BrokerLease, "renew", renew_once_broken)
        await wait_for(lambda: not any(broken.values()), 5)
        await second.start()
        await second.serving()  # broker 1 must still see it and hand its partition on
        await wait_for(lambda: second.leads(key) and not first.leads(key), 5)
        await asyncio.sleep(3 * LEASE_MS / 1000)  # broker 1's lease is still renewed: it stays live
        assert [m.node_id for m in second.live()] == [1, 2]
    finally:
        await second.close()
        await first.close()  # raised the heartbeat's InternalClientError before (SIGTERM exit 1)


async def test_brokers_lead_again_within_a_few_heartbeats_of_the_database_answering(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An outage longer than the lease: every broker lets go of its partitions; once the database
    answers, each registers again and leads its partitions again within a few heartbeats, and
    stops cleanly. No partition moves: the first broker back used to end the others' leases at
    once (their alive locks went with their sessions) and take their partitions, so every
    outage moved every partition twice (there and back), refusing and re-sending what was in
    flight (the cloud campaign's plain duplicates clustered at database outages)."""
    keys = [key_led_by(1, [1, 2]), key_led_by(2, [1, 2])]
    brokers = [PostgresCluster(Member(n, "127.0.0.1", 9000 + n), url, lambda: keys, LEASE_MS, HEARTBEAT_MS)
               for n in (1, 2)]
    renew, late = leases.BrokerLease.renew, asyncio.Event()

    async def broker_2_back_later(self: leases.BrokerLease, conn: asyncpg.Connection) -> bool:
        if self.me.node_id == 2 and not late.is_set():  # as one broker's reconnect lags another's
            await late.wait()
        return await renew(self, conn)

    for broker in brokers:
        await broker.start()
        await broker.serving()  # as the server says once it listens
    try:
        await wait_for(lambda: all(b.leads(k) for b, k in zip(brokers, keys)), 5)
        before = {k: brokers[0].leader_of(k) for k in keys}
        with database_outage(url):
            await wait_for(lambda: not any(b.leads(k) for b in brokers for k in keys), 2 * LEASE_MS / 1000 + 2)
            await asyncio.sleep(LEASE_MS / 1000)  # every lease has lapsed
            # Metadata still names both brokers (naming only itself, librdkafka dropped the other)
            assert [[m.node_id for m in b.live()] for b in brokers] == [[1, 2], [1, 2]]
            monkeypatch.setattr(leases.BrokerLease, "renew", broker_2_back_later)
        await asyncio.sleep(LEASE_MS / 2000)  # broker 1 is back alone for half a lease
        late.set()
        took = await wait_for(lambda: all(b.leads(k) for b, k in zip(brokers, keys)), 30)
        assert took < REJOIN_S, f"the brokers led again {took:.1f} s after the database answered"
        assert {k: b.leader_of(k) for b in brokers for k in keys} == before, "leadership moved"
    finally:
        for broker in brokers:
            await broker.close()
