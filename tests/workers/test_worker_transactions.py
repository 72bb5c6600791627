"""Transactions across `serve --workers 2`: one transaction writes partitions both workers own.

The worker that owns a transactional id's __consumer_offsets partition
coordinates it; the other worker's partitions verify a producer's first
write with it and take their markers from it, as Kafka's partition leaders
do (kafkacompat/workers/txn_forward.py). Before, worker 1 refused the
transactional produce (INVALID_PRODUCER_ID_MAPPING) and the transaction
could not commit. A group's offsets sent to a transaction are staged by the
group's coordinator and committed by the transaction's, which since stop 61
may be two workers.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafkacompat.storage.disk.shared import owner_of
from kio.schema.errors import ErrorCode

from tests.test_transactions_protocol import fetch, init, txn_batch
from tests.test_transactions_v2 import READ_COMMITTED, end_txn_v5, produce_v12
from tests.wire import Wire
from tests.workers.test_workers import Workers, create_topic, keys_coordinated_by

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


def read_to_end(bootstrap: str, isolation: str, ends: list[int], topic: str = TOPIC) -> list[bytes]:
    """Every record a consumer of that isolation level reads from the start to `ends` (each partition's
    high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    assignment = [TopicPartition(topic, p, 0) for p in range(len(ends))]
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


@pytest.mark.slow
@pytest.mark.parametrize("txn_worker", [0, 1], ids=["txn-at-0-group-at-1", "txn-at-1-group-at-0"])
def test_offsets_sent_to_a_transaction_of_another_worker_commit_with_it_and_not_at_abort(
    workers: Workers, txn_worker: int
) -> None:
    txn_id = keys_coordinated_by(2, "offsets-txn")[txn_worker]
    group = keys_coordinated_by(2, "offsets-group")[1 - txn_worker]
    create_topic(workers.bootstrap, "in", 1)
    create_topic(workers.bootstrap, TOPIC, PARTITIONS)
    member = Consumer({"bootstrap.servers": workers.bootstrap, "group.id": group, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": workers.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    for offset, commit in ((5, True), (9, False), (12, True)):
        producer.begin_transaction()
        producer.produce(TOPIC, f"at-{offset}".encode(), partition=offset % PARTITIONS)
        producer.send_offsets_to_transaction([TopicPartition("in", 0, offset)], member.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        expected = offset if commit else 5
        assert member.committed([TopicPartition("in", 0)], 30)[0].offset == expected, (offset, commit)
    member.close()


def owned_by_worker_1(prefix: str) -> str:
    """A topic name whose partition 0 worker 1 of two owns (ownership is a pure function of the name)."""
    return next(f"{prefix}{n}" for n in range(100) if owner_of(2, "/default", f"{prefix}{n}", 0) == 1)


@pytest.mark.slow
def test_a_transactions_v2_produce_to_worker_1_joins_worker_0s_transaction(workers: Workers) -> None:
    # KIP-890 part 2: no AddPartitionsToTxn; worker 1 adds the partition at worker 0 for the Produce v12
    topic = owned_by_worker_1("v2-")
    create_topic(workers.bootstrap, topic, 1)
    with Wire(f"127.0.0.1:{workers.ports[0]}") as coordinator, Wire(f"127.0.0.1:{workers.ports[1]}") as owner:
        started = init(coordinator, "v2-spanning", version=5)
        pid, epoch = started.producer_id, started.producer_epoch
        assert produce_v12(owner, "v2-spanning", topic, txn_batch(pid, epoch, 0, b"a")) == ErrorCode.none
        assert fetch(owner, topic, READ_COMMITTED).last_stable_offset == 0  # open: the LSO holds
        assert end_txn_v5(coordinator, "v2-spanning", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
        assert produce_v12(owner, "v2-spanning", topic, txn_batch(pid, epoch + 1, 0, b"b")) == ErrorCode.none
        assert end_txn_v5(coordinator, "v2-spanning", pid, epoch + 1, False) == (ErrorCode.none, pid, epoch + 2)
        answer = fetch(owner, topic, READ_COMMITTED)
        assert (answer.high_watermark, answer.last_stable_offset) == (4, 4)
        assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [(pid, 2)]


AFTER = 100_050  # records written after the aborted transaction


def test_an_abort_older_than_the_log_tail_stays_aborted_after_worker_1_restarts(workers: Workers) -> None:
    # Worker 1 may not write the state tables; it rebuilt its partitions' aborted transactions from the log
    # tail at each load (the last 100,000 offsets or 32 MiB), so after a restart a read_committed consumer was
    # served every transaction aborted before that (the workers fault campaign, seed 5501: 762 aborted reads).
    # Its aborts are now kept in worker 0's table.
    topic = owned_by_worker_1("old-abort")
    create_topic(workers.bootstrap, topic, 1)
    txn = Producer({"bootstrap.servers": workers.bootstrap, "transactional.id": f"t-{topic}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, f"aborted-{i}".encode())
    txn.flush(30)
    txn.abort_transaction(30)
    plain = Producer({"bootstrap.servers": workers.bootstrap, "linger.ms": 5})
    for i in range(AFTER):  # past the 100,000 offsets a load reads of the log tail
        while True:
            try:
                plain.produce(topic, b"%d" % i)
                break
            except BufferError:
                plain.poll(0.1)
    assert plain.flush(60) == 0
    spare = int(re.search(r"pid (\d+)", workers.wait_for("spare worker started", 60))[1])
    os.kill(workers.pids[1], signal.SIGKILL)
    workers.wait_for("worker 1 serves again", 60)
    workers.pids[1] = spare
    seen = read_to_end(workers.bootstrap, "read_committed", [AFTER + 6], topic)  # 5 aborted, their marker, AFTER
    assert [v for v in seen if v.startswith(b"aborted")] == [], "an aborted transaction's records were read"
    assert len(seen) == AFTER
