"""Fetch's max_bytes across partitions, as Kafka 4.1 applies it.

Only the first partition with data may go past max_bytes, and only by one
whole batch (Kafka's minOneMessage); every later partition gets at most what
is left. librdkafka drops the connection when a response is larger than
receive.message.max.bytes (fetch.max.bytes + 512), which is how its test 0082
found the old behaviour.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch, iter_records
from kio.schema.errors import ErrorCode

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import unavailable
from tests.conftest import create_topic
from tests.test_bad_input import produce_request
from tests.wire import Wire

PARTITIONS = 3


def _fill(bootstrap: str, value_size: int, batches: int) -> str:
    """A fresh topic whose partitions each hold `batches` one-record batches of value_size bytes."""
    topic = create_topic(bootstrap, f"maxbytes-{uuid.uuid4().hex[:8]}", PARTITIONS)
    now_ms = int(time.time() * 1000)  # stamped in 1970, the batches were Kafka's retention's to delete
    with Wire(bootstrap) as wire:
        for partition in range(PARTITIONS):
            for i in range(batches):
                batch = build_batch([Record(None, bytes([65 + i]) * value_size, [], now_ms + i)])
                _produce(wire, produce_request(topic, batch, partition=partition))
    return topic


def _produce(wire: Wire, request: object) -> None:
    """Produce, retrying while a just-created topic has no leader yet (Kafka answers NOT_LEADER meanwhile)."""
    deadline = time.monotonic() + 15
    while True:
        code = wire.request(0, 9, request).responses[0].partition_responses[0].error_code
        if code != ErrorCode.not_leader_or_follower or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert code == ErrorCode.none


def _fetch(bootstrap: str, topic: str, max_bytes: int, partition_max: int) -> list[tuple[int, list[int]]]:
    """Per partition: (bytes of records, offsets of the whole batches in them)."""
    import kio.schema.fetch.v12.request as m

    parts = tuple(
        make(m.FetchPartition, partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
             log_start_offset=-1, partition_max_bytes=partition_max, replica_directory_id=None)
        for p in range(PARTITIONS)
    )
    request = make(
        m.FetchRequest, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
        max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(make(m.FetchTopic, topic=topic, topic_id=None, partitions=parts),), forgotten_topics_data=(), rack_id="",
    )
    with Wire(bootstrap) as wire:
        response = wire.request(1, 12, request)
    answers = sorted(response.responses[0].partitions, key=lambda p: p.partition_index)
    assert [p.error_code for p in answers] == [0] * PARTITIONS
    return [(len(p.records), [r.offset for r in iter_records(p.records)]) for p in answers]


# (max_bytes, partition_max_bytes) -> whole batches each partition gets, as Kafka 4.1 answers
# with three 40 KB one-record batches per partition
CASES = {
    (100_000, 1 << 20): [[0, 1], [], []],  # what is left after two batches cannot hold a third
    (10 << 20, 30_000): [[0], [], []],  # only the first partition may exceed partition_max_bytes
    (10 << 20, 50_000): [[0], [0], [0]],
    (100_000, 50_000): [[0], [0], []],
}


@pytest.mark.parametrize(("max_bytes", "partition_max"), list(CASES))
def test_partitions_after_the_first_get_only_whole_batches_that_fit(bootstrap: str, max_bytes: int, partition_max: int) -> None:
    topic = _fill(bootstrap, 40_000, 3)
    answers = _fetch(bootstrap, topic, max_bytes, partition_max)
    assert [offsets for _size, offsets in answers] == CASES[max_bytes, partition_max]
    assert sum(size for size, _offsets in answers) <= max(max_bytes, answers[0][0])
    assert all(size <= partition_max for size, _offsets in answers[1:])


def test_only_the_first_partition_may_exceed_max_bytes_by_one_whole_batch(bootstrap: str) -> None:
    topic = _fill(bootstrap, 150_000, 1)
    answers = _fetch(bootstrap, topic, max_bytes=100_000, partition_max=1 << 20)
    assert answers[0][0] > 150_000 and answers[0][1] == [0] and answers[1:] == [(0, []), (0, [])]


def test_librdkafka_consumes_big_batches_across_partitions_within_fetch_max_bytes(bootstrap: str) -> None:
    """librdkafka's 0082 setup: any response over receive.message.max.bytes kills the connection."""
    topic = create_topic(bootstrap, f"rdk-maxbytes-{uuid.uuid4().hex[:8]}", PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "batch.size": 500_000, "linger.ms": 0})
    per_partition = 4
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, b"v" * 400_000, partition=partition)
            producer.flush(15)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False,
        "fetch.max.bytes": 1_000_000, "receive.message.max.bytes": 1_000_512,
        "max.partition.fetch.bytes": 1_000_000, "error_cb": _fail_on_error,
    })
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got = 0
        for _ in range(60):
            got += len([m for m in consumer.consume(num_messages=50, timeout=0.5) if m.error() is None])
            if got == PARTITIONS * per_partition:
                break
        assert got == PARTITIONS * per_partition
    finally:
        consumer.close()


def _fail_on_error(error: object) -> None:
    raise AssertionError(f"librdkafka reported {error}")


def test_java_consumer_reads_every_record_when_fetches_hold_batches_back(ours: Broker) -> None:
    """Kafka 4.1's console consumer (Java) still gets all: held-back batches come first in a later fetch."""
    if unavailable():
        pytest.skip(unavailable())
    bootstrap = ours.bootstrap_servers
    topic = _fill(bootstrap, 40_000, 3)
    done = run_tool(
        "kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning",
        "--max-messages", str(PARTITIONS * 3), "--timeout-ms", "20000",
        "--consumer-property", "fetch.max.bytes=100000", "--consumer-property", "max.partition.fetch.bytes=30000",
        "--property", "print.value=false", "--property", "print.partition=true",
    )
    assert f"Processed a total of {PARTITIONS * 3} messages" in done.stderr, done.stderr[-2000:]
    assert sorted(done.stdout.split()) == sorted(f"Partition:{p}" for p in range(PARTITIONS) for _ in range(3))
