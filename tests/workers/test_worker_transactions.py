"""Transactions across `serve --workers 2`: one transaction writes partitions both workers own.

Worker 0 coordinates every transactional id; worker 1's partitions verify a
producer's first write with it and take their markers from it, as Kafka's
partition leaders do (kafkacompat/workers/txn_forward.py). Before, worker 1
refused the transactional produce (INVALID_PRODUCER_ID_MAPPING) and the
transaction could not commit.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.workers.test_workers import Workers, create_topic

TOPIC = "spanned"
PARTITIONS = 4


@pytest.fixture
def workers(tmp_path: Path):
    running = Workers(tmp_path / "data", 2)
    yield running
    running.kill()


def offsets(admin: AdminClient, committed: bool) -> list[int]:
    """Each partition's end as a consumer of that isolation level sees it (read_committed: the LSO)."""
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(PARTITIONS)},
                                 isolation_level=level, request_timeout=30)
    return [futures[TopicPartition(TOPIC, p)].result(30).offset for p in range(PARTITIONS)]


def read_to_end(bootstrap: str, isolation: str, ends: list[int]) -> list[bytes]:
    """Every record a consumer of that isolation level reads from the start to `ends` (the high watermarks)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    assignment = [TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)]
    consumer.assign(assignment)
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while any(tp.offset < end for tp, end in zip(consumer.position(assignment), ends)):
            assert time.monotonic() < deadline, f"{isolation} read only {got}"
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.slow
def test_a_transaction_over_both_workers_partitions_commits_and_aborts(workers: Workers) -> None:
    create_topic(workers.bootstrap, TOPIC, PARTITIONS)
    create_topic(workers.bootstrap, "source", 1)
    admin = AdminClient({"bootstrap.servers": workers.bootstrap})
    leaders = {p.leader for p in admin.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions.values()}
    assert len(leaders) == 2, f"{TOPIC}'s partitions are not spread over both workers: {leaders}"
    plain = Producer({"bootstrap.servers": workers.bootstrap})
    plain.produce("source", b"in")
    assert plain.flush(30) == 0

    # consume-transform-produce: the input's offset is committed with the output
    source = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": "transform", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    source.subscribe(["source"])
    deadline = time.monotonic() + 60
    msg = None
    errors = []
    while msg is None or msg.error() is not None:
        assert time.monotonic() < deadline, f"the source record never came: {errors}, assigned {source.assignment()}"
        msg = source.poll(0.5)
        if msg is not None and msg.error() is not None:
            errors.append(str(msg.error()))

    producer = Producer({"bootstrap.servers": workers.bootstrap, "transactional.id": "spanning"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(TOPIC, f"commit-{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    # open: read_committed consumers see nothing of it yet on either worker
    assert offsets(admin, committed=True) == [0] * PARTITIONS
    assert offsets(admin, committed=False) == [1] * PARTITIONS
    producer.send_offsets_to_transaction([TopicPartition("source", 0, msg.offset() + 1)],
                                         source.consumer_group_metadata(), 30)
    producer.commit_transaction(30)

    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(TOPIC, f"abort-{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)

    ends = offsets(admin, committed=False)  # each: a record and a marker per transaction
    assert ends == [4] * PARTITIONS
    assert offsets(admin, committed=True) == ends, "the aborted transaction's markers released the LSO"
    assert sorted(read_to_end(workers.bootstrap, "read_committed", ends)) == \
        sorted(f"commit-{p}".encode() for p in range(PARTITIONS))
    assert sorted(read_to_end(workers.bootstrap, "read_uncommitted", ends)) == \
        sorted(f"{kind}-{p}".encode() for kind in ("commit", "abort") for p in range(PARTITIONS))
    committed = source.committed([TopicPartition("source", 0)], 30)
    assert committed[0].offset == msg.offset() + 1
    source.close()
