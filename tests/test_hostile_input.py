"""Hostile input through a real broker: no request crashes, poisons or exhausts it."""

from __future__ import annotations

import datetime
import logging
import os
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests import poison_batches as poison
from tests.hostile_frames import create_partitions_207gb, create_topics_null_topics
from tests.test_bad_input import PRODUCE_V, api_versions_ok, api_versions_ok_on, high_watermark, produce_request
from tests.wire import Wire


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def _wait_for(condition, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# --- requests that allocate from lengths they do not carry --------------------


def test_the_36_byte_create_partitions_frame_closes_one_connection(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    frame = create_partitions_207gb()
    assert len(frame) == 36
    with caplog.at_level(logging.INFO, logger="kafkacompat"):
        for _ in range(3):
            with Wire(broker.bootstrap_servers) as wire:
                wire.send_raw(frame)
                assert wire.is_closed()
        assert api_versions_ok(broker)
    closing = [r for r in caplog.records if "malformed request" in r.getMessage()]
    assert len(closing) == 3 and "broker_ids" in closing[0].getMessage()
    assert not _tracebacks(caplog)


@pytest.mark.parametrize("version", [2, 5, 7])
def test_minus_one_length_never_reaches_a_handler(
    broker: Broker, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kafkacompat"):
        with Wire(broker.bootstrap_servers) as wire:
            wire.send_raw(create_topics_null_topics(version))
            assert wire.is_closed()
        assert api_versions_ok(broker)
    assert any("null array topics" in r.getMessage() for r in caplog.records)
    assert not _tracebacks(caplog)


# --- partition counts ------------------------------------------------------


def _create_topics(wire: Wire, specs: list[tuple[str, int]], validate_only: bool = False):
    import kio.schema.create_topics.v7.request as m

    request = make(
        m.CreateTopicsRequest,
        topics=tuple(
            make(m.CreatableTopic, name=name, num_partitions=count, replication_factor=-1, assignments=(), configs=())
            for name, count in specs
        ),
        timeout=datetime.timedelta(seconds=10),
        validate_only=validate_only,
    )
    return {t.name: (t.error_code, t.error_message) for t in wire.request(19, 7, request).topics}


def _create_partitions(wire: Wire, name: str, count: int):
    import kio.schema.create_partitions.v3.request as m

    request = make(
        m.CreatePartitionsRequest,
        topics=(make(m.CreatePartitionsTopic, name=name, count=count, assignments=None),),
        timeout=datetime.timedelta(seconds=10),
        validate_only=False,
    )
    result = wire.request(37, 3, request).results[0]
    return result.error_code, result.error_message


def test_a_million_partitions_are_refused_cheaply(broker: Broker, topic_name: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        started = time.monotonic()
        refused = _create_topics(wire, [(topic_name, 1_000_000)])
        assert refused[topic_name] == (
            ErrorCode.policy_violation, "Excessively large number of partitions per request."
        )
        # Kafka counts the whole request: two topics of 6,000 are refused together
        both = _create_topics(wire, [(topic_name + "a", 6000), (topic_name + "b", 6000)], validate_only=True)
        assert {code for code, _ in both.values()} == {ErrorCode.policy_violation}
        assert _create_topics(wire, [(topic_name, 1)])[topic_name][0] == ErrorCode.none
        for count in (1_000_000, 2**31 - 1):
            assert _create_partitions(wire, topic_name, count)[0] == ErrorCode.policy_violation
        assert time.monotonic() - started < 5
    assert broker.server.store.get_topic("/default", topic_name).partitions == 1


def test_partitions_per_broker_are_capped() -> None:
    with Broker(max_broker_partitions=10) as small, Wire(small.bootstrap_servers) as wire:
        assert _create_topics(wire, [("eight", 8)])["eight"][0] == ErrorCode.none
        code, message = _create_topics(wire, [("three", 3)])["three"]
        assert code == ErrorCode.policy_violation and "max_broker_partitions=10" in message
        assert _create_partitions(wire, "eight", 11)[0] == ErrorCode.policy_violation
        assert _create_partitions(wire, "eight", 10)[0] == ErrorCode.none


def test_non_positive_partition_counts_are_invalid(broker: Broker, topic_name: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        assert _create_topics(wire, [(topic_name, 0)])[topic_name][0] == ErrorCode.invalid_partitions
        assert _create_topics(wire, [(topic_name, -5)])[topic_name][0] == ErrorCode.invalid_partitions


# --- poison batches --------------------------------------------------------

REFUSALS = {
    "junk_records": ErrorCode.corrupt_message,
    "gzip_flag_over_plain_body": ErrorCode.corrupt_message,
    "count_more_than_records": ErrorCode.invalid_record,
    "count_fewer_than_records": ErrorCode.invalid_record,
    "same_offset_delta": ErrorCode.invalid_record,
    "trailing_bytes_after_records": ErrorCode.invalid_record,
    "record_length_past_the_end": ErrorCode.invalid_record,
    "timestamp_too_far_ahead": ErrorCode.invalid_timestamp,
    "timestamp_far_ahead_in_one_record": ErrorCode.invalid_timestamp,
    "gzip_count_mismatch": ErrorCode.invalid_record,
    "zstd_count_mismatch": ErrorCode.invalid_record,
    "gzip_bomb": ErrorCode.invalid_record,
}


def test_poison_batches_are_refused_and_consumers_keep_reading(broker: Broker, topic: str) -> None:
    assert set(REFUSALS) == set(poison.POISON)
    with Wire(broker.bootstrap_servers) as wire:
        first = wire.request(0, PRODUCE_V, produce_request(topic, poison.good(3)))
        assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
        for name, expected in REFUSALS.items():
            part = wire.request(0, PRODUCE_V, produce_request(topic, poison.POISON[name]())).responses[0]
            part = part.partition_responses[0]
            assert part.error_code == expected, (name, part.error_message)
            if expected == ErrorCode.invalid_timestamp:
                assert part.error_message == "One or more records have been rejected due to invalid timestamp"
                assert part.record_errors and "out of range" in part.record_errors[0].batch_index_error_message
        # a good batch after a poison one in the same request: nothing of the request is written
        mixed = wire.request(0, PRODUCE_V, produce_request(topic, poison.good(2) + poison.same_offset_delta()))
        assert mixed.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record
        last = wire.request(0, PRODUCE_V, produce_request(topic, poison.compressed(poison.Codec.ZSTD, 2)))
        assert last.responses[0].partition_responses[0].base_offset == 3
    assert high_watermark(broker, topic) == 5
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 15
        while len(values) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [b"v0", b"v1", b"v2", b"v0", b"v1"]
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_stock_client_compressed_batches_pass_validation(broker: Broker, topic: str, codec: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec, "linger.ms": 20})
    for i in range(500):
        producer.produce(topic, b"message %d " % i * 20, key=b"k%d" % (i % 7), headers={"n": b"%d" % i})
    assert producer.flush(15) == 0
    assert high_watermark(broker, topic) == 500


def test_timestamp_bounds_follow_the_topic_config(broker: Broker, topic_name: str) -> None:
    from tests.conftest import create_topic

    create_topic(broker.bootstrap_servers, topic_name, configs={"message.timestamp.after.max.ms": str(3 * 3600 * 1000)})
    with Wire(broker.bootstrap_servers) as wire:
        response = wire.request(0, PRODUCE_V, produce_request(topic_name, poison.timestamp_too_far_ahead()))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


# --- connections -----------------------------------------------------------


def test_idle_connections_are_closed_and_busy_ones_kept() -> None:
    with Broker(connections_max_idle_ms=400) as b:
        with Wire(b.bootstrap_servers) as idle, Wire(b.bootstrap_servers) as busy:
            assert api_versions_ok_on(idle)
            started = time.monotonic()
            while time.monotonic() - started < 1.2:  # three idle periods
                assert api_versions_ok_on(busy)
                time.sleep(0.1)
            assert idle.is_closed(timeout=5)
            assert api_versions_ok_on(busy)
        stalled = Wire(b.bootstrap_servers)
        stalled.send_raw(struct.pack(">i", 100 << 20) + b"\x00\x12")  # announces 100 MiB, sends 2 bytes
        assert stalled.is_closed(timeout=5)
        stalled.close()
        _wait_for(lambda: not b.server._connections, what="every connection to be gone")


def _rss() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_stalled_frames_and_idle_connections_hold_little_memory() -> None:
    with Broker() as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        assert api_versions_ok(b)
        before = _rss()
        stalled = []
        for _ in range(20):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(struct.pack(">i", 100 << 20) + b"\x00\x00\x00\x12" + bytes(1000))
            stalled.append(sock)
        idle = [socket.create_connection((host, int(port))) for _ in range(1000)]
        _wait_for(lambda: len(b.server._connections) == 1020, what="1,020 accepted connections")
        time.sleep(0.2)  # let the stalled frames' bytes arrive
        grown = _rss() - before
        try:
            # was 1.2 GB for the 20 stalled frames and 256 KiB per idle connection
            assert grown < 60 << 20, f"RSS grew {grown >> 20} MiB"
            assert api_versions_ok(b)
        finally:
            for sock in stalled + idle:
                sock.close()


def test_connections_per_ip_are_limited() -> None:
    with Broker(max_connections_per_ip=2) as limited:
        first, second = Wire(limited.bootstrap_servers), Wire(limited.bootstrap_servers)
        try:
            assert api_versions_ok_on(first) and api_versions_ok_on(second)
            third = Wire(limited.bootstrap_servers)
            assert third.is_closed()
            third.close()
            first.close()
            _wait_for(lambda: len(limited.server._connections) == 1, what="the first connection to go")
            with Wire(limited.bootstrap_servers) as again:
                assert api_versions_ok_on(again)
        finally:
            first.close()
            second.close()


def test_message_max_bytes_is_enforced_with_message_too_large(topic_name: str) -> None:
    from tests.conftest import create_topic

    with Broker(message_max_bytes=2000) as b:
        create_topic(b.bootstrap_servers, topic_name)
        big = poison.batch(poison.record(0, b"x" * 3000), 1)
        with Wire(b.bootstrap_servers) as wire:
            response = wire.request(0, PRODUCE_V, produce_request(topic_name, big))
            small = wire.request(0, PRODUCE_V, produce_request(topic_name, poison.good(1)))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.message_too_large
        assert small.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_limits_load_under_kafka_names_and_bad_ones_are_refused() -> None:
    from kafkacompat.config import ConfigError, load_config

    config = load_config(environ={"KAFKACOMPAT_CONNECTIONS_MAX_IDLE_MS": "1000", "KAFKACOMPAT_MAX_CONNECTIONS_PER_IP": "5"})
    assert (config.connections_max_idle_ms, config.max_connections_per_ip) == (1000, 5)
    assert config.socket_request_max_bytes == 104_857_600 and config.message_max_bytes == 1_048_588
    with pytest.raises(ConfigError, match="queued_max_request_bytes"):
        load_config(environ={"KAFKACOMPAT_QUEUED_MAX_REQUEST_BYTES": "1000"})
    assert load_config(environ={"KAFKACOMPAT_QUEUED_MAX_REQUEST_BYTES": "-1"}).queued_max_request_bytes == -1
    with pytest.raises(ConfigError, match="max_connections_per_ip"):
        load_config(environ={"KAFKACOMPAT_MAX_CONNECTIONS_PER_IP": "0"})


def test_describe_configs_shows_the_limits(broker: Broker) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["connections.max.idle.ms"].value == "600000"
    assert configs["max.connections.per.ip"].value == "2147483647"
    assert configs["message.max.bytes"].value == "1048588"


def test_a_compressed_batch_inflating_past_the_in_place_bound_is_still_accepted(broker: Broker, topic: str) -> None:
    from kafkacompat.handlers.produce import INLINE_DECOMPRESSED

    value = b"a" * (INLINE_DECOMPRESSED + (1 << 20))  # checked in a worker thread, within 64 MiB
    batch = poison.batch(poison.compress(poison.Codec.ZSTD, poison.record(0, value)), 1, codec=poison.Codec.ZSTD)
    assert len(batch) < 1 << 20
    with Wire(broker.bootstrap_servers) as wire:
        response = wire.request(0, PRODUCE_V, produce_request(topic, batch))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
