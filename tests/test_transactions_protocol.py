"""The transactional APIs at the wire: Kafka's error codes by case and version.

Clients only exercise the paths that work; these requests take the others:
timeouts out of bounds, stale epochs (PRODUCER_FENCED, or
INVALID_PRODUCER_EPOCH for versions before it existed), a transactional
batch outside its transaction, the brokers' verify-only AddPartitionsToTxn,
Fetch read_committed answers, and the admin listings.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
import threading
import time
import uuid

import pytest
from kafkacompat.protocol.control_records import set_attributes
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import ATTR_TRANSACTIONAL, Record, build_batch, iter_records
from kafkacompat.storage import StorageUnavailableError
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.test_bad_input import produce_request
from tests.wire import Wire, request_class


@pytest.fixture
def wire(broker: Broker):
    with Wire(broker.bootstrap_servers) as connection:
        yield connection


def init(wire: Wire, txn_id: str, timeout_ms: int = 60_000, version: int = 4, pid: int = -1, epoch: int = -1):
    request = make(request_class(22, version), transactional_id=txn_id,
                   transaction_timeout=datetime.timedelta(milliseconds=timeout_ms), producer_id=pid,
                   producer_epoch=epoch)
    return wire.request(22, version, request)


def add_partitions(wire: Wire, txn_id: str, pid: int, epoch: int, topic: str, version: int = 3, partitions=(0,)):
    cls = request_class(24, version)
    module = sys.modules[cls.__module__]
    request = make(cls, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch,
                   v3_and_below_topics=(make(module.AddPartitionsToTxnTopic, name=topic, partitions=partitions),))
    response = wire.request(24, version, request)
    return [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]


def end_txn(wire: Wire, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> ErrorCode:
    request = make(request_class(26, version), transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                   committed=commit)
    return wire.request(26, version, request).error_code


def txn_batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    batch = build_batch([Record(None, v, [], 1) for v in values], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq)
    return set_attributes(batch, ATTR_TRANSACTIONAL)


def produce_txn(wire: Wire, txn_id: str | None, topic: str, batch: bytes) -> ErrorCode:
    request = dataclasses.replace(produce_request(topic, batch, acks=-1), transactional_id=txn_id)
    return wire.request(0, 9, request).responses[0].partition_responses[0].error_code


def fetch(wire: Wire, topic: str, isolation: int):
    import kio.schema.fetch.v11.request as m

    request = make(
        m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
        isolation_level=isolation, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
        topics=(make(m.FetchTopic, topic=topic, partitions=(make(
            m.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),),
    )
    return wire.request(1, 11, request).responses[0].partitions[0]


def test_transaction_timeout_bounds(wire: Wire) -> None:
    assert init(wire, "bounds", timeout_ms=0).error_code == ErrorCode.invalid_transaction_timeout
    assert init(wire, "bounds", timeout_ms=900_001).error_code == ErrorCode.invalid_transaction_timeout
    ok = init(wire, "bounds", timeout_ms=900_000)
    assert ok.error_code == ErrorCode.none and ok.producer_epoch == 0
    again = init(wire, "bounds")
    assert (again.producer_id, again.producer_epoch) == (ok.producer_id, 1)  # same id, next epoch


def test_stale_epochs_are_fenced_with_the_code_each_version_knows(broker: Broker, wire: Wire, topic: str) -> None:
    txn = f"fenced-{uuid.uuid4().hex[:6]}"
    old = init(wire, txn)
    new = init(wire, txn)
    assert add_partitions(wire, txn, old.producer_id, old.producer_epoch, topic, version=3) == [ErrorCode.producer_fenced]
    assert add_partitions(wire, txn, old.producer_id, old.producer_epoch, topic, version=1) == \
        [ErrorCode.invalid_producer_epoch]
    assert end_txn(wire, txn, old.producer_id, old.producer_epoch, True, version=3) == ErrorCode.producer_fenced
    assert end_txn(wire, txn, old.producer_id, old.producer_epoch, True, version=1) == ErrorCode.invalid_producer_epoch
    assert add_partitions(wire, txn, new.producer_id + 1, new.producer_epoch, topic) == \
        [ErrorCode.invalid_producer_id_mapping]
    # KIP-360: a producer bumping its own epoch must hold the current one
    assert init(wire, txn, pid=old.producer_id, epoch=old.producer_epoch - 1).error_code == ErrorCode.producer_fenced
    assert init(wire, txn, version=3, pid=old.producer_id, epoch=old.producer_epoch - 1).error_code == \
        ErrorCode.invalid_producer_epoch


def test_an_end_while_the_last_commits_markers_are_owed_is_concurrent_transactions(
        broker: Broker, wire: Wire, topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store refuses a commit's markers (an outage): the commit is decided (PrepareCommit stored) and
    answered, and finished in the background. The producer's next transaction, aborted before anything
    was added to it, sends EndTxn(abort) meanwhile. Kafka's coordinator answers any EndTxn while its
    transition to Complete* is pending CONCURRENT_TRANSACTIONS (retriable); INVALID_TXN_STATE here was
    fatal to librdkafka producers in the cloud fault campaign, just after a database outage began."""
    coordinator = broker.server.cluster.transactions
    real, away = coordinator._write_markers, threading.Event()

    async def refused(meta, control):
        if away.is_set():
            raise StorageUnavailableError("writing the markers failed: the database is unavailable")
        await real(meta, control)

    monkeypatch.setattr(coordinator, "_write_markers", refused)
    started = init(wire, "owed")
    pid, epoch = started.producer_id, started.producer_epoch
    assert add_partitions(wire, "owed", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "owed", topic, txn_batch(pid, epoch, 0, b"in")) == ErrorCode.none
    away.set()
    assert end_txn(wire, "owed", pid, epoch, True) == ErrorCode.none  # decided; its markers are owed
    assert end_txn(wire, "owed", pid, epoch, False) == ErrorCode.concurrent_transactions
    assert end_txn(wire, "owed", pid, epoch, True) == ErrorCode.concurrent_transactions
    away.clear()
    deadline = time.monotonic() + 30
    while end_txn(wire, "owed", pid, epoch, True) != ErrorCode.none:  # the retry of a finished commit
        assert time.monotonic() < deadline, "the commit was never finished after the store came back"
        time.sleep(0.1)


def test_unknown_partitions_fail_the_whole_add(wire: Wire, topic: str) -> None:
    started = init(wire, "unknown-parts")
    errors = add_partitions(wire, "unknown-parts", started.producer_id, started.producer_epoch, topic,
                            partitions=(0, 7))
    assert errors == [ErrorCode.operation_not_attempted, ErrorCode.unknown_topic_or_partition]
    assert end_txn(wire, "unknown-parts", started.producer_id, started.producer_epoch, True) == \
        ErrorCode.invalid_txn_state  # nothing was added: no transaction to end


def test_a_transactional_batch_outside_its_transaction_is_refused(broker: Broker, wire: Wire, topic: str) -> None:
    started = init(wire, "outside")
    pid, epoch = started.producer_id, started.producer_epoch
    assert produce_txn(wire, "outside", topic, txn_batch(pid, epoch, 0, b"x")) == ErrorCode.invalid_txn_state
    assert produce_txn(wire, None, topic, txn_batch(pid, epoch, 0, b"x")) == \
        ErrorCode.transactional_id_authorization_failed  # as Kafka 4.1 answers
    assert add_partitions(wire, "outside", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "outside", topic, txn_batch(pid, epoch, 0, b"in")) == ErrorCode.none
    bumped = init(wire, "outside")  # aborts the open transaction (CONCURRENT_TRANSACTIONS: retry)
    assert bumped.error_code == ErrorCode.concurrent_transactions
    bumped = init(wire, "outside")
    assert bumped.error_code == ErrorCode.none and bumped.producer_epoch == epoch + 2
    assert produce_txn(wire, "outside", topic, txn_batch(pid, epoch, 1, b"zombie")) == ErrorCode.invalid_producer_epoch
    assert [m.value for m in broker.consume(topic)] == [b"in"]  # and its abort marker


def test_read_committed_fetch_stops_at_the_lso_and_lists_aborts(broker: Broker, wire: Wire, topic: str) -> None:
    started = init(wire, "fetcher")
    pid, epoch = started.producer_id, started.producer_epoch
    assert add_partitions(wire, "fetcher", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "fetcher", topic, txn_batch(pid, epoch, 0, b"a1", b"a2")) == ErrorCode.none
    assert end_txn(wire, "fetcher", pid, epoch, False) == ErrorCode.none  # abort marker at offset 2
    assert add_partitions(wire, "fetcher", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "fetcher", topic, txn_batch(pid, epoch, 2, b"open")) == ErrorCode.none  # offset 3
    committed = fetch(wire, topic, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 3)
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(pid, 0)]
    assert [r.value for r in iter_records(committed.records)] == [b"a1", b"a2"]  # the client drops them
    uncommitted = fetch(wire, topic, 0)
    assert uncommitted.aborted_transactions is None and uncommitted.last_stable_offset == 3
    assert [r.value for r in iter_records(uncommitted.records)] == [b"a1", b"a2", b"open"]
    assert end_txn(wire, "fetcher", pid, epoch, True) == ErrorCode.none
    assert end_txn(wire, "fetcher", pid, epoch, True) == ErrorCode.none  # a retried EndTxn
    assert end_txn(wire, "fetcher", pid, epoch, False) == ErrorCode.invalid_txn_state
    assert fetch(wire, topic, 1).last_stable_offset == 5


def test_verify_only_add_partitions_v4(wire: Wire, topic: str) -> None:
    import kio.schema.add_partitions_to_txn.v4.request as m

    started = init(wire, "verify")
    pid, epoch = started.producer_id, started.producer_epoch
    assert add_partitions(wire, "verify", pid, epoch, topic) == [ErrorCode.none]

    def verify(partitions: tuple[int, ...]) -> list[ErrorCode]:
        request = make(m.AddPartitionsToTxnRequest, transactions=(make(
            m.AddPartitionsToTxnTransaction, transactional_id="verify", producer_id=pid, producer_epoch=epoch,
            verify_only=True, topics=(make(m.AddPartitionsToTxnTopic, name=topic, partitions=partitions),)),))
        response = wire.request(24, 4, request)
        (result,) = response.results_by_transaction
        return [p.partition_error_code for t in result.topic_results for p in t.results_by_partition]

    assert verify((0,)) == [ErrorCode.none]


def test_describe_and_list_transactions(wire: Wire, topic: str) -> None:
    import kio.schema.describe_transactions.v0.request as d
    import kio.schema.list_transactions.v1.request as lt

    started = init(wire, "listed")
    assert add_partitions(wire, "listed", started.producer_id, started.producer_epoch, topic) == [ErrorCode.none]
    # (kio's reader refuses the -1 start time Kafka sends for an unknown id, so only a known one here)
    described = wire.request(65, 0, make(d.DescribeTransactionsRequest, transactional_ids=("listed",)))
    (listed,) = described.transaction_states
    assert (listed.transaction_state, listed.producer_id) == ("Ongoing", started.producer_id)
    assert [(t.topic, t.partitions) for t in listed.topics] == [(topic, (0,))]

    def list_ids(states: tuple[str, ...], duration: int = -1) -> tuple[set[str], tuple[str, ...]]:
        response = wire.request(66, 1, make(lt.ListTransactionsRequest, state_filters=states,
                                            producer_id_filters=(), duration_filter=duration))
        return {t.transactional_id for t in response.transaction_states}, response.unknown_state_filters

    assert "listed" in list_ids(("Ongoing",))[0]
    assert "listed" not in list_ids(("CompleteCommit",))[0]
    assert list_ids(("Bogus",)) == (set(), ("Bogus",))
    assert "listed" not in list_ids((), duration=3_600_000)[0]



def test_a_record_given_the_sequence_of_an_aborted_one_is_stored(broker: Broker, wire: Wire, topic: str) -> None:
    """librdkafka's abort purges the records still in its queue, one of them sent and stored while its
    broker was paused, and gives the next record the purged one's sequence number. Answered as a
    duplicate of the aborted record (as Kafka does), the next record was never stored though its
    transaction committed (the 60-minute cloud run, issue 28). After an abort under the same epoch the
    producer's next batch is taken with any sequence; a retry of it is matched as ever."""
    started = init(wire, "purger")
    pid, epoch = started.producer_id, started.producer_epoch
    assert add_partitions(wire, "purger", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "purger", topic, txn_batch(pid, epoch, 0, b"kept")) == ErrorCode.none
    assert end_txn(wire, "purger", pid, epoch, True) == ErrorCode.none
    assert add_partitions(wire, "purger", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "purger", topic, txn_batch(pid, epoch, 1, b"purged")) == ErrorCode.none
    assert end_txn(wire, "purger", pid, epoch, False) == ErrorCode.none
    assert add_partitions(wire, "purger", pid, epoch, topic) == [ErrorCode.none]
    assert produce_txn(wire, "purger", topic, txn_batch(pid, epoch, 1, b"next")) == ErrorCode.none
    assert produce_txn(wire, "purger", topic, txn_batch(pid, epoch, 1, b"next")) == ErrorCode.none  # a retry
    assert produce_txn(wire, "purger", topic, txn_batch(pid, epoch, 5, b"gap")) == ErrorCode.out_of_order_sequence_number
    assert end_txn(wire, "purger", pid, epoch, True) == ErrorCode.none
    records = fetch(wire, topic, 0)
    assert [r.value for r in iter_records(records.records)] == [b"kept", b"purged", b"next"]
