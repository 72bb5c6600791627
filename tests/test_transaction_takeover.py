"""A decided transaction (PrepareCommit stored) is always finished, however its first try went.

Two ways it was left in PrepareCommit with nothing finishing it, so that every
retried EndTxn and every InitProducerId for the id was answered
CONCURRENT_TRANSACTIONS until its coordinator moved again, and read_committed
readers waited at its records:

- A broker that takes over the id (it gained the id's __consumer_offsets
  partition) finishes what the last coordinator left in Prepare*; a first
  try the store refused was logged and dropped (the 60-minute cloud
  campaign's logs show it at database outages).
- A write stored though its writer was told it failed (PostgreSQL ended the
  session after the commit): the coordinator takes the transition back to
  what the store holds, which is the PrepareCommit it just wrote (read from
  the code, not seen in a log: the campaign's outages end sessions mid-commit).

One broker, in process, plays each part; the store's refusal is injected.
"""

from __future__ import annotations

import time

import pytest

from kafkacompat import storage
from kafkacompat.testing import Broker
from kafkacompat.transactions import coordinator as coordinator_module
from kafkacompat.transactions.coordinator import TRANSACTIONS_TABLE, TransactionCoordinator
from kafkacompat.transactions.metadata import TxnState
from tests.test_database_outage import open_transaction, read_committed

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
        _producer = open_transaction(broker, topic, TXN_ID, 3)  # kept open: its transaction is the one taken over
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


def test_a_prepare_commit_stored_though_its_write_failed_is_finished_and_the_retried_commit_succeeds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A write can be stored and still fail for its writer (PostgreSQL ended the session after the
    commit, as the campaign's outages do). The coordinator then takes the transition back to what the
    store holds, and when that is the PrepareCommit it just tried to write, the transaction is decided
    with nothing finishing it: every retried EndTxn was answered CONCURRENT_TRANSACTIONS until the
    coordinator moved. It must be finished, and the producer's commit succeed."""
    with Broker() as broker:
        topic = broker.create_topic("stored-yet-failed", 1)
        producer = open_transaction(broker, topic, TXN_ID, 3)
        store = broker.server.cluster.transactions.store
        put_state = store.put_state
        failed: list[str] = []

        async def stored_then_failed(stream, table, records, **kwargs):  # type: ignore[no-untyped-def]
            await put_state(stream, table, records, **kwargs)
            if table == TRANSACTIONS_TABLE and not failed and records[TXN_ID]["state"] == "PrepareCommit":
                failed.append("PrepareCommit")
                raise storage.StorageError("the database ended the session after the commit")

        monkeypatch.setattr(store, "put_state", stored_then_failed)
        producer.commit_transaction(30)
        assert failed == ["PrepareCommit"]
        assert broker.server.cluster.transactions.describe(TXN_ID).state is TxnState.COMPLETE_COMMIT
        assert read_committed(broker, topic, 3, time.monotonic() + 20) == [b"t0", b"t1", b"t2"]
