"""A deposed coordinator's late OffsetCommit (or OffsetDelete, or transaction state change) is refused: committed offsets never go back (issue 28).

A coordinator that has been replaced believes it leads its __consumer_offsets
partition until its next lease renewal. Its OffsetCommit in that window used to
write the cursors unfenced, landing after the new coordinator's commit and moving
the group's offset back. Here one broker, in process on the real cloud store,
still believes it leads under the epoch the leader table has moved past (its
view is held at that belief: the window, made to last); the new coordinator's
commit is in the database. The old one's OffsetCommit must answer NOT_COORDINATOR
(the client finds the coordinator again and commits there) and write nothing.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.broker.cluster import Cluster
from kafkacompat.cluster.leases import create_schema
from kafkacompat.cluster.membership import coordinator_partition
from kafkacompat.config import BrokerConfig
from kafkacompat.http.kafka_calls import build, call
from kafkacompat.testing.services import ServiceUnavailable, cloud_store

OFFSET_COMMIT = 8
OFFSET_DELETE = 47


def offset_commit(group: str, topic: str, offset: int) -> Any:
    return build(OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=(build(OFFSET_COMMIT, "OffsetCommitRequestTopic", name=topic, partitions=(
                     build(OFFSET_COMMIT, "OffsetCommitRequestPartition", partition_index=0, committed_offset=offset,
                           committed_leader_epoch=-1, committed_metadata=""),)),))


@contextlib.asynccontextmanager
async def believed_leader(*topics: str) -> AsyncIterator[tuple[Cluster, asyncpg.Connection, Any]]:
    """(broker 1, a database connection, a second store), on one cloud store: broker 1 believes it
    leads __consumer_offsets partition 0 under epoch 3, the one row of the leader table (its view is
    held at that belief), and the store fences its writes by that table. `topics` are created first."""
    try:
        database, objects = cloud_store()
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    old_store = storage.open_store(database, object_store=objects)
    new_store = storage.open_store(database, object_store=objects)
    await old_store.open()
    await new_store.open()
    broker = Cluster(BrokerConfig(node_id=1, offsets_topic_num_partitions=1), old_store)
    conn = await asyncpg.connect(database)
    try:
        await create_schema(conn)
        for topic in topics:
            await old_store.create_topic("/default", topic, 1)
        await conn.execute("INSERT INTO kc_partition_leaders VALUES ('/default', '__consumer_offsets', 0, 1, 3)")
        view: Any = broker.view
        view.leads, view.leader_of = (lambda key: True), (lambda key: (1, 3))
        broker._fenced = True
        yield broker, conn, new_store
    finally:
        await conn.close()
        await broker.groups.close()
        await new_store.close()
        await old_store.close()


async def test_a_deposed_coordinators_offset_commit_answers_not_coordinator_and_writes_nothing() -> None:
    assert coordinator_partition("g", 1) == 0  # the partition broker 1 believes it leads
    async with believed_leader("t") as (broker, conn, new_store):
        answer = await call(broker, OFFSET_COMMIT, offset_commit("g", "t", 5))
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none

        # broker 2 took the partition (epoch 4) and the group committed 10 there
        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 4")
        await new_store.commit_cursors("/default", "g", [storage.Cursor("t", 0, 10)])

        answer = await call(broker, OFFSET_COMMIT, offset_commit("g", "t", 7))  # late, on the old coordinator
        assert answer.topics[0].partitions[0].error_code == ErrorCode.not_coordinator
        stored = await conn.fetchval("SELECT \"offset\" FROM kc_cursors WHERE grp = 'g' AND topic = 't'")
        assert stored == 10


async def test_a_deposed_coordinators_offset_delete_and_expiry_remove_nothing_its_successor_committed() -> None:
    # The same window: the old coordinator's OffsetDelete (or its offset-expiry sweep) deleted the
    # offsets unfenced, though the new coordinator's group had committed them since.
    async with believed_leader("t") as (broker, conn, new_store):
        answer = await call(broker, OFFSET_COMMIT, offset_commit("g", "t", 5))
        assert answer.topics[0].partitions[0].error_code == ErrorCode.none

        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 4")
        await new_store.commit_cursors("/default", "g", [storage.Cursor("t", 0, 10)])

        late = build(OFFSET_DELETE, group_id="g", topics=(build(OFFSET_DELETE, "OffsetDeleteRequestTopic", name="t",
                     partitions=(build(OFFSET_DELETE, "OffsetDeleteRequestPartition", partition_index=0),)),))
        answer = await call(broker, OFFSET_DELETE, late)
        assert answer.topics[0].partitions[0].error_code == ErrorCode.not_coordinator
        assert await broker.groups.expire_offsets(now=2**62) == 0  # every offset long past its retention
        stored = await conn.fetchval("SELECT \"offset\" FROM kc_cursors WHERE grp = 'g' AND topic = 't'")
        assert stored == 10


async def test_offsets_a_deposed_transaction_coordinator_commits_at_end_txn_are_refused() -> None:
    """Offsets a transaction commits are written at EndTxn by its coordinator, fenced by the epoch of
    the transaction's __consumer_offsets partition: once that moved (here between its markers and
    its offsets), the deposed coordinator writes none of them; the transaction stays PrepareCommit in the store for the next coordinator to
    finish (as it does a deposed coordinator's refused markers), under its own epoch."""
    async with believed_leader("t", "__consumer_offsets") as (broker, conn, new_store):  # the markers go there
        init = await call(broker, 22, build(22, transactional_id="x", transaction_timeout=datetime.timedelta(
            seconds=60), producer_id=-1, producer_epoch=-1))
        assert init.error_code == ErrorCode.none
        ids = {"transactional_id": "x", "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
        assert (await call(broker, 25, build(25, group_id="g", **ids))).error_code == ErrorCode.none
        staged = await call(broker, 28, build(28, group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                              topics=(build(28, "TxnOffsetCommitRequestTopic", name="t", partitions=(
                                                  build(28, "TxnOffsetCommitRequestPartition", partition_index=0,
                                                        committed_offset=7, committed_leader_epoch=-1,
                                                        committed_metadata=""),)),), **ids))
        assert staged.topics[0].partitions[0].error_code == ErrorCode.none

        write_markers = broker.transactions._write_markers

        async def deposed_after_the_markers(meta: Any, control: Any) -> None:
            """The coordinator is replaced once its markers are stored, before it writes the offsets
            (the markers have their own fence); the group commits 10 on the new coordinator."""
            await write_markers(meta, control)
            await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 4")
            await new_store.commit_cursors("/default", "g", [storage.Cursor("t", 0, 10)])

        broker.transactions._write_markers = deposed_after_the_markers  # type: ignore[method-assign]
        await call(broker, 26, build(26, committed=True, **ids))
        stored = await conn.fetchval("SELECT \"offset\" FROM kc_cursors WHERE grp = 'g' AND topic = 't'")
        assert stored == 10
        state = await conn.fetchval("SELECT value->>'state' FROM kc_state WHERE tbl = 'transactions' AND key = 'x'")
        assert state == "PrepareCommit"


async def test_a_deposed_transaction_coordinators_state_change_is_refused_and_stores_nothing() -> None:
    """The transaction coordinator's own state is fenced the same way. A deposed coordinator's
    AddOffsetsToTxn (its AddPartitionsToTxn, EndTxn alike) used to store Ongoing after its successor
    had loaded the id as Empty: the producer, sent on to the successor, could have its commit answered
    INVALID_TXN_STATE there (fatal in librdkafka; one way to the 60-minute cloud campaign's, not shown
    to be theirs). Now it answers NOT_COORDINATOR, the client finds the successor, and the store keeps
    what the successor holds."""
    async with believed_leader("t") as (broker, conn, new_store):
        init = await call(broker, 22, build(22, transactional_id="x", transaction_timeout=datetime.timedelta(
            seconds=60), producer_id=-1, producer_epoch=-1))
        assert init.error_code == ErrorCode.none
        ids = {"transactional_id": "x", "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}

        await conn.execute("UPDATE kc_partition_leaders SET leader = 2, epoch = 4")  # broker 2 loads x: Empty
        answer = await call(broker, 25, build(25, group_id="g", **ids))  # late, on the old coordinator
        assert answer.error_code == ErrorCode.not_coordinator
        state = await conn.fetchval("SELECT value->>'state' FROM kc_state WHERE tbl = 'transactions' AND key = 'x'")
        assert state == "Empty"
        assert broker.transactions.describe("x").state.value == "Empty"  # nor does it believe the change made
