"""Each kind of injected fault, as a real client experiences it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidRecordError, PolicyViolationError

from kafkacompat.testing import Broker


@pytest.fixture(autouse=True)
def _no_leftover_faults(broker: Broker):
    yield
    broker.faults.clear()


def _deliver(producer: Producer, topic: str, value: bytes) -> list:
    reports: list = []
    producer.produce(topic, value, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(30) == 0
    return reports


def test_librdkafka_retries_after_not_leader_and_writes_once(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retry.backoff.ms": 10})
    broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)

    assert _deliver(producer, topic_name, b"once") == [(None, 0)]
    assert broker.faults.fired("Produce") == 2
    assert [m.value for m in broker.consume(topic_name)] == [b"once"]


def test_a_non_retriable_error_reaches_kafka_python_and_writes_nothing(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name)
    # Idempotent kafka-python producers turn any refused batch into a fatal state.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
    try:
        producer.send(topic_name, b"warm-up").get(timeout=20)
        broker.faults.fail("produce", 87)  # INVALID_RECORD, by number
        with pytest.raises(InvalidRecordError):
            producer.send(topic_name, b"refused").get(timeout=20)
        producer.send(topic_name, b"accepted").get(timeout=20)  # count=1: over
    finally:
        producer.close(timeout=5)
    assert [m.value for m in broker.consume(topic_name)] == [b"warm-up", b"accepted"]


def test_admin_sees_the_injected_error_and_the_topic_is_not_created(broker: Broker, topic_name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        broker.faults.fail("CreateTopics", "POLICY_VIOLATION")
        with pytest.raises(PolicyViolationError):
            admin.create_topics([NewTopic(topic_name, 1, 1)])
        assert topic_name not in admin.list_topics()
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        assert topic_name in admin.list_topics()
    finally:
        admin.close()


def test_fetch_errors_are_retried_by_the_consumer(broker: Broker, topic_name: str) -> None:
    broker.produce(topic_name, b"still readable")
    broker.faults.fail("Fetch", "NOT_LEADER_OR_FOLLOWER", count=3)
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "fault-tests",
        "enable.auto.commit": False,
    })
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None and polled.error() is None:
                message = polled
    finally:
        consumer.close()
    assert message is not None and message.value() == b"still readable"
    assert broker.faults.fired("Fetch") == 3


def test_metadata_and_list_offsets_errors_are_retried(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name, partitions=2)
    broker.produce(topic_name, b"a", partition=1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, retry_backoff_ms=10)
    try:
        broker.faults.fail("Metadata", "LEADER_NOT_AVAILABLE", count=2)
        broker.faults.fail("ListOffsets", "NOT_LEADER_OR_FOLLOWER", count=1)
        ends = consumer.end_offsets([KPartition(topic_name, 0), KPartition(topic_name, 1)])
    finally:
        consumer.close()
    assert ends == {KPartition(topic_name, 0): 0, KPartition(topic_name, 1): 1}
    assert broker.faults.fired("ListOffsets") == 1
    assert broker.faults.fired("Metadata") >= 1


def test_a_delayed_answer_is_observed_and_the_delay_counts_down(broker: Broker, topic_name: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    try:
        producer.send(topic_name, b"warm-up").get(timeout=20)
        broker.faults.delay("Produce", 0.6, count=1)
        started = time.monotonic()
        producer.send(topic_name, b"late").get(timeout=20)
        assert time.monotonic() - started >= 0.6
        producer.send(topic_name, b"on time").get(timeout=20)
    finally:
        producer.close(timeout=5)
    assert broker.faults.fired("Produce") == 1
    assert [m.value for m in broker.consume(topic_name)] == [b"warm-up", b"late", b"on time"]


def test_a_delay_past_the_client_timeout_makes_it_give_up(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    assert topic_name in producer.list_topics(timeout=10).topics
    broker.faults.delay(None, 1.5)  # every API, until cleared
    started = time.monotonic()
    with pytest.raises(KafkaException):
        producer.list_topics(topic_name, timeout=0.5)
    assert time.monotonic() - started < 1.5  # gave up at its own timeout
    broker.faults.clear()
    assert topic_name in producer.list_topics(topic_name, timeout=10).topics


def test_a_dropped_request_is_resent_after_reconnecting(broker: Broker, topic_name: str) -> None:
    broker.create_topic(topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retry.backoff.ms": 10})
    _deliver(producer, topic_name, b"before")
    broker.faults.disconnect("Produce")

    assert _deliver(producer, topic_name, b"after") == [(None, 1)]
    assert broker.faults.fired("Produce") == 1
    assert [m.value for m in broker.consume(topic_name)] == [b"before", b"after"]


@pytest.mark.parametrize("idempotent, copies", [(True, 1), (False, 2)])
def test_a_lost_answer_duplicates_only_without_idempotence(
    broker: Broker, topic_name: str, idempotent: bool, copies: int
) -> None:
    broker.create_topic(topic_name)
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers,
        "enable.idempotence": idempotent,
        "retry.backoff.ms": 10,
    })
    _deliver(producer, topic_name, b"warm-up")
    broker.faults.disconnect("Produce", after_handling=True)

    reports = _deliver(producer, topic_name, b"paid")
    assert [err for err, _ in reports] == [None]
    values = [m.value for m in broker.consume(topic_name)]
    assert values == [b"warm-up"] + [b"paid"] * copies


def test_dropping_every_connection_lets_a_consumer_carry_on(broker: Broker, topic_name: str) -> None:
    broker.produce(topic_name, b"first")
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": "fault-tests",
        "enable.auto.commit": False,
        "reconnect.backoff.ms": 10,
    })
    try:
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        received = []
        deadline = time.monotonic() + 30
        dropped = 0
        while len(received) < 2 and time.monotonic() < deadline:
            polled = consumer.poll(0.2)
            if polled is not None and polled.error() is None:
                received.append(polled.value())
                if len(received) == 1:
                    dropped = broker.drop_connections()
                    broker.produce(topic_name, b"second")
    finally:
        consumer.close()
    assert dropped >= 1
    assert received == [b"first", b"second"]


def test_faults_are_checked_when_set() -> None:
    with Broker() as broker:
        with pytest.raises(ValueError, match="unknown Kafka API"):
            broker.faults.fail("NoSuchApi", "NOT_LEADER_OR_FOLLOWER")
        with pytest.raises(ValueError, match="unknown Kafka error code"):
            broker.faults.fail("Produce", "NO_SUCH_ERROR")
        with pytest.raises(ValueError, match="no injected error answers"):
            broker.faults.fail("FetchSnapshot", "NOT_LEADER_OR_FOLLOWER")  # a KRaft API this broker does not serve
        with pytest.raises(ValueError, match="count must be positive"):
            broker.faults.delay("Fetch", 1.0, count=0)
        assert broker.faults.rules == {}


def test_faults_on_one_broker_leave_another_alone(broker: Broker, topic_name: str) -> None:
    with Broker() as other:
        other.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=None)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        try:
            producer.send(topic_name, b"unaffected").get(timeout=20)
        finally:
            producer.close(timeout=5)
        assert other.faults.fired("Produce") == 0
        with pytest.raises(KafkaException):
            lonely = Producer({"bootstrap.servers": other.bootstrap_servers, "message.timeout.ms": 1000})
            reports = _deliver(lonely, topic_name, b"refused")
            raise KafkaException(reports[0][0])
    assert [m.value for m in broker.consume(topic_name)] == [b"unaffected"]
