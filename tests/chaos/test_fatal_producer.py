"""The campaign's idempotent producer after a fatal error, against the real broker and store.

A log cut under an idempotent producer (acknowledged records past the cut
lost, as docs/operations.md allows for damaged partitionlet bytes) leaves the
broker's producer state, rebuilt from the log, behind the producer: its next
batch is answered OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka 4.1 answers it
(ProducerAppendInfo.checkSequence), and librdkafka makes that fatal. The
workload must record the error, give every record the dead producer held an
outcome (a `send-failed`, promised nothing), and go on with a new producer.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kafkacompat.chaos.disk import DiskEngine, batch_starts, partitionlet_logs
from kafkacompat.chaos.history import Event, History
from kafkacompat.chaos.workload import Writer


class Recorded(History):
    """The history, its events also kept in memory for the test to wait on."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.events: list[Event] = []

    def record(self, type_: str, **fields: Any) -> Event:
        event = super().record(type_, **fields)
        self.events.append(event)
        return event

    def wait_for(self, what: str, test: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(test(e) for e in list(self.events)):
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.1)


def active_log(engine: DiskEngine) -> Path:
    return partitionlet_logs(engine.data / "streams" / "chaos" / "a" / "0")[-1][1]


def wait_for_batches(engine: DiskEngine, count: int, timeout: float) -> None:
    """Until partition 0's active log holds `count` whole batches. A producer that started while the broker
    was slow sends its first hundred records as one batch, and a cut through the only batch of a producer
    leaves the broker no state for it: Kafka then takes any sequence (ProducerStateManager), so nothing fails."""
    deadline = time.monotonic() + timeout
    while len(batch_starts(active_log(engine))) <= count:  # the starts, and the end of the last batch
        assert time.monotonic() < deadline, f"partition 0 holds fewer than {count} batches after {timeout} s"
        time.sleep(0.1)


def tear_last_batch(log: Path) -> None:
    """Cut the log inside its last batch: that batch's acknowledged records go, the ones before keep the
    producer's state, now behind the producer."""
    *_, last, end = sorted(batch_starts(log))
    os.truncate(log, last + (end - last) // 2)


def acks(history: Recorded, producer: str, partition: int | None = None) -> list[Event]:
    return [e for e in list(history.events) if e["type"] == "ack" and e["producer"] == producer
            and partition in (None, e["partition"])]


@pytest.mark.slow
def test_a_producer_made_fatal_by_a_cut_log_fails_what_it_held_and_is_replaced(tmp_path: Path) -> None:
    history = Recorded(tmp_path / "history.jsonl")
    engine = DiskEngine(tmp_path, history)
    stopping = threading.Event()
    writer = Writer("idem", "idempotent", engine.bootstrap, history, stopping, random.Random(2), rate=300)
    try:
        assert engine.start()
        engine.setup(random.Random(1))
        writer.start()
        history.wait_for("acks on partition 0", lambda e: len(acks(history, "idem.0", 0)) >= 100, 60)
        wait_for_batches(engine, 2, 60)
        engine.stop()
        tear_last_batch(active_log(engine))  # the tail of idem.0's acknowledged batches is gone
        assert engine.start()
        history.wait_for("a fatal error", lambda e: e["type"] == "client-error" and e["fatal"], 60)
        history.wait_for("a new producer's acks", lambda e: e["type"] == "ack" and e["producer"] == "idem.1", 60)
    finally:
        stopping.set()
        writer.join(120)
        engine.close()
        history.close()
    assert not writer.is_alive() and writer.failure is None
    errors = [e for e in history.events if e["type"] == "client-error"]
    assert any("OUT_OF_ORDER_SEQUENCE_NUMBER" in e["error"] for e in errors), errors
    closed = next(e for e in history.events if e["type"] == "producer-closed" and e["producer"] == "idem.0")
    sent = {e["seq"] for e in history.events if e["type"] == "send" and e["producer"] == "idem.0"}
    told = {e["seq"] for e in history.events if e["type"] in ("ack", "send-failed") and e["producer"] == "idem.0"}
    assert sent - told == set(), f"{len(sent - told)} of idem.0's records never got an outcome ({closed})"
    assert closed["undelivered"] > 0 and len(acks(history, "idem.1")) > 0


@pytest.mark.slow
def test_a_fatal_error_while_the_producer_drains_at_the_stop_does_not_wedge_the_campaign(tmp_path: Path) -> None:
    """The campaign's hang: the fatal error came inside flush() at the stop, delivery reports were served
    after it with the exception pending, and the history lock one took was never released."""
    history = Recorded(tmp_path / "history.jsonl")
    engine = DiskEngine(tmp_path, History(tmp_path / "broker-history.jsonl"))  # not the lock a wedged client holds
    stopping = threading.Event()
    writer = Writer("idem", "idempotent", engine.bootstrap, history, stopping, random.Random(2), rate=300)
    try:
        assert engine.start()
        engine.setup(random.Random(1))
        writer.start()
        history.wait_for("acks on partition 0", lambda e: len(acks(history, "idem.0", 0)) >= 100, 60)
        wait_for_batches(engine, 2, 60)
        engine.stop()  # SIGTERM: every request answered, so librdkafka keeps its producer id (no timeouts)
        sent = len(history.events)
        history.wait_for("sends held while the broker is away",
                         lambda e: e["i"] > sent and e["type"] == "send" and e["partition"] == 0, 30)
        stopping.set()  # the writer drains what it holds
        tear_last_batch(active_log(engine))
        assert engine.start()
        writer.join(90)
        assert not writer.is_alive(), "the writer never finished draining"
        recorded = threading.Thread(target=history.record, args=("probe",), daemon=True)
        recorded.start()
        recorded.join(10)
        assert not recorded.is_alive(), "the history's lock is held by no one and never released"
    finally:
        stopping.set()
        engine.close()
    errors = [e for e in history.events if e["type"] == "client-error"]
    assert any("OUT_OF_ORDER_SEQUENCE_NUMBER" in e["error"] for e in errors), errors
