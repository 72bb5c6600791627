"""A broker's transaction state of a partition follows what other brokers append to it.

Two CloudStores on one database stand for two brokers of a cluster: `here`
keeps a partition's transaction state (PartitionTxnRegistry, as every
broker of a cluster does: follow_log), `there` is the partition's previous
leader, or the transaction coordinator's broker, appending to the same log.
The state was read before the other broker's transactional batch came, as a
read begun before a hand-over and ended after it leaves it; a later look
must still hold the last stable offset below that open transaction and list
its abort once the marker comes, or read_committed consumers are served
aborted records (chaos, cloud engine: aborted reads after leadership moves).
"""

from __future__ import annotations

import asyncio

import pytest
from kafkacompat.protocol.control_records import ControlType, build_marker, set_attributes
from kafkacompat.protocol.records import ATTR_TRANSACTIONAL, Record, build_batch, record_timestamps

from kafkacompat import storage
from kafkacompat.testing.services import ServiceUnavailable, cloud_store
from kafkacompat.transactions.partition_state import AbortedTxn, PartitionTxnRegistry, PartitionTxns

PID = 7


@pytest.fixture
async def brokers():
    try:
        database, objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    stores = [storage.open_store(database, object_store=objects, record_timestamps=record_timestamps, flush_ms=3)
              for _ in range(2)]
    for st in stores:
        await st.open()
    yield stores
    for st in stores:
        await st.close()


async def until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def followed_partition(here: storage.Store, there: storage.Store) -> tuple[PartitionTxnRegistry, PartitionTxns]:
    """A one-partition topic both brokers see, and `here`'s transaction state of it, read now."""
    await here.create_stream("/s")
    await here.create_topic("/s", "t", 1)
    await until(lambda: there.get_topic("/s", "t") is not None)
    registry = PartitionTxnRegistry(here)
    registry.follow_log = True
    return registry, await registry.get("/s", "t", 0)


def txn_batch(value: bytes) -> bytes:
    data = build_batch([Record(None, value, [], 1000)], producer_id=PID, producer_epoch=0, base_sequence=0)
    return set_attributes(data, ATTR_TRANSACTIONAL)


async def test_a_transaction_another_broker_began_after_the_state_was_read_holds_the_lso_and_its_abort_is_listed(
        brokers):
    here, there = brokers
    await here.create_stream("/s")
    await here.create_topic("/s", "t", 1)
    await until(lambda: there.get_topic("/s", "t") is not None)
    await here.partition("/s", "t", 0).append(build_batch([Record(None, b"plain", [], 1000)]), 1)
    registry = PartitionTxnRegistry(here)
    registry.follow_log = True
    state = await registry.get("/s", "t", 0)  # read now: one plain record, no transaction
    assert state.last_stable_offset == 1

    theirs = there.partition("/s", "t", 0)
    await until(lambda: theirs.high_watermark == 1)
    first = (await theirs.append(txn_batch(b"open"), 1)).base_offset
    await until(lambda: here.partition("/s", "t", 0).high_watermark == first + 1)
    assert state.last_stable_offset == first  # not read yet: never passed before the next look
    state = await registry.get("/s", "t", 0)
    assert state.last_stable_offset == first  # the open transaction is not served to read_committed

    marker = (await theirs.append(build_marker(PID, 0, ControlType.ABORT, 2000), 1)).base_offset
    await until(lambda: here.partition("/s", "t", 0).high_watermark == marker + 1)
    state = await registry.get("/s", "t", 0)
    assert state.last_stable_offset == marker + 1
    assert state.aborted_between(0, marker + 1) == [AbortedTxn(PID, first, marker)]


async def test_an_abort_this_broker_writes_lists_the_transaction_the_leader_stored_since_the_state_looked(
        brokers):
    """This broker is the transaction coordinator's, `there` the partition's leader: the producer's batch
    is stored there after this state last read the log, then the coordinator writes the abort marker
    through this state. The abort must be listed, and stay listed at every later look (the batch before
    the marker is not taken for old news)."""
    here, there = brokers
    registry, state = await followed_partition(here, there)
    assert state.last_stable_offset == 0

    first = (await there.partition("/s", "t", 0).append(txn_batch(b"aborted"), 1)).base_offset
    marker = (await state.partition.append(build_marker(PID, 0, ControlType.ABORT, 2000), 1)).base_offset
    assert marker == first + 1
    await state.marker_written(PID, marker, ControlType.ABORT)
    for _look in range(2):
        state = await registry.get("/s", "t", 0)
        assert state.last_stable_offset == marker + 1
        assert state.aborted_between(0, marker + 1) == [AbortedTxn(PID, first, marker)]


async def test_a_batch_this_broker_appends_past_what_the_state_read_waits_behind_the_previous_leaders_batch(
        brokers):
    """The partition moved here (`there` led it): the previous leader stored the transaction's first
    batch just before the move, after this state last read the log; this broker then appends the same
    transaction's next batch. The LSO must stay at the first batch, not at this broker's (chaos, cloud:
    read_committed was served the first batch of a transaction that was then aborted)."""
    here, there = brokers
    registry, state = await followed_partition(here, there)

    first = (await there.partition("/s", "t", 0).append(txn_batch(b"before the move"), 1)).base_offset
    await state.partition.refresh()
    mine = (await state.partition.append(txn_batch(b"after the move"), 1)).base_offset
    assert mine == first + 1
    state.appended(PID, mine)
    for _look in range(2):
        state = await registry.get("/s", "t", 0)
        assert state.last_stable_offset == first
    marker = (await state.partition.append(build_marker(PID, 0, ControlType.ABORT, 2000), 1)).base_offset
    await state.marker_written(PID, marker, ControlType.ABORT)
    assert state.aborted_between(0, marker + 1) == [AbortedTxn(PID, first, marker)]


async def test_the_previous_transactions_marker_read_late_leaves_the_producers_next_transaction_open(brokers):
    """The previous leader stored a whole transaction (batch and commit marker) after this state last
    read the log; the producer's next transaction's batch then lands here. Reading the commit marker
    must not end the next transaction, whose abort is listed when it comes."""
    here, there = brokers
    registry, state = await followed_partition(here, there)

    theirs = there.partition("/s", "t", 0)
    await theirs.append(txn_batch(b"committed"), 1)
    committed = (await theirs.append(build_marker(PID, 0, ControlType.COMMIT, 2000), 1)).base_offset
    await state.partition.refresh()
    second = (await state.partition.append(txn_batch(b"next, aborted"), 1)).base_offset
    assert second == committed + 1
    state.appended(PID, second)
    state = await registry.get("/s", "t", 0)
    assert state.last_stable_offset == second
    marker = (await state.partition.append(build_marker(PID, 0, ControlType.ABORT, 3000), 1)).base_offset
    await state.marker_written(PID, marker, ControlType.ABORT)
    assert state.last_stable_offset == marker + 1
    assert state.aborted_between(0, marker + 1) == [AbortedTxn(PID, second, marker)]
