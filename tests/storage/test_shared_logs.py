"""Cursor logs and state tables that several worker processes write (`serve --workers N`).

Each worker coordinates a share of the groups and transactional ids and
writes their cursors and state into the stream's shared logs itself; the
others follow those logs. These tests open the store as two workers (the
test holds the data dir's lock, as the supervisor does) and check that
each sees the other's writes, deletions and compactions, and that appends
from several processes at once all land whole.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import multiprocessing
import os

import pytest
from kafkacompat.storage import Cursor
from kafkacompat.storage.disk import layout
from kafkacompat.storage.disk.catalog import JsonLog
from kafkacompat.storage.disk.shared import WorkerShare
from kafkacompat.storage.disk.store import DiskStore


@pytest.fixture
def held_root(tmp_path):
    """A data dir whose lock this test holds, as the supervisor holds it for its workers."""
    root = str(tmp_path / "data")
    first = DiskStore([root], background_verify=False)
    asyncio.run(_open_close(first))
    fd = os.open(os.path.join(root, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield root
    os.close(fd)


async def _open_close(store: DiskStore) -> None:
    await store.open()
    await store.close()


async def _worker(root: str, index: int) -> DiskStore:
    store = DiskStore([root], background_verify=False)
    store.share = WorkerShare(index, 2, 5 + index)
    await store.open()
    return store


def _cursor(topic: str, partition: int, offset: int) -> Cursor:
    return Cursor(topic, partition, offset, 0, "", 0)


async def test_each_worker_sees_the_cursors_another_committed_and_deleted(held_root):
    zero, one = await _worker(held_root, 0), await _worker(held_root, 1)
    try:
        stream = zero.default_stream
        await one.commit_cursors(stream, "g1", [_cursor("t", 0, 10), _cursor("t", 1, 20)])
        await zero.commit_cursors(stream, "g0", [_cursor("t", 0, 5)])
        assert {c.offset for c in zero.get_cursors(stream, "g1")} == {10, 20}
        assert [c.offset for c in one.get_cursors(stream, "g0")] == [5]
        await zero.commit_cursors(stream, "g1", [_cursor("t", 0, 11)])  # a transaction's commit, elsewhere
        assert one.get_cursor(stream, "g1", "t", 0).offset == 11
        await one.delete_cursors(stream, "g0")
        assert zero.list_cursor_groups(stream) == ["g1"]
        assert one.list_cursor_groups(stream) == ["g1"]
    finally:
        await zero.close()
        await one.close()
    again = DiskStore([held_root], background_verify=False)  # what a later start with one worker reads
    again.share = WorkerShare(0, 1, 9)
    await again.open()
    try:
        assert {(c.partition, c.offset) for c in again.get_cursors(again.default_stream, "g1")} == {(0, 11), (1, 20)}
        assert again.list_cursor_groups(again.default_stream) == ["g1"]
    finally:
        await again.close()


async def test_a_state_table_written_by_two_workers_reads_the_same_in_both(held_root):
    zero, one = await _worker(held_root, 0), await _worker(held_root, 1)
    try:
        stream = zero.default_stream
        await one.put_state(stream, "things", {"a": {"v": 1}})  # a table worker 0 has never seen
        assert zero.get_state(stream, "things") == {"a": {"v": 1}}
        version = zero.state_version(stream, "things")
        await zero.put_state(stream, "things", {"b": {"v": 2}, "a": None})
        assert one.get_state(stream, "things") == {"b": {"v": 2}}
        await one.put_state(stream, "things", {"b": {"v": 3}})
        assert zero.state_version(stream, "things") > version
        assert zero.get_state(stream, "things") == {"b": {"v": 3}}
    finally:
        await zero.close()
        await one.close()


async def test_a_log_compacted_by_one_worker_is_read_afresh_by_the_other(held_root):
    zero, one = await _worker(held_root, 0), await _worker(held_root, 1)
    try:
        stream = zero.default_stream
        log_path = os.path.join(layout.stream_dir(held_root, stream), layout.CURSORS_FILE)
        first = os.stat(log_path).st_ino
        one.get_cursors(stream, "g")  # worker 1 has read the log as it was
        for offset in range(40):  # many commits of the same cursors: the log grows stale
            await zero.commit_cursors(stream, "g", [_cursor("t", partition, offset) for partition in range(300)])
        deadline = asyncio.get_running_loop().time() + 10
        while os.stat(log_path).st_ino == first or _lines(log_path) >= 40 * 300:
            assert asyncio.get_running_loop().time() < deadline, "the stale log was not compacted"
            await asyncio.sleep(0.05)
        await one.delete_cursors(stream, "g", [("t", 2)])  # on a file worker 1 never saw: read afresh
        await one.commit_cursors(stream, "g", [_cursor("t", 0, 99_999)])
        expected = {(0, 99_999)} | {(partition, 39) for partition in range(1, 300) if partition != 2}
        assert {(c.partition, c.offset) for c in zero.get_cursors(stream, "g")} == expected
        assert {(c.partition, c.offset) for c in one.get_cursors(stream, "g")} == expected
    finally:
        await zero.close()
        await one.close()


def _lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


async def test_a_line_another_worker_left_torn_does_not_swallow_the_next_records(held_root):
    zero, one = await _worker(held_root, 0), await _worker(held_root, 1)
    try:
        stream = zero.default_stream
        await one.commit_cursors(stream, "g", [_cursor("t", 0, 1)])
        log_path = os.path.join(layout.stream_dir(held_root, stream), layout.CURSORS_FILE)
        with open(log_path, "ab") as f:  # worker 1 died in the middle of its next append
            f.write(b'{"g":"g","t":"t","p":0,"o":2')
        await zero.commit_cursors(stream, "g", [_cursor("t", 1, 7)])
        await one.commit_cursors(stream, "g", [_cursor("t", 2, 9)])
        expected = {(0, 1), (1, 7), (2, 9)}
        assert {(c.partition, c.offset) for c in zero.get_cursors(stream, "g")} == expected
        assert {(c.partition, c.offset) for c in one.get_cursors(stream, "g")} == expected
    finally:
        await zero.close()
        await one.close()
    again = DiskStore([held_root], background_verify=False)  # a later start reads the same
    again.share = WorkerShare(0, 1, 9)
    await again.open()
    try:
        assert {(c.partition, c.offset) for c in again.get_cursors(again.default_stream, "g")} == expected
    finally:
        await again.close()


def _append_many(path: str, writer: int, count: int) -> None:
    async def run() -> None:
        log = JsonLog(path, key=lambda rec: rec["k"], shared=True)
        log.load(repair=False)
        for i in range(count):
            await log.append([{"k": f"{writer}-{i}", "v": i}])
            if i % 50 == 0:
                log.follow()
                await log.compact_if_stale(10)
        log.close()

    asyncio.run(run())


def test_appends_and_compactions_of_three_processes_at_once_all_land_whole(tmp_path):
    path = str(tmp_path / ".state.things")
    open(path, "wb").close()
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_append_many, args=(path, writer, 1500)) for writer in range(3)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(120)
        assert process.exitcode == 0
    lines = open(path, "rb").read().splitlines()
    keys = {json.loads(line)["k"] for line in lines}  # every line whole JSON
    assert keys == {f"{writer}-{i}" for writer in range(3) for i in range(1500)}
