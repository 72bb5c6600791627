"""A heartbeat reads only the leader rows written since its last, and plans only what changed.

Every heartbeat (1 s by default) fetched every row of kc_partition_leaders
and planned every partition on the event loop; with 8,000 topics on the
cloud engine that was about a tenth of the broker's time, and it grows with
the topics (issue 32). Now a heartbeat first reads the partitions' change
stamp, the brokers and a fingerprint of the table (its rows and the sum of
their epochs: a move raises an epoch); when all match a tick that changed
nothing, it stops there. While topics are created nothing is quiet, so a
heartbeat reads only the rows written since its last read (by the
transactions its last read's snapshot had not seen finished, which takes in
a row committed after a newer one), and plans only the partitions new since,
those whose row changed and those it wrote, while the brokers are the same.
Here cluster views share a real PostgreSQL: quiet heartbeats plan nothing
and read no row in full, a new partition among many is planned alone, and a
move, a new partition or a broker leaving is still seen within a few
heartbeats.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from kafkacompat.cluster import leadership
from kafkacompat.cluster.leadership import preferred_leader
from kafkacompat.cluster.leases import create_schema
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


async def test_quiet_heartbeats_plan_nothing_and_a_new_partition_is_planned_alone(
        postgres: Postgres, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres.create_database()
    many = [("/s", f"many{i}", 0) for i in range(200)]
    one, two = key_led_by(1, [1, 2]), key_led_by(2, [1, 2])
    known = [*many, one, two]
    planned: list[int] = []  # how many partitions each plan was asked about
    full_reads: list[int] = []  # rows of each read of the whole table
    plan, read = leadership.plan, leadership.LeaderTable._read

    def counted_plan(me, live, keys, *args, **kwargs):  # type: ignore[no-untyped-def]
        keys = list(keys)
        planned.append(len(keys))
        return plan(me, live, keys, *args, **kwargs)

    async def counted_read(self, conn, since):  # type: ignore[no-untyped-def]
        found = await read(self, conn, since)
        if since is None:
            full_reads.append(len(self.rows))
        return found

    monkeypatch.setattr(leadership, "plan", counted_plan)
    monkeypatch.setattr(leadership.LeaderTable, "_read", counted_read)
    first = PostgresCluster(Member(1, "127.0.0.1", 9001), url, lambda: list(known), LEASE_MS, HEARTBEAT_MS)
    second = PostgresCluster(Member(2, "127.0.0.1", 9002), url, lambda: list(known), LEASE_MS, HEARTBEAT_MS)
    try:
        for view in (first, second):
            await view.start()
            await view.serving()
        await _until(lambda: first.leads(one) and second.leads(two), "each broker leads its own partition")
        await _until(lambda: all(first.leader_of(k) is not None and second.leader_of(k) is not None for k in many),
                     "both brokers know every partition's leader")

        await asyncio.sleep(5 * HEARTBEAT_MS / 1000)  # the ticks after the last change: a quiet one each
        planned.clear()
        full_reads.clear()
        await asyncio.sleep(10 * HEARTBEAT_MS / 1000)
        assert planned == [], f"quiet heartbeats planned {planned} partitions"

        three = key_led_by(1, [1, 2], start=100)
        known.append(three)  # a topic made: its partition is placed at the next heartbeat
        await _until(lambda: first.leads(three), "the new partition led by its preferred broker")
        await _until(lambda: second.leader_of(three) is not None, "the other broker reads the new row")
        assert planned and max(planned) <= 3, f"one new partition among {len(known)}: plans of {planned} partitions"
        assert full_reads == [], f"the whole table was read ({full_reads} rows) for one new row"

        await second.leave()  # a clean stop: its partition moves to broker 1
        await second.close()
        await _until(lambda: first.leads(two), "broker 1 leads what broker 2 led once it left")
        assert max(planned) >= len(known), "the brokers changed, and the plan did not take in every partition"
    finally:
        await second.close()
        await first.close()


async def test_a_row_committed_after_a_newer_one_is_still_read(postgres: Postgres,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writers of the leader table: the one whose transaction began first commits last. A copy
    that asked only for rows newer than the newest it had seen would not read the first's row, and
    only the check of its count would make it read the whole table."""
    url = postgres.create_database()
    slow, quick, reader = [await asyncpg.connect(url) for _ in range(3)]
    reads: list[int | None] = []
    read = leadership.LeaderTable._read

    async def recorded(self, conn, since):  # type: ignore[no-untyped-def]
        reads.append(since)
        return await read(self, conn, since)

    monkeypatch.setattr(leadership.LeaderTable, "_read", recorded)
    try:
        await create_schema(reader)
        table = leadership.LeaderTable()
        await table.refresh(reader)
        assert reads == [None]
        early, late = ("/s", "early", 0), ("/s", "late", 0)
        async with slow.transaction():
            await leadership.add_missing(slow, {early: 1})  # its transaction id comes first
            await leadership.add_missing(quick, {late: 2})  # committed at once
            _, changed = await table.refresh(reader)
            assert changed == [late] and early not in table.rows
        _, changed = await table.refresh(reader)
        assert changed == [early], f"the row committed last was not read: {changed}"
        assert table.rows[early] == leadership.LeaderRow(1, 0)
        moved = await leadership.move(quick, [(late, table.rows[late], 1)])
        assert moved == 1
        _, changed = await table.refresh(reader)
        assert changed == [late] and table.rows[late] == leadership.LeaderRow(1, 1)
        assert None not in reads[1:], f"the whole table was read again: {reads}"
    finally:
        for conn in (slow, quick, reader):
            await conn.close()
