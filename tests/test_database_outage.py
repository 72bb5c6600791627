"""A broker on the cloud engine while its PostgreSQL is out of reach, as clients see it.

Every session the broker holds with its database is ended (pg_terminate_backend,
as a failover or an administrator ends them) and new ones are refused for a
while. Clients must get the named, retriable errors Kafka gives when its own
log cannot be written (KAFKA_STORAGE_ERROR for a partition, NOT_COORDINATOR
for a coordinator's state) on a connection that stays open, and once the
database is back the broker must serve again with every acknowledged record
and committed offset intact.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from kafkacompat.testing.services import database_outage, object_store_outage
from tests.cloud_engine import on_the_cloud_engine
from tests.wire import Wire


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[Broker]:
    on_the_cloud_engine(monkeypatch)
    with Broker(store_flush_ms=2) as running:
        yield running


def produce_request(topic: str, records: bytes, acks: int = -1, timeout_s: float = 30) -> object:
    """A Produce v9 request of `records` to partition 0 of `topic`."""
    import kio.schema.produce.v9.request as m

    return make(m.ProduceRequest, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=timeout_s),
                topic_data=(make(m.TopicProduceData, name=topic, partition_data=(
                    make(m.PartitionProduceData, index=0, records=records),)),))


def produce(wire: Wire, topic: str, value: bytes) -> tuple[ErrorCode, int]:
    request = produce_request(topic, build_batch([Record(None, value, [], 1000)]))
    part = wire.request(0, 9, request).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def commit_offset(wire: Wire, group: str, topic: str, offset: int) -> ErrorCode:
    import kio.schema.offset_commit.v8.request as m

    request = make(m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=(make(m.OffsetCommitRequestTopic, name=topic, partitions=(
                       make(m.OffsetCommitRequestPartition, partition_index=0, committed_offset=offset,
                            committed_leader_epoch=-1, committed_metadata=""),)),))
    return wire.request(8, 8, request).topics[0].partitions[0].error_code


def init_producer_id(wire: Wire, transactional_id: str) -> ErrorCode:
    import kio.schema.init_producer_id.v4.request as m

    request = make(m.InitProducerIdRequest, transactional_id=transactional_id,
                   transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
    return wire.request(22, 4, request).error_code


def test_requests_during_an_outage_get_kafkas_retriable_errors_and_nothing_is_lost(broker: Broker) -> None:
    topic = broker.create_topic("outage", 1)
    with Wire(broker.bootstrap_servers, timeout=30) as wire:
        assert produce(wire, topic, b"before") == (ErrorCode.none, 0)
        assert commit_offset(wire, "g", topic, 1) == ErrorCode.none
        assert init_producer_id(wire, "tx") == ErrorCode.none
        with database_outage(broker.config.store):
            assert commit_offset(wire, "g", topic, 5) == ErrorCode.not_coordinator
            assert produce(wire, topic, b"refused")[0] == ErrorCode.kafka_storage_error
            assert init_producer_id(wire, "tx") == ErrorCode.not_coordinator
            assert init_producer_id(wire, "new-tx") == ErrorCode.not_coordinator
            assert broker.committed("g", topic) == {0: 1}  # the refused commit is not served either
        # the same connection goes on once the database is back (the pool reconnects)
        deadline = time.monotonic() + 20
        while (answer := produce(wire, topic, b"after"))[0] != ErrorCode.none:
            assert answer[0] == ErrorCode.kafka_storage_error and time.monotonic() < deadline
        assert answer == (ErrorCode.none, 1)
        assert commit_offset(wire, "g", topic, 2) == ErrorCode.none
        assert init_producer_id(wire, "tx") == ErrorCode.none
        assert init_producer_id(wire, "new-tx") == ErrorCode.none
    assert broker.committed("g", topic) == {0: 2}
    assert [(m.offset, m.value) for m in broker.consume(topic, count=2)] == [(0, b"before"), (1, b"after")]


def test_a_stock_producer_and_consumer_ride_through_an_outage(broker: Broker) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    topic = broker.create_topic("ride-through", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60_000, "retry.backoff.ms": 100})
    delivered: list[tuple[int, bytes]] = []
    failed: list[KafkaError] = []

    def report(err: KafkaError | None, msg) -> None:
        if err is None:
            delivered.append((msg.offset(), msg.value()))
        else:
            failed.append(err)

    commits: list[KafkaError | None] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "riders",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "on_commit": lambda err, _partitions: commits.append(err)})

    def poll_until(done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            consumer.poll(0.1)

    try:
        for i in range(20):
            producer.produce(topic, f"m{i}".encode(), on_delivery=report)
        assert producer.flush(30) == 0
        consumer.assign([TopicPartition(topic, 0, 0)])
        consumer.commit(offsets=[TopicPartition(topic, 0, 10)], asynchronous=False)
        commits.clear()

        with database_outage(broker.config.store):
            for i in range(20, 40):  # sent into the outage: retried by the client until the database is back
                producer.produce(topic, f"m{i}".encode(), on_delivery=report)
            # asynchronous: a synchronous commit blocks in librdkafka, which may retry it until the
            # database is back (it does so when its coordinator connection turns over meanwhile)
            consumer.commit(offsets=[TopicPartition(topic, 0, 15)], asynchronous=True)
            poll_until(lambda: commits, 10)
            producer.poll(0.5)
            assert len(delivered) == 20 and failed == []  # nothing acked while the database is away
        assert producer.flush(60) == 0
        assert failed == []
        assert sorted(delivered) == [(i, f"m{i}".encode()) for i in range(40)]  # each acked once, in order
        poll_until(lambda: commits, 30)
        # the commit made in the outage either failed with NOT_COORDINATOR (retriable: Java's
        # NotCoordinatorException is a RetriableException) or was retried by the client until it held
        assert len(commits) == 1, commits
        assert commits[0] is None or commits[0].code() == KafkaError.NOT_COORDINATOR, commits[0]
        assert broker.committed("riders", topic) == ({0: 15} if commits[0] is None else {0: 10})
        consumer.commit(offsets=[TopicPartition(topic, 0, 40)], asynchronous=False)
    finally:
        consumer.close()
    assert broker.committed("riders", topic) == {0: 40}
    assert [m.value for m in broker.consume(topic, count=40)] == [f"m{i}".encode() for i in range(40)]


def test_a_transaction_committed_during_an_outage_commits_once_the_database_is_back(
        broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """EndTxn whose Prepare* cannot be stored is not applied (NOT_COORDINATOR, as Kafka answers a
    failed append to __transaction_state); the client retries it and the commit lands afterwards."""
    topic = broker.create_topic("txn-outage", 1)
    producer = open_transaction(broker, topic, "outage-tx", 5)
    outage = database_outage(broker.config.store)
    outage.__enter__()
    threading.Timer(2.0, outage.__exit__, (None, None, None)).start()  # the commit below is retried meanwhile
    with caplog.at_level(logging.INFO, logger="kafkacompat.transactions.coordinator"):
        producer.commit_transaction(60)
    assert any("outage-tx: state not written, answering NOT_COORDINATOR" in r.getMessage() for r in caplog.records)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and producer_state(broker, "outage-tx") != "CompleteCommit":
        time.sleep(0.05)
    assert producer_state(broker, "outage-tx") == "CompleteCommit"
    assert read_committed(broker, topic, 5, deadline) == [f"t{i}".encode() for i in range(5)]


def open_transaction(broker: Broker, topic: str, transactional_id: str, count: int) -> Any:
    """A librdkafka transactional producer with `count` records t0, t1, ... to partition 0 of `topic`
    written in its open transaction."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                         "linger.ms": 5})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, f"t{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    return producer


def read_committed(broker: Broker, topic: str, count: int, deadline: float) -> list[bytes]:
    """Up to `count` values of partition 0 of `topic` from its start, read_committed, until `deadline`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "txn-readers",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        consumer.close()


def producer_state(broker: Broker, transactional_id: str) -> str | None:
    meta = broker.server.cluster.transactions.describe(transactional_id)
    return None if meta is None else meta.state.value


def test_a_write_held_up_past_the_request_timeout_is_answered_request_timed_out_in_time(broker: Broker) -> None:
    """A commit waiting on the database (here a row lock another session holds) leaves the producer
    without an answer: before, it waited as long as the database did, past the client's own request
    timeout (librdkafka REQTMOUT). It is answered REQUEST_TIMED_OUT within the request's timeout, the
    write goes on, and once the database lets it through the batch is stored once."""
    import asyncio

    import asyncpg

    topic = broker.create_topic("held", 1)
    with Wire(broker.bootstrap_servers) as wire:
        assert produce(wire, topic, b"first") == (ErrorCode.none, 0)
    locked, release = threading.Event(), threading.Event()

    async def hold_the_partition_row() -> None:
        conn = await asyncpg.connect(broker.config.store)
        try:
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM kc_partitions p JOIN kc_topics t ON t.id = p.topic_id "
                                   "WHERE t.name = 'held' FOR UPDATE OF p")
                locked.set()
                while not release.is_set():
                    await asyncio.sleep(0.05)
        finally:
            await conn.close()

    holder = threading.Thread(target=asyncio.run, args=(hold_the_partition_row(),))
    holder.start()
    try:
        assert locked.wait(10)
        request = produce_request(topic, build_batch([Record(None, b"second", [], 1000)]), acks=1, timeout_s=2)
        with Wire(broker.bootstrap_servers, timeout=10) as wire:
            sent = time.monotonic()
            part = wire.request(0, 9, request).responses[0].partition_responses[0]
            answered = time.monotonic() - sent
    finally:
        release.set()
        holder.join(10)
    assert part.error_code == ErrorCode.request_timed_out and answered < 2.0, (part.error_code, answered)
    with Wire(broker.bootstrap_servers) as wire:
        assert produce(wire, topic, b"third") == (ErrorCode.none, 2)  # the held write was stored, once


def test_a_batch_without_idempotence_answered_request_timed_out_before_its_commit_is_never_stored(
        broker: Broker) -> None:
    """A plain (acks=1, no idempotence) batch held up before its commit (here its upload, the object
    store out) and answered REQUEST_TIMED_OUT is withdrawn: its producer resends it, and a copy stored
    after the answer was a second one it cannot tell apart (the cloud campaign's plain producer had
    runs of 60 records stored twice). Its retry is then the only copy. A commit already under way is
    not withdrawn (the test above)."""

    topic = broker.create_topic("withdrawn", 1)
    with Wire(broker.bootstrap_servers) as wire:
        assert produce(wire, topic, b"first") == (ErrorCode.none, 0)
    request = produce_request(topic, build_batch([Record(None, b"late", [], 1000)]), acks=1, timeout_s=1)
    with Wire(broker.bootstrap_servers, timeout=10) as wire:
        with object_store_outage():
            part = wire.request(0, 9, request).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.request_timed_out, part.error_code
        assert produce(wire, topic, b"retried") == (ErrorCode.none, 1)  # waits behind the late write's end
    assert [(m.offset, m.value) for m in broker.consume(topic)] == [(0, b"first"), (1, b"retried")]


def read_requests(topic: str) -> list[tuple[str, int, int, object, object]]:
    """(name, api key, version, request, its partition-level error codes) for the read paths a
    consumer, an admin and a producer take: each may reach the database when its cache is cold."""
    import kio.schema.describe_producers.v0.request as dp
    import kio.schema.list_offsets.v7.request as lo
    import kio.schema.metadata.v12.request as md
    import kio.schema.offset_fetch.v7.request as of
    import kio.schema.offset_for_leader_epoch.v4.request as oe

    return [
        ("OffsetForLeaderEpoch", 23, 4, make(oe.OffsetForLeaderEpochRequest, replica_id=-1, topics=(
            make(oe.OffsetForLeaderTopic, topic=topic, partitions=(
                make(oe.OffsetForLeaderPartition, partition=0, current_leader_epoch=-1, leader_epoch=0),)),)),
         lambda r: [p.error_code for t in r.topics for p in t.partitions]),
        ("ListOffsets", 2, 7, make(lo.ListOffsetsRequest, replica_id=-1, isolation_level=1, topics=(
            make(lo.ListOffsetsTopic, name=topic, partitions=(
                make(lo.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1, timestamp=-1),)),)),
         lambda r: [p.error_code for t in r.topics for p in t.partitions]),
        ("DescribeProducers", 61, 0, make(dp.DescribeProducersRequest, topics=(
            make(dp.TopicRequest, name=topic, partition_indexes=(0,)),)),
         lambda r: [p.error_code for t in r.topics for p in t.partitions]),
        ("OffsetFetch", 9, 7, make(of.OffsetFetchRequest, group_id="cold-group", require_stable=True, topics=(
            make(of.OffsetFetchRequestTopic, name=topic, partition_indexes=(0,)),)),
         lambda r: [r.error_code]),
        ("Metadata", 3, 12, make(md.MetadataRequest, topics=(make(md.MetadataRequestTopic, topic_id=None,
                                                                    name=topic),),
                                 allow_auto_topic_creation=False, include_topic_authorized_operations=False),
         lambda r: [t.error_code for t in r.topics]),
    ]


RETRIABLE = {ErrorCode.none, ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower,
             ErrorCode.leader_not_available, ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
             ErrorCode.coordinator_load_in_progress, ErrorCode.request_timed_out}


def test_reads_during_an_outage_get_named_retriable_errors_on_an_open_connection(broker: Broker) -> None:
    """Found by the chaos campaign (cloud, seed 4, database-outage): OffsetForLeaderEpoch during the
    outage raised the store's StorageUnavailableError out of the handler, and the broker closed the
    connection over an "internal error". Each read is answered, with a retriable error where it
    could not be served, and the connection goes on."""
    topic = broker.create_topic("cold-reads", 1)
    with Wire(broker.bootstrap_servers, timeout=30) as wire:
        assert produce(wire, topic, b"before") == (ErrorCode.none, 0)
    with Wire(broker.bootstrap_servers, timeout=30) as wire, database_outage(broker.config.store):
        for name, key, version, request, errors in read_requests(topic):
            codes = errors(wire.request(key, version, request))
            assert set(codes) <= RETRIABLE, (name, codes)
        assert produce(wire, topic, b"refused")[0] == ErrorCode.kafka_storage_error  # the connection is open


class CommitAnswerLost:
    """The broker's pool, except that the first kc_commit is applied by the database and then its
    answer is lost (the session ended, as pg_terminate_backend does after the commit), and the
    next connections are refused for `refused` attempts (the database not accepting connections)."""

    def __init__(self, pool, refused: int) -> None:
        self.pool, self.refused, self.cut = pool, refused, False

    def __getattr__(self, name: str):
        return getattr(self.pool, name)

    def acquire(self):
        import contextlib

        import asyncpg

        outer = self

        class Proxy:
            def __init__(self, conn) -> None:
                self.conn = conn

            def __getattr__(self, name: str):
                return getattr(self.conn, name)

            async def fetch(self, sql: str, *args):
                rows = await self.conn.fetch(sql, *args)
                if "kc_commit" in sql and not outer.cut:
                    outer.cut = True
                    raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation")
                return rows

        @contextlib.asynccontextmanager
        async def acquired():
            if outer.cut and outer.refused:
                outer.refused -= 1
                raise asyncpg.ObjectNotInPrerequisiteStateError("database is not currently accepting connections")
            async with outer.pool.acquire() as conn:
                yield Proxy(conn)

        return acquired()


def test_a_write_whose_commit_answer_was_lost_is_stored_once_with_the_idempotent_retry(
        broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the chaos campaign (cloud, seed 4, 2 min, database-outage): a batch whose commit the
    database applied just before the outage ended the session was answered KAFKA_STORAGE_ERROR after
    four quick attempts met a database refusing connections; the idempotent producer's retry was then
    stored as well (`idem.0|2173` at offsets 1444 and 1479). The commit is repeated until its outcome
    is known (a repeat returns the first call's offsets), so the retry finds the batch stored."""
    import kio.schema.init_producer_id.v4.request as ip

    topic = broker.create_topic("answer-lost", 1)
    with Wire(broker.bootstrap_servers, timeout=60) as wire:
        pid = wire.request(22, 4, make(ip.InitProducerIdRequest, transactional_id=None,
                                       transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                                       producer_epoch=-1))
        store = broker.server.cluster.store
        monkeypatch.setattr(store, "_pool", CommitAnswerLost(store._pool, refused=6))

        def send(seq: int, value: bytes) -> tuple[ErrorCode, int]:
            records = build_batch([Record(None, value, [], 1000)], producer_id=pid.producer_id,
                                  producer_epoch=pid.producer_epoch, base_sequence=seq)
            part = wire.request(0, 9, produce_request(topic, records)).responses[0].partition_responses[0]
            return part.error_code, part.base_offset

        deadline = time.monotonic() + 40
        while (answer := send(0, b"once"))[0] != ErrorCode.none:  # retried as the producer does
            assert time.monotonic() < deadline, answer
        assert answer == (ErrorCode.none, 0)
        assert send(1, b"next") == (ErrorCode.none, 1)
    assert [(r.offset, r.value) for r in broker.consume(topic, count=2)] == [(0, b"once"), (1, b"next")]
