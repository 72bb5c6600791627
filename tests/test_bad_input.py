"""Bad input gets a clear error, loses nothing, and the broker keeps serving."""

from __future__ import annotations

import datetime
import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire

PRODUCE_V = 9


def produce_request(topic: str, records: bytes, acks: int = 1, partition: int = 0):
    import kio.schema.produce.v9.request as m

    return make(
        m.ProduceRequest,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(make(m.TopicProduceData, name=topic, partition_data=(make(m.PartitionProduceData, index=partition, records=records),)),),
    )


def api_versions_ok(broker: Broker) -> bool:
    import kio.schema.api_versions.v3.request as m

    with Wire(broker.bootstrap_servers) as wire:
        response = wire.request(18, 3, make(m.ApiVersionsRequest, client_software_name="t", client_software_version="1"))
    return response.error_code == ErrorCode.none


def high_watermark(broker: Broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "hw-check"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def test_garbage_frame_closes_only_that_connection(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send_raw(struct.pack(">i", 6) + b"\x00\x03\x00")  # 6 bytes promised, 3 sent
        wire.send_raw(b"\xff\xff\xff")  # the rest: not a request header
        assert wire.is_closed()
    assert api_versions_ok(broker)


def test_truncated_frame_then_hangup_keeps_broker_serving(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send_raw(struct.pack(">i", 1000) + b"\x00\x12\x00\x03")
    assert api_versions_ok(broker)


def test_negative_frame_size_is_refused(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send_raw(struct.pack(">i", -5))
        assert wire.is_closed()
    assert api_versions_ok(broker)


def test_oversized_frame_is_refused_before_it_is_read() -> None:
    with Broker(socket_request_max_bytes=1024) as small:
        with Wire(small.bootstrap_servers) as wire:
            wire.send_raw(struct.pack(">i", 1025))
            assert wire.is_closed()
        producer = Producer({"bootstrap.servers": small.bootstrap_servers})
        producer.produce("fits", b"x" * 10)
        assert producer.flush(10) == 0
        assert api_versions_ok(small)


def test_unknown_api_key_closes_the_connection(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(9999, 0, b"")
        assert wire.is_closed()
    assert api_versions_ok(broker)


def test_unsupported_version_of_an_api_closes_the_connection(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(3, 99, b"")  # Metadata v99
        assert wire.is_closed()
    assert api_versions_ok(broker)


def test_malformed_body_closes_the_connection(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(3, 1, b"\x00\x00\x00\x05")  # five topics promised, none sent
        assert wire.is_closed()
    assert api_versions_ok(broker)


def test_corrupt_batch_is_refused_and_nothing_is_written(broker: Broker, topic: str) -> None:
    good = build_batch([Record(b"k", b"good", [], 1_700_000_000_000)])
    bad = bytearray(build_batch([Record(b"k", b"flipped", [], 1_700_000_000_000)]))
    bad[-3] ^= 0xFF  # a byte inside the records: CRC-32C no longer matches
    with Wire(broker.bootstrap_servers) as wire:
        first = wire.request(0, PRODUCE_V, produce_request(topic, good))
        assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
        refused = wire.request(0, PRODUCE_V, produce_request(topic, bytes(bad)))
        part = refused.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.corrupt_message
        assert "CRC" in part.error_message
        # good + corrupt in one request: the whole partition's data is refused
        both = wire.request(0, PRODUCE_V, produce_request(topic, good + bytes(bad)))
        assert both.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
        # the connection stays usable
        again = wire.request(0, PRODUCE_V, produce_request(topic, good))
        assert again.responses[0].partition_responses[0].base_offset == 1
    assert high_watermark(broker, topic) == 2


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda b: b[:-1], "length"),
        (lambda b: b[:16] + b"\x01" + b[17:], "magic"),
    ],
)
def test_malformed_batches_are_refused(broker: Broker, topic: str, mutate, reason: str) -> None:
    batch = build_batch([Record(None, b"v", [], 1)])
    with Wire(broker.bootstrap_servers) as wire:
        wire.request(0, PRODUCE_V, produce_request(topic, batch))
        refused = wire.request(0, PRODUCE_V, produce_request(topic, mutate(batch)))
    part = refused.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.corrupt_message, reason
    assert high_watermark(broker, topic) == 1


def test_control_batch_from_a_client_is_refused(broker: Broker, topic: str) -> None:
    import crc32c

    batch = bytearray(build_batch([Record(None, b"v", [], 1)]))
    struct.pack_into(">h", batch, 21, 0x20)  # control bit
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with Wire(broker.bootstrap_servers) as wire:
        wire.request(0, PRODUCE_V, produce_request(topic, build_batch([Record(None, b"ok", [], 1)])))
        refused = wire.request(0, PRODUCE_V, produce_request(topic, bytes(batch)))
    assert refused.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record


def test_produce_to_missing_topic_without_autocreate() -> None:
    with Broker(auto_create_topics=False) as strict:
        batch = build_batch([Record(None, b"v", [], 1)])
        with Wire(strict.bootstrap_servers) as wire:
            response = wire.request(0, PRODUCE_V, produce_request("nowhere", batch))
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
            import kio.schema.metadata.v9.request as m

            meta = wire.request(3, 9, make(m.MetadataRequest, topics=(make(m.MetadataRequestTopic, name="nowhere"),),
                                            allow_auto_topic_creation=True, include_cluster_authorized_operations=False, include_topic_authorized_operations=False))
            assert meta.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        assert api_versions_ok(strict)


def test_acks_zero_failure_closes_the_connection(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(0, PRODUCE_V, produce_request("bad name!", build_batch([Record(None, b"v", [], 1)]), acks=0))
        assert wire.is_closed()


def test_invalid_acks_value(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        response = wire.request(0, PRODUCE_V, produce_request(topic, build_batch([Record(None, b"v", [], 1)]), acks=2))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


def test_connection_limit_is_enforced() -> None:
    with Broker(max_connections=2) as limited:
        first, second = Wire(limited.bootstrap_servers), Wire(limited.bootstrap_servers)
        try:
            assert api_versions_ok_on(first)
            third = Wire(limited.bootstrap_servers)
            assert third.is_closed()
            third.close()
            assert api_versions_ok_on(second)
        finally:
            first.close()
            second.close()


def api_versions_ok_on(wire: Wire) -> bool:
    import kio.schema.api_versions.v3.request as m

    return wire.request(18, 3, make(m.ApiVersionsRequest, client_software_name="t", client_software_version="1")).error_code == ErrorCode.none
