"""Log compaction on the cloud engine where several processes share one store.

The compaction rules themselves run on every engine in test_cleaner.py;
here two CloudStore instances on one database and bucket stand for two
brokers: a cleaning by one is what the other reads (its in-memory tail
index included), two cleanings at once never both rewrite a range, a
cleaning under a superseded leader epoch is refused, and the replaced
objects leave the bucket only after the grace time.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
from kafkacompat.protocol.records import record_timestamps
from test_cleaner import HOUR, T0, compacted, put, read_all, roll

from kafkacompat import storage
from kafkacompat.broker.cleaner_codec import CLEANER_CODEC
from kafkacompat.testing.services import BUCKET, ServiceUnavailable, cloud_store

NOW = T0 + HOUR


@pytest.fixture
async def pair():
    try:
        database, objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    stores = [storage.open_store(database, object_store=objects, record_timestamps=record_timestamps,
                                 record_codec=CLEANER_CODEC, cleaner_backoff_ms=3_600_000, flush_ms=1)
              for _ in range(2)]
    for st in stores:
        await st.open()
    yield stores
    for st in stores:
        await st.close()


async def eventually(check, timeout: float = 10.0):
    """Wait until the coroutine function `check` returns something true; returns it."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def updates(part) -> list[tuple[int, str, str | None]]:
    """Seven batches (four updates of three keys, a tombstone, a roll, a tail), each its own object;
    returns the compacted view: three batches go, one is rebuilt with fewer records."""
    for i in range(4):
        await put(part, [(f"k{j}", f"v{i}") for j in range(3)])
    await put(part, [("k0", None), ("k1", "last")])
    await roll(part)
    await put(part, [("tail", "t")])
    return [(11, "k2", "v3"), (12, "k0", None), (13, "k1", "last"), (15, "tail", "t")]


async def shared_topic(a, b):
    part_a = await compacted(a)
    await eventually(lambda: asyncio.sleep(0, b.get_topic("/s", "t") is not None))
    return part_a, b.partition("/s", "t", 0)


def data_keys(store) -> set[str]:
    from kafkacompat.testing import services

    _, s3 = services._shared
    return set(s3.keys(BUCKET, store.objects.prefix + "/data/"))


async def test_a_cleaning_by_one_broker_is_what_the_other_reads(pair):
    a, b = pair
    part_a, part_b = await shared_topic(a, b)
    expected = await updates(part_b)  # b appended: its tail index names every batch
    assert len(await read_all(part_b)) == 15
    results = await a.clean_logs(now=NOW)
    assert [r.partition for r in results] == [part_a.name]
    assert await read_all(part_a) == expected
    # b's tail entries below the cleaned range are dropped on the notification: b reads the new index
    assert await eventually(lambda: _equal(read_all(part_b), expected))
    assert part_b.high_watermark == part_a.high_watermark == 16 and part_b.log_start_offset == 0


async def _equal(rows, expected) -> bool:
    return await rows == expected


async def test_two_cleanings_at_once_never_both_rewrite_a_range(pair):
    a, b = pair
    part_a, part_b = await shared_topic(a, b)
    expected = await updates(part_a)
    await eventually(lambda: asyncio.sleep(0, part_b.high_watermark == 16))
    done = await asyncio.gather(a.clean_logs(now=NOW), b.clean_logs(now=NOW))
    assert sum(len(results) for results in done) == 1  # the other was refused, or found nothing due
    assert await read_all(part_a) == expected
    assert await eventually(lambda: _equal(read_all(part_b), expected))


async def test_a_cleaning_under_a_superseded_leader_epoch_is_refused(pair):
    import asyncpg

    from kafkacompat.cluster.leases import create_schema

    a, _ = pair
    part = await compacted(a)
    expected = await updates(part)
    conn = await asyncpg.connect(a.database_url)
    try:
        await create_schema(conn)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/s', 't', 0, 1, 3)")
        before_keys = data_keys(a)
        a.cleaner_fence = lambda stream, topic, index: 3  # a leads at epoch 3 as far as it knows ...
        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 4")  # ... but it moved
        assert await a.clean_logs(now=NOW) == []
        assert len(await read_all(part)) == 15  # nothing replaced
        assert data_keys(a) == before_keys  # the objects written for the refused swap are gone
        a.cleaner_fence = lambda stream, topic, index: None  # a broker that does not lead: no cleaning
        assert await a.clean_logs(now=NOW) == []
        a.cleaner_fence = lambda stream, topic, index: 4  # the leader at the current epoch
        assert len(await a.clean_logs(now=NOW)) == 1
        assert await read_all(part) == expected
    finally:
        await conn.close()


async def test_replaced_objects_leave_the_bucket_only_after_the_grace_time(pair):
    a, b = pair
    part_a, part_b = await shared_topic(a, b)
    expected = await updates(part_a)
    before = data_keys(a)
    assert len(before) == 7  # one object per batch here
    await a.clean_logs(now=NOW)
    await a.enforce_retention(now=NOW)
    assert data_keys(a) >= before  # within the grace time a reader holding old rows still finds them
    a.object_grace_ms = 0
    await a.enforce_retention(now=NOW + 1)
    await a.enforce_retention(now=NOW + 2)
    after = data_keys(a)
    assert (len(before - after), len(after - before)) == (4, 1)  # 3 removed and 1 rebuilt batch's objects go
    a.cache.__init__(a.cache.capacity)
    b.cache.__init__(b.cache.capacity)
    assert await read_all(part_a) == expected
    assert await eventually(lambda: _equal(read_all(part_b), expected))


async def test_segments_of_a_topic_made_compact_later_are_cleaned(pair):
    """Batches written while the topic was not compacted have no segment: the cleaner makes them one."""
    a, _ = pair
    await a.create_stream("/s", storage.StreamPolicy(partitionlet_bytes=4096))
    await a.create_topic("/s", "t", 1, {"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"})
    part = a.partition("/s", "t", 0)
    for i in range(6):
        await put(part, [(f"k{i % 2}", f"v{i}")])
    assert await a.clean_logs(now=NOW) == []  # not compacted
    await a.set_topic_configs("/s", "t", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                          "delete.retention.ms": "0"})
    await put(part, [("k0", "active")])  # the first compacted commit starts a new segment
    assert len(await a.clean_logs(now=NOW)) == 1
    assert await read_all(part) == [(4, "k0", "v4"), (5, "k1", "v5"), (6, "k0", "active")]


CRASH_SCRIPT = textwrap.dedent("""
    import asyncio, os, sys
    from kafkacompat import storage
    from kafkacompat.broker.cleaner_codec import CLEANER_CODEC
    from kafkacompat.storage.cloud import cleaner

    database, objects, point, now = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    swap = cleaner._swap

    async def killed(*args):
        if point == "after-swap":
            await swap(*args)
        os._exit(9)  # no cleanup of any kind, as kill -9

    cleaner._swap = killed

    async def main():
        st = storage.open_store(database, object_store=objects, record_codec=CLEANER_CODEC,
                                cleaner_backoff_ms=3_600_000)
        await st.open()
        await st.clean_logs(now=now)
        os._exit(0)

    asyncio.run(main())
""")


@pytest.mark.parametrize("point", ["before-swap", "after-swap"])
async def test_a_cleaner_killed_before_or_after_its_swap_leaves_a_valid_log(pair, point):
    a, b = pair
    part_a, part_b = await shared_topic(a, b)
    expected = await updates(part_a)
    before_rows, before_keys = await read_all(part_a), data_keys(a)
    done = await asyncio.create_subprocess_exec(sys.executable, "-c", CRASH_SCRIPT, a.database_url, a.objects.url,
                                                point, str(NOW))
    assert await asyncio.wait_for(done.wait(), 60) == 9, "the cleaner did not reach its swap"
    assert len(data_keys(a)) == len(before_keys) + 1  # the rebuilt batch's object was written
    want = expected if point == "after-swap" else before_rows
    for part in (part_a, part_b):  # the other brokers read the old log or the new one, nothing between
        assert await eventually(lambda: _equal(read_all(part), want))
    a.object_grace_ms = 0
    await a.enforce_retention()  # the first pass also sweeps objects no commit recorded
    if point == "before-swap":
        assert data_keys(a) == before_keys  # the orphan went
        assert len(await a.clean_logs(now=NOW)) == 1  # and cleaning still works
    assert await read_all(part_a) == expected
    for _ in range(2):  # unreferenced objects are marked, then deleted once the grace time passed
        await asyncio.sleep(0.01)
        await a.enforce_retention()
    assert len(data_keys(a)) == len(before_keys) - 3  # 4 objects replaced by 1
