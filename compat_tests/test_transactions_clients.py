"""Transactions as Python clients use them: confluent-kafka (librdkafka) and aiokafka.

Each test is a row of COMPATIBILITY.md under the client it drives.

Consume-transform-produce with send_offsets_to_transaction, commit and
abort visibility per isolation level, the last stable offset held by an
open transaction, idempotence inside a transaction across a lost answer,
and restarts mid-transaction (open: aborted by its timeout; EndTxn
accepted: finished on start) -- never half visible.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kafkacompat.testing import Broker
from kafkacompat.transactions import TxnState

from .conftest import compat_broker, create_topic


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with compat_broker(transaction_abort_timed_out_transaction_cleanup_interval_ms=200) as running:
        yield running


def new_topic(broker: Broker, prefix: str, partitions: int = 1) -> str:
    name = _name(prefix)
    create_topic(broker, name, partitions)
    return name


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def read_all(bootstrap: str, topic: str, isolation: str, partitions: int = 1, timeout: float = 15) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record an isolation level shows, up to its end offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("reader"), "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic} ({isolation}) did not reach its end: {got}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                at_end.add(msg.partition())  # partition EOF
                continue
            at_end.discard(msg.partition())
            got.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return sorted(got)


def txn_producer(bootstrap: str, txn_id: str, **conf: object) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    producer.init_transactions(15)
    return producer


@pytest.mark.librdkafka
def test_transactions_commit_and_abort_visibility(broker: Broker) -> None:
    topic = new_topic(broker, "vis", 2)
    producer = txn_producer(broker.bootstrap_servers, _name("tx"))
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"c%d" % i, partition=i % 2)
    producer.commit_transaction(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"a%d" % i, partition=i % 2)
    producer.flush(15)
    producer.abort_transaction(15)
    committed = read_all(broker.bootstrap_servers, topic, "read_committed", 2)
    everything = read_all(broker.bootstrap_servers, topic, "read_uncommitted", 2)
    assert [v for _, _, v in committed] == [b"c0", b"c2", b"c1", b"c3"]
    assert sorted(v for _, _, v in everything) == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2", b"c3"]
    # markers take offsets: partition 0 holds c0 c2 COMMIT a0 a2 ABORT
    assert [(p, o) for p, o, v in everything if p == 0] == [(0, 0), (0, 1), (0, 3), (0, 4)]


@pytest.mark.librdkafka
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_transactions_consume_transform_produce(broker: Broker, protocol: str) -> None:
    """Both group protocols: a KIP-848 member's group metadata carries its member epoch into TxnOffsetCommit."""
    bootstrap = broker.bootstrap_servers
    source = new_topic(broker, "ctp-in")
    sink = new_topic(broker, "ctp-out")
    group = _name("ctp")
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        plain.produce(source, value=b"v%02d" % i)
    assert plain.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "group.protocol": protocol})
    consumer.subscribe([source])
    producer = txn_producer(bootstrap, _name("ctp-tx"))
    copied, rounds = 0, 0
    deadline = time.monotonic() + 30
    try:
        while copied < 20:
            assert time.monotonic() < deadline, f"copied {copied} of 20"
            batch = consumer.consume(5, 0.5)
            if not batch:
                continue
            producer.begin_transaction()
            for msg in batch:
                producer.produce(sink, value=msg.value().upper())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 15)
            rounds += 1
            if rounds == 1:  # the first round is aborted: output gone, offsets not committed
                producer.abort_transaction(15)
                for tp in consumer.committed(consumer.assignment(), 10):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(15)
            copied += len(batch)
    finally:
        consumer.close()
    assert [v for _, _, v in read_all(bootstrap, sink, "read_committed")] == [b"V%02d" % i for i in range(20)]
    assert broker.committed(group, source) == {0: 20}


@pytest.mark.librdkafka
def test_transactions_open_one_holds_the_lso_until_its_timeout(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = new_topic(broker, "lso")
    broker.produce(topic, b"before", partition=0)
    producer = txn_producer(bootstrap, _name("hang"), **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.flush(10)
    broker.produce(topic, b"after", partition=0)
    assert read_all(bootstrap, topic, "read_committed") == [(0, 0, b"before")]
    deadline = time.monotonic() + 15
    while [v for _, _, v in read_all(bootstrap, topic, "read_committed")] != [b"before", b"after"]:
        assert time.monotonic() < deadline, "the timed-out transaction was not aborted"
        time.sleep(0.2)
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction(10)
    assert "fenced" in str(fenced.value).lower() or "epoch" in str(fenced.value).lower()


@pytest.mark.librdkafka
def test_transactions_second_producer_fences_the_first(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = new_topic(broker, "fence")
    txn_id = _name("shared")
    first = txn_producer(bootstrap, txn_id)
    first.begin_transaction()
    first.produce(topic, value=b"zombie")
    first.flush(10)
    second = txn_producer(bootstrap, txn_id)  # aborts the zombie's open transaction
    second.begin_transaction()
    second.produce(topic, value=b"current")
    second.commit_transaction(10)
    with pytest.raises(KafkaException):
        first.produce(topic, value=b"late")
        first.commit_transaction(10)
    assert [v for _, _, v in read_all(bootstrap, topic, "read_committed")] == [b"current"]


@pytest.mark.librdkafka
def test_transactions_retried_batch_written_once(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = new_topic(broker, "idem")
    producer = txn_producer(bootstrap, _name("idem-tx"))
    producer.begin_transaction()
    broker.faults.disconnect("Produce", count=1, after_handling=True)  # appended, answer lost: a retry
    for i in range(10):
        producer.produce(topic, value=b"m%d" % i)
    producer.commit_transaction(20)
    assert broker.faults.fired("Produce") == 1
    assert [v for _, _, v in read_all(bootstrap, topic, "read_committed")] == [b"m%d" % i for i in range(10)]


@pytest.mark.aiokafka
def test_transactions_consume_transform_produce_aiokafka(broker: Broker) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    bootstrap = broker.bootstrap_servers
    source = new_topic(broker, "aio-in")
    sink = new_topic(broker, "aio-out")
    group = _name("aio")
    for i in range(5):
        broker.produce(source, b"x%d" % i, partition=0)

    async def run() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=_name("aio-tx"))
        consumer = aiokafka.AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group,
                                             enable_auto_commit=False, auto_offset_reset="earliest",
                                             isolation_level="read_committed")
        await producer.start()
        await consumer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait(sink, b"dropped", partition=0)
            await producer.abort_transaction()
            got = await consumer.getmany(timeout_ms=5000, max_records=5)
            records = [r for batch in got.values() for r in batch]
            assert len(records) == 5
            async with producer.transaction():
                for r in records:
                    await producer.send(sink, r.value.upper(), partition=0)
                tp = aiokafka.TopicPartition(source, 0)
                await producer.send_offsets_to_transaction({tp: records[-1].offset + 1}, group)
        finally:
            await consumer.stop()
            await producer.stop()

    asyncio.run(run())
    assert [v for _, _, v in read_all(bootstrap, sink, "read_committed")] == [b"X%d" % i for i in range(5)]
    assert b"dropped" in [v for _, _, v in read_all(bootstrap, sink, "read_uncommitted")]
    assert broker.committed(group, source) == {0: 5}


@pytest.mark.librdkafka
def test_transactions_restart_with_one_open_aborts_it_on_timeout(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    settings = {"transaction_abort_timed_out_transaction_cleanup_interval_ms": 200}
    with compat_broker(data_dir=data, **settings) as first:
        port = first.port
        topic = new_topic(first, "orders")
        producer = txn_producer(first.bootstrap_servers, "restart-open", **{"transaction.timeout.ms": 3000})
        producer.begin_transaction()
        producer.produce(topic, value=b"uncommitted")
        producer.flush(10)
    with compat_broker(data_dir=data, port=port, **settings) as second:
        bootstrap = second.bootstrap_servers
        second.produce(topic, b"later", partition=0)
        assert read_all(bootstrap, topic, "read_committed") == []  # LSO held by the open transaction
        deadline = time.monotonic() + 15
        while read_all(bootstrap, topic, "read_committed") != [(0, 1, b"later")]:
            assert time.monotonic() < deadline, "the open transaction was not aborted after the restart"
            time.sleep(0.2)
        assert second.server.cluster.transactions.describe("restart-open").state is TxnState.COMPLETE_ABORT
    with compat_broker(data_dir=data, port=port, **settings) as third:  # the abort itself survives a restart
        assert read_all(third.bootstrap_servers, topic, "read_committed") == [(0, 1, b"later")]
        assert [v for _, _, v in read_all(third.bootstrap_servers, topic, "read_uncommitted")] == [b"uncommitted", b"later"]


@pytest.mark.librdkafka
def test_transactions_restart_after_end_txn_accepted_finishes_markers(tmp_path: Path) -> None:
    """A stop between the PrepareCommit record and the markers: the start writes them."""
    data = str(tmp_path / "data")
    with compat_broker(data_dir=data) as first:
        port = first.port
        a = new_topic(first, "left", 2)
        producer = txn_producer(first.bootstrap_servers, "restart-commit")
        producer.begin_transaction()
        for i in range(4):
            producer.produce(a, value=b"t%d" % i, partition=i % 2)
        producer.flush(10)
        coordinator = first.server.cluster.transactions
        meta = coordinator.describe("restart-commit")
        assert meta.state is TxnState.ONGOING and len(meta.partitions) == 2

        async def accept_end_txn_then_stop() -> None:
            meta.state = TxnState.PREPARE_COMMIT
            await coordinator._persist(meta)  # what EndTxn records before writing markers

        first.call(accept_end_txn_then_stop())
    with compat_broker(data_dir=data, port=port) as second:
        assert second.server.cluster.transactions.describe("restart-commit").state is TxnState.COMPLETE_COMMIT
        got = read_all(second.bootstrap_servers, a, "read_committed", 2)
        assert sorted(v for _, _, v in got) == [b"t0", b"t1", b"t2", b"t3"]


class _ServedBroker:
    """`python -m kafkacompat serve` on a data dir, to be killed with SIGKILL as a crash would."""

    def __init__(self, data_dir: str, port: int) -> None:
        self.data_dir, self.port = data_dir, port
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "KAFKACOMPAT_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "200",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                           os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", self.data_dir, "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "WARNING"], env=env)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, "the broker exited at start"
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "the broker did not start listening"
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.mark.librdkafka
def test_transactions_broker_killed_mid_transaction(tmp_path: Path) -> None:
    """kill -9 with one transaction committed and one open: the first stays, the second never shows."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    served = _ServedBroker(str(tmp_path / "data"), port)
    served.start()
    try:
        admin_topic = "crash"
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        admin.create_topics([NewTopic(admin_topic, 2, 1)])[admin_topic].result(15)
        done = txn_producer(served.bootstrap, "crash-committed")
        done.begin_transaction()
        for i in range(6):
            done.produce(admin_topic, value=b"kept%d" % i, partition=i % 2)
        done.commit_transaction(15)
        hanging = txn_producer(served.bootstrap, "crash-open", **{"transaction.timeout.ms": 2000})
        hanging.begin_transaction()
        for i in range(4):
            hanging.produce(admin_topic, value=b"lost%d" % i, partition=i % 2)
        hanging.flush(10)
        served.kill()
        served.start()
        deadline = time.monotonic() + 20
        while True:
            seen = sorted(v for _, _, v in read_all(served.bootstrap, admin_topic, "read_committed", 2))
            assert not any(v.startswith(b"lost") for v in seen), seen
            if seen == sorted(b"kept%d" % i for i in range(6)):
                break
            assert time.monotonic() < deadline, f"after the crash read_committed shows {seen}"
            time.sleep(0.3)
        everything = [v for _, _, v in read_all(served.bootstrap, admin_topic, "read_uncommitted", 2)]
        assert sorted(everything) == sorted([b"kept%d" % i for i in range(6)] + [b"lost%d" % i for i in range(4)])
    finally:
        served.kill()
