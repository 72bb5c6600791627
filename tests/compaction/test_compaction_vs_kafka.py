"""Compaction side by side with Apache Kafka 4.1: the same steps, the same consumer view.

Both brokers get the same produce sequence (one record per batch, so both
logs hold the same batches), with segment.ms small and
min.cleanable.dirty.ratio=0.01 so cleanings happen within seconds. A
consumer reading from the beginning must then see the same offsets, keys
and values on both: after the first cleaning (superseded records gone,
tombstones kept) and after the next (tombstones past delete.retention.ms
gone). Records of an aborted transaction go with a cleaning on both, and
committed transactional records compact like others; later cleanings remove
the abort marker, left with nothing of its transaction, and both logs then
hold the same batches at the same offsets. A record without a key is
refused by both with the same answer.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch

from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import ReferenceKafka, unavailable
from kafkacompat.testing.services import TEST_STORE_VARIABLE, ServiceUnavailable
from tests.test_fetch_and_offsets import list_offsets
from tests.wire import Wire

pytestmark = pytest.mark.slow

SEGMENT_MS = 1500  # longer than producing the history takes, so it all lands in one segment
CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "0"}
HISTORY = [("a", "1"), ("b", "1"), ("c", "1"), ("a", "2"), ("b", None), ("c", "2"), ("d", "1"), ("a", "3"),
           ("e", "1"), ("e", None)]
View = list[tuple[int, str, str | None]]


@pytest.fixture(scope="module")
def kafka() -> Iterator[ReferenceKafka]:
    if unavailable():
        pytest.skip(unavailable())
    running = ReferenceKafka(**{"log.cleaner.backoff.ms": "200", "group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def kafka_side() -> dict[str, Any]:
    """Kafka's side of each comparison, by test: taken once and compared with every engine of
    `ours`, since what Kafka does cannot depend on which engine kafkacompat runs on."""
    return {}


def once(runs: dict[str, Any], name: str, take: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """Kafka's side of `name`, started the first time it is asked for and run while the caller runs
    kafkacompat's: the two sides are separate brokers, and each is mostly waiting on its log cleaner."""
    if name not in runs:
        beside = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafka-side")
        runs[name] = beside.submit(take)
        beside.shutdown(wait=False)  # its one thread ends with `take`
    return runs[name]


@pytest.fixture(scope="module", params=["disk", "cloud"])
def ours(request) -> Iterator[Broker]:
    """kafkacompat on disk, and on the cloud engine (PostgreSQL + S3, its leader cleaning)."""
    if request.param == "cloud":
        with pytest.MonkeyPatch.context() as env:
            env.setenv(TEST_STORE_VARIABLE, "cloud")
            try:
                broker = Broker(log_cleaner_backoff_ms=200)
            except ServiceUnavailable as exc:
                pytest.skip(str(exc))
    else:
        broker = Broker(data_dir="tmp", log_cleaner_backoff_ms=200)
    with broker as running:
        yield running


def read_view(bootstrap: str, topic: str, isolation: str = "read_committed") -> View:
    """Every record of the topic's one partition from the beginning to the end, as a consumer sees it
    (assigned, not subscribed: a group join per look would only add its own wait)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.partition.eof": True, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: View = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                continue
            value = msg.value()
            out.append((msg.offset(), msg.key().decode(), None if value is None else value.decode()))
    finally:
        consumer.close()
    pytest.fail(f"no end of {topic} within 30 s: {out}")


def wait_view(bootstrap: str, topic: str, done: Callable[[View], bool], isolation: str = "read_committed") -> View:
    deadline = time.monotonic() + 60
    while True:
        view = read_view(bootstrap, topic, isolation)
        if done(view):
            return view
        if time.monotonic() > deadline:
            pytest.fail(f"the log cleaner did not get {topic} there within 60 s: {view}")
        time.sleep(0.5)


def one_per_key(view: View) -> bool:
    keys = [k for _, k, _ in view]
    return len(keys) == len(set(keys))


def scenario(bootstrap: str) -> tuple[View, View, View]:
    """The full history, the view after the first cleaning and after the next one."""
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=CONFIGS)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

    def send(key: str, value: str | None) -> None:
        producer.produce(topic, key=key, value=value)
        assert producer.flush(10) == 0

    started = time.monotonic()
    for key, value in HISTORY:
        send(key, value)
    assert time.monotonic() - started < SEGMENT_MS / 1000, "the history must fit in one segment"
    history = read_view(bootstrap, topic)
    time.sleep(SEGMENT_MS * 1.2 / 1000)  # the next append rolls the segment: all of the above is cleanable
    send("z", "1")
    first = wait_view(bootstrap, topic, one_per_key)
    time.sleep(SEGMENT_MS * 1.2 / 1000)
    send("y", "1")
    time.sleep(SEGMENT_MS * 1.2 / 1000)
    send("x", "1")
    second = wait_view(bootstrap, topic, lambda view: one_per_key(view) and all(v for _, _, v in view))
    return history, first, second


def test_consumers_see_the_same_compacted_log_as_on_kafka(kafka, ours, kafka_side):
    on_kafka = once(kafka_side, "compacted", lambda: scenario(kafka.bootstrap_servers))
    mine = scenario(ours.bootstrap_servers)
    theirs = on_kafka.result()
    assert theirs[1] != theirs[0] and theirs[2] != theirs[1], "Kafka did not clean: the comparison shows nothing"
    assert mine == theirs


def transactions_scenario(bootstrap: str) -> tuple[View, View, str]:
    """A read_uncommitted consumer's view of a compacted topic with an aborted and a committed
    transaction, before and after a cleaning (and the topic)."""
    topic = f"compact-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=CONFIGS)])[topic].result(timeout=30)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    txn = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "transactional.id": uuid.uuid4().hex})
    txn.init_transactions(30)

    def send(producer: Producer, key: str, value: str) -> None:
        producer.produce(topic, key=key, value=value)
        assert producer.flush(10) == 0

    send(plain, "a", "1")
    send(plain, "b", "1")
    txn.begin_transaction()
    send(txn, "a", "aborted")
    send(txn, "c", "aborted")
    txn.abort_transaction(30)
    txn.begin_transaction()
    send(txn, "b", "2")
    send(txn, "d", "committed")
    txn.commit_transaction(30)
    markers_written(bootstrap, topic)
    history = read_view(bootstrap, topic, "read_uncommitted")
    time.sleep(SEGMENT_MS * 1.2 / 1000)  # the next append rolls the segment: all of the above is cleanable
    send(plain, "z", "1")
    cleaned = wait_view(bootstrap, topic, lambda view: one_per_key(view) and "aborted" not in {v for _, _, v in view},
                        "read_uncommitted")
    return history, cleaned, topic


def markers_written(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    """Wait until partition 0 has no open transaction: its last stable offset is its high watermark.

    Kafka answers EndTxn before its coordinator has written the markers; a record appended
    meanwhile would land before the commit marker and change the layout compared later.
    """
    deadline = time.monotonic() + timeout
    with Wire(bootstrap) as wire:
        while (list_offsets(wire, topic, -1, isolation_level=1).offset
               != list_offsets(wire, topic, -1, isolation_level=0).offset):
            assert time.monotonic() < deadline, f"{topic} still had an open transaction after {timeout}s"
            time.sleep(0.1)


def markers_scenario(bootstrap: str, topic: str) -> Layout:
    """The batches left once further cleanings removed the abort marker (the commit marker stays:
    its transaction's records are the last of their keys)."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    rolls = iter(range(100))

    def roll() -> None:
        time.sleep(SEGMENT_MS * 1.2 / 1000)
        plain.produce(topic, key=f"roll-{next(rolls)}", value="1")
        assert plain.flush(10) == 0

    layout = wait_layout(bootstrap, topic, lambda batches: all(k != "ABORT" for _, _, k in batches), roll)
    assert any(k == "COMMIT" for _, _, k in layout)
    # compare what the cleanings left of the transactions, not how many rolls each broker needed
    last_txn = max(first for first, _, k in layout if k == "COMMIT")
    return [b for b in layout if b[0] <= last_txn]


Layout = list[tuple[int, int, str]]


def batch_layout(bootstrap: str, topic: str) -> Layout:
    """(first offset, last offset, kind) of every batch in the log, markers and emptied batches included,
    as a raw read_uncommitted Fetch returns them; kind is "data", "ABORT", "COMMIT" or "control" (a
    control batch the cleaner emptied)."""
    import kio.schema.fetch.v11.request as m
    from kafkacompat.protocol.control_records import marker_type
    from kafkacompat.protocol.records import read_header

    layout: Layout = []
    offset, end = 0, None
    with Wire(bootstrap) as wire:
        while end is None or offset < end:
            request = make(
                m.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=(),
                topics=(make(m.FetchTopic, topic=topic, partitions=(make(
                    m.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset,
                    log_start_offset=-1, partition_max_bytes=1 << 20),)),))
            answer = wire.request(1, 11, request).responses[0].partitions[0]
            end = answer.high_watermark
            view, pos = memoryview(answer.records or b""), 0
            while len(view) - pos >= 61:
                header = read_header(view, pos)
                if pos + header.size > len(view):
                    break
                control = marker_type(view[pos:pos + header.size]) if header.is_control else None
                kind = "data" if not header.is_control else control.name if control is not None else "control"
                if header.last_offset >= offset:
                    layout.append((header.base_offset, header.last_offset, kind))
                offset = max(offset, header.last_offset + 1)
                pos += header.size
    return layout


def wait_layout(bootstrap: str, topic: str, done: Callable[[Layout], bool], roll: Callable[[], None]) -> Layout:
    """Roll segments (each roll lets one more cleaning run) until the layout is `done`."""
    deadline = time.monotonic() + 90
    while True:
        layout = batch_layout(bootstrap, topic)
        if done(layout):
            return layout
        if time.monotonic() > deadline:
            pytest.fail(f"the log cleaner did not get {topic} there within 90 s: {layout}")
        roll()


def test_aborted_records_go_with_a_cleaning_as_on_kafka(kafka, ours, kafka_side):
    def on_kafka() -> tuple[tuple[View, View, str], Layout]:
        views = transactions_scenario(kafka.bootstrap_servers)
        return views, markers_scenario(kafka.bootstrap_servers, views[2])

    beside = once(kafka_side, "aborted", on_kafka)
    mine = transactions_scenario(ours.bootstrap_servers)
    my_markers = markers_scenario(ours.bootstrap_servers, mine[2])
    theirs, their_markers = beside.result()
    assert any(v == "aborted" for _, _, v in theirs[0]), "the history must show the aborted records"
    assert mine[:2] == theirs[:2]
    assert my_markers == their_markers


def produce_keyless(bootstrap: str, topic: str) -> tuple[int, str | None, list[tuple[int, str | None]]]:
    """Produce v9 of one batch whose second record has no key: (error code, message, record errors)."""
    import kio.schema.produce.v9.request as m

    batch = build_batch([Record(b"k", b"v"), Record(None, b"no key"), Record(b"k2", b"v")])
    body = make(m.ProduceRequest, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                topic_data=(make(m.TopicProduceData, name=topic, partition_data=(
                    make(m.PartitionProduceData, index=0, records=batch),)),))
    with Wire(bootstrap) as wire:
        response = wire.request(0, 9, body)
    part = response.responses[0].partition_responses[0]
    return (part.error_code.value, part.error_message,
            [(e.batch_index, e.batch_index_error_message) for e in part.record_errors])


def test_a_record_without_a_key_is_refused_as_kafka_refuses_it(kafka, ours):
    answers = []
    topic = f"keyless-{uuid.uuid4().hex[:8]}"
    for bootstrap in (kafka.bootstrap_servers, ours.bootstrap_servers):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=CONFIGS)])[topic].result(timeout=30)
        deadline = time.monotonic() + 10
        answer = produce_keyless(bootstrap, topic)
        # Kafka answers UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER until the new topic reaches
        # its metadata cache; a client retries those
        while answer[0] in (3, 6) and time.monotonic() < deadline:
            time.sleep(0.2)
            answer = produce_keyless(bootstrap, topic)
        answers.append(answer)
    assert answers[0][0] == 87  # INVALID_RECORD
    assert answers[1] == answers[0]
    assert ours.consume(topic, count=0) == []  # nothing of the batch was written
