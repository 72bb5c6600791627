"""Behaviour every engine shares: namespace rules, append/read, offsets, cursors."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest
from kafkacompat.storage import Cursor, FsyncPolicy, StreamPolicy
from storage_testkit import batch, values

from kafkacompat import storage


async def topic(store, name="t", partitions=1, stream=None):
    await store.create_topic(stream or store.default_stream, name, partitions)
    return store.partition(stream or store.default_stream, name, 0)


# --- streams -----------------------------------------------------------------


async def test_default_stream_exists_with_autocreate(store):
    info = store.get_stream("/default")
    assert info is not None and info.policy.autocreate and info.topic_count == 0


async def test_stream_lifecycle(store):
    info = await store.create_stream("/apps/iot/pumps", StreamPolicy(ttl_seconds=60, default_partitions=3))
    assert info.path == "/apps/iot/pumps" and info.policy.default_partitions == 3
    assert [s.path for s in store.list_streams()] == ["/apps/iot/pumps", "/default"]
    await store.create_topic("/apps/iot/pumps", "metrics", 2)
    edited = await store.edit_stream("/apps/iot/pumps", StreamPolicy(ttl_seconds=5, fsync="always"))
    assert edited.policy.fsync is FsyncPolicy.ALWAYS and edited.topic_count == 1
    with pytest.raises(storage.StreamExistsError):
        await store.create_stream("/apps/iot/pumps")
    await store.delete_stream("/apps/iot/pumps")
    assert store.get_stream("/apps/iot/pumps") is None
    assert store.get_topic("/apps/iot/pumps", "metrics") is None
    with pytest.raises(storage.UnknownStreamError):
        await store.edit_stream("/apps/iot/pumps", StreamPolicy())
    # the name is free again, and its old topics are gone
    await store.create_stream("/apps/iot/pumps")
    assert store.list_topics("/apps/iot/pumps") == []


@pytest.mark.parametrize("path", ["relative", "/a//b", "/a/", "/a.b", "/a b", "/", "/" + "x" * 300, "/ü"])
async def test_invalid_stream_paths(store, path):
    with pytest.raises(storage.InvalidPathError):
        await store.create_stream(path)


async def test_streams_do_not_nest(store):
    await store.create_stream("/a/b")
    with pytest.raises(storage.InvalidPathError, match="nest"):
        await store.create_stream("/a/b/c")
    with pytest.raises(storage.InvalidPathError, match="nest"):
        await store.create_stream("/a")
    await store.create_stream("/a/bc")  # a sibling sharing a prefix is fine


@pytest.mark.parametrize(
    "policy",
    [StreamPolicy(ttl_seconds=-1), StreamPolicy(default_partitions=0), StreamPolicy(fsync="sometimes"),
     StreamPolicy(partitionlet_bytes=10), StreamPolicy(retention_bytes=-5), StreamPolicy(fsync_interval_ms=0)],
)
async def test_invalid_policies(store, policy):
    with pytest.raises(storage.InvalidPolicyError):
        await store.create_stream("/p", policy)


async def test_default_stream_cannot_be_deleted(store):
    with pytest.raises(storage.InvalidPathError):
        await store.delete_stream("/default")


# --- topics ------------------------------------------------------------------


async def test_topic_lifecycle(store):
    info = await store.create_topic("/default", "orders", 3, {"cleanup.policy": "delete"})
    assert info.partitions == 3 and info.configs == {"cleanup.policy": "delete"}
    assert store.get_topic("/default", "orders") == info
    assert store.get_topic_by_id(info.topic_id) == info
    assert store.get_topic_by_id(uuid.uuid4()) is None
    assert store.get_stream("/default").topic_count == 1
    with pytest.raises(storage.TopicExistsError):
        await store.create_topic("/default", "orders", 1)
    grown = await store.add_partitions("/default", "orders", 5)
    assert grown.partitions == 5 and grown.topic_id == info.topic_id
    store.partition("/default", "orders", 4)
    for total in (5, 2):
        with pytest.raises(storage.InvalidPartitionsError):
            await store.add_partitions("/default", "orders", total)
    changed = await store.set_topic_configs("/default", "orders", {"retention.ms": "1000"})
    assert changed.configs == {"retention.ms": "1000"}
    await store.delete_topic("/default", "orders")
    assert store.get_topic("/default", "orders") is None
    assert store.get_topic_by_id(info.topic_id) is None
    with pytest.raises(storage.UnknownTopicError):
        store.partition("/default", "orders", 0)


async def test_topic_errors(store):
    with pytest.raises(storage.UnknownStreamError):
        await store.create_topic("/nope", "t", 1)
    with pytest.raises(storage.InvalidPartitionsError):
        await store.create_topic("/default", "t", 0)
    await store.create_topic("/default", "t", 2)
    with pytest.raises(storage.UnknownTopicError):
        store.partition("/default", "t", 2)
    with pytest.raises(storage.UnknownTopicError):
        await store.delete_topic("/default", "missing")
    with pytest.raises(storage.InvalidPolicyError):
        await store.set_topic_configs("/default", "t", {"retention.ms": "soon"})


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a:b", "x" * 250, "tab\t", "ü"])
async def test_invalid_topic_names(store, name):
    with pytest.raises(storage.InvalidTopicNameError):
        await store.create_topic("/default", name, 1)


async def test_topics_with_dot_names_and_same_name_in_two_streams(store):
    await store.create_stream("/s")
    a = await store.create_topic("/s", ".stream", 1)
    b = await store.create_topic("/default", ".stream", 1)
    assert a.topic_id != b.topic_id
    await store.partition("/s", ".stream", 0).append(batch(1), 1)
    assert store.partition("/default", ".stream", 0).high_watermark == 0
    assert {t.stream for t in store.list_topics()} == {"/s", "/default"}


# --- append and read -----------------------------------------------------------


async def test_append_assigns_dense_offsets_and_patches_header(store):
    part = await topic(store)
    r1 = await part.append(batch(3), 3)
    r2 = await part.append(batch(2), 2)
    assert (r1.base_offset, r1.last_offset, r2.base_offset, r2.last_offset) == (0, 2, 3, 4)
    assert r1.log_append_time > 0
    assert part.high_watermark == 5 and part.log_start_offset == 0
    data = bytes(await part.read(0, 1 << 20))
    assert [o for o, _ in values(data)] == [0, 1, 2, 3, 4]
    base, _, epoch = struct.unpack_from(">qii", data, 0)
    assert base == 0 and epoch == part.leader_epoch
    await part.wait_durable(part.high_watermark)


async def test_read_returns_whole_batches_from_the_containing_one(store):
    part = await topic(store)
    sizes = []
    for i in range(10):
        b = batch(4, size=100)
        sizes.append(len(b))
        await part.append(b, 4)
    data = await part.read(6, sizes[0] * 3)  # offset 6 is inside batch 1 (offsets 4-7)
    assert [o for o, _ in values(data)][0] == 4 and len(data) == 3 * sizes[0]
    one = await part.read(39, 1)  # max_bytes smaller than a batch: still one whole batch
    assert len(one) == sizes[0] and values(one)[-1][0] == 39
    assert await part.read(40, 100) == b""
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.read(41, 100)
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.read(-1, 100)


async def test_append_refuses_broken_batches(store):
    part = await topic(store)
    good = bytearray(batch(2))
    with pytest.raises(storage.CorruptBatchError):
        await part.append(good, 3)  # count disagrees with lastOffsetDelta
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    with pytest.raises(storage.CorruptBatchError):
        await part.append(flipped, 2)
    with pytest.raises(storage.CorruptBatchError):
        await part.append(good[:-1], 2)
    with pytest.raises(storage.CorruptBatchError):
        await part.append(b"short", 1)
    assert part.high_watermark == 0
    await part.append(memoryview(good), 2)
    assert part.high_watermark == 2


# --- timestamps ------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd", "snappy"])
async def test_offset_for_timestamp_is_exact(store, compression):
    part = await topic(store)
    await part.append(batch(5, ts=100, step=10, compression=compression), 5)  # 0-4: 100..140
    await part.append(batch(3, timestamps=[300, 150, 200], compression=compression), 3)  # 5-7
    await part.append(batch(2, ts=400, compression=compression), 2)  # 8-9
    hit = lambda t: part.offset_for_timestamp(t)  # noqa: E731
    assert (await hit(0)).offset == 0
    assert (await hit(100)).offset == 0
    assert (await hit(101)) == storage.TimestampHit(1, 110)
    assert (await hit(140)).offset == 4
    assert (await hit(141)) == storage.TimestampHit(5, 300)
    assert (await hit(301)) == storage.TimestampHit(8, 400)
    assert (await hit(401)) == storage.TimestampHit(9, 401)
    assert await hit(402) is None
    top = await part.max_timestamp()
    assert top == storage.TimestampHit(9, 401)


async def test_a_hit_by_timestamp_carries_the_leader_epoch_of_its_batch(store):
    """As Kafka's FileRecords.searchForTimestamp answers ListOffsets by time: the found batch's epoch."""
    part = await topic(store)
    await part.append(batch(2, ts=100), 2)
    stamped = struct.unpack_from(">i", bytes(await part.read(0, 1 << 20)), 12)[0]
    hit = await part.offset_for_timestamp(101)
    assert hit == storage.TimestampHit(1, 101) and hit.leader_epoch == stamped == part.leader_epoch


async def test_offset_for_timestamp_respects_log_start(store):
    part = await topic(store)
    await part.append(batch(5, ts=100, step=10), 5)
    await part.delete_records(3)
    assert (await part.offset_for_timestamp(0)).offset == 3
    assert (await part.offset_for_timestamp(125)).offset == 3
    assert (await part.offset_for_timestamp(135)).offset == 4


async def test_max_timestamp_sees_records_below_the_log_start_in_a_batch_still_kept(store):
    """Kafka's MAX_TIMESTAMP does not look at the log start: a max below it, in a batch still kept, is the answer."""
    part = await topic(store)
    await part.append(batch(3, timestamps=[100, 300, 200]), 3)
    await part.delete_records(2)
    top = await part.max_timestamp()
    assert top == storage.TimestampHit(1, 300) and top.leader_epoch == part.leader_epoch


async def test_max_timestamp_after_delete_records_keeps_the_partitionlet_max(store, request):
    """One batch per record, one partitionlet (Kafka: one segment): deleting up to offset 2 leaves
    the segment and its max timestamp, at offset 1. The cloud engine drops the index rows wholly
    below the log start at once, so it answers the max of what is left."""
    part = await topic(store)
    for stamp in (1_000, 3_000, 2_000):
        await part.append(batch(1, ts=stamp), 1)
    await part.delete_records(2)
    cloud = "cloud" in request.node.callspec.id
    assert await part.max_timestamp() == (storage.TimestampHit(2, 2_000) if cloud else storage.TimestampHit(1, 3_000))
    assert (part.log_start_offset, (await part.offset_for_timestamp(0)).offset) == (2, 2)
    # deleting every record frees the active partitionlet too (room on a full disk), where Kafka
    # keeps its active segment and still answers offset 1: a difference kept on purpose
    assert await part.delete_records(-1) == 3
    assert (await part.max_timestamp(), await part.offset_for_timestamp(0), await part.read(3, 100)) == (None, None, b"")
    await part.append(batch(1, ts=500), 1)
    assert values(await part.read(3, 100)) == [(3, b"A" * 10)]


async def test_max_timestamp_empty(store):
    part = await topic(store)
    assert await part.max_timestamp() is None
    assert await part.offset_for_timestamp(0) is None


# --- log start, epochs, waiters --------------------------------------------------


async def test_delete_records(store):
    part = await topic(store)
    for _ in range(5):
        await part.append(batch(2), 2)
    assert await part.delete_records(3) == 3
    assert part.log_start_offset == 3
    assert values(await part.read(3, 1 << 20))[0][0] == 2  # the containing batch is served whole
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.read(2, 100)
    assert await part.delete_records(1) == 3  # never goes back
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.delete_records(11)
    assert await part.delete_records(-1) == 10  # -1: up to the high watermark
    assert await part.read(10, 100) == b""
    await part.append(batch(1), 1)
    assert values(await part.read(10, 100)) == [(10, b"A" * 10)]


async def test_end_offset_for_epoch(store):
    part = await topic(store)
    await part.append(batch(3), 3)
    epoch = part.leader_epoch
    assert await part.end_offset_for_epoch(epoch) == (epoch, 3)
    assert await part.end_offset_for_epoch(epoch + 1) == (-1, -1)


async def test_wait_for_data_wakes_on_append(store):
    part = await topic(store)
    assert part.wait_for_data(-1).done() is False or part.high_watermark > -1
    fut = part.wait_for_data(0)
    later = part.wait_for_data(1)
    assert not fut.done()
    await part.append(batch(1), 1)
    await asyncio.wait_for(fut, 1)
    assert not later.done()
    await part.append(batch(1), 1)
    await asyncio.wait_for(later, 1)
    assert part.wait_for_data(0).done()


async def test_deleting_topic_releases_pollers(store):
    part = await topic(store)
    fut = part.wait_for_data(0)
    await store.delete_topic("/default", "t")
    await asyncio.wait_for(fut, 1)
    with pytest.raises(storage.UnknownTopicError):
        await part.append(batch(1), 1)


async def test_purge_stream_keeps_topics_and_offsets(store):
    part = await topic(store)
    await part.append(batch(3), 3)
    await store.commit_cursors("/default", "g", [Cursor("t", 0, 2)])
    await store.purge_stream("/default")
    assert store.get_topic("/default", "t") is not None
    assert part.high_watermark == 3 and part.log_start_offset == 3
    assert store.get_cursors("/default", "g") == []
    assert (await part.append(batch(1), 1)).base_offset == 3


# --- cursors ---------------------------------------------------------------------


async def test_cursors(store):
    await store.create_topic("/default", "t", 2)
    await store.commit_cursors("/default", "g1", [Cursor("t", 0, 5, 3, "meta", 77), Cursor("t", 1, 9)])
    await store.commit_cursors("/default", "g2", [Cursor("t", 0, 1)])
    await store.commit_cursors("/default", "g1", [Cursor("t", 0, 6)])
    got = {(c.topic, c.partition): c for c in store.get_cursors("/default", "g1")}
    assert got[("t", 0)].offset == 6 and got[("t", 0)].commit_time_ms > 0
    assert got[("t", 1)].offset == 9
    assert store.list_cursor_groups("/default") == ["g1", "g2"]
    await store.delete_cursors("/default", "g1", [("t", 1)])
    assert [c.partition for c in store.get_cursors("/default", "g1")] == [0]
    await store.delete_cursors("/default", "g2")
    assert store.list_cursor_groups("/default") == ["g1"]
    assert store.get_cursors("/default", "nobody") == []
    await store.delete_topic("/default", "t")
    assert store.get_cursors("/default", "g1") == []
    with pytest.raises(storage.UnknownStreamError):
        await store.commit_cursors("/nope", "g", [Cursor("t", 0, 1)])


async def test_state_tables(store):
    assert store.get_state("/default", "txns") == {}
    await store.put_state("/default", "txns", {"a": {"n": 1}, "b": {"n": 2}})
    await store.put_state("/default", "txns", {"a": {"n": 3}, "b": None}, durable=False)
    assert store.get_state("/default", "txns") == {"a": {"n": 3}}
    assert store.get_state("/default", "other") == {}
    with pytest.raises(ValueError):
        await store.put_state("/default", "../escape", {"a": {}})
    with pytest.raises(storage.UnknownStreamError):
        await store.put_state("/nope", "txns", {"a": {}})


async def test_enforce_retention_by_ttl_and_size(store):
    await store.create_stream("/r", StreamPolicy(ttl_seconds=60, partitionlet_bytes=4096))
    await store.create_topic("/r", "t", 1)
    part = store.partition("/r", "t", 0)
    for i in range(40):
        await part.append(batch(2, ts=1_000 + i, size=200), 2)  # long expired
    now = 1_000 + 3600_000
    await part.append(batch(2, ts=now, size=200), 2)
    assert await store.enforce_retention(now) > 0
    # whole batches (memory) or whole partitionlets (disk) go, never the fresh records
    assert 0 < part.log_start_offset <= 80 and part.high_watermark == 82
    assert values(await part.read(part.log_start_offset, 1 << 20))[-2:] == [(80, b"A" * 200), (81, b"B" * 200)]
    await store.create_topic("/r", "capped", 1, {"retention.bytes": "3000", "retention.ms": "-1"})
    capped = store.partition("/r", "capped", 0)
    for i in range(60):
        await capped.append(batch(2, ts=1_000, size=200), 2)
    await store.enforce_retention(now)
    kept = len(await capped.read(capped.log_start_offset, 1 << 30))
    assert capped.log_start_offset > 0 and 3000 <= kept < 3000 + 4096 + 600


async def test_retention_ms_0_expires_every_record_older_than_now_but_a_stream_ttl_0_keeps_forever(store):
    """Kafka's UnifiedLog deletes a segment once now - its largest timestamp > retention.ms, so
    retention.ms=0 takes every segment whose newest record is older than now, the active one too;
    only a negative retention.ms keeps forever. A stream's ttl 0 keeps forever, as on MapR."""
    await store.create_stream("/forever", StreamPolicy(ttl_seconds=0, partitionlet_bytes=4096))
    now = 5_000_000
    parts = {}
    for name, configs in (("zero", {"retention.ms": "0"}), ("unlimited", {"retention.ms": "-1"}), ("stream", {})):
        await store.create_topic("/forever", name, 1, configs)
        parts[name] = part = store.partition("/forever", name, 0)
        for i in range(30):
            await part.append(batch(2, ts=now - 1_000 + i, size=200), 2)
        await part.append(batch(2, ts=now - 1, size=200), 2)  # stamped now - 1 and now
    await store.enforce_retention(now)
    zero = parts["zero"]
    assert 0 < zero.log_start_offset <= 60 and zero.high_watermark == 62
    assert values(await zero.read(zero.log_start_offset, 1 << 20))[-2:] == [(60, b"A" * 200), (61, b"B" * 200)]
    await store.enforce_retention(now + 1)
    assert (zero.log_start_offset, zero.high_watermark) == (62, 62)
    assert (await zero.append(batch(1, ts=now + 1), 1)).base_offset == 62
    assert values(await zero.read(62, 1 << 20)) == [(62, b"A" * 10)]
    for kept in (parts["unlimited"], parts["stream"]):
        assert (kept.log_start_offset, kept.high_watermark) == (0, 62)


async def test_concurrent_creates_of_one_name_conflict(store):
    results = await asyncio.gather(store.create_stream("/c"), store.create_stream("/c"), return_exceptions=True)
    assert sum(isinstance(r, storage.StreamExistsError) for r in results) == 1
    results = await asyncio.gather(*(store.create_topic("/c", "t", 1) for _ in range(3)), return_exceptions=True)
    assert sum(isinstance(r, storage.TopicExistsError) for r in results) == 2
    assert len(store.list_topics("/c")) == 1


async def test_truncate_fully_and_start_at(store):
    """A replica whose source dropped the offsets it lacks goes on at the source's log start."""
    part = await topic(store)
    for _ in range(3):
        await part.append(batch(2), 2)
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.truncate_fully_and_start_at(5)  # never back below the high watermark
    woken = part.wait_for_data(6)
    await part.truncate_fully_and_start_at(40)
    assert (part.log_start_offset, part.high_watermark) == (40, 40)
    assert woken.done() and await part.read(40, 100) == b""
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.read(39, 100)
    result = await part.append(batch(1), 1, at=40)
    assert result.base_offset == 40 and values(await part.read(40, 100)) == [(40, b"A" * 10)]


async def test_an_append_at_a_stated_offset_is_stored_only_there(store):
    """A replica's copy keeps its source's offsets: stored only if `at` is the next offset, else
    OffsetMismatchError with the next offset, and nothing written (no gap, no overlap)."""
    part = await topic(store)
    await part.append(batch(2), 2)
    assert (await part.append(batch(3), 3, at=2)).base_offset == 2
    for stale_or_ahead in (4, 6):
        with pytest.raises(storage.OffsetMismatchError) as refused:
            await part.append(batch(1), 1, at=stale_or_ahead)
        assert refused.value.high_watermark == 5
    assert part.high_watermark == 5
    assert (await part.append(batch(1), 1)).base_offset == 5
    assert [offset for offset, _ in values(await part.read(0, 1 << 20))] == list(range(6))
