"""The on-disk engine: rolls, volumes, indexes, restarts, retention, limits."""

from __future__ import annotations

import asyncio
import os
import struct
import time

import pytest
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.storage import Cursor, FsyncPolicy, StreamPolicy
from storage_testkit import batch, values

from kafkacompat import storage

SMALL = StreamPolicy(partitionlet_bytes=4096)


async def open_disk(path, **kw):
    kw.setdefault("record_timestamps", record_timestamps)
    st = storage.open_store(str(path), **kw)
    await st.open()
    return st


async def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def log_files(root):
    return sorted(
        os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".log")
    )


async def fill(part, count, *, size=300, per_batch=3, ts=1000):
    """Append `count` batches of varied sizes; returns their sizes."""
    sizes = []
    for i in range(count):
        b = batch(per_batch, size=size + (i * 37) % 200, ts=ts + i * 10)
        await part.append(b, per_batch)
        sizes.append(len(b))
    return sizes


# --- rolls, volumes and indexes -----------------------------------------------------


async def test_rolls_spread_over_volumes_and_every_offset_reads_back(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, volumes=[str(b)], volume_limits={str(a): 1 << 20, str(b): 1 << 20})
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 120)
    lets = await part.partitionlets()
    assert len(lets) > 10 and {p.volume for p in lets} == {str(a), str(b)}
    assert all(p.sealed for p in lets[:-1]) and not lets[-1].sealed
    assert all(x.next_offset == y.base_offset for x, y in zip(lets, lets[1:]))
    assert all(p.size_bytes <= 4096 or p.next_offset - p.base_offset == 3 for p in lets)
    assert len(log_files(b)) == sum(p.volume == str(b) for p in lets)

    async def check(part):
        for offset in range(part.high_watermark):
            got = values(await part.read(offset, 1))
            assert got[0][0] <= offset <= got[-1][0], offset  # exactly the batch holding the offset
            assert got[-1][0] - got[0][0] == 2

    await check(part)
    await st.close()
    st = await open_disk(a, volumes=[str(b)])
    part = st.partition("/s", "t", 0)
    assert part.high_watermark == 360
    await check(part)
    await st.close()


async def test_read_max_bytes_boundaries(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", StreamPolicy(partitionlet_bytes=1 << 20))
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    sizes = await fill(part, 200, size=100)
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    for first in (0, 1, 57, 120, 199):
        for max_bytes in (1, sizes[first], sizes[first] + 1, 4095, 4096, 4097, 9000, 1 << 20):
            data = await part.read(first * 3 + 1, max_bytes)
            want_end = max(j for j in range(first + 1, len(sizes) + 1)
                           if j == first + 1 or starts[j] - starts[first] <= max_bytes)
            assert len(data) == starts[want_end] - starts[first], (first, max_bytes)
            assert values(data)[0][0] == first * 3
    await st.close()


async def test_indexes_are_rebuilt_when_missing(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 40)
    await st.close()
    for d, _, files in os.walk(tmp_path / "d"):
        for f in files:
            if f.endswith("index"):
                os.unlink(os.path.join(d, f))
    st = await open_disk(tmp_path / "d")
    part = st.partition("/s", "t", 0)
    for offset in range(0, 120, 7):
        assert values(await part.read(offset, 1))[0][0] == offset - offset % 3
    assert (await part.offset_for_timestamp(1000 + 25 * 10 + 1)).offset == 25 * 3 + 1
    await st.close()


async def test_timestamps_across_partitionlets_and_without_decoder(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    for i in range(60):  # 10 records per batch, timestamps 0, 1, 2, ... ; gzip inside
        await part.append(batch(10, ts=i * 10, size=200, compression="gzip"), 10)
    assert len(await part.partitionlets()) >= 3
    for t in (0, 1, 9, 10, 11, 299, 300, 599):
        assert await part.offset_for_timestamp(t) == storage.TimestampHit(t, t)
    assert await part.offset_for_timestamp(600) is None
    assert await part.max_timestamp() == storage.TimestampHit(599, 599)
    await st.close()
    st = await open_disk(tmp_path / "d", record_timestamps=None)
    part = st.partition("/s", "t", 0)
    assert await part.offset_for_timestamp(123) == storage.TimestampHit(120, 129)  # batch granularity
    assert await part.max_timestamp() == storage.TimestampHit(599, 599)
    await st.close()


# --- restart ---------------------------------------------------------------------------


async def test_restart_keeps_streams_topics_configs_cursors_and_epochs(tmp_path):
    st = await open_disk(tmp_path / "d")
    policy = StreamPolicy(ttl_seconds=3600, default_partitions=4, autocreate=False, fsync=FsyncPolicy.ALWAYS,
                          permissions=storage.PermissionEntries(produce="u:alice"))
    await st.create_stream("/apps/iot/pumps", policy)
    info = await st.create_topic("/apps/iot/pumps", "metrics", 2, {"retention.ms": "5000"})
    dotted = await st.create_topic("/default", ".hidden", 1)
    await st.create_topic("/default", "gone", 1)
    await st.delete_topic("/default", "gone")
    await st.add_partitions("/apps/iot/pumps", "metrics", 3)
    await st.commit_cursors("/apps/iot/pumps", "g", [Cursor("metrics", 0, 5, 1, "m"), Cursor("metrics", 1, 7)])
    await st.delete_cursors("/apps/iot/pumps", "g", [("metrics", 1)])
    await st.commit_cursors("/default", "h", [Cursor(".hidden", 0, 1)])
    await st.put_state("/apps/iot/pumps", "aborted_txns", {"x": {"first": 1}, "y": {"first": 2}})
    await st.put_state("/apps/iot/pumps", "aborted_txns", {"y": None})
    part = st.partition("/apps/iot/pumps", "metrics", 2)
    await part.append(batch(2), 2)
    await part.wait_durable(2)
    epoch1 = part.leader_epoch
    await st.close()

    st = await open_disk(tmp_path / "d")
    got = st.get_stream("/apps/iot/pumps")
    assert got.policy == policy and got.topic_count == 1
    topic = st.get_topic("/apps/iot/pumps", "metrics")
    assert topic.topic_id == info.topic_id and topic.partitions == 3 and topic.configs == {"retention.ms": "5000"}
    assert st.get_topic_by_id(dotted.topic_id).name == ".hidden"
    assert st.get_topic("/default", "gone") is None
    assert [(c.partition, c.offset, c.leader_epoch, c.metadata) for c in st.get_cursors("/apps/iot/pumps", "g")] \
        == [(0, 5, 1, "m")]
    assert st.list_cursor_groups("/default") == ["h"]
    assert st.get_state("/apps/iot/pumps", "aborted_txns") == {"x": {"first": 1}}
    part = st.partition("/apps/iot/pumps", "metrics", 2)
    assert part.leader_epoch > epoch1 and part.high_watermark == 2
    r = await part.append(batch(1), 1)
    assert r.base_offset == 2
    assert await part.end_offset_for_epoch(epoch1) == (epoch1, 2)
    assert await part.end_offset_for_epoch(part.leader_epoch) == (part.leader_epoch, 3)
    data = bytes(await part.read(0, 1 << 20))
    assert struct.unpack_from(">i", data, 12)[0] == epoch1
    with pytest.raises(storage.InvalidPathError, match="nest"):
        await st.create_stream("/apps/iot")
    await st.close()


async def test_many_topics_open_lazily_and_handles_stay_bounded(tmp_path):
    st = await open_disk(tmp_path / "d", max_open_files=8)
    await asyncio.gather(*(st.create_topic("/default", f"t{i}", 1) for i in range(2000)))
    for i in range(0, 2000, 40):
        await st.partition("/default", f"t{i}", 0).append(batch(1, size=i % 50 + 1), 1)
    assert len(st.handles) <= 8
    await st.close()
    t0 = time.perf_counter()
    st = await open_disk(tmp_path / "d", max_open_files=8)
    assert time.perf_counter() - t0 < 1.0
    assert len(st.list_topics("/default")) == 2000
    assert len(os.listdir(tmp_path / "d" / "streams" / "default")) == 3 + 50  # .stream, .topics, .cursors, 50 dirs
    for i in range(0, 2000, 40):
        assert values(await st.partition("/default", f"t{i}", 0).read(0, 100)) == [(0, b"A" * (i % 50 + 1))]
    assert len(st.handles) <= 8
    await st.close()


async def test_deleted_topic_and_stream_leave_nothing_behind(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/x/y")
    await st.create_topic("/x/y", "t", 1)
    await st.partition("/x/y", "t", 0).append(batch(1), 1)
    await st.create_topic("/default", "t", 1)
    await st.partition("/default", "t", 0).append(batch(1), 1)
    await st.delete_topic("/default", "t")
    await st.create_topic("/default", "t", 1)
    assert st.partition("/default", "t", 0).high_watermark == 0
    await st.delete_stream("/x/y")
    await st.close()
    assert log_files(tmp_path / "d") == []
    st = await open_disk(tmp_path / "d")
    assert st.get_stream("/x/y") is None
    assert st.partition("/default", "t", 0).high_watermark == 0
    await st.close()


# --- retention and DeleteRecords ---------------------------------------------------


async def test_retention_by_ttl_deletes_files_and_moves_log_start(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", StreamPolicy(partitionlet_bytes=4096, ttl_seconds=3600))
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    now = int(time.time() * 1000)
    await fill(part, 30, ts=now - 7200_000)  # expired
    await fill(part, 30, ts=now)  # fresh
    before = len(log_files(tmp_path / "d"))
    deleted = await st.enforce_retention()
    lets = await part.partitionlets()
    assert deleted > 0 and len(log_files(tmp_path / "d")) == before - deleted
    assert part.log_start_offset == lets[0].base_offset > 0
    assert all(p.max_timestamp >= now for p in lets)
    assert values(await part.read(part.log_start_offset, 100))[0][0] == part.log_start_offset
    assert await st.enforce_retention() == 0
    # everything expired, including the active partitionlet: the log empties, offsets go on
    assert await st.enforce_retention(now + 7200_000) == len(lets)
    assert part.log_start_offset == part.high_watermark == 180
    assert log_files(tmp_path / "d") == []
    assert (await part.append(batch(1), 1)).base_offset == 180
    await st.close()
    st = await open_disk(tmp_path / "d")
    assert st.partition("/s", "t", 0).log_start_offset == 180
    await st.close()


async def test_retention_by_size_and_topic_override(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", SMALL)
    # fill() dates its records 1970: retention.ms -1 leaves the size cap alone at work
    await st.create_topic("/s", "t", 1, {"retention.bytes": "10000", "retention.ms": "-1"})
    part = st.partition("/s", "t", 0)
    await fill(part, 60)
    await st.enforce_retention()
    lets = await part.partitionlets()
    assert sum(p.size_bytes for p in lets) - lets[0].size_bytes < 10000 <= sum(p.size_bytes for p in lets)
    assert part.log_start_offset == lets[0].base_offset


async def test_retention_runs_in_the_background(tmp_path):
    st = await open_disk(tmp_path / "d", retention_check_ms=20)
    await st.create_stream("/s", StreamPolicy(partitionlet_bytes=4096, ttl_seconds=1))
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 20, ts=0)
    await wait_until(lambda: part.log_start_offset == part.high_watermark)
    await st.close()


async def test_delete_records_removes_whole_partitionlets_and_survives_restart(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 60)
    lets = await part.partitionlets()
    cut = lets[3].base_offset + 1
    files_before = len(log_files(tmp_path / "d"))
    assert await part.delete_records(cut) == cut
    assert len(log_files(tmp_path / "d")) == files_before - 3
    with pytest.raises(storage.OffsetOutOfRangeError):
        await part.read(cut - 1, 100)
    await st.close()
    st = await open_disk(tmp_path / "d")
    part = st.partition("/s", "t", 0)
    assert part.log_start_offset == cut
    assert values(await part.read(cut, 1))[0][0] == cut - 1
    await st.close()


# --- durability ------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["always", "interval"])
async def test_wait_durable_fsyncs_without_blocking_other_partitions(tmp_path, monkeypatch, policy):
    import threading

    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", StreamPolicy(fsync=policy, fsync_interval_ms=10_000))
    await st.create_topic("/s", "a", 1)
    await st.create_topic("/s", "b", 1)
    a, b = st.partition("/s", "a", 0), st.partition("/s", "b", 0)
    await a.append(batch(1), 1)
    await b.append(batch(1), 1)
    await asyncio.wait_for(a.wait_durable(1), 5)  # interval: a waiter starts the group commit early
    gate = threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd):
        gate.wait(5)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    await a.append(batch(1), 1)
    waiting = asyncio.ensure_future(a.wait_durable(2))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    for _ in range(20):  # the stuck fsync of `a` holds up neither the loop nor `b`
        await asyncio.wait_for(b.append(batch(1), 1), 1)
    gate.set()
    await asyncio.wait_for(waiting, 5)
    monkeypatch.setattr(os, "fsync", real_fsync)
    await st.close()


async def test_interval_policy_commits_without_waiters(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", StreamPolicy(fsync="interval", fsync_interval_ms=10))
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await part.append(batch(1), 1)
    await wait_until(lambda: part._commit.synced == 1)
    await st.close()


# --- full disk -----------------------------------------------------------------------


async def test_volume_cap_raises_storage_full_and_keeps_everything_readable(tmp_path):
    d = tmp_path / "d"
    st = await open_disk(d, volume_limits={str(d): 20_000})
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    stored = []
    with pytest.raises(storage.StorageFullError):
        for i in range(1000):
            b = batch(2, size=500)
            await part.append(b, 2)
            stored.append(b)
    hw = part.high_watermark
    assert hw == 2 * len(stored) > 0
    assert sum(os.path.getsize(f) for f in log_files(d)) == sum(len(b) for b in stored)
    data = b""
    while len(data) < sum(len(b) for b in stored):
        data += await part.read(len(values(data)), 1 << 20)
    assert len(values(data)) == hw
    await st.close()
    st = await open_disk(d, volume_limits={str(d): 20_000})
    part = st.partition("/s", "t", 0)
    assert part.high_watermark == hw
    with pytest.raises(storage.StorageFullError):
        await part.append(batch(2, size=500), 2)
    await part.delete_records(hw)
    await part.append(batch(2, size=500), 2)  # room again once data is deleted
    await st.close()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if os.system(f"mount -t tmpfs -o size=512k tmpfs {mnt} 2>/dev/null") != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    os.system(f"umount {mnt}")


async def test_real_full_disk(tiny_tmpfs):
    st = await open_disk(tiny_tmpfs)
    await st.create_topic("/default", "other", 1)
    for _ in range(3):
        await st.partition("/default", "other", 0).append(batch(1, size=8000), 1)
    await st.create_topic("/default", "t", 1)
    part = st.partition("/default", "t", 0)
    count = 0
    with pytest.raises(storage.StorageFullError):
        for _ in range(10_000):
            await part.append(batch(1, size=8000), 1)
            count += 1
    assert part.high_watermark == count > 10
    for offset in range(count):
        assert values(await part.read(offset, 1)) == [(offset, b"A" * 8000)]
    hw = part.high_watermark
    await st.delete_topic("/default", "other")  # deleting works on a full disk and frees room
    await wait_until(lambda: not os.listdir(tiny_tmpfs / "trash"))
    await part.append(batch(1, size=8000), 1)
    with pytest.raises(storage.StorageFullError):
        for _ in range(100):
            await part.append(batch(1, size=8000), 1)
    hw = part.high_watermark
    await part.delete_records(hw)  # so does DeleteRecords
    await part.append(batch(1, size=8000), 1)
    await st.close()
    st = await open_disk(tiny_tmpfs)
    assert st.partition("/default", "t", 0).high_watermark == hw + 1
    assert st.get_topic("/default", "other") is None
    await st.close()


# --- urls -------------------------------------------------------------------------


async def test_file_url_and_bad_urls(tmp_path):
    st = storage.open_store(f"file://{tmp_path}/u")
    await st.open()
    assert (tmp_path / "u" / "streams" / "default" / ".stream").exists()
    await st.close()
    for url in ("s3://bucket", "file://remote/x"):
        with pytest.raises(ValueError):
            storage.open_store(url)


async def test_roll_by_age_and_topic_segment_overrides(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_topic("/default", "aged", 1, {"segment.ms": "1"})
    await st.create_topic("/default", "sized", 1, {"segment.bytes": "4096"})
    aged, sized = st.partition("/default", "aged", 0), st.partition("/default", "sized", 0)
    for _ in range(3):
        await aged.append(batch(1), 1)
        await wait_until(lambda: time.time() * 1000 - 2 > (aged._chain[-1].created_ms))
    assert len(await aged.partitionlets()) == 3
    await fill(sized, 40)
    lets = await sized.partitionlets()
    assert len(lets) > 3 and all(p.size_bytes <= 4096 for p in lets)
    await st.close()


async def test_stale_data_of_a_recreated_topic_is_never_served(tmp_path):
    """A crash between recording a topic's deletion and moving its files away."""
    st = await open_disk(tmp_path / "d")
    await st.create_topic("/default", "t", 1)
    await st.partition("/default", "t", 0).append(batch(5), 5)
    await st.close()
    stale = tmp_path / "stale"
    os.rename(tmp_path / "d" / "streams" / "default" / "t", stale)
    st = await open_disk(tmp_path / "d")
    await st.delete_topic("/default", "t")
    await st.create_topic("/default", "t", 1)
    os.rename(stale, tmp_path / "d" / "streams" / "default" / "t")  # the old files reappear
    part = st.partition("/default", "t", 0)
    assert part.high_watermark == 0 and await part.read(0, 100) == b""
    await part.append(batch(1), 1)
    await st.close()
    st = await open_disk(tmp_path / "d")
    assert st.partition("/default", "t", 0).high_watermark == 1
    await st.close()


async def test_garbled_manifest_is_rebuilt_from_the_partitionlet_files(tmp_path, caplog):
    st = await open_disk(tmp_path / "d")
    await st.create_topic("/default", "t", 1)
    await st.partition("/default", "t", 0).append(batch(3), 3)
    await st.close()
    manifest = tmp_path / "d" / "streams" / "default" / "t" / "0" / "chain.json"
    manifest.write_bytes(b"{garbage")
    st = await open_disk(tmp_path / "d")
    part = st.partition("/default", "t", 0)
    assert part.high_watermark == 3 and len(values(await part.read(0, 1000))) == 3
    assert [r.message for r in caplog.records if str(manifest) in r.message and "rebuil" in r.message]
    await st.close()


async def test_epoch_history_across_restarts(tmp_path):
    epochs = []
    for round_ in range(4):
        st = await open_disk(tmp_path / "d")
        if round_ == 0:
            await st.create_topic("/default", "t", 1)
        part = st.partition("/default", "t", 0)
        epochs.append(part.leader_epoch)
        if round_ != 2:  # round 2 appends nothing: its epoch leaves no trace
            await part.append(batch(2), 2)
        await st.close()
    assert epochs == sorted(set(epochs))
    st = await open_disk(tmp_path / "d")
    part = st.partition("/default", "t", 0)
    assert part._epochs[:-1] == [(epochs[0], 0), (epochs[1], 2), (epochs[3], 4)]
    assert await part.end_offset_for_epoch(epochs[0]) == (epochs[0], 2)
    assert await part.end_offset_for_epoch(epochs[2]) == (epochs[1], 4)
    assert await part.end_offset_for_epoch(epochs[3]) == (epochs[3], 6)
    assert await part.end_offset_for_epoch(part.leader_epoch) == (part.leader_epoch, 6)
    assert await part.end_offset_for_epoch(part.leader_epoch + 1) == (-1, -1)
    await st.close()


async def test_files_left_by_a_crash_are_removed(tmp_path):
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 30)
    first = (await part.partitionlets())[0]
    await part.delete_records(first.next_offset)
    await st.close()
    pdir = tmp_path / "d" / "streams" / "s" / "t" / "0"
    kept = sorted(os.listdir(pdir))
    for suffix in (".log", ".index", ".timeindex"):  # dropped just before a crash: not unlinked yet
        (pdir / f"{0:020d}{suffix}").write_bytes(b"x" * 100)
    (pdir / f"{part.high_watermark:020d}.log").write_bytes(b"")  # a roll cut short
    (tmp_path / "d" / ".clean").unlink()
    st = await open_disk(tmp_path / "d")
    part = st.partition("/s", "t", 0)
    assert sorted(os.listdir(pdir)) == kept
    assert part.log_start_offset == first.next_offset
    assert values(await part.read(first.next_offset, 100))[0][0] == first.next_offset
    await st.close()


async def test_cursor_log_compacts_while_commits_go_on(tmp_path, monkeypatch):
    from kafkacompat.storage.disk import store as disk_store

    monkeypatch.setattr(disk_store, "_COMPACT_SLACK", 20)
    st = await open_disk(tmp_path / "d")
    await st.create_topic("/default", "t", 4)

    async def commits(group):
        for i in range(200):
            await st.commit_cursors("/default", group, [Cursor("t", i % 4, i)])

    await asyncio.gather(*(commits(f"g{n}") for n in range(5)))
    await st.delete_cursors("/default", "g4", [("t", 3)])
    lines = (tmp_path / "d" / "streams" / "default" / ".cursors").read_text().count("\n")
    assert lines <= 2 * 19 + 20 + 5
    await st.close()
    st = await open_disk(tmp_path / "d")
    for n in range(5):
        got = {c.partition: c.offset for c in st.get_cursors("/default", f"g{n}")}
        assert got == ({0: 196, 1: 197, 2: 198} if n == 4 else {0: 196, 1: 197, 2: 198, 3: 199})
    await st.close()


async def test_one_store_per_data_dir(tmp_path):
    st = await open_disk(tmp_path / "d")
    with pytest.raises(storage.StorageError, match="in use"):
        await open_disk(tmp_path / "d")
    await st.close()
    st = await open_disk(tmp_path / "d")  # free again once closed
    await st.close()


@pytest.mark.parametrize("yields", [0, 1, 2, 3, 5, 8, 13])
async def test_cancelled_appends_finish_their_roll_before_close(tmp_path, yields, monkeypatch):
    """A broker stopping cancels requests mid-append; the chain must stay whole.

    A cancelled append either happens whole or not at all, and close waits
    for any roll or manifest write still under way instead of racing it.
    """
    st = await open_disk(tmp_path)
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 10)  # the next appends roll
    from kafkacompat.storage.disk import partition as partition_module

    real_write = partition_module.write_atomic

    def slow_write(*args, **kwargs):  # a slow disk keeps manifest writes in flight
        time.sleep(0.02)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(partition_module, "write_atomic", slow_write)
    tasks = [asyncio.ensure_future(part.append(batch(3, size=1500), 3)) for _ in range(6)]
    for _ in range(yields):  # cancel at different points of the rolls, as a stopping broker would
        await asyncio.sleep(0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await st.close()
    st = await open_disk(tmp_path)
    part = st.partition("/s", "t", 0)
    hw = part.high_watermark
    assert 30 <= hw <= 48 and hw % 3 == 0
    offsets = []
    while len(offsets) < hw:
        offsets += [o for o, _ in values(await part.read(len(offsets), 1 << 20))]
    assert offsets == list(range(hw))
    await st.close()


async def test_store_id_and_settings_survive_restarts(tmp_path):
    st = await open_disk(tmp_path / "d")
    made = st.store_id
    assert await st.set_settings({"a": "1", "b": "2"}) == {"a": "1", "b": "2"}
    assert await st.set_settings({"a": None, "c": "3"}) == {"b": "2", "c": "3"}
    await st.close()
    st = await open_disk(tmp_path / "d")
    assert st.store_id == made and st.settings() == {"b": "2", "c": "3"}
    await st.close()


async def test_restart_at_an_offset_survives_a_restart(tmp_path):
    """A replica partition restarted past its end (a retention gap at the source) keeps both ends on disk."""
    st = await open_disk(tmp_path / "d")
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    await fill(part, 40)
    await part.truncate_fully_and_start_at(500)
    await st.close()
    st = await open_disk(tmp_path / "d")
    part = st.partition("/s", "t", 0)
    assert (part.log_start_offset, part.high_watermark) == (500, 500)
    assert (await part.append(batch(2), 2, at=500)).base_offset == 500
    await st.close()
    st = await open_disk(tmp_path / "d")
    part = st.partition("/s", "t", 0)
    assert (part.log_start_offset, part.high_watermark) == (500, 502)
    assert values(await part.read(500, 1 << 20)) == [(500, b"A" * 10), (501, b"B" * 10)]
    await st.close()
