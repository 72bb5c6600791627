"""Partitions opened off the event loop (issue 32): after a crash an open validates the
partition's tail, and on the loop that held every other connection meanwhile.

What a client relies on: the partition served is the recovered one (every record, offsets
going on after them), callers asking at once share one recovery, and nobody is served before
it has ended. No wall clock is measured here (`kafkacompat bench scale` prints the figures).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from kafkacompat.storage.disk import chain_load
from kafkacompat.storage.disk.store import DiskStore
from storage_testkit import batch, values
from test_recovery import N, crash_writer

from kafkacompat import storage


def _watch_loads(monkeypatch, hold: threading.Event | None = None) -> tuple[list[str], threading.Event]:
    """Names of the threads that loaded a chain; with `hold`, each load waits for it once entered."""
    threads: list[str] = []
    entered = threading.Event()
    real = chain_load.ChainLoader.load

    def load(self: chain_load.ChainLoader) -> chain_load.LoadedChain:
        threads.append(threading.current_thread().name)
        entered.set()
        if hold is not None:
            assert hold.wait(30), "the test never let the open go on"
        return real(self)

    monkeypatch.setattr(chain_load.ChainLoader, "load", load)
    return threads, entered


async def _crashed_store(tmp_path) -> storage.Store:
    crash_writer(tmp_path / "d", 1 << 20)
    st = DiskStore([str(tmp_path / "d")], background_verify=False)  # only the test opens partitions
    await st.open()
    return st


async def _check_served(part: storage.Partition) -> None:
    """Every record written before the crash, and the next append after them."""
    got = values(await part.read(0, 1 << 20))
    assert [o for o, _ in got] == list(range(2 * N))
    assert all(v == bytes([65 + o % 2]) * (20 + o // 2) for o, v in got)
    assert (await part.append(batch(1), 1)).base_offset == 2 * N


async def test_an_open_after_a_crash_recovers_in_the_opening_thread_and_serves_every_record(
        tmp_path, monkeypatch) -> None:
    st = await _crashed_store(tmp_path)
    threads, _ = _watch_loads(monkeypatch)
    try:
        part = await st.open_partition("/s", "t", 0)
        assert threads and all(name.startswith("partition-open") for name in threads), threads
        assert st.partition("/s", "t", 0) is part and await st.open_partition("/s", "t", 0) is part
        assert threads == threads[:1]  # opened once
        await _check_served(part)
        assert len(st.handles) >= 1  # served through the store's descriptors, not the thread's (closed)
    finally:
        await st.close()
    st = storage.open_store(str(tmp_path / "d"))  # and what the open recovered is what the next start finds
    await st.open()
    try:
        assert [o for o, _ in values(await (await st.open_partition("/s", "t", 0)).read(0, 1 << 20))] == \
            list(range(2 * N + 1))
    finally:
        await st.close()


async def test_callers_asking_at_once_share_one_recovery_and_none_is_served_before_it_ends(
        tmp_path, monkeypatch) -> None:
    st = await _crashed_store(tmp_path)
    hold = threading.Event()
    threads, entered = _watch_loads(monkeypatch, hold)
    try:
        waiting = [asyncio.ensure_future(st.open_partition("/s", "t", 0)) for _ in range(5)]
        assert await asyncio.to_thread(entered.wait, 30)
        for _ in range(10):
            await asyncio.sleep(0)
        assert not any(task.done() for task in waiting)  # the recovery has not ended: nobody is served
        threading.Timer(0.05, hold.set).start()
        from_sync_caller = st.partition("/s", "t", 0)  # a caller that cannot wait on the loop waits for that open
        parts = await asyncio.gather(*waiting)
        assert all(part is from_sync_caller for part in parts)
        assert len(threads) == 1, threads
        await _check_served(from_sync_caller)
    finally:
        hold.set()
        await st.close()


async def test_a_topic_deleted_while_its_partition_opens_leaves_nothing_served(tmp_path, monkeypatch) -> None:
    st = await _crashed_store(tmp_path)
    hold = threading.Event()
    _, entered = _watch_loads(monkeypatch, hold)
    try:
        opening = asyncio.ensure_future(st.open_partition("/s", "t", 0))
        assert await asyncio.to_thread(entered.wait, 30)
        threading.Timer(0.05, hold.set).start()
        await st.delete_topic("/s", "t")  # waits for the open, then purges what it opened
        with pytest.raises(storage.UnknownTopicError):
            await opening  # its caller is told the topic is gone, not handed the purged partition
        await st.create_topic("/s", "t", 1)
        fresh = await st.open_partition("/s", "t", 0)
        assert fresh.high_watermark == 0 and values(await fresh.read(0, 1 << 20)) == []
    finally:
        hold.set()
        await st.close()


async def test_the_partitions_of_one_request_open_together_and_unknown_ones_are_left_out(tmp_path, monkeypatch) -> None:
    st = await _crashed_store(tmp_path)
    await st.create_topic("/s", "u", 3)
    threads, _ = _watch_loads(monkeypatch)
    try:
        await st.open_partitions([("/s", "t", 0), *(("/s", "u", i) for i in range(3)), ("/s", "t", 0),
                                  ("/s", "missing", 0), ("/s", "t", 7), ("/nowhere", "t", 0)])
        assert len(threads) == 4 and all(name.startswith("partition-open") for name in threads), threads
        await _check_served(st.partition("/s", "t", 0))  # opened: partition() answers without a load
        assert all(st.partition("/s", "u", i).high_watermark == 0 for i in range(3)) and len(threads) == 4
    finally:
        await st.close()
