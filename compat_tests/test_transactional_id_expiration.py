"""transactional.id.expiration.ms on Kafka 4.1 and kafkacompat, same steps on both.

A transactional id whose last transaction finished is forgotten once it
has not been updated for the expiration time; one with a transaction still
open is kept however old. `kafka-transactions.sh` shows which ids are
left, and a producer that comes back with an expired id gets a new
producer id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import compat_broker
from .reference import KafkaTools, ReferenceKafka, Side, agree, kafka_home, on_both, unique

pytestmark = [pytest.mark.differential, pytest.mark.kafka_tools, pytest.mark.slow]

EXPIRATION_MS = 8000  # long enough that the first describe (tools take turns) comes before it
SWEEP_MS = 300


@pytest.fixture(scope="module")
def expiring_sides(kafka_tools: KafkaTools) -> Iterator[dict[str, Side]]:
    """Both brokers with a short transactional.id.expiration.ms."""
    kafka = ReferenceKafka(kafka_home(), **{
        "transactional.id.expiration.ms": EXPIRATION_MS,
        "transaction.remove.expired.transaction.cleanup.interval.ms": SWEEP_MS,
        "group.initial.rebalance.delay.ms": 0,
    })
    with kafka.start(), compat_broker(transactional_id_expiration_ms=EXPIRATION_MS,
                                      transaction_remove_expired_transaction_cleanup_interval_ms=SWEEP_MS) as ours:
        yield {"kafka": Side("kafka", kafka.bootstrap_servers, kafka_tools),
               "kafkacompat": Side("kafkacompat", ours.bootstrap_servers, kafka_tools)}


def _producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 120_000, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def _state(side: Side, txn_id: str) -> tuple[int, str, str]:
    """(exit code, state or error, producer id) as kafka-transactions.sh describe shows it."""
    step = side.step("kafka-transactions", "describe", "--transactional-id", txn_id)
    if step.code != 0:
        return step.code, step.err.replace(txn_id, "<id>").strip(), ""
    header, row = (line.split() for line in step.out.splitlines()[:2])
    cells = dict(zip(header, row))
    return 0, cells["TransactionState"], cells["ProducerId"]


def _scenario(side: Side) -> dict[str, Any]:
    topic = unique("txn-expiry")
    admin = AdminClient({"bootstrap.servers": side.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    done, still_open = unique("done"), unique("open")
    run: dict[str, Any] = {}
    # The tools' JVM loads kafka-transactions at its first run, which took 11 s at load 9, past
    # the expiration: loaded now, the describe after the commit comes well before it.
    side.step("kafka-transactions", "list")
    # The open transaction's last update comes first, so it is the older of the two ids.
    open_producer = _producer(side.bootstrap, still_open)
    open_producer.begin_transaction()
    open_producer.produce(topic, b"pending")
    open_producer.flush(30)
    finished = _producer(side.bootstrap, done)
    finished.begin_transaction()
    finished.produce(topic, b"committed")
    finished.commit_transaction(30)
    # Kafka answers EndTxn once PrepareCommit is logged and writes the markers after: wait for the outcome.
    deadline = time.monotonic() + 30
    while (found := _state(side, done))[1] == "PrepareCommit":
        assert time.monotonic() < deadline, f"{side.name}: {done} stayed in PrepareCommit"
        time.sleep(0.1)
    code, state, first_pid = found
    run["done before expiry"] = (code, state)
    deadline = time.monotonic() + 60
    while (found := _state(side, done))[0] == 0:
        assert time.monotonic() < deadline, f"{side.name}: {done} never expired: {found}"
        time.sleep(0.2)
    run["done after expiry"] = found[:2]
    run["open after expiry"] = _state(side, still_open)[:2]
    listed = side.step("kafka-transactions", "list")
    run["listed"] = [label for label, name in (("done", done), ("open", still_open)) if name in listed.out]
    again = _producer(side.bootstrap, done)  # the same id comes back: its old producer id is gone
    run["new producer id"] = _state(side, done)[2] != first_pid
    for producer in (again, finished):
        producer.flush(10)
    open_producer.abort_transaction(30)
    return run


@pytest.fixture(scope="module")
def expiry_runs(expiring_sides: dict[str, Side]) -> dict[str, dict[str, Any]]:
    return on_both(expiring_sides, _scenario)


def test_finished_transactional_ids_expire_alike(expiry_runs: dict[str, dict[str, Any]]) -> None:
    agree(expiry_runs, "done before expiry", "done after expiry", "listed", "new producer id")
    assert "could not be found" in expiry_runs["kafkacompat"]["done after expiry"][1]
    assert expiry_runs["kafkacompat"]["listed"] == ["open"]


def test_open_transactions_do_not_expire_alike(expiry_runs: dict[str, dict[str, Any]]) -> None:
    agree(expiry_runs, "open after expiry")
    assert expiry_runs["kafkacompat"]["open after expiry"] == (0, "Ongoing")
