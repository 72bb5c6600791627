"""A clean stop (SIGTERM) answers the requests it already acted on (seen in the chaos campaign, seed 2028).

A produce whose batch was written but whose answer was still owed when the
broker stopped left librdkafka's transactional producer believing the
message unsent: on abort_transaction it purged it and reused its sequence
number, in the same epoch, for the first record of its next transaction,
which the restarted broker then took for a duplicate of the stored batch.
That committed record was acknowledged and never stored. Kafka's controlled
shutdown answers what it has handled before closing; so must we.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kafkacompat.kafka_port.server import STOP_GRACE
from kafkacompat.testing.ports import free_port
from tests.test_durability_faults import Served

# `kafkacompat serve` answering every Produce PRODUCE_DELAY seconds late (after appending): the answer is
# owed when the SIGTERM comes
PRODUCE_ANSWERS_LATE = """
import os, sys
from kafkacompat.kafka_port import server
from kafkacompat.cli import main
from kafkacompat.testing.faults import Faults

real = server.BrokerServer.__init__

def init(self, *args, **kwargs):
    real(self, *args, faults=Faults(), **kwargs)
    self.faults.delay("Produce", float(os.environ["PRODUCE_DELAY"]))

server.BrokerServer.__init__ = init
sys.argv[0] = "kafkacompat"
sys.exit(main())
"""
PRODUCE_DELAY = 1.5


def serve_late(served: Served, delay: float = PRODUCE_DELAY) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", PRODUCE_ANSWERS_LATE, "serve", "--data-dir", str(served.data),
                             "--host", "127.0.0.1", "--port", str(served.port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PRODUCE_DELAY": str(delay)})
    output = line = ""
    while "listening on" not in line:
        line = proc.stdout.readline()
        assert line, f"serve did not start: {output}"
        output += line
    return proc


def wait_until_stored(bootstrap: str, topic: str, value: bytes) -> None:
    """Wait until `value` is in the partition (read uncommitted): the broker has written it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watch", "isolation.level": "read_uncommitted",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error() and message.value() == value:
                return
        raise AssertionError(f"{value!r} never stored")
    finally:
        consumer.close()


def committed_values(bootstrap: str, topic: str, until: bytes) -> dict[bytes, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, int] = {}
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF and until in seen:
                    break
                continue
            seen[message.value()] = message.offset()
    finally:
        consumer.close()
    return seen


@pytest.mark.slow
def test_a_write_answered_late_is_answered_on_sigterm_so_the_next_transaction_is_stored(tmp_path: Path) -> None:
    served = Served(tmp_path / "data", free_port())
    served.start()
    for command in (["stream", "create", "/s", "--fsync", "always"], ["topic", "create", "/s:t", "--partitions", "1"]):
        done = served.cli(*command)
        assert done.returncode == 0, done.stderr
    assert served.stop() == 0
    proc = serve_late(served)
    reports: dict[bytes, tuple[str | None, int]] = {}
    producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "tx-stop", "linger.ms": 0})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("/s:t", b"first", partition=0,
                         on_delivery=lambda err, msg: reports.update({msg.value(): (err and err.name(), msg.offset())}))
        producer.poll(0)
        wait_until_stored(served.bootstrap, "/s:t", b"first")  # written; its answer is still owed
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        aborting = threading.Thread(target=producer.abort_transaction, args=(30,))
        aborting.start()  # the broker is down: the abort purges what the producer thinks unsent
        served.start()
        aborting.join(35)
        producer.begin_transaction()
        producer.produce("/s:t", b"second", partition=0,
                         on_delivery=lambda err, msg: reports.update({msg.value(): (err and err.name(), msg.offset())}))
        producer.commit_transaction(30)
        stored = committed_values(served.bootstrap, "/s:t", b"second")
    finally:
        producer.flush(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        served.kill()
    assert reports[b"second"][0] is None, reports
    assert stored.get(b"second") == reports[b"second"][1], (reports, stored)  # acknowledged and stored there


@pytest.mark.slow
def test_a_stop_waits_for_owed_answers_only_a_few_seconds(tmp_path: Path) -> None:
    served = Served(tmp_path / "data", free_port())
    proc = serve_late(served, delay=120)
    producer = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 0})
    try:
        producer.produce("t", b"slow", partition=0)
        producer.poll(0)
        wait_until_stored(served.bootstrap, "t", b"slow")
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        took = time.monotonic() - began
        output = proc.stdout.read()
    finally:
        producer.purge()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < STOP_GRACE + 10, took  # not the 120 s the answer would take
    assert "answers still owed after 5 s" in output and "Traceback" not in output, output
