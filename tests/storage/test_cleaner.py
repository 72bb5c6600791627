"""Log compaction in the on-disk engine: what survives a cleaning, at every boundary.

Batches are built and read with the protocol's record codec (as the broker
injects it); every test reads the partition back as a consumer would and
checks offsets, keys and values.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap

import pytest
from kafkacompat.protocol.control_records import ControlType, build_marker, marker_type, set_attributes
from kafkacompat.protocol.records import (
    ATTR_TRANSACTIONAL,
    Record,
    build_batch,
    iter_records,
    read_header,
    record_timestamps,
)
from kafkacompat.storage import StreamPolicy

from kafkacompat import storage
from kafkacompat.broker.cleaner_codec import CLEANER_CODEC
from kafkacompat.testing.services import ServiceUnavailable, cloud_store

HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_700_000_000_000  # record timestamps; cleanings run "now" = T0 + some hours


@pytest.fixture(params=["disk", "memory", "cloud"])
def engine(request) -> str:
    """The compaction rules hold on every engine; files, restarts and crashes are the disk's."""
    return request.param


async def open_disk(path, engine="disk", **kw):
    kw.setdefault("record_timestamps", record_timestamps)
    kw.setdefault("record_codec", CLEANER_CODEC)
    kw.setdefault("cleaner_backoff_ms", 3_600_000)  # tests clean explicitly
    if engine == "cloud":
        try:
            url, kw["object_store"] = cloud_store()
        except ServiceUnavailable as exc:
            pytest.skip(str(exc))
        kw.setdefault("flush_ms", 1)
    else:
        url = "memory://" if engine == "memory" else str(path)
    st = storage.open_store(url, **kw)
    await st.open()
    return st


async def sealed_chain(part):
    """The partition's sealed segments (the cloud engine reads them from its database)."""
    chain = part.sealed_chain()
    return await chain if inspect.isawaitable(chain) else chain


async def compacted(st, configs=None, topic="t"):
    """A compacted topic whose partitionlets roll at 4 KiB."""
    if st.get_stream("/s") is None:
        await st.create_stream("/s", StreamPolicy(partitionlet_bytes=4096))
    conf = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}
    conf.update(configs or {})
    await st.create_topic("/s", topic, 1, conf)
    return st.partition("/s", topic, 0)


async def put(part, pairs, *, ts=T0, codec="none", producer=(-1, -1, -1), transactional=False):
    """Append one batch of (key, value) pairs; returns its base offset."""
    records = [Record(None if k is None else k.encode(), None if v is None else v.encode(), timestamp=ts)
               for k, v in pairs]
    pid, epoch, seq = producer
    data = build_batch(records, compression=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    if transactional:
        data = set_attributes(data, ATTR_TRANSACTIONAL)
    return (await part.append(data, len(records))).base_offset


async def end_txn(part, pid, control, ts=T0):
    """Append the end-transaction marker of producer `pid`, as the coordinator writes it."""
    return (await part.append(build_marker(pid, 0, control, ts), 1)).base_offset


async def roll(part, ts=T0):
    """Fill the active partitionlet so the next append starts a new one."""
    await put(part, [(f"filler-{ts}", "x" * 4000)], ts=ts)


async def read_all(part):
    """(offset, key, value) of every record from the log start, as a consumer reads them."""
    out, offset = [], part.log_start_offset
    while offset < part.high_watermark:
        data = await part.read(offset, 1 << 20)
        if not data:
            break
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            header = read_header(view, pos)
            offset = header.last_offset + 1
            pos += header.size
        out += [(r.offset, r.key and r.key.decode(), r.value and r.value.decode()) for r in iter_records(data)]
    return [r for r in out if not (r[1] or "").startswith("filler")]


def latest(rows):
    return {k: v for _, k, v in rows}


async def test_keeps_the_last_record_per_key_at_its_offset(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st)
    for i in range(3):
        await put(part, [("a", f"a{i}"), ("b", f"b{i}")])
    await roll(part)
    await put(part, [("a", "active")])  # in the active partitionlet: never cleaned
    before = await read_all(part)
    results = await st.clean_logs(now=T0 + HOUR)
    assert len(results) == 1 and results[0].records_kept < results[0].records_read
    after = await read_all(part)
    assert after == [(4, "a", "a2"), (5, "b", "b2"), (7, "a", "active")]
    assert latest(after) == latest(before)
    assert part.high_watermark == 8 and part.log_start_offset == 0
    # a fetch inside a gap answers from the next batch on, as Kafka does
    assert [r.offset for r in iter_records(await part.read(1, 1 << 20))][0] == 4
    await st.close()


async def test_tombstones_stay_for_delete_retention_ms_then_go(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st, {"delete.retention.ms": str(HOUR)})
    await put(part, [("a", "1")])
    await put(part, [("b", "1")])
    await put(part, [("a", None)])  # tombstone
    await roll(part)
    await put(part, [("c", "live")])
    await st.clean_logs(now=T0 + HOUR)
    assert await read_all(part) == [(1, "b", "1"), (2, "a", None), (4, "c", "live")]
    # nothing dirty: no cleaning, however old the tombstone (as on Kafka 4.1)
    assert await st.clean_logs(now=T0 + 3 * HOUR) == []
    await roll(part)
    await put(part, [("d", "1")])
    # a cleaning before delete.retention.ms passed (it counts from the first cleaning) keeps it
    await st.clean_logs(now=T0 + HOUR + HOUR // 2)
    assert (2, "a", None) in await read_all(part)
    await roll(part)
    await put(part, [("e", "1")])
    await st.clean_logs(now=T0 + 2 * HOUR + 1)
    assert await read_all(part) == [(1, "b", "1"), (4, "c", "live"), (6, "d", "1"), (8, "e", "1")]
    await st.close()


async def test_min_compaction_lag_keeps_recent_partitionlets_dirty(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st, {"min.compaction.lag.ms": str(HOUR)})
    await put(part, [("a", "old")], ts=T0)
    await roll(part, ts=T0)
    await put(part, [("a", "new")], ts=T0 + 2 * HOUR)
    await roll(part, ts=T0 + 2 * HOUR)
    await put(part, [("z", "active")], ts=T0 + 2 * HOUR)
    # at T0 + 2.5 h only the first partitionlet is older than the lag: "old" is the last "a" it sees
    await st.clean_logs(now=T0 + 2 * HOUR + HOUR // 2)
    assert [v for _, k, v in await read_all(part) if k == "a"] == ["old", "new"]
    await st.clean_logs(now=T0 + 4 * HOUR)
    assert [v for _, k, v in await read_all(part) if k == "a"] == ["new"]
    await st.close()


async def test_dirty_ratio_below_minimum_waits_unless_max_compaction_lag_passed(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st, {"min.cleanable.dirty.ratio": "0.9", "max.compaction.lag.ms": str(10 * HOUR)})
    await put(part, [("a", "1")])
    await roll(part)
    await put(part, [("a", "2")])
    await roll(part)
    await put(part, [("b", "active")])
    assert len(await st.clean_logs(now=T0 + HOUR)) == 1  # everything is dirty: ratio 1.0
    await put(part, [("a", "3")])
    await roll(part)
    await put(part, [("b", "active2")])
    # a small dirty part next to a large clean one: below 0.9
    assert await st.clean_logs(now=T0 + HOUR) == []
    assert [v for _, k, v in await read_all(part) if k == "a"] == ["2", "3"]
    # ...until the oldest dirty partitionlet is older than max.compaction.lag.ms
    lets = await sealed_chain(part)
    dirty = [p for p in lets if p.clean_to is None]
    assert dirty and await st.clean_logs(now=dirty[0].created_ms + 10 * HOUR + 1)
    assert [v for _, k, v in await read_all(part) if k == "a"] == ["3"]
    await st.close()


async def test_max_compaction_lag_caps_the_partitionlet_age(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st, {"max.compaction.lag.ms": "1000", "segment.ms": str(HOUR)})
    assert part.settings.partitionlet_age_ms == 1000
    await st.close()


async def test_keys_spanning_partitionlets(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st)
    expected = {}
    for round_ in range(4):
        for k in range(20):
            if (k + round_) % 3:
                value = f"{k}@{round_}"
                await put(part, [(f"k{k}", value)])
                expected[f"k{k}"] = value
        await roll(part)
    await put(part, [("tail", "x")])
    assert len(await sealed_chain(part)) >= 4
    await st.clean_logs(now=T0 + HOUR)
    rows = await read_all(part)
    assert latest(rows) == {**expected, "tail": "x"}
    assert len(rows) == len(expected) + 1  # exactly one record per key
    offsets = [o for o, _, _ in rows]
    assert offsets == sorted(offsets)
    await st.close()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compressed_batches_are_recompressed_with_their_codec(engine, tmp_path, codec):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st)
    await put(part, [(f"k{i % 5}", f"v{i}") for i in range(40)], codec=codec)
    await put(part, [("k0", "last")], codec=codec)
    await roll(part)
    await put(part, [("z", "1")])
    await st.clean_logs(now=T0 + HOUR)
    data = await part.read(0, 1 << 20)
    header = read_header(data)
    assert header.codec == {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    assert header.base_offset == 0 and header.last_offset_delta == 39  # offsets kept
    assert header.record_count == 4
    assert latest(await read_all(part)) == {"k0": "last", "k1": "v36", "k2": "v37", "k3": "v38", "k4": "v39",
                                            "z": "1"}
    await st.close()


async def test_a_full_offset_map_cleans_a_prefix_and_the_next_pass_the_rest(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine, cleaner_dedupe_buffer_bytes=5 * storage.compaction.ENTRY_BYTES)
    part = await compacted(st)
    for round_ in range(2):
        for k in range(10):
            await put(part, [(f"k{k}", f"{round_}")])
    await roll(part)
    await put(part, [("z", "1")])
    first = (await st.clean_logs(now=T0 + HOUR))[0]
    assert first.keys_mapped == 5 and first.clean_to < part.high_watermark - 2
    assert len(await read_all(part)) > 11
    passes = 1
    while await st.clean_logs(now=T0 + HOUR):
        passes += 1
        assert passes < 10, "cleaning does not converge"
    assert passes > 1
    rows = await read_all(part)
    assert latest(rows) == {**{f"k{k}": "1" for k in range(10)}, "z": "1"} and len(rows) == 11
    await st.close()


async def test_a_producers_last_batch_stays_as_an_empty_batch(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st)
    await put(part, [("a", "1"), ("b", "1")], producer=(7, 0, 0))
    await put(part, [("a", "2"), ("b", "2")])  # no producer id
    await roll(part)
    await put(part, [("z", "1")])
    await st.clean_logs(now=T0 + HOUR)
    data = await part.read(0, 1 << 20)
    header = read_header(data)
    assert (header.producer_id, header.base_sequence, header.record_count, header.last_offset_delta) == (7, 0, 0, 1)
    assert [r[:2] for r in await read_all(part)] == [(2, "a"), (3, "b"), (5, "z")]
    await st.close()


async def test_aborted_records_go_committed_ones_compact_and_markers_stay(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st)
    await put(part, [("a", "1"), ("b", "1")])
    await put(part, [("a", "aborted"), ("c", "aborted")], producer=(7, 0, 0), transactional=True)
    await end_txn(part, 7, ControlType.ABORT)
    await put(part, [("b", "2"), ("d", "committed")], producer=(8, 0, 0), transactional=True)
    await end_txn(part, 8, ControlType.COMMIT)
    await put(part, [("d", "last")], producer=(8, 0, 2), transactional=True)
    await end_txn(part, 8, ControlType.COMMIT)
    await roll(part)
    await put(part, [("z", "1")])
    before = await read_all(part)
    assert (2, "a", "aborted") in before
    await st.clean_logs(now=T0 + HOUR)
    # "a" keeps its committed value: the aborted record neither stays nor hides it
    assert await read_all(part) == [(0, "a", "1"), (5, "b", "2"), (8, "d", "last"), (11, "z", "1")]
    markers = [h for h in _headers(await part.read(0, 1 << 20)) if h.is_control]
    assert [m.producer_id for m in markers] == [7, 8, 8]
    await st.close()


@pytest.mark.parametrize("retention_ms, kept_markers", [
    (0, [(7, "COMMIT"), (8, "COMMIT")]),  # emptied transactions lose their markers at the next cleaning
    (DAY, [(7, "ABORT"), (8, "COMMIT"), (7, "COMMIT"), (8, "COMMIT")]),  # not before delete.retention.ms
])
async def test_markers_go_once_their_transaction_is_empty_and_delete_retention_passed(
        engine, tmp_path, retention_ms, kept_markers):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st, {"delete.retention.ms": str(retention_ms)})
    await put(part, [("a", "aborted"), ("c", "aborted")], producer=(7, 0, 0), transactional=True)
    await end_txn(part, 7, ControlType.ABORT)
    await put(part, [("b", "2"), ("d", "committed")], producer=(8, 0, 0), transactional=True)
    await end_txn(part, 8, ControlType.COMMIT)
    await put(part, [("e", "1")], producer=(7, 0, 2), transactional=True)
    await end_txn(part, 7, ControlType.COMMIT)
    await put(part, [("d", "last")], producer=(8, 0, 2), transactional=True)
    await end_txn(part, 8, ControlType.COMMIT)
    await put(part, [("b", "3")])  # producer 8's first transaction is now all superseded
    await roll(part)
    await put(part, [("z", "1")])

    def markers(data) -> list[tuple[int, str]]:
        return [(h.producer_id, _marker(data, h)) for h in _headers(data) if h.is_control]

    await st.clean_logs(now=T0 + HOUR)
    # the first cleaning removes the batches; it met them, so their markers stay this time
    assert markers(await part.read(part.log_start_offset, 1 << 20)) == [(7, "ABORT"), (8, "COMMIT"), (7, "COMMIT"), (8, "COMMIT")]
    await roll(part, ts=T0 + 1)
    await put(part, [("y", "1")])
    await st.clean_logs(now=T0 + 2 * HOUR)
    assert markers(await part.read(part.log_start_offset, 1 << 20)) == kept_markers
    assert await read_all(part) == [(6, "e", "1"), (8, "d", "last"), (10, "b", "3"), (12, "z", "1"), (14, "y", "1")]
    await st.close()


def _marker(data, header) -> str:
    """ABORT or COMMIT: the control type of the marker batch `header` within fetched `data`."""
    view, pos = memoryview(data), 0
    while pos < len(view):
        found = read_header(view, pos)
        if found.base_offset == header.base_offset:
            return marker_type(view[pos:pos + found.size]).name
        pos += found.size
    raise AssertionError(f"no batch at {header.base_offset}")


async def test_a_transaction_still_open_bounds_the_cleaning(engine, tmp_path):
    st = await open_disk(tmp_path, engine=engine)
    part = await compacted(st)
    await put(part, [("a", "1")])
    await put(part, [("a", "2")])
    await put(part, [("a", "open")], producer=(9, 0, 0), transactional=True)
    await put(part, [("a", "3")])  # after the open transaction: not cleaned past it
    await roll(part)
    await put(part, [("z", "1")])
    await st.clean_logs(now=T0 + HOUR)
    assert await read_all(part) == [(1, "a", "2"), (2, "a", "open"), (3, "a", "3"), (5, "z", "1")]
    await end_txn(part, 9, ControlType.ABORT)
    await roll(part)
    await put(part, [("y", "1")])
    await st.clean_logs(now=T0 + 2 * HOUR)
    assert await read_all(part) == [(3, "a", "3"), (5, "z", "1"), (8, "y", "1")]
    await st.close()


def _headers(data):
    view, pos, out = memoryview(data), 0, []
    while pos < len(view):
        header = read_header(view, pos)
        out.append(header)
        pos += header.size
    return out


async def test_cleaned_partitionlets_survive_a_restart_and_a_lost_index(tmp_path):
    st = await open_disk(tmp_path)
    part = await compacted(st)
    for i in range(30):
        await put(part, [(f"k{i % 3}", str(i))])
    await roll(part)
    await put(part, [("z", "1")])
    await st.clean_logs(now=T0 + HOUR)
    expected = await read_all(part)
    await st.close()
    for d, _, files in os.walk(tmp_path):
        for f in files:
            if f.endswith(".index") or f.endswith(".timeindex"):
                os.unlink(os.path.join(d, f))
    st = await open_disk(tmp_path)
    part = st.partition("/s", "t", 0)
    assert await read_all(part) == expected
    assert part.high_watermark == 32
    await st.close()


async def test_a_delete_policy_topic_is_never_cleaned_and_compact_ignores_the_ttl(tmp_path):
    st = await open_disk(tmp_path)
    await st.create_stream("/s", StreamPolicy(partitionlet_bytes=4096, ttl_seconds=1))
    await st.create_topic("/s", "plain", 1, {"min.cleanable.dirty.ratio": "0.01"})
    plain = st.partition("/s", "plain", 0)
    part = await compacted(st)
    for p in (plain, part):
        await put(p, [("a", "1")])
        await put(p, [("a", "2")])
        await roll(p)
        await put(p, [("z", "1")])
    assert [r.partition for r in await st.clean_logs(now=T0 + HOUR)] == [part.name]
    assert len(await read_all(plain)) == 3
    await st.enforce_retention(now=T0 + 10 * HOUR)
    assert plain.log_start_offset > 0 and part.log_start_offset == 0


# --- a cleaner killed mid-way leaves a valid log ------------------------------------

CRASH_SCRIPT = textwrap.dedent("""
    import asyncio, os, sys
    sys.path.insert(0, {tests!r})
    from test_cleaner import open_disk, T0, HOUR
    from kafkacompat.storage.disk import cleaner, partition

    point = sys.argv[2]

    def die(name):
        if name == point:
            os._exit(9)

    cleaner.crash_point = die
    if point == "unlink":
        partition.unlink_files = lambda paths: os._exit(9)

    async def main():
        st = await open_disk(sys.argv[1])
        await st.clean_logs(now=T0 + HOUR)
        os._exit(0)  # no clean shutdown either way

    asyncio.run(main())
""")


@pytest.mark.parametrize("point", ["mapped", "writing", "written", "unlink"])
async def test_a_cleaner_killed_at_any_point_leaves_a_valid_log(tmp_path, point):
    st = await open_disk(tmp_path)
    part = await compacted(st)
    for i in range(60):
        await put(part, [(f"k{i % 7}", str(i))])
    await roll(part)
    await put(part, [("z", "1")])
    before = await read_all(part)
    await st.close()
    script = CRASH_SCRIPT.format(tests=os.path.dirname(__file__))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), point], cwd=os.getcwd(), timeout=60)
    assert done.returncode == 9, "the cleaner did not reach the crash point"
    st = await open_disk(tmp_path)  # unclean: orphans removed, logs checked
    part = st.partition("/s", "t", 0)
    rows = await read_all(part)
    assert latest(rows) == latest(before)
    assert rows == before if point != "unlink" else len(rows) == 8
    files = sorted(f for _, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".log"))
    assert len(files) == len(part.sealed_chain()) + 1, f"orphan files left: {files}"
    await st.clean_logs(now=T0 + HOUR)  # and cleaning still works
    assert len(await read_all(part)) == 8
    await st.close()


async def test_compact_delete_drops_old_partitionlets_even_past_one_the_cleaner_emptied(tmp_path):
    st = await open_disk(tmp_path)
    part = await compacted(st, {"cleanup.policy": "compact,delete", "retention.ms": str(HOUR)})
    await put(part, [("a", "1")])
    await roll(part)  # the filler is superseded below: this partitionlet ends up empty
    await put(part, [(f"filler-{T0}", "gone")])
    await roll(part, ts=T0 + 1)
    await put(part, [("b", "1")], ts=T0 + 10 * HOUR)
    await st.clean_logs(now=T0 + HOUR)
    assert any(p.size == 0 for p in part.sealed_chain())
    await st.enforce_retention(now=T0 + 5 * HOUR)
    assert await read_all(part) == [(4, "b", "1")] and part.log_start_offset == 4
    await st.close()
