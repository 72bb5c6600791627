"""A deposed leader cannot append: the store's commit transaction checks the leader epoch.

The leader of a partition is stalled with a batch in flight (its commit
waits on the partition row, which the test holds locked; then the process
is paused with SIGSTOP), its lease lapses, another broker takes the
partition. When the stalled broker goes on, PostgreSQL refuses its batch:
the producer gets NOT_LEADER_OR_FOLLOWER, and the log keeps dense offsets
with nothing of the stale batch, whatever the timing.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import time

import asyncpg
import pytest
from confluent_kafka import Producer
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch

from tests.cluster.test_shared_store import create_topic, leaders, read_all
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

NOT_LEADER_OR_FOLLOWER = 6
PRODUCE_V = 9


def produce_request(topic: str, records: bytes) -> object:
    import kio.schema.produce.v9.request as m

    return make(m.ProduceRequest, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                topic_data=(make(m.TopicProduceData, name=topic, partition_data=(
                    make(m.PartitionProduceData, index=0, records=records),)),))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0


async def wait_for(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.05)


async def test_a_deposed_leaders_batch_in_flight_is_refused_by_the_database(store_and_cluster) -> None:
    database, cluster = store_and_cluster
    bootstrap = cluster.brokers[0].bootstrap
    topic = await asyncio.to_thread(create_topic, bootstrap, 1)
    old_id = (await asyncio.to_thread(leaders, bootstrap, topic))[0]
    old = cluster.broker(old_id)
    others = [b for b in cluster.brokers if b is not old]
    before = [f"before-{i}".encode() for i in range(10)]
    after = [f"after-{i}".encode() for i in range(10)]
    await asyncio.to_thread(produce, bootstrap, topic, before)

    db = await asyncpg.connect(database)
    wire = Wire(old.bootstrap, timeout=60)
    paused = False
    try:
        hold = db.transaction()
        await hold.start()
        await db.execute("SELECT 1 FROM kc_partitions p JOIN kc_topics t ON t.id = p.topic_id "
                         "WHERE t.name = $1 FOR UPDATE OF p", topic)
        # The leader takes the batch and uploads it; its commit then waits for the partition's row.
        wire.send(0, PRODUCE_V, produce_request(topic, build_batch([Record(None, b"stale", [], 1)])))

        async def commit_waiting() -> bool:
            return bool(await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"))
        await wait_for("the leader's commit waits on the partition", commit_waiting, 30)

        os.kill(old.pid, signal.SIGSTOP)  # a stall (GC pause, swapped out, VM frozen) past its lease
        paused = True

        async def moved() -> bool:
            found = await asyncio.to_thread(leaders, others[0].bootstrap, topic)
            return found[0] not in (-1, old_id)
        await wait_for("another broker leads the partition", moved, 30)
        await hold.commit()  # the stalled broker's commit goes on now, in the database

        async def commit_done() -> bool:
            return not await commit_waiting()
        await wait_for("the stalled commit finished", commit_done, 30)
        os.kill(old.pid, signal.SIGCONT)
        paused = False
        _, answer = await asyncio.to_thread(wire.receive, 0, PRODUCE_V)
        assert answer.responses[0].partition_responses[0].error_code.value == NOT_LEADER_OR_FOLLOWER
    finally:
        if paused:
            os.kill(old.pid, signal.SIGCONT)
        wire.close()
        await db.close()

    await asyncio.to_thread(produce, bootstrap, topic, after)
    records = await asyncio.to_thread(read_all, others[0].bootstrap, topic, 1, 20)
    assert [value for _, _, value in records] == before + after  # the stale batch is nowhere
    assert [offset for _, offset, _ in records] == list(range(20))  # dense


async def test_a_deposed_coordinators_marker_in_flight_is_refused_by_the_database(store_and_cluster) -> None:
    """The transaction coordinator is stalled with a commit marker in flight past its lease; the next
    coordinator finishes the transaction from its PrepareCommit state. The stalled one's marker is
    refused (its __consumer_offsets partition's epoch moved): one marker is stored, not two, and the
    producer's commit succeeds through the next coordinator."""
    from confluent_kafka import Producer as TxnProducer

    from kafkacompat.cluster.membership import coordinator_partition
    from tests.cluster.test_shared_store import read_all

    database, cluster = store_and_cluster
    bootstrap = cluster.bootstrap
    topic = await asyncio.to_thread(create_topic, bootstrap, 1)
    txn = f"fence-{topic}"
    producer = TxnProducer({"bootstrap.servers": bootstrap, "transactional.id": txn})
    await asyncio.to_thread(producer.init_transactions, 30)
    producer.begin_transaction()
    producer.produce(topic, value=b"in-txn", partition=0)
    assert await asyncio.to_thread(producer.flush, 30) == 0
    index = coordinator_partition(txn, 50)
    old_id = (await asyncio.to_thread(leaders, bootstrap, "__consumer_offsets"))[index]
    old = cluster.broker(old_id)
    others = [b for b in cluster.brokers if b is not old]

    db = await asyncpg.connect(database)
    paused = False
    try:
        rows = "SELECT count(*) FROM kc_batches b JOIN kc_partitions p ON p.id = b.pid JOIN kc_topics t ON t.id = p.topic_id WHERE t.name = $1"
        assert await db.fetchval(rows, topic) == 1  # the transaction's one batch
        hold = db.transaction()
        await hold.start()
        await db.execute("SELECT 1 FROM kc_partitions p JOIN kc_topics t ON t.id = p.topic_id "
                         "WHERE t.name = $1 FOR UPDATE OF p", topic)
        committing = asyncio.ensure_future(asyncio.to_thread(producer.commit_transaction, 90))

        async def marker_waiting() -> bool:
            return bool(await db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"))
        await wait_for("the coordinator's marker waits on the partition", marker_waiting, 30)
        os.kill(old.pid, signal.SIGSTOP)  # stalled past its lease with the marker in flight
        paused = True

        async def moved() -> bool:
            found = await asyncio.to_thread(leaders, others[0].bootstrap, "__consumer_offsets")
            return found[index] not in (-1, old_id)
        await wait_for("another broker coordinates the transaction", moved, 30)
        await hold.commit()  # the stalled broker's marker commit goes on now, in the database

        async def marker_done() -> bool:  # refused; the next coordinator's marker may queue behind it
            return await db.fetchval(rows, topic) >= 2 or not await marker_waiting()
        await wait_for("the stalled commit finished", marker_done, 30)
        os.kill(old.pid, signal.SIGCONT)
        paused = False
        await committing  # through the next coordinator (the stalled one answers NOT_COORDINATOR)

        async def one_marker() -> bool:
            return await db.fetchval(rows, topic) >= 2
        await wait_for("the next coordinator wrote its marker", one_marker, 30)

        async def no_commit_under_way() -> bool:  # the stalled broker's too: it was first in the lock's queue
            return not await db.fetchval("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                         "AND query LIKE '%kc_commit%' AND pid <> pg_backend_pid()")
        await wait_for("every marker commit is over", no_commit_under_way, 30)
        assert await db.fetchval(rows, topic) == 2  # the batch and one marker: the deposed one's was refused
    finally:
        if paused:
            os.kill(old.pid, signal.SIGCONT)
        await db.close()
    records = await asyncio.to_thread(read_all, others[0].bootstrap, topic, 1, 1)
    assert [value for _, _, value in records] == [b"in-txn"]
