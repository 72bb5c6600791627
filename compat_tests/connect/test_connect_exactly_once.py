"""Connect's exactly-once source support (KIP-618) on kafkacompat.

A worker with exactly.once.source.support=enabled writes each source
task's records and its source offsets in one Kafka transaction, fences
zombie tasks through InitProducerId, and reads its config topic
read_committed. A FileStreamSource connector that requires exactly-once
then delivers every line once, in transactional batches a read_committed
consumer sees, and keeps going after the worker restarts.
"""

from __future__ import annotations

import shutil
import tempfile
import urllib.error
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafkacompat.protocol.records import read_header

from kafkacompat.testing import Broker

from .connect_kit import ConnectWorker, wait_for
from .test_connect_file import append_lines

pytestmark = [pytest.mark.slow, pytest.mark.kafka_connect]


@pytest.fixture(scope="module")
def eos_worker(connect_broker: Broker) -> Iterator[ConnectWorker]:
    root = tempfile.mkdtemp(prefix="kafkacompat-connect-eos-")
    running = ConnectWorker(connect_broker.bootstrap_servers, root, **{"exactly.once.source.support": "enabled"})
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


def committed_values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        wait_for(f"{count} committed records in {topic}",
                 lambda: values.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
                 or len(values) >= count, 60)
    finally:
        consumer.close()
    return values


def test_exactly_once_source_delivers_each_line_once_in_transactions(eos_worker, connect_broker, tmp_path):
    source = str(tmp_path / "in.txt")
    topic = f"eos-{tmp_path.name[-8:]}".replace("_", "-")
    connect_broker.create_topic(topic, partitions=1)
    open(source, "w").close()
    name = f"eos-src-{topic}"
    eos_worker.create(name, {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                             "tasks.max": "1", "file": source, "topic": topic,
                             "exactly.once.support": "required", "transaction.boundary": "poll"})
    try:
        eos_worker.wait_state(name, "RUNNING")
        first = [f"line {i}" for i in range(30)]
        append_lines(source, first)
        assert committed_values(connect_broker.bootstrap_servers, topic, 30) == [f'"{line}"'.encode() for line in first]
        # The records came in transactions: their batches are transactional, with markers between.
        partition = connect_broker.server.cluster.store.partition(connect_broker.server.cluster.default_stream,
                                                                  topic, 0)
        data = connect_broker.call(partition.read(0, 1 << 20))
        headers, pos = [], 0
        while pos < len(data):
            header = read_header(data, pos)
            headers.append(header)
            pos += header.size
        assert all(h.is_transactional for h in headers) and any(h.is_control for h in headers)

        eos_worker.stop()  # a restart: the new task fences the old one and resumes from its committed offset
        eos_worker.start()
        eos_worker.wait_state(name, "RUNNING")
        second = [f"after restart {i}" for i in range(10)]
        append_lines(source, second)
        got = committed_values(connect_broker.bootstrap_servers, topic, 40)
        assert got == [f'"{line}"'.encode() for line in first + second]  # nothing twice, nothing lost
    finally:
        try:
            eos_worker.request("DELETE", f"/connectors/{name}")
        except urllib.error.HTTPError:
            pass
