"""Rebootstrap (KIP-899, KIP-1102): a client whose known brokers are all gone finds the cluster again
through its bootstrap list.

The broker first takes clients on its bootstrap address but advertises another
listener of its own, so clients work with that one; then it restarts (same
store) on the bootstrap address only. A client set to
metadata.recovery.strategy=rebootstrap goes back to its bootstrap list and
carries on; one set to none keeps trying the vanished address.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from kafkacompat.testing import Broker
from kafkacompat.testing.ports import free_port


class MovingBroker:
    """A broker that advertises a second listener, then comes back on its bootstrap address alone."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = str(data_dir)
        self.bootstrap_port, self.other_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.bootstrap_port}"
        other = f"127.0.0.1:{self.other_port}"
        self.broker = Broker(data_dir=self.data_dir, listeners=[f"PLAINTEXT://{self.bootstrap}", f"OTHER://{other}"],
                             listener_security_protocol_map=["OTHER:PLAINTEXT"],
                             advertised_listeners=[f"PLAINTEXT://{other}", f"OTHER://{other}"]).start()
        self.topic = f"rb-{uuid.uuid4().hex[:6]}"
        self.broker.create_topic(self.topic)

    def move(self) -> None:
        """Restart on the bootstrap address only: the advertised one is gone."""
        self.broker.stop()
        self.broker = Broker(data_dir=self.data_dir, listeners=[f"PLAINTEXT://{self.bootstrap}"]).start()

    def values(self) -> list[bytes]:
        return [m.value for m in self.broker.consume(self.topic)]


@pytest.fixture
def moving(tmp_path: Path) -> Iterator[MovingBroker]:
    broker = MovingBroker(tmp_path)
    try:
        yield broker
    finally:
        broker.broker.stop()


def _librdkafka_after_move(moving: MovingBroker, strategy: str,
                           timeout_ms: int = 15000) -> tuple[KafkaError | None, float]:
    results: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": moving.bootstrap, "metadata.recovery.strategy": strategy,
                         "metadata.recovery.rebootstrap.trigger.ms": 2000, "message.timeout.ms": timeout_ms})
    producer.produce(moving.topic, b"one", on_delivery=lambda err, _msg: results.append(err))
    producer.flush(15)
    assert results == [None]
    moving.move()
    started = time.monotonic()
    producer.produce(moving.topic, b"two", on_delivery=lambda err, _msg: results.append(err))
    producer.flush(30)
    return results[-1], time.monotonic() - started


def test_librdkafka_rebootstraps_when_its_known_broker_is_gone(moving: MovingBroker) -> None:
    error, seconds = _librdkafka_after_move(moving, "rebootstrap")
    assert error is None and seconds < 10
    assert moving.values() == [b"one", b"two"]


@pytest.mark.slow
def test_librdkafka_without_rebootstrap_stays_with_the_vanished_address(moving: MovingBroker) -> None:
    """The control: the same move defeats a client that does not rebootstrap. Its record times out after 6 s,
    three rebootstrap triggers (2 s): a client that went back to its bootstrap list would have delivered it."""
    error, _ = _librdkafka_after_move(moving, "none", timeout_ms=6000)
    assert error is not None and error.code() == KafkaError._MSG_TIMED_OUT
    assert moving.values() == [b"one"]


@pytest.mark.slow
def test_java_producer_rebootstraps_when_its_known_broker_is_gone(moving: MovingBroker) -> None:
    """kafka-clients 3.9.1 with metadata.recovery.strategy=rebootstrap (KIP-899)."""
    from compat_tests.drivers import ClientUnavailable
    from compat_tests.drivers.java import java_command

    try:
        command = java_command("Rebootstrap")
    except ClientUnavailable as exc:
        pytest.skip(str(exc))
    program = subprocess.Popen([*command, "produce", moving.bootstrap, f"topic={moving.topic}", "strategy=rebootstrap"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert program.stdout is not None and program.stdin is not None
        first = program.stdout.readline()  # blocks until the first record is written (or the program died)
        assert json.loads(first) == {"first": "ok"}
        moving.move()
        program.stdin.write("go\n")
        program.stdin.flush()
        out, _ = program.communicate(timeout=90)
    finally:
        if program.poll() is None:
            program.kill()
            program.wait(10)
    second = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert second["second"] == "ok" and second["seconds"] < 30, second
    assert moving.values() == [b"one", b"two"]
