"""WriteTxnMarkers at the wire: the answers Kafka's partition leader gives an operator's abort.

`kafka-transactions.sh abort` (Admin.abortTransaction) sends one marker;
these requests take every path: a stale producer epoch, an older coordinator
epoch, unknown topics and partitions, a commit marker with nothing open, a
marker of a newer epoch fencing the producer's later batches, and the
authorization Kafka asks for (ALTER or CLUSTER_ACTION on the cluster).
tests/parity/test_abort_transaction.py runs `marker_answers` on Kafka 4.1 too.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import kio.schema.write_txn_markers.v1.request as m
import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.groups.test_groups_protocol import find_coordinator
from tests.test_transactions_protocol import add_partitions, end_txn, fetch, init, produce_txn, txn_batch
from tests.wire import Wire

# (producer id, producer epoch, commit?, coordinator epoch, {topic: partitions})
Marker = tuple[int, int, bool, int, dict[str, tuple[int, ...]]]


def write_markers(wire: Wire, *markers: Marker) -> list[tuple[int, list[tuple[str, list[tuple[int, int]]]]]]:
    """WriteTxnMarkers v1 (the only version Kafka 4.1 serves): (producer id, [(topic, [(partition, error)])])."""
    request = make(m.WriteTxnMarkersRequest, markers=tuple(
        make(m.WritableTxnMarker, producer_id=pid, producer_epoch=epoch, transaction_result=commit,
             coordinator_epoch=coordinator_epoch, topics=tuple(
                 make(m.WritableTxnMarkerTopic, name=name, partition_indexes=parts) for name, parts in topics.items()))
        for pid, epoch, commit, coordinator_epoch, topics in markers))
    response = wire.request(27, 1, request)
    return [(r.producer_id, [(t.name, [(p.partition_index, ErrorCode(p.error_code)) for p in t.partitions])
                             for t in r.topics]) for r in response.markers]


def _error(answer: list[Any]) -> ErrorCode:
    """The one partition's error of a one-marker, one-partition answer."""
    [(_, [(_, [(_, error)])])] = answer
    return error


def _open_transaction(w: Wire, name: str) -> tuple[int, int]:
    """(producer id, epoch 1) of a transaction with one record open at offset 0 of `name`.

    Kafka creates its transaction log when a client first looks for a transaction coordinator, and
    loads it after: FindCoordinator and InitProducerId are retried until it answers.
    """
    deadline = time.monotonic() + 60
    while fetch(w, name, 0).error_code != ErrorCode.none:  # the new topic's leader is in place
        assert time.monotonic() < deadline, f"topic {name} has no leader"
        time.sleep(0.2)
    while True:
        find_coordinator(w, 4, [name], key_type=1)
        started = init(w, name)
        if started.error_code == ErrorCode.none:
            break
        assert time.monotonic() < deadline, f"InitProducerId: {started.error_code!r}"
        time.sleep(0.3)
    started = init(w, name)  # a second producer of the id: epoch 1, so that epoch 0 is a stale one
    pid, epoch = started.producer_id, started.producer_epoch
    assert add_partitions(w, name, pid, epoch, name) == [ErrorCode.none]
    assert produce_txn(w, name, name, txn_batch(pid, epoch, 0, b"hung")) == ErrorCode.none
    return pid, epoch


def _committed_view(w: Wire, name: str) -> tuple[int, int, list[int]]:
    """(high watermark, last stable offset, first offsets of aborted transactions) of a read_committed fetch."""
    answer = fetch(w, name, 1)
    return answer.high_watermark, answer.last_stable_offset, [a.first_offset for a in answer.aborted_transactions]


def marker_answers(bootstrap: str, name: str) -> list[tuple[object, ...]]:
    """Each step's answer, ids left out: the same on Kafka 4.1 and kafkacompat."""
    create_topic(bootstrap, name)
    out: list[tuple[object, ...]] = []
    with Wire(bootstrap) as w:
        pid, epoch = _open_transaction(w, name)
        out.append(("open", _committed_view(w, name)))
        out.append(("stale producer epoch", _error(write_markers(w, (pid, epoch - 1, False, 0, {name: (0,)})))))
        unknown = write_markers(w, (pid, epoch, False, 0, {name: (7,), f"{name}-absent": (0,)}))
        # sorted: Kafka answers topics in the order of a hash map
        out.append(("unknown partition and topic", sorted((t.replace(name, "<t>"), p) for t, p in unknown[0][1])))
        out.append(("no markers", write_markers(w)))
        out.append(("abort", _error(write_markers(w, (pid, epoch, False, 2, {name: (0,)})))))
        out.append(("after the abort", _committed_view(w, name)))
        out.append(("older coordinator epoch", _error(write_markers(w, (pid, epoch, False, 1, {name: (0,)})))))
        out.append(("commit, nothing open", _error(write_markers(w, (pid, epoch, True, 2, {name: (0,)})))))
        out.append(("newer producer epoch", _error(write_markers(w, (pid, epoch + 1, False, 2, {name: (0,)})))))
        out.append(("the producer's next batch", produce_txn(w, name, name, txn_batch(pid, epoch, 1, b"late"))))
        out.append(("the producer ends its transaction", end_txn(w, name, pid, epoch, False)))
        out.append(("at the end", _committed_view(w, name)))
    return out


@pytest.mark.also_on_cloud
def test_marker_answers(broker: Broker) -> None:
    """What Kafka 4.1 answers (tests/parity/test_abort_transaction.py compares the two)."""
    answers = dict((step, rest[0]) for step, *rest in marker_answers(broker.bootstrap_servers,
                                                                      f"markers-{uuid.uuid4().hex[:8]}"))
    unknown = ErrorCode.unknown_topic_or_partition
    assert answers == {
        "open": (1, 0, []),  # the open transaction holds read_committed consumers at offset 0
        "stale producer epoch": ErrorCode.invalid_producer_epoch,
        "unknown partition and topic": [("<t>", [(7, unknown)]), ("<t>-absent", [(0, unknown)])],
        "no markers": [],
        "abort": ErrorCode.none,
        "after the abort": (2, 2, [0]),  # the marker at 1 ends it: consumers move on and drop offset 0
        "older coordinator epoch": ErrorCode.transaction_coordinator_fenced,
        "commit, nothing open": ErrorCode.none,  # written, as on Kafka; nothing changes for consumers
        "newer producer epoch": ErrorCode.none,
        "the producer's next batch": ErrorCode.invalid_producer_epoch,  # fenced by the marker's epoch
        "the producer ends its transaction": ErrorCode.none,  # its coordinator's marker is refused there
        "at the end": (4, 4, [0]),
    }


def test_a_markers_epochs_still_fence_after_a_restart(tmp_path: Path) -> None:
    """The producer and coordinator epochs of an operator's marker are read back from the log."""
    with Broker(data_dir=str(tmp_path)) as first:
        topic = create_topic(first.bootstrap_servers, "fenced-after-restart")
        with Wire(first.bootstrap_servers) as w:
            assert _error(write_markers(w, (4242, 3, False, 7, {topic: (0,)}))) == ErrorCode.none
    with Broker(data_dir=str(tmp_path)) as again, Wire(again.bootstrap_servers) as w:
        answers = [_error(write_markers(w, (4242, 3, False, 6, {topic: (0,)}))),
                   _error(write_markers(w, (4242, 2, False, 7, {topic: (0,)}))),
                   _error(write_markers(w, (4242, 3, True, 7, {topic: (0,)})))]
    assert answers == [ErrorCode.transaction_coordinator_fenced, ErrorCode.invalid_producer_epoch, ErrorCode.none]


def test_no_marker_goes_into_consumer_offsets(broker: Broker) -> None:
    """Offsets are cursors here and a transaction's offsets wait in its coordinator: nothing to mark there."""
    with Wire(broker.bootstrap_servers) as w:
        find_coordinator(w, 4, ["any-group"])  # makes __consumer_offsets, as a group's first client does
        answer = write_markers(w, (4242, 0, False, 0, {"__consumer_offsets": (0,)}))
    assert _error(answer) == ErrorCode.invalid_topic_exception


def test_kafka_python_admin_aborts_an_open_transaction(broker: Broker) -> None:
    """kafka-python's KafkaAdminClient finds the open transaction (describe_producers) and aborts it
    (abort_transaction, WriteTxnMarkers); its read_committed consumer then reads past it."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import AbortTransactionSpec, KafkaAdminClient

    topic = create_topic(broker.bootstrap_servers, f"kp-abort-{uuid.uuid4().hex[:8]}")
    hung = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": topic})
    hung.init_transactions(15)
    hung.begin_transaction()
    hung.produce(topic, b"hung")
    assert hung.flush(15) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, b"after")
    assert plain.flush(15) == 0
    partition = TopicPartition(topic, 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        [state] = admin.describe_producers([partition])[partition].active_producers
        assert state.current_transaction_start_offset == 0
        admin.abort_transaction(AbortTransactionSpec(partition, state.producer_id, state.producer_epoch,
                                                     max(state.coordinator_epoch, 0)))
        [state] = admin.describe_producers([partition])[partition].active_producers
        assert state.current_transaction_start_offset == -1
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, isolation_level="read_committed",
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    try:
        first = next(iter(consumer))
    finally:
        consumer.close()
    assert (first.offset, first.value) == (1, b"after")  # the aborted record is dropped, the LSO moved on
    hung.abort_transaction(15)
