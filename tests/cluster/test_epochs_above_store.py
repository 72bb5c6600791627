"""A partition's leader epochs start above the epochs the cloud store already stamped its batches with.

The store stamps a batch with the larger of the partition's last epoch and
the leader table's. A partition written before it had a leader row (by an
earlier version, whose transaction markers took the store's open counter,
or with the leader table in another database) carries that counter; a row
starting at 0 below it left every later batch stamped above the epoch
Metadata names, and OffsetForLeaderEpoch, asked for the epoch a consumer
read, answered that it knew no such epoch (a Java consumer then resets its
position). So, where the store's tables share the leader table's database,
a new row starts at the partition's stored epoch and a move goes above it.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import asyncpg
import pytest

from kafkacompat import storage
from kafkacompat.cluster import leadership
from kafkacompat.cluster.leases import create_schema
from kafkacompat.testing.services import ServiceUnavailable, cloud_store
from tests.storage.storage_testkit import batch

KEY = ("/default", "t", 0)


async def leader_row(conn: asyncpg.Connection) -> tuple[int, int]:
    table = leadership.LeaderTable()
    await table.refresh(conn)
    row = table.rows[KEY]
    return row.leader, row.epoch


def stamped(data: bytes | memoryview) -> int:
    return struct.unpack_from(">qii", bytes(data), 0)[2]  # partitionLeaderEpoch


@pytest.fixture
async def written() -> AsyncIterator[tuple[storage.Store, asyncpg.Connection]]:
    """A cloud store whose partition KEY holds one batch appended with no leader row (offset 0),
    and a connection to its database, which holds the cluster's tables too."""
    try:
        database, objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    store = storage.open_store(database, object_store=objects, flush_ms=3)
    await store.open()
    conn = await asyncpg.connect(database)
    try:
        await store.create_topic("/default", "t", 1)
        await store.partition(*KEY).append(batch(1), 1)  # no leader to fence by: the store's open counter
        await create_schema(conn)
        yield store, conn
    finally:
        await conn.close()
        await store.close()


async def test_leader_epochs_start_above_what_the_store_stamped_before_the_partition_had_a_leader(written) -> None:
    store, conn = written
    part = store.partition(*KEY)
    counter = stamped(await part.read(0, 1 << 20))
    assert counter == store.epoch >= 1
    await leadership.add_missing(conn, {KEY: 1}, store_epochs=True)
    assert await leader_row(conn) == (1, counter)  # what Metadata names from now on
    await part.append(batch(1), 1, leader_epoch=counter)
    assert stamped(await part.read(1, 1 << 20)) == counter
    assert await part.end_offset_for_epoch(counter, current=counter) == (counter, 2)

    await leadership.move(conn, [(KEY, leadership.LeaderRow(1, counter), 2)], store_epochs=True)
    assert await leader_row(conn) == (2, counter + 1)
    await part.append(batch(1), 1, leader_epoch=counter + 1)
    assert stamped(await part.read(2, 1 << 20)) == counter + 1
    assert await part.end_offset_for_epoch(counter, current=counter + 1) == (counter, 2)
    assert await part.end_offset_for_epoch(counter + 1, current=counter + 1) == (counter + 1, 3)


async def test_a_row_already_below_the_stored_epoch_moves_above_it(written) -> None:
    """A leader table from before this rule: its next move lifts the epoch past the store's."""
    store, conn = written
    part = store.partition(*KEY)
    await leadership.add_missing(conn, {KEY: 1})  # as before: epoch 0, below the store's
    assert await leader_row(conn) == (1, 0)
    await leadership.move(conn, [(KEY, leadership.LeaderRow(1, 0), 2)], store_epochs=True)
    assert await leader_row(conn) == (2, store.epoch + 1)
    await part.append(batch(1), 1, leader_epoch=store.epoch + 1)
    assert stamped(await part.read(1, 1 << 20)) == store.epoch + 1
