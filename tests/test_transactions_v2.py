"""Transactions v2 (KIP-890 part 2) at the wire, as Kafka 4.1's coordinator answers them.

A v2 producer sends no AddPartitionsToTxn: its first Produce v12 to a
partition adds it; no AddOffsetsToTxn: TxnOffsetCommit v5 adds the group.
Every EndTxn v5 bumps the epoch and answers the new one; the markers carry
it, so a zombie of the previous transaction is refused at the partition.
compat_tests/test_transactions_java.py runs the Java client on it against
Kafka 4.1; these take the paths a client takes only on retries and races.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import whole_batches
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from kafkacompat.transactions import TxnState
from tests.test_bad_input import produce_request
from tests.test_transactions_protocol import fetch, init, txn_batch
from tests.wire import Wire, request_class

READ_COMMITTED, READ_UNCOMMITTED = 1, 0


@pytest.fixture
def wire(broker: Broker):
    with Wire(broker.bootstrap_servers) as connection:
        yield connection


def produce_v12(wire: Wire, txn_id: str, topic: str, batch: bytes, version: int = 12) -> ErrorCode:
    request = dataclasses.replace(produce_request(topic, batch, acks=-1), transactional_id=txn_id)
    fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
    cls = request_class(0, version)
    module = __import__(cls.__module__, fromlist=["TopicProduceData"])
    fields["topic_data"] = tuple(
        make(module.TopicProduceData, name=t.name, partition_data=tuple(
            make(module.PartitionProduceData, index=p.index, records=p.records) for p in t.partition_data))
        for t in request.topic_data)
    return wire.request(0, version, make(cls, **fields)).responses[0].partition_responses[0].error_code


def end_txn_v5(wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool) -> tuple[ErrorCode, int, int]:
    request = make(request_class(26, 5), transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                   committed=commit)
    answer = wire.request(26, 5, request)
    return answer.error_code, answer.producer_id, answer.producer_epoch


def markers(wire: Wire, topic: str) -> list[tuple[int, int]]:
    """(offset, producer epoch) of the control batches in partition 0."""
    records = fetch(wire, topic, READ_UNCOMMITTED).records or b""
    return [(h.base_offset, h.producer_epoch) for h in whole_batches(bytes(records)) if h.is_control]


def committed_values(broker: Broker, topic: str, timeout: float = 15.0) -> list[bytes]:
    """What a read_committed consumer reads of partition 0, up to the end of the log."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"read-{topic}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while consumer.position([TopicPartition(topic, 0)])[0].offset < end:
            assert time.monotonic() < deadline, f"read_committed did not reach offset {end}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(broker: Broker, wire: Wire,
                                                                         topic: str) -> None:
    started = init(wire, "v2-basic", version=5)
    pid, epoch = started.producer_id, started.producer_epoch
    assert produce_v12(wire, "v2-basic", topic, txn_batch(pid, epoch, 0, b"a")) == ErrorCode.none
    meta = broker.server.cluster.transactions.describe("v2-basic")
    assert meta.state is TxnState.ONGOING and [p[1:] for p in meta.partitions] == [(topic, 0)]
    assert fetch(wire, topic, READ_COMMITTED).last_stable_offset == 0  # open: the LSO holds
    assert end_txn_v5(wire, "v2-basic", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
    assert markers(wire, topic) == [(1, epoch + 1)]  # the marker carries the new epoch
    # a retry of that EndTxn (the epoch before the bump) is answered as the first was
    assert end_txn_v5(wire, "v2-basic", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
    assert end_txn_v5(wire, "v2-basic", pid, epoch, False)[0] == ErrorCode.invalid_txn_state
    # the next transaction runs under the new epoch, sequences from 0
    assert produce_v12(wire, "v2-basic", topic, txn_batch(pid, epoch + 1, 0, b"b")) == ErrorCode.none
    assert end_txn_v5(wire, "v2-basic", pid, epoch + 1, False) == (ErrorCode.none, pid, epoch + 2)
    answer = fetch(wire, topic, READ_COMMITTED)
    assert (answer.high_watermark, answer.last_stable_offset) == (4, 4)
    assert [(a.producer_id, a.first_offset) for a in answer.aborted_transactions] == [(pid, 2)]
    assert committed_values(broker, topic) == [b"a"]


def test_a_zombie_of_the_previous_transaction_is_refused(broker: Broker, wire: Wire, topic: str) -> None:
    started = init(wire, "v2-zombie", version=5)
    pid, epoch = started.producer_id, started.producer_epoch
    assert produce_v12(wire, "v2-zombie", topic, txn_batch(pid, epoch, 0, b"a")) == ErrorCode.none
    assert end_txn_v5(wire, "v2-zombie", pid, epoch, True)[0] == ErrorCode.none
    # a late batch of the committed transaction cannot open a new one under the old epoch
    assert produce_v12(wire, "v2-zombie", topic, txn_batch(pid, epoch, 1, b"late")) == \
        ErrorCode.invalid_producer_epoch
    # nor slip in at the partition while the new epoch's transaction is open there
    assert produce_v12(wire, "v2-zombie", topic, txn_batch(pid, epoch + 1, 0, b"b")) == ErrorCode.none
    assert produce_v12(wire, "v2-zombie", topic, txn_batch(pid, epoch, 1, b"late")) == \
        ErrorCode.invalid_producer_epoch
    assert end_txn_v5(wire, "v2-zombie", pid, epoch + 1, True)[0] == ErrorCode.none
    assert committed_values(broker, topic) == [b"a", b"b"]


def test_end_txn_v5_with_nothing_open(wire: Wire) -> None:
    started = init(wire, "v2-empty", version=5)
    pid, epoch = started.producer_id, started.producer_epoch
    assert end_txn_v5(wire, "v2-empty", pid, epoch, True)[0] == ErrorCode.invalid_txn_state
    assert end_txn_v5(wire, "v2-empty", pid, epoch, False) == (ErrorCode.none, pid, epoch + 1)  # still a new epoch
    assert end_txn_v5(wire, "v2-empty", pid, epoch - 5, False) == (ErrorCode.producer_fenced, -1, -1)
    assert end_txn_v5(wire, "v2-empty", pid + 1, epoch + 1, False) == \
        (ErrorCode.invalid_producer_id_mapping, -1, -1)


def test_txn_offset_commit_v5_adds_the_group(broker: Broker, wire: Wire, topic: str) -> None:
    started = init(wire, "v2-offsets", version=5)
    pid, epoch = started.producer_id, started.producer_epoch
    cls = request_class(28, 5)
    module = __import__(cls.__module__, fromlist=["TxnOffsetCommitRequestTopic"])
    request = make(cls, transactional_id="v2-offsets", group_id="v2-group", producer_id=pid, producer_epoch=epoch,
                   generation_id=-1, member_id="", group_instance_id=None, topics=(make(
                       module.TxnOffsetCommitRequestTopic, name=topic, partitions=(make(
                           module.TxnOffsetCommitRequestPartition, partition_index=0, committed_offset=7,
                           committed_leader_epoch=-1, committed_metadata=""),)),))
    answer = wire.request(28, 5, request)
    assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.none]
    assert broker.server.cluster.transactions.describe("v2-offsets").groups == {"v2-group"}
    assert end_txn_v5(wire, "v2-offsets", pid, epoch, True)[0] == ErrorCode.none
    assert _committed(broker, "v2-group", topic) == 7
    stale = dataclasses.replace(request, producer_epoch=epoch)  # the epoch before EndTxn's bump
    answer = wire.request(28, 5, stale)
    assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.invalid_producer_epoch]


def _committed(broker: Broker, group: str, topic: str) -> int:
    """The group's committed offset of partition 0, as a consumer reads it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return found.offset
    finally:
        consumer.close()


def test_epoch_overflow_at_end_txn_v5_gives_a_new_producer_id(broker: Broker, wire: Wire, topic: str) -> None:
    started = init(wire, "v2-overflow", version=5)
    pid = started.producer_id
    meta = broker.server.cluster.transactions.describe("v2-overflow")
    last = 2**15 - 2  # the last epoch a client may hold (Kafka keeps 32767 for fencing)
    meta.producer_epoch = last
    assert produce_v12(wire, "v2-overflow", topic, txn_batch(pid, last, 0, b"a")) == ErrorCode.none
    error, new_pid, new_epoch = end_txn_v5(wire, "v2-overflow", pid, last, True)
    assert error == ErrorCode.none and new_pid != pid and new_epoch == 0
    assert markers(wire, topic) == [(1, last + 1)]  # written under the old id's final epoch
    assert end_txn_v5(wire, "v2-overflow", pid, last, True) == (ErrorCode.none, new_pid, 0)  # its retry
    assert produce_v12(wire, "v2-overflow", topic, txn_batch(new_pid, 0, 0, b"b")) == ErrorCode.none
    assert end_txn_v5(wire, "v2-overflow", new_pid, 0, True) == (ErrorCode.none, new_pid, 1)
    assert committed_values(broker, topic) == [b"a", b"b"]


def test_older_produce_versions_still_need_add_partitions(wire: Wire, topic: str) -> None:
    started = init(wire, "v2-old-produce", version=5)
    pid, epoch = started.producer_id, started.producer_epoch
    assert produce_v12(wire, "v2-old-produce", topic, txn_batch(pid, epoch, 0, b"x"), version=11) == \
        ErrorCode.invalid_txn_state


def test_restart_keeps_an_implicitly_added_partition_in_its_transaction(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with Broker(data_dir=data) as first:
        port = first.port
        first.create_topic("v2-restart", partitions=1)
        with Wire(first.bootstrap_servers) as w:
            started = init(w, "v2-restart", version=5, timeout_ms=60_000)
            pid, epoch = started.producer_id, started.producer_epoch
            assert produce_v12(w, "v2-restart", "v2-restart", txn_batch(pid, epoch, 0, b"open")) == ErrorCode.none
    with Broker(data_dir=data, port=port) as second:
        meta = second.server.cluster.transactions.describe("v2-restart")
        assert meta.state is TxnState.ONGOING and meta.client_version == 2
        with Wire(second.bootstrap_servers) as w:
            deadline = time.monotonic() + 10
            while fetch(w, "v2-restart", READ_COMMITTED).error_code != ErrorCode.none:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert fetch(w, "v2-restart", READ_COMMITTED).last_stable_offset == 0  # still open after the restart
            assert end_txn_v5(w, "v2-restart", pid, epoch, True) == (ErrorCode.none, pid, epoch + 1)
            assert markers(w, "v2-restart") == [(1, epoch + 1)]
        assert committed_values(second, "v2-restart") == [b"open"]
    with Broker(data_dir=data, port=port) as third:  # and the new epoch survives another restart
        meta = third.server.cluster.transactions.describe("v2-restart")
        assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch + 1)
        with Wire(third.bootstrap_servers) as w:
            deadline = time.monotonic() + 10
            while fetch(w, "v2-restart", READ_COMMITTED).error_code != ErrorCode.none:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert produce_v12(w, "v2-restart", "v2-restart", txn_batch(pid, epoch, 1, b"zombie")) == \
                ErrorCode.invalid_producer_epoch
