"""Crash recovery: a process dies without closing the store, then its last
batch is torn or damaged. Recovery must keep every valid batch and nothing else,
and hand out no offset twice: the torn batch's offsets (and any written after it)
may have been acknowledged, so offsets go on from the manifest's reservation.
(A log cut exactly at a batch boundary shows no loss: it reads as one that
ended there.)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.storage import batch_format as bf
from kafkacompat.storage.disk.partition import RESERVE_STEP
from storage_testkit import batch, values

from kafkacompat import storage

N = 12  # batches written before the crash, 2 records each

WRITER = textwrap.dedent("""
    import asyncio, os, sys
    from kafkacompat import storage
    from storage_testkit import batch

    async def main(data, partitionlet_bytes):
        st = storage.open_store(data)
        await st.open()
        await st.create_stream("/s", storage.StreamPolicy(partitionlet_bytes=partitionlet_bytes, fsync="none"))
        await st.create_topic("/s", "t", 1)
        part = st.partition("/s", "t", 0)
        for i in range({n}):
            await part.append(batch(2, size=20 + i, ts=1000 + i), 2)
        os._exit(0)  # die without closing: no checkpoint, no clean marker

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""").format(n=N)


def crash_writer(data, partitionlet_bytes):
    here = os.path.dirname(__file__)
    root = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, here]))
    subprocess.run([sys.executable, "-c", WRITER, str(data), str(partitionlet_bytes)], check=True, env=env,
                   timeout=60)


@pytest.fixture(scope="module", params=[1 << 20, 4096], ids=["one-partitionlet", "rolled"])
def crashed(request, tmp_path_factory):
    data = tmp_path_factory.mktemp("crashed") / "d"
    crash_writer(data, request.param)
    pdir = data / "streams" / "s" / "t" / "0"
    active = sorted(f for f in os.listdir(pdir) if f.endswith(".log"))[-1]
    return data, active


def batch_starts(path):
    with open(path, "rb") as f:
        buf = f.read()
    starts, pos = [], 0
    while pos < len(buf):
        starts.append(pos)
        pos += bf.parse_header(buf, pos).size
    return starts, len(buf)


async def reopen(data):
    st = storage.open_store(str(data), record_timestamps=record_timestamps)
    await st.open()
    return st, st.partition("/s", "t", 0)


async def check_recovered(data, expect_kept, *, reopen_twice=True, lost=False):
    """Offsets below `expect_kept` are served; a `lost` tail after them is quarantined up to the reservation."""
    st, part = await reopen(data)
    next_offset = RESERVE_STEP if lost else expect_kept
    assert part.high_watermark == next_offset
    got = []
    offset = part.log_start_offset
    while offset < expect_kept:
        chunk = values(await part.read(offset, 1 << 20))
        got += chunk
        offset = chunk[-1][0] + 1
    assert [o for o, _ in got] == list(range(expect_kept))
    assert all(v == bytes([65 + o % 2]) * (20 + o // 2) for o, v in got)
    if lost:
        with pytest.raises(storage.DamagedRangeError) as caught:
            await part.read(expect_kept, 1 << 20)
        assert (caught.value.first, caught.value.resume_at) == (expect_kept, RESERVE_STEP)
    assert (await part.append(bf_batch(), 1)).base_offset == next_offset  # no offset handed out twice
    await st.close()
    if reopen_twice:
        st, part = await reopen(data)  # the recovered state is now the clean state
        assert part.high_watermark == next_offset + 1
        assert [o for o, _ in values(await part.read(next_offset, 1 << 20))] == [next_offset]
        await st.close()


def bf_batch():
    return batch(1)


async def test_crash_without_damage_loses_nothing(crashed, tmp_path):
    data, _ = crashed
    copy = tmp_path / "d"
    shutil.copytree(data, copy)
    await check_recovered(copy, 2 * N)


async def for_each_position(data, tmp_path, positions, damage, expect_hw, after=None, lost=lambda pos: True):
    """Copy the crashed store once per position, damage it there, check recovery.

    Stores are independent, so positions are checked a few at a time
    concurrently (their fsyncs overlap).
    """

    async def one(pos):
        copy = tmp_path / f"at{pos}"
        shutil.copytree(data, copy)
        damage(copy, pos)
        await check_recovered(copy, expect_hw(pos), reopen_twice=pos % 16 == 0, lost=lost(pos))
        if after is not None:
            after(copy, pos)
        shutil.rmtree(copy)

    positions = list(positions)
    for k in range(0, len(positions), 8):
        await asyncio.gather(*(one(pos) for pos in positions[k : k + 8]))


async def test_truncated_at_every_byte_of_the_last_batch(crashed, tmp_path):
    data, active = crashed
    rel = os.path.join("streams", "s", "t", "0", active)
    starts, size = batch_starts(data / rel)

    def truncate(copy, cut):
        os.truncate(copy / rel, cut)

    def torn_tail_is_gone(copy, cut):
        # the batch appended after recovery directly follows the last valid one
        assert os.path.getsize(copy / rel) == starts[-1] + len(bf_batch())

    await for_each_position(data, tmp_path, range(starts[-1], size), truncate, lambda cut: 2 * (N - 1),
                            torn_tail_is_gone, lost=lambda cut: cut != starts[-1])


async def test_byte_flipped_anywhere_in_the_last_batch(crashed, tmp_path):
    data, active = crashed
    rel = os.path.join("streams", "s", "t", "0", active)
    starts, size = batch_starts(data / rel)

    def flip(copy, pos):
        with open(copy / rel, "r+b") as f:
            f.seek(pos)
            byte = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([byte ^ 0x5A]))

    def expect(pos):
        # partitionLeaderEpoch (bytes 12-15) lies outside the CRC: such a batch is still intact
        return 2 * N if 12 <= pos - starts[-1] < 16 else 2 * (N - 1)

    await for_each_position(data, tmp_path, range(starts[-1], size), flip, expect,
                            lost=lambda pos: expect(pos) < 2 * N)


async def test_damaged_middle_batch_is_quarantined_and_the_rest_kept(crashed, tmp_path):
    """A flipped byte mid-log costs that batch only: later batches stay, their offsets are never reused."""
    data, active = crashed
    copy = tmp_path / "d"
    shutil.copytree(data, copy)
    log = copy / "streams" / "s" / "t" / "0" / active
    starts, size = batch_starts(log)
    if len(starts) < 3:
        pytest.skip("the active partitionlet holds too few batches")
    first_offset = N - len(starts)  # batches before this partitionlet
    with open(log, "r+b") as f:
        f.seek(starts[1] + 40)
        byte = f.read(1)[0]
        f.seek(starts[1] + 40)
        f.write(bytes([byte ^ 1]))
    st, part = await reopen(copy)
    assert part.high_watermark == 2 * N
    damaged = 2 * (first_offset + 1)
    with pytest.raises(storage.DamagedRangeError) as caught:
        await part.read(damaged, 1 << 20)
    assert (caught.value.first, caught.value.resume_at) == (damaged, damaged + 2)
    assert [o for o, _ in values(await part.read(damaged + 2, 1 << 20))][0] == damaged + 2
    assert (await part.append(bf_batch(), 1)).base_offset == 2 * N
    await st.close()


OPENER = textwrap.dedent("""
    import asyncio, os, sys
    from kafkacompat import storage

    async def main(data):
        st = storage.open_store(data)
        await st.open()
        st.partition("/s", "t", 0)  # its recovery runs; nothing is appended to it
        os._exit(0)  # killed again before anything else saved the partition's manifest

    asyncio.run(main(sys.argv[1]))
""")


async def test_recovery_killed_before_anything_else_hands_out_no_offset_twice(crashed, tmp_path):
    """The whole active log zeroed after a kill -9 (issue 28): recovery cuts it to nothing and goes on from the
    reservation. Killed again before the partition saved anything, the next open finds an empty log that agrees
    with the old manifest; offsets handed out before the first kill must still never be handed out again."""
    data, active = crashed
    copy = tmp_path / "d"
    shutil.copytree(data, copy)
    log = copy / "streams" / "s" / "t" / "0" / active
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.write(bytes(size))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                                                       os.path.dirname(__file__)]))
    subprocess.run([sys.executable, "-c", OPENER, str(copy)], check=True, env=env, timeout=60)
    st, part = await reopen(copy)
    assert part.high_watermark == RESERVE_STEP  # offsets up to 2 * N were handed out before the first kill
    assert (await part.append(bf_batch(), 1)).base_offset == RESERVE_STEP
    await st.close()
