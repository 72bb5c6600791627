"""A state write fenced by leader epoch (Store.put_state(fence=...)) on the cloud store.

The share-partition state of a cluster's brokers is written so: once the
partition's leadership moved (its row in kc_partition_leaders has a new
epoch), the deposed leader's write is refused in its own transaction and
nothing of it is stored, as kc_commit refuses its appends.
"""

from __future__ import annotations

import asyncpg
import pytest

from kafkacompat import storage
from kafkacompat.cluster.leases import create_schema
from kafkacompat.testing.services import ServiceUnavailable, cloud_store


async def test_a_write_under_a_superseded_leader_epoch_is_refused() -> None:
    try:
        database, objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    store = storage.open_store(database, object_store=objects)
    await store.open()
    conn = await asyncpg.connect(database)
    try:
        await create_schema(conn)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', 'orders', 0, 1, 4)")
        await store.put_state("/default", "share_state", {"k": {"v": 1}}, fence=("/default", "orders", 0, 4))
        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 5")  # the leadership moved
        with pytest.raises(storage.NotLeaderError):
            await store.put_state("/default", "share_state", {"k": {"v": 2}, "j": {"v": 3}},
                                  fence=("/default", "orders", 0, 4))
        with pytest.raises(storage.NotLeaderError):  # a partition nobody leads
            await store.put_state("/default", "share_state", {"k": {"v": 2}}, fence=("/default", "other", 0, 0))
        await store.put_state("/default", "share_state", {"j": {"v": 4}}, fence=("/default", "orders", 0, 5))
        rows = await conn.fetch("SELECT key, value::text FROM kc_state WHERE tbl = 'share_state' ORDER BY key")
        assert [(r["key"], r["value"]) for r in rows] == [("j", '{"v": 4}'), ("k", '{"v": 1}')]
        await store.reload_state("/default", "share_state")
        assert store.get_state("/default", "share_state") == {"j": {"v": 4}, "k": {"v": 1}}
    finally:
        await conn.close()
        await store.close()
