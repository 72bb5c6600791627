"""A coordinator that takes over a decided transaction finishes it, even when its first try fails.

In a cluster, the broker that gains a transactional id's __consumer_offsets
partition loads what the last coordinator stored and finishes a transaction
left in PrepareCommit or PrepareAbort (`TransactionCoordinator.take_over`).
When the store refused that first try (the database away during a fault
campaign's outage), the transaction stayed in PrepareCommit on its new
coordinator: every EndTxn retry and every InitProducerId for the id was
answered CONCURRENT_TRANSACTIONS until the coordinator moved again, and
read_committed readers waited at its records. Here one broker plays the new
coordinator: the stored state is PrepareCommit, the first marker append
fails, and the take-over must still end with the records committed.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kafkacompat import storage
from kafkacompat.testing import Broker
from kafkacompat.transactions import coordinator as coordinator_module
from kafkacompat.transactions.coordinator import TRANSACTIONS_TABLE, TransactionCoordinator
from kafkacompat.transactions.metadata import TxnState
from tests.test_database_outage import read_committed

TXN_ID = "handed-over"


async def _left_in_prepare_commit(coordinator: TransactionCoordinator) -> None:
    """Store the open transaction as PrepareCommit, as a coordinator deposed before its markers leaves it."""
    meta = coordinator.transactions[TXN_ID]
    meta.state = TxnState.PREPARE_COMMIT
    await coordinator.store.put_state(coordinator.store.default_stream, TRANSACTIONS_TABLE,
                                      {TXN_ID: meta.to_json()})


def test_a_transaction_taken_over_in_prepare_commit_is_committed_though_the_first_try_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with Broker() as broker:
        topic = broker.create_topic("taken-over", 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": TXN_ID,
                             "linger.ms": 5})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"t{i}".encode())
        assert producer.flush(30) == 0
        coordinator = broker.server.cluster.transactions
        broker.call(_left_in_prepare_commit(coordinator))

        refusals = [storage.StorageError("committing the marker failed: the database is unavailable")]
        append_marker = coordinator_module.append_marker

        async def refused_once(*args, **kwargs):  # type: ignore[no-untyped-def]
            if refusals:
                raise refusals.pop()
            return await append_marker(*args, **kwargs)

        monkeypatch.setattr(coordinator_module, "append_marker", refused_once)
        broker.call(coordinator.take_over(lambda txn_id: txn_id == TXN_ID))

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and coordinator.describe(TXN_ID).state is not TxnState.COMPLETE_COMMIT:
            time.sleep(0.05)
        assert not refusals  # the first try was made, and refused
        assert coordinator.describe(TXN_ID).state is TxnState.COMPLETE_COMMIT
        assert read_committed(broker, topic, 3, deadline) == [b"t0", b"t1", b"t2"]
