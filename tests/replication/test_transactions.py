"""Transactions on replicas: a read_committed consumer of a replica sees what it would see at the source."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.test_idempotence import send
from tests.wire import Wire

from .helpers import admin, batches, end_offset, replica, wait_for

TOPIC = "/s:payments"


@pytest.fixture
def pair(tmp_path):
    a = Broker(str(tmp_path / "sanjose"), cluster_name="sanjose").start()
    b = Broker(str(tmp_path / "newyork"), cluster_name="newyork").start()
    yield a, b
    b.stop()
    a.stop()


def _committed_values(broker: Broker, expected: int) -> list[bytes]:
    """What a read_committed confluent-kafka consumer reads from the start: `expected` values, then nothing."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "audit",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[bytes] = []
    try:
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is None:
                if len(seen) >= expected:
                    break
                continue
            assert msg.error() is None, msg.error()
            seen.append(msg.value())
    finally:
        consumer.close()
    return seen


def _stable_end(broker: Broker) -> int:
    """The partition's end for read_committed consumers (ListOffsets latest, READ_COMMITTED): the LSO."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = client.list_offsets({TopicPartition(TOPIC, 0): OffsetSpec.latest()},
                                  isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10)
    return next(iter(futures.values())).result(timeout=15).offset


def test_read_committed_on_the_replica_equals_the_source(pair):
    from confluent_kafka import Producer

    a, b = pair
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    producer = Producer({"bootstrap.servers": a.bootstrap_servers, "transactional.id": "payments-1"})
    producer.init_transactions(15)
    for txn, outcome in enumerate(["commit", "abort", "commit", "abort", "commit"]):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(TOPIC, f"{outcome}-{txn}-{i}".encode(), partition=0)
        producer.flush(10)
        if outcome == "commit":
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)
    a.produce(TOPIC, b"plain", partition=0)  # a non-transactional record between transactions
    # a transaction left open at the source: the replica's LSO must stop before it
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, f"open-{i}".encode(), partition=0)
    producer.flush(10)
    hw = end_offset(a, "/s", "payments")
    wait_for(lambda: end_offset(b, "/s", "payments") == hw, what="replica caught up")
    assert batches(b, "/s", "payments") == batches(a, "/s", "payments")  # markers included, byte for byte

    wanted = [f"commit-{t}-{i}".encode() for t in (0, 2, 4) for i in range(4)] + [b"plain"]
    assert _committed_values(a, len(wanted)) == wanted
    assert _committed_values(b, len(wanted)) == wanted
    lso = _stable_end(a)
    assert lso < hw and _stable_end(b) == lso

    # the open transaction commits: its records become readable on the replica too
    producer.commit_transaction(15)
    hw = end_offset(a, "/s", "payments")
    wait_for(lambda: end_offset(b, "/s", "payments") == hw, what="commit marker replicated")
    wanted += [f"open-{i}".encode() for i in range(3)]
    wait_for(lambda: _stable_end(b) == hw, what="replica LSO at its high watermark")
    assert _committed_values(b, len(wanted)) == wanted


def test_aborted_index_survives_a_replica_restart(tmp_path):
    """The replica keeps aborted transactions durably, as the source does, so a restart changes nothing."""
    from confluent_kafka import Producer

    a = Broker(str(tmp_path / "a"), cluster_name="a").start()
    b = Broker(str(tmp_path / "b"), cluster_name="b").start()
    try:
        for broker in (a, b):
            admin(broker).call("stream.create", path="/s")
        admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
        producer = Producer({"bootstrap.servers": a.bootstrap_servers, "transactional.id": "t"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(TOPIC, b"gone", partition=0)
        producer.flush(10)
        producer.abort_transaction(15)
        producer.begin_transaction()
        producer.produce(TOPIC, b"kept", partition=0)
        producer.commit_transaction(15)
        hw = end_offset(a, "/s", "payments")
        wait_for(lambda: end_offset(b, "/s", "payments") == hw, what="replica caught up")
        assert _committed_values(b, 1) == [b"kept"]
        b.stop()
        b = Broker(str(tmp_path / "b"), cluster_name="b").start()
        assert _committed_values(b, 1) == [b"kept"]
    finally:
        b.stop()
        a.stop()


def _producers(broker: Broker) -> list[tuple[int, int, int, int, int]]:
    """DescribeProducers of /s:payments partition 0 with kafka-python's admin client:
    (producer id, epoch, last sequence, last timestamp, open transaction's first offset)."""
    from kafka import KafkaAdminClient, TopicPartition

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        [state] = client.describe_producers([TopicPartition(TOPIC, 0)]).values()
    finally:
        client.close()
    return sorted((p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
                   p.current_transaction_start_offset) for p in state.active_producers)


def test_the_replica_keeps_the_producer_epochs_markers_carry(pair):
    """A fenced producer's abort marker carries the epoch its coordinator bumped (as every EndTxn of
    transactions v2 does): the replica takes it into its producer state as the source does, so
    DescribeProducers answers alike there and a producer failing over is judged as at the source."""
    from confluent_kafka import Producer

    a, b = pair
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    a.produce(TOPIC, b"plain", partition=0)
    wait_for(lambda: end_offset(b, "/s", "payments") == 1, what="topic replicated")
    assert _producers(a) == _producers(b) == []
    first = Producer({"bootstrap.servers": a.bootstrap_servers, "transactional.id": "payments-1"})
    first.init_transactions(15)
    first.begin_transaction()
    for i in range(3):
        first.produce(TOPIC, f"open-{i}".encode(), partition=0)
    first.flush(10)
    wait_for(lambda: end_offset(b, "/s", "payments") == end_offset(a, "/s", "payments") == 4, what="batch replicated")
    [(pid, epoch, last_seq, _, txn_start)] = _producers(a)
    assert (last_seq, txn_start) == (2, 1) and _producers(b) == _producers(a)

    # the same transactional id starts again: its coordinator fences the first producer, aborting its
    # transaction with a marker of the next epoch
    second = Producer({"bootstrap.servers": a.bootstrap_servers, "transactional.id": "payments-1"})
    second.init_transactions(15)
    wait_for(lambda: end_offset(b, "/s", "payments") == end_offset(a, "/s", "payments") == 5, what="marker replicated")
    [(fenced_pid, fenced_epoch, last_seq, _, txn_start)] = described = _producers(a)
    assert (fenced_pid, last_seq, txn_start) == (pid, -1, -1) and fenced_epoch > epoch  # Kafka's view after it
    assert _producers(b) == described
    # the fenced producer, a zombie now, is refused on the replica as on the source
    for broker in (a, b):
        with Wire(broker.bootstrap_servers) as wire:
            assert send(wire, TOPIC, pid, 3, count=1, epoch=epoch)[0] == ErrorCode.invalid_producer_epoch

    second.begin_transaction()
    second.produce(TOPIC, b"after", partition=0)
    second.commit_transaction(15)
    hw = end_offset(a, "/s", "payments")
    wait_for(lambda: end_offset(b, "/s", "payments") == hw, what="next transaction replicated")
    assert _producers(b) == _producers(a)


@pytest.mark.slow
def test_the_replicas_lso_is_held_while_an_open_transactions_batch_is_appended(pair):
    """The replica's store makes a replicated batch readable a few event-loop turns before the
    receiver marks its transaction open (the partition's first batch always takes that path: the
    store starts a partitionlet for it). A watcher on the replica's own loop reads, at every turn,
    the offset a read_committed Fetch is answered up to: it never passes the open transaction."""
    import asyncio

    from confluent_kafka import Producer

    a, b = pair
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    a.create_topic(TOPIC)
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "payments") == 0, what="topic replicated")
    exposed: list[int] = []
    watching = asyncio.Event()

    async def watch() -> None:
        cluster = b.server.cluster
        assert cluster is not None
        txns = await cluster.transactions.partitions.get("/s", "payments", 0)
        watching.set()
        while watching.is_set():
            if txns.last_stable_offset > 0:
                exposed.append(txns.last_stable_offset)
            await asyncio.sleep(0)

    async def start() -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(watch())
        await watching.wait()
        return task

    async def stop(task: asyncio.Task[None]) -> None:
        watching.clear()
        await task

    watcher = b.call(start())
    try:
        producer = Producer({"bootstrap.servers": a.bootstrap_servers, "transactional.id": "held-1"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(TOPIC, b"open", partition=0)
        producer.flush(10)
        wait_for(lambda: end_offset(b, "/s", "payments") == 1, what="open batch replicated")
    finally:
        b.call(stop(watcher))
    assert exposed == []
    producer.commit_transaction(15)
    wait_for(lambda: _stable_end(b) == 2, what="the commit marker replicated")
