"""A coordinator that no longer coordinates a transactional id does not expire it.

In a cluster a broker deposed but not yet told still holds each id as it last saw it: idle, and
so past transactional.id.expiration.ms, while its successor has loaded the id and may have written
it since. Its expiration sweep deleted the successor's row (issue 28: a producer whose id vanishes
from the store gets a new producer id at its next coordinator, and its old epoch fences nothing).
The sweep's deletions are now fenced as the id's other writes are; an id whose coordinator moved
is left to the successor. And an id started again while its deletion is being stored keeps the
new row.

One broker, in process, plays the deposed coordinator: its `state_fence` says NotLeaderError for
one id, as Cluster.coordinator_fence does once the id's __consumer_offsets partition moved.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import Producer

from kafkacompat import storage
from kafkacompat.testing import Broker
from kafkacompat.transactions.coordinator import TRANSACTIONS_TABLE, TransactionCoordinator

MOVED, STILL_HERE = "moved-away", "still-here"


def _finished_transaction(broker: Broker, topic: str, txn_id: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id, "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, txn_id.encode(), partition=0)
    producer.commit_transaction(30)


def _stored(coordinator: TransactionCoordinator) -> set[str]:
    return set(coordinator.store.get_state(coordinator.store.default_stream, TRANSACTIONS_TABLE))


def _deposed_for(txn_id: str) -> Any:
    def fence(key: str) -> storage.StateFence | None:
        if key == txn_id:
            raise storage.NotLeaderError(f"no longer coordinates {key!r}", -1)
        return None
    return fence


@pytest.fixture
def idle_ids() -> Any:
    """A broker whose ids expire at once, never swept but by the test, with two finished ids."""
    with Broker(transactional_id_expiration_ms=1,
                transaction_remove_expired_transaction_cleanup_interval_ms=3_600_000) as broker:
        topic = broker.create_topic("expiring", 1)
        for txn_id in (MOVED, STILL_HERE):
            _finished_transaction(broker, topic, txn_id)
        coordinator = broker.server.cluster.transactions
        assert {MOVED, STILL_HERE} <= _stored(coordinator)
        yield broker, coordinator


def test_an_id_whose_coordinator_moved_is_left_to_its_successor(idle_ids: Any) -> None:
    broker, coordinator = idle_ids
    coordinator.state_fence = _deposed_for(MOVED)
    assert broker.call(coordinator.remove_expired()) == 1
    stored = _stored(coordinator)
    assert MOVED in stored, "a deposed coordinator deleted the row its successor now owns"
    assert STILL_HERE not in stored
    assert MOVED in coordinator.transactions and STILL_HERE not in coordinator.transactions


def test_a_deletion_the_store_refuses_as_deposed_keeps_the_ids(idle_ids: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Deposed between the sweep's look and its write: the store's fence refuses it (NotLeaderError),
    and the ids stay, in the store and here, until this broker lets the partition go."""
    broker, coordinator = idle_ids

    async def refused(*args: Any, **kwargs: Any) -> None:
        raise storage.NotLeaderError("the partition moved", -1)

    monkeypatch.setattr(coordinator.store, "put_state", refused)
    assert broker.call(coordinator.remove_expired()) == 0
    monkeypatch.undo()
    assert {MOVED, STILL_HERE} <= _stored(coordinator)
    assert {MOVED, STILL_HERE} <= set(coordinator.transactions)


class _WatchedLock(asyncio.Lock):
    """An id's lock that counts who asked for it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0
        self.asked_again = asyncio.Event()

    async def acquire(self) -> bool:
        self.asked += 1
        if self.asked > 1:
            self.asked_again.set()
        return await super().acquire()


def test_an_id_started_again_while_its_deletion_is_stored_stays_stored(idle_ids: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """InitProducerId for an expiring id while the sweep's deletion is on its way to the store: the
    request waits for the deletion, then starts the id afresh, and that row stays. (The sweep forgot
    the ids before writing, so the request made and stored the id first, and the deletion then
    removed its row: a producer the next coordinator would not know, its transaction never ended.)"""
    broker, coordinator = idle_ids
    original = coordinator.store.put_state

    async def scenario() -> tuple[Any, int]:
        deleting, gate = asyncio.Event(), asyncio.Event()

        async def held_deletion(stream: str, table: str, rows: dict[str, Any], **kwargs: Any) -> Any:
            if table == TRANSACTIONS_TABLE and STILL_HERE in rows and rows[STILL_HERE] is None:
                deleting.set()
                await gate.wait()
            return await original(stream, table, rows, **kwargs)

        monkeypatch.setattr(coordinator.store, "put_state", held_deletion)
        lock = coordinator._locks[STILL_HERE] = _WatchedLock()
        sweep = asyncio.create_task(coordinator.remove_expired())
        await asyncio.wait_for(deleting.wait(), 10)
        init = asyncio.create_task(coordinator.init_producer_id(STILL_HERE, 60_000, -1, -1))
        asked_again = asyncio.create_task(lock.asked_again.wait())
        await asyncio.wait({init, asked_again}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert lock.asked > 1, "InitProducerId never asked for the id's lock"
        gate.set()
        removed = await asyncio.wait_for(sweep, 10)
        return await asyncio.wait_for(init, 10), removed

    (error, producer_id, epoch), removed = broker.call(scenario())
    assert removed == 2
    assert error == 0 and producer_id >= 0 and epoch == 0
    assert STILL_HERE in _stored(coordinator), "the sweep's deletion removed the row of an id started again"
    assert coordinator.transactions[STILL_HERE].producer_id == producer_id
