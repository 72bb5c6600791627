"""Brokers in one process keep to themselves, and careless tests cannot hang a session."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer

from kafkacompat.testing import Broker


def test_two_brokers_in_one_process_keep_their_own_data() -> None:
    with Broker() as first, Broker() as second:
        assert first.port != second.port
        for broker, value in ((first, b"one"), (second, b"two")):
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
            producer.produce("shared-name", value)
            assert producer.flush(20) == 0
        assert [m.value for m in first.consume("shared-name")] == [b"one"]
        assert [m.value for m in second.consume("shared-name")] == [b"two"]
        second.reset()
        assert [m.value for m in first.consume("shared-name")] == [b"one"]


def test_stopping_with_clients_left_open_is_quick() -> None:
    broker = Broker().start()
    broker.produce("left-open", b"x")
    consumer = KafkaConsumer(
        "left-open", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
        enable_auto_commit=False, fetch_max_wait_ms=5000,
    )
    assert next(consumer).value == b"x"  # and now it long-polls for more
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send("left-open", b"y").get(timeout=20)
    half_frame = socket.create_connection(("127.0.0.1", broker.port))
    half_frame.sendall(struct.pack(">i", 100) + b"\x00\x12")  # a request that never completes

    port = broker.port
    started = time.monotonic()
    broker.stop()
    assert time.monotonic() - started < 5
    # The port is closed: nothing is left serving behind the test's back.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    half_frame.close()
    consumer.close(autocommit=False)
    producer.close(timeout=1)


async def test_leaving_an_async_broker_with_a_long_poll_pending_is_quick() -> None:
    from aiokafka import AIOKafkaConsumer

    started = None
    async with Broker() as broker:
        await broker.aproduce("polled", b"x")
        consumer = AIOKafkaConsumer(
            "polled", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
            fetch_max_wait_ms=5000,
        )
        await consumer.start()
        record = await asyncio.wait_for(consumer.getone(), 20)
        assert record.value == b"x"
        started = time.monotonic()
    assert time.monotonic() - started < 5
    await consumer.stop()


def test_the_startup_benchmark_serves_api_versions_within_budget() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kafkacompat.testing.bench", "--runs", "1", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["peak_rss_mb"] < 60  # the target; memory does not vary with load
    assert 0 < figures["startup_ms"] < 1000  # the target is 50 ms; a shared CI box is noisy
