"""Kafka 4.1's kafka-transactions.sh find-hanging and abort against kafkacompat, step by step beside Kafka.

A producer opens a transaction in two partitions and stops there (as one
killed would, long before its timeout): read_committed consumers wait at its
first record. The operator looks for it (find-hanging, describe-producers)
and aborts it in each partition, once by its start offset and once by
producer id and epoch, with a stale epoch first. What every tool printed and
what a read_committed consumer then reads must be what Kafka 4.1 shows.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import unavailable
from tests.conftest import create_topic
from tests.test_transactions_protocol import fetch
from tests.test_write_txn_markers import marker_answers
from tests.wire import Wire

SHOWN = ("ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "CurrentTransactionStartOffset")


@pytest.fixture(autouse=True)
def _kafka_tools() -> None:
    if unavailable():
        pytest.skip(unavailable())


def _tool(*args: str, bootstrap: str, topic: str) -> tuple[int, list[str], str]:
    """(exit code, stdout lines, the error line) of kafka-transactions ARGS, with the topic and producer id hidden."""
    done = run_tool("kafka-transactions", "--bootstrap-server", bootstrap, *args)

    def hidden(text: str) -> str:
        return re.sub(r"producerId=\d+", "producerId=<pid>", text.replace(topic, "<topic>"))

    errors = [line for line in done.stderr.splitlines() if line.startswith(("Failed", "Could not"))]
    return done.returncode, [hidden(line) for line in done.stdout.splitlines()], hidden("".join(errors))


def _producers(bootstrap: str, topic: str, partition: int) -> list[dict[str, str]]:
    done = run_tool("kafka-transactions", "--bootstrap-server", bootstrap, "describe-producers",
                    "--topic", topic, "--partition", str(partition))
    assert done.returncode == 0, done.stderr
    header, *rows = (line.split() for line in done.stdout.splitlines())
    return [dict(zip(header, row)) for row in rows]


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[tuple[int, int, str]]:
    """(partition, offset, value) a read_committed consumer reads from the start, once it has `expected`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    seen: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.partition(), message.offset(), message.value().decode()))
    finally:
        consumer.close()
    return sorted(seen)


def _scenario(bootstrap: str) -> dict[str, Any]:
    topic = create_topic(bootstrap, f"abort-hung-{uuid.uuid4().hex[:8]}", 2)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})  # no producer id: not in describe-producers
    settings = {"bootstrap.servers": bootstrap, "transactional.id": topic, "transaction.timeout.ms": 300_000}
    first = Producer(settings)
    first.init_transactions(30)  # epoch 0; the next producer of the id has epoch 1
    hung = Producer(settings)
    hung.init_transactions(30)
    for partition in (0, 1):
        plain.produce(topic, b"before", partition=partition)
    assert plain.flush(15) == 0
    hung.begin_transaction()
    for partition in (0, 1):
        hung.produce(topic, b"hung", partition=partition)
    assert hung.flush(15) == 0  # and then it stops: no commit, no abort
    for partition in (0, 1):
        plain.produce(topic, b"after", partition=partition)
    assert plain.flush(15) == 0
    [state] = _producers(bootstrap, topic, 1)
    run: dict[str, Any] = {"producer": {key: state[key] for key in SHOWN}}
    with Wire(bootstrap) as w:
        answer = fetch(w, topic, 1)
        run["read_committed before"] = (answer.high_watermark, answer.last_stable_offset)
    run["find-hanging"] = _tool("find-hanging", "--topic", topic, "--max-transaction-timeout", "0",
                                bootstrap=bootstrap, topic=topic)
    by_offset = ("abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
    run["abort by start offset"] = _tool(*by_offset, bootstrap=bootstrap, topic=topic)
    run["abort by start offset again"] = _tool(*by_offset, bootstrap=bootstrap, topic=topic)
    by_id = ("abort", "--topic", topic, "--partition", "1", "--producer-id", state["ProducerId"])
    run["abort a stale epoch"] = _tool(*by_id, "--producer-epoch", "0", "--coordinator-epoch", "0",
                                       bootstrap=bootstrap, topic=topic)
    run["abort by producer id"] = _tool(*by_id, "--producer-epoch", state["ProducerEpoch"], "--coordinator-epoch",
                                        state["LatestCoordinatorEpoch"], bootstrap=bootstrap, topic=topic)
    run["producers after"] = [{key: row[key] for key in SHOWN}
                              for p in (0, 1) for row in _producers(bootstrap, topic, p)]
    with Wire(bootstrap) as w:
        answer = fetch(w, topic, 1)
        run["read_committed after"] = (answer.high_watermark, answer.last_stable_offset,
                                       [a.first_offset for a in answer.aborted_transactions])
    run["records"] = _read_committed(bootstrap, topic, 4)
    try:  # the producer comes back and aborts: its coordinator still had the transaction open
        hung.abort_transaction(30)
        run["producer's own abort"] = "ok"
    except KafkaException as exc:
        run["producer's own abort"] = exc.args[0].name()
    first.flush(1)
    return run


def test_kafka_transactions_abort_same_as_kafka(ours: Broker, kafka41) -> None:
    seen = {name: _scenario(bootstrap) for name, bootstrap in
            (("kafkacompat", ours.bootstrap_servers), ("kafka", kafka41.bootstrap_servers))}
    for step in seen["kafka"]:
        assert seen["kafkacompat"][step] == seen["kafka"][step], step
    mine = seen["kafkacompat"]
    assert mine["read_committed before"] == (3, 1)  # held at the open transaction
    assert mine["abort by start offset"] == (0, [], "")
    assert "Could not find any open transactions starting at offset 1" in mine["abort by start offset again"][2]
    assert "invalid producer epoch" in mine["abort a stale epoch"][2]
    assert mine["read_committed after"] == (4, 4, [1])
    assert mine["records"] == [(0, 0, "before"), (0, 2, "after"), (1, 0, "before"), (1, 2, "after")]


def test_marker_wire_answers_same_as_kafka(ours: Broker, kafka41) -> None:
    """Every error path of WriteTxnMarkers (tests/test_write_txn_markers.py) answers as on Kafka 4.1."""
    name = f"markers-{uuid.uuid4().hex[:8]}"
    assert marker_answers(ours.bootstrap_servers, name) == marker_answers(kafka41.bootstrap_servers, name)
