"""Client byte-rate quotas: set, described, matched as Kafka matches them, and enforced with throttle_time_ms."""

from __future__ import annotations

import time
import uuid

import kio.schema.alter_client_quotas.v1.request as acq
import kio.schema.describe_client_quotas.v1.request as dcq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.test_bad_input import produce_request
from tests.wire import Wire


def set_quota(wire: Wire, entity: dict[str, str | None], **values: float | None) -> tuple[int, str | None]:
    answer = wire.request(49, 1, make(acq.AlterClientQuotasRequest, validate_only=False, entries=(make(
        acq.EntryData, entity=tuple(make(acq.EntityData, entity_type=k, entity_name=v) for k, v in entity.items()),
        ops=tuple(make(acq.OpData, key=k, value=v or 0.0, remove=v is None) for k, v in values.items())),)))
    [entry] = answer.entries
    return entry.error_code, entry.error_message


def quotas(wire: Wire, *components: tuple[str, int, str | None], strict: bool = False) -> list:
    answer = wire.request(48, 1, make(dcq.DescribeClientQuotasRequest, strict=strict, components=tuple(
        make(dcq.ComponentData, entity_type=k, match_type=how, match=name) for k, how, name in components)))
    return [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
            for entry in answer.entries]


def test_quotas_are_set_described_and_kept_by_the_store(tmp_path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker, Wire(broker.bootstrap_servers) as wire:
        assert set_quota(wire, {"client-id": "a"}, producer_byte_rate=1000.0) == (ErrorCode.none, None)
        assert set_quota(wire, {"user": None}, consumer_byte_rate=2000.0)[0] == ErrorCode.none
        assert set_quota(wire, {"user": "u", "client-id": None}, producer_byte_rate=3000.0)[0] == ErrorCode.none
        assert set_quota(wire, {"client-id": "a"}, request_percentage=50.0)[0] == ErrorCode.invalid_request
        assert set_quota(wire, {"ip": "1.2.3.4", "user": "u"}, producer_byte_rate=1.0)[0] == ErrorCode.invalid_request
    with Broker(data_dir=str(tmp_path)) as again, Wire(again.bootstrap_servers) as wire:
        assert quotas(wire, ("client-id", 0, "a")) == [({"client-id": "a"}, {"producer_byte_rate": 1000.0})]
        assert quotas(wire, ("user", 1, None), strict=True) == [({"user": None}, {"consumer_byte_rate": 2000.0})]
        assert len(quotas(wire, ("user", 2, None))) == 2  # any user, the default one too
        assert set_quota(wire, {"client-id": "a"}, producer_byte_rate=None)[0] == ErrorCode.none
        assert quotas(wire, ("client-id", 0, "a")) == []


def test_a_producer_over_its_quota_is_throttled(broker: Broker) -> None:
    client = f"slow-{uuid.uuid4().hex[:6]}"
    with Wire(broker.bootstrap_servers) as wire:
        assert set_quota(wire, {"client-id": client}, producer_byte_rate=100_000.0)[0] == ErrorCode.none
    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": client, "linger.ms": 5,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    started = time.monotonic()
    for _ in range(120):  # 1.2 MB: 120 KB/s over Kafka's 10 s window, 20 % over the bound
        producer.produce("quota-topic", b"x" * 10_000)
        producer.poll(0)
    assert producer.flush(30) == 0
    producer.poll(0.5)
    # Kafka's answer: (rate - bound) / bound x window = about 2 s, and the connection waits it out
    assert throttles and 0.5 < max(throttles) <= 3.0, throttles
    assert time.monotonic() - started >= 0.5


def test_throttle_time_is_in_the_produce_answer_and_other_clients_are_not_held(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire, Wire(broker.bootstrap_servers) as other:
        assert set_quota(wire, {"client-id": "wire-test"}, producer_byte_rate=1000.0)[0] == ErrorCode.none
        batch = build_batch([Record(None, b"y" * 20_000, [], 1)])
        answer = wire.request(0, 9, produce_request("quota-wire", batch))
        assert answer.throttle_time.total_seconds() > 5  # 2 KB/s over 10 s against 1 KB/s: 10 s
        # this connection is muted now; another one is served, and lifts the quota
        started = time.monotonic()
        assert set_quota(other, {"client-id": "wire-test"}, producer_byte_rate=None)[0] == ErrorCode.none
        assert other.request(0, 9, produce_request("quota-wire", batch)).throttle_time.total_seconds() == 0
        assert time.monotonic() - started < 1


@pytest.mark.slow
def test_a_throttled_fetch_comes_back_empty_then_the_consumer_catches_up(broker: Broker) -> None:
    """300 KB against 25 KB/s: fetches are throttled until the first samples leave Kafka's 11 s window."""
    topic = f"qf-{uuid.uuid4().hex[:6]}"
    client = f"slowc-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for _ in range(30):  # one batch each: a fetch can always stay under the quota
        producer.produce(topic, b"z" * 10_000)
        assert producer.flush(10) == 0
    with Wire(broker.bootstrap_servers) as wire:
        assert set_quota(wire, {"client-id": client}, consumer_byte_rate=25_000.0)[0] == ErrorCode.none
    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": client, "client.id": client,
                         "fetch.max.bytes": 1_000_000, "message.max.bytes": 1_000_000, "max.partition.fetch.bytes": 100_000,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < 30 and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(10, timeout=0.5) if m.error() is None])
    finally:
        consumer.close()
    assert got == 30 and throttles and max(throttles) > 0


def test_a_share_fetch_over_the_consumer_quota_is_throttled(broker: Broker) -> None:
    """ShareFetch counts against consumer_byte_rate as Fetch does: the answer carries the wait, the
    connection is muted for it, another client is served meanwhile."""
    import datetime

    from kio.schema.share_fetch.v1 import request as sf

    topic = f"qs-{uuid.uuid4().hex[:6]}"
    for _ in range(4):
        broker.produce(topic, b"s" * 10_000, partition=0)
    group = f"g-{uuid.uuid4().hex[:6]}"
    broker.call(broker.server.cluster.store.set_settings({f"group-config:{group}:share.auto.offset.reset": "earliest"}))
    topic_id = broker.server.cluster.topic_for(topic)[0].topic_id
    request = make(sf.ShareFetchRequest, group_id=group, member_id="m1", share_session_epoch=0,
                   max_wait=datetime.timedelta(milliseconds=100), min_bytes=1, max_bytes=1 << 20, max_records=100,
                   batch_size=100, forgotten_topics_data=(), topics=(make(sf.FetchTopic, topic_id=topic_id, partitions=(
                       make(sf.FetchPartition, partition_index=0, acknowledgement_batches=()),)),))
    with Wire(broker.bootstrap_servers) as wire, Wire(broker.bootstrap_servers) as other:
        assert set_quota(other, {"client-id": "wire-test"}, consumer_byte_rate=1000.0)[0] == ErrorCode.none
        answer = wire.request(78, 1, request)
        records = [a for t in answer.responses for p in t.partitions for a in p.acquired_records]
        assert records and records[0].first_offset == 0  # the records come, acquired
        assert answer.throttle_time.total_seconds() > 5  # 40 KB against 1 KB/s over Kafka's window
        started = time.monotonic()
        assert set_quota(other, {"client-id": "wire-test"}, consumer_byte_rate=None)[0] == ErrorCode.none
        assert time.monotonic() - started < 1
