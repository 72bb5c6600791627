"""A partition is never moved to a broker whose lease stopped saying "serving" after the move was planned.

A broker stopping cleanly renews its lease as "not serving", then hands its
partitions on. Another broker's heartbeat that read the leases before that
renewal and the leader rows after the hand-over saw the stopping broker
still serving and the partitions led elsewhere, and planned them back to it
(their preferred leader); they stayed led by a broker that had stopped until
its lease ended (tests/cluster/test_shared_store.py's clean stop saw them
moved, then led by the stopped broker again). The move now checks the
target's lease in the statement that writes the row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from kafkacompat.cluster import leadership
from kafkacompat.cluster.leases import BrokerLease, create_schema
from kafkacompat.cluster.membership import Member
from kafkacompat.testing.services import ServiceUnavailable, cloud_store

KEY = ("/default", "hand-back", 0)


@pytest.fixture
async def conn() -> AsyncIterator[asyncpg.Connection]:
    try:
        database, _objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    connection = await asyncpg.connect(database)
    try:
        await create_schema(connection)  # a fresh database: no broker, no leader row
        yield connection
    finally:
        await connection.close()


async def leader(conn: asyncpg.Connection) -> int:
    table = leadership.LeaderTable()
    await table.refresh(conn)
    return table.rows[KEY].leader


async def test_a_move_planned_to_a_broker_that_since_said_not_serving_is_not_made(conn) -> None:
    leases = {}
    for node in (1, 2):
        leases[node] = BrokerLease(Member(node, "127.0.0.1", 9000 + node), 30_000)
        await leases[node].register(conn, wait_s=5)
    try:
        await leadership.add_missing(conn, {KEY: 2}, store_epochs=False)
        table = leadership.LeaderTable()
        await table.refresh(conn)
        as_read = table.rows[KEY]  # the planner's picture: 1 serving, the partition led by 2

        leases[1].serving = False  # 1 stops cleanly: its renewal says so before it hands anything on
        assert await leases[1].renew(conn)
        assert await leadership.move(conn, [(KEY, as_read, 1)], serving=[1, 2]) == 0
        assert await leader(conn) == 2, "not handed back to the broker that is stopping"

        leases[1].serving = True  # serving again (a restart): the same move is made
        assert await leases[1].renew(conn)
        assert await leadership.move(conn, [(KEY, as_read, 1)], serving=[1, 2]) == 1
        assert await leader(conn) == 1
    finally:
        for lease in leases.values():
            await lease.release(conn)
