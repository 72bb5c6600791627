"""Moving a partition to another volume (AlterReplicaLogDirs): every record stays readable, at every step.

The partition is read back as a consumer reads it before, during and after
the move, and after restarts; a process killed at each step of the move
comes back with every record and finishes the move on its own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time

import pytest
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.storage import StreamPolicy
from storage_testkit import batch, values

from kafkacompat import storage

SMALL = StreamPolicy(partitionlet_bytes=4096)
CAPS = 1 << 20  # both volumes capped alike: new partitionlets alternate between them


async def open_disk(a, b, **kw):
    kw.setdefault("record_timestamps", record_timestamps)
    st = storage.open_store(str(a), volumes=[str(b)], volume_limits={str(a): CAPS, str(b): CAPS}, **kw)
    await st.open()
    return st


async def spread_partition(st, batches=60):
    """A partition whose partitionlets sit on both volumes."""
    await st.create_stream("/s", SMALL)
    await st.create_topic("/s", "t", 1)
    part = st.partition("/s", "t", 0)
    for i in range(batches):
        await part.append(batch(3, size=300 + i % 50, ts=1000 + i), 3)
    return part


async def read_all(part):
    out, offset = [], part.log_start_offset
    while offset < part.high_watermark:
        got = values(await part.read(offset, 1 << 16))
        out += got
        offset = got[-1][0] + 1
    return out


async def settled(part, timeout=20.0):
    """Wait until no partitionlet is left away from the partition's log dir."""
    deadline = time.monotonic() + timeout
    while part.away_from_home():
        assert time.monotonic() < deadline, f"still away: {[p.log_path for p in part.away_from_home()]}"
        await asyncio.sleep(0.01)


def logs_by_volume(a, b):
    return {str(v): sorted(f for _d, _s, files in os.walk(v) for f in files if f.endswith(".log")) for v in (a, b)}


async def test_a_moved_partition_keeps_every_record_and_its_new_partitionlets_start_there(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, b)
    part = await spread_partition(st)
    assert {p.volume for p in await part.partitionlets()} == {str(a), str(b)}
    before = await read_all(part)
    await part.move_to_log_dir(str(b))
    assert part.log_dir() == str(b)
    for i in range(20):  # appends and reads go on during the move
        await part.append(batch(3, size=300, ts=5000 + i), 3)
        assert (await read_all(part))[:len(before)] == before
        await asyncio.sleep(0.001)
    await settled(part)
    for i in range(20):
        await part.append(batch(3, size=300, ts=6000 + i), 3)
    lets = await part.partitionlets()
    assert {p.volume for p in lets} == {str(b)} and len(lets) > 10
    assert all(x.next_offset == y.base_offset for x, y in zip(lets, lets[1:]))
    after = await read_all(part)
    assert after[:len(before)] == before and [o for o, _ in after] == list(range(part.high_watermark))
    await st.close()  # lets the last swap finish unlinking the originals
    assert logs_by_volume(a, b)[str(a)] == []

    st = await open_disk(a, b)  # the choice of log dir outlives a restart
    part = st.partition("/s", "t", 0)
    assert part.log_dir() == str(b) and await read_all(part) == after
    for i in range(20):
        await part.append(batch(3, size=300, ts=7000 + i), 3)
    assert {p.volume for p in await part.partitionlets()} == {str(b)}
    await st.close()


async def test_a_new_log_dir_mid_move_wins_and_an_empty_partition_starts_there(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, b)
    part = await spread_partition(st)
    before = await read_all(part)
    await part.move_to_log_dir(str(b))
    await part.move_to_log_dir(str(a))
    await settled(part)
    assert {p.volume for p in await part.partitionlets()} == {str(a)} and await read_all(part) == before
    await st.create_topic("/s", "empty", 1)
    empty = st.partition("/s", "empty", 0)
    await empty.move_to_log_dir(str(b))
    await st.close()
    st = await open_disk(a, b)
    empty = st.partition("/s", "empty", 0)
    assert empty.log_dir() == str(b)
    await empty.append(batch(1), 1)
    assert [p.volume for p in await empty.partitionlets()] == [str(b)]
    await st.close()


async def test_no_room_in_the_log_dir_is_a_storage_error_and_loses_nothing(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = storage.open_store(str(a), volumes=[str(b)], volume_limits={str(b): 1000},
                            record_timestamps=record_timestamps)
    await st.open()
    part = await spread_partition(st, batches=30)
    before = await read_all(part)
    await part.move_to_log_dir(str(b))  # the roll fits; the partitionlets to move do not
    await asyncio.sleep(0.2)
    assert part.away_from_home() and await read_all(part) == before
    with pytest.raises(storage.StorageFullError):
        for i in range(10):
            await part.append(batch(3, size=300), 3)
    assert (await read_all(part))[:len(before)] == before
    await st.close()


async def test_memory_and_single_dir_stores_hold_every_partition_in_their_one_dir(tmp_path):
    st = storage.open_store("memory://")
    await st.open()
    await st.create_topic("/default", "t", 1)
    part = st.partition("/default", "t", 0)
    await part.move_to_log_dir(st.data_dirs()[0])
    assert part.log_dir() is None
    await st.close()


async def test_a_topic_deleted_mid_move_leaves_nothing_behind_and_does_not_come_back(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, b)
    part = await spread_partition(st)
    st.move_bytes_per_second = 20_000  # slow enough to be mid-copy when the topic goes
    await part.move_to_log_dir(str(b))
    moved = len(part.away_from_home())
    home = part.dir_on(str(b))
    present = set(os.listdir(home))  # with the new active partitionlet
    deadline = time.monotonic() + 10
    while set(os.listdir(home)) <= present:
        assert time.monotonic() < deadline, "no copy started"
        await asyncio.sleep(0.005)
    await st.delete_topic("/s", "t")  # a copy is under way
    deadline = time.monotonic() + 10
    while any(os.path.exists(os.path.join(v, "streams", "s", "t")) for v in (a, b)):
        assert time.monotonic() < deadline, logs_by_volume(a, b)
        await asyncio.sleep(0.01)
    await st.close()
    st = await open_disk(a, b)
    assert moved and st.get_topic("/s", "t") is None and logs_by_volume(a, b) == {str(a): [], str(b): []}
    await st.close()


# --- a move killed mid-way leaves every record readable ---------------------------------

CRASH_SCRIPT = textwrap.dedent("""
    import asyncio, os, sys
    sys.path.insert(0, {tests!r})
    from test_log_dir_moves import open_disk
    from kafkacompat.storage.disk import move, partition

    a, b, point = sys.argv[1:4]
    seen = []

    def die(name):
        if name == point:
            seen.append(name)
            if len(seen) == 3:  # a few partitionlets were moved first
                os._exit(9)

    move.crash_point = die
    if point == "unlink":
        real = partition.unlink_files
        def unlink(paths):
            seen.append(point)
            if len(seen) == 3:
                os._exit(9)
            real(paths)
        partition.unlink_files = unlink

    async def main():
        st = await open_disk(a, b)
        part = st.partition("/s", "t", 0)
        await part.move_to_log_dir(b)
        await asyncio.sleep(30)
        os._exit(0)

    asyncio.run(main())
""")


@pytest.mark.parametrize("point", ["copied", "unlink"])
async def test_a_move_killed_at_any_step_keeps_one_readable_copy_and_resumes(tmp_path, point):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, b)
    part = await spread_partition(st)
    before = await read_all(part)
    await st.close()
    script = CRASH_SCRIPT.format(tests=os.path.dirname(__file__))
    done = subprocess.run([sys.executable, "-c", script, str(a), str(b), point], cwd=os.getcwd(), timeout=60)
    assert done.returncode == 9, "the move did not reach the crash point"
    st = await open_disk(a, b)  # unclean: leftovers removed, the move goes on by itself
    part = st.partition("/s", "t", 0)
    assert part.log_dir() == str(b)
    assert await read_all(part) == before
    await settled(part)
    assert await read_all(part) == before
    count = len(await part.partitionlets())
    await st.close()  # lets the last swap finish unlinking the originals
    logs = logs_by_volume(a, b)
    assert logs[str(a)] == [] and len(logs[str(b)]) == count


async def test_a_move_keeps_to_the_stores_byte_rate(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, b)
    part = await spread_partition(st, batches=40)
    to_copy = sum(p.size_bytes for p in await part.partitionlets() if p.volume == str(a) and p.sealed)
    st.move_bytes_per_second = 40_000  # Kafka's replica.alter.log.dirs.io.max.bytes.per.second
    started = time.monotonic()
    await part.move_to_log_dir(str(b))
    await settled(part)
    assert time.monotonic() - started >= 0.9 * to_copy / 40_000 > 0.25
    await st.close()


async def test_a_byte_rate_of_0_holds_a_move_until_it_is_raised(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    st = await open_disk(a, b)
    part = await spread_partition(st, batches=40)
    st.move_bytes_per_second = 0  # Kafka's throttle of 0: nothing is copied
    await part.move_to_log_dir(str(b))
    away = [p.log_path for p in part.away_from_home()]
    assert away
    for _ in range(30):  # three rechecks of the throttle: not one partitionlet moved
        await asyncio.sleep(0.01)
        assert [p.log_path for p in part.away_from_home()] == away
    before = await read_all(part)
    st.move_bytes_per_second = None
    await settled(part)
    assert await read_all(part) == before
    await st.close()
