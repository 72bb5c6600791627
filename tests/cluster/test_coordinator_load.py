"""A broker that gains a transaction's coordinator partition but cannot load its state says so.

The next coordinator loads the groups and transactional ids of the __consumer_offsets partition
it gained from the store. When that read fails (the database is away), it must not answer from
empty memory: an EndTxn got INVALID_PRODUCER_ID_MAPPING there, fatal to the producer, for a
transaction whose state was safe in the database. It answers COORDINATOR_LOAD_IN_PROGRESS, as
Kafka's coordinator does while loading, and loads again at the next request until it can.

The read is made to fail by renaming the state table while the coordinator moves: the cluster's
heartbeat and the data path, which use other tables, go on.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest
from confluent_kafka import Producer

from kafkacompat.cluster.membership import coordinator_partition
from tests.cluster.client_log import ClientLog
from tests.cluster.test_shared_store import create_topic, leaders, read_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


async def until(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.05)


async def test_a_commit_waits_for_a_coordinator_that_cannot_load_the_transaction_yet(store_and_cluster) -> None:
    database, cluster = store_and_cluster
    topic = await asyncio.to_thread(create_topic, cluster.bootstrap, 1)
    txn = f"load-{topic}"
    seen = ClientLog(f"rdkafka-{txn}")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn, "debug": "eos"},
                        logger=seen.logger)
    await asyncio.to_thread(producer.init_transactions, 30)
    producer.begin_transaction()
    producer.produce(topic, value=b"in-txn", partition=0)
    assert await asyncio.to_thread(producer.flush, 30) == 0
    index = coordinator_partition(txn, 50)
    old = cluster.broker((await asyncio.to_thread(leaders, cluster.bootstrap, "__consumer_offsets"))[index])
    db = await asyncpg.connect(database)
    renamed = False
    try:
        await db.execute("ALTER TABLE kc_state RENAME TO kc_state_away")
        renamed = True
        await asyncio.to_thread(old.stop)  # a clean stop hands its partitions to the others at once
        committing = asyncio.ensure_future(asyncio.to_thread(producer.commit_transaction, 90))

        def told_or_ended() -> bool:
            producer.poll(0)  # librdkafka hands its log lines to the application in poll
            return committing.done() or any("EndTxn returned COORDINATOR_LOAD_IN_PROGRESS" in line
                                            for line in seen.lines)  # and tries again
        await until("the client is told the coordinator is loading", told_or_ended, 60)
        assert not committing.done(), committing.exception()  # not refused for good (fatal to the producer)
        await db.execute("ALTER TABLE kc_state_away RENAME TO kc_state")
        renamed = False
        await asyncio.wait_for(committing, 90)
    finally:
        if renamed:
            await db.execute("ALTER TABLE kc_state_away RENAME TO kc_state")
        await db.close()
        seen.close()
    others = [b for b in cluster.brokers if b is not old]
    records = await asyncio.to_thread(read_all, others[0].bootstrap, topic, 1, 1)
    assert [value for _, _, value in records] == [b"in-txn"]  # committed: a read_committed reader sees it
