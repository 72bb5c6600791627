"""Fetch, ListOffsets and OffsetForLeaderEpoch at the wire level."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch, iter_records
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.test_bad_input import produce_request
from tests.wire import Wire


def produce(wire: Wire, topic: str, values: list[bytes], timestamp: int = 1_000) -> int:
    batch = build_batch([Record(None, v, [], timestamp + i) for i, v in enumerate(values)])
    part = wire.request(0, 9, produce_request(topic, batch)).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none
    return part.base_offset


def fetch_request(version: int, topic: str, offset: int, *, topic_id=None, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 50 << 20, partition_max: int = 1 << 20):
    m = __import__(f"kio.schema.fetch.v{version}.request", fromlist=["x"])
    part = make(m.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=partition_max, replica_directory_id=None)
    return make(
        m.FetchRequest, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(make(m.FetchTopic, topic=topic, topic_id=topic_id, partitions=(part,)),),
        forgotten_topics_data=(), rack_id="",
    )


def topic_id_of(wire: Wire, topic: str):
    m = __import__("kio.schema.metadata.v12.request", fromlist=["x"])
    response = wire.request(3, 12, make(m.MetadataRequest, topics=(make(m.MetadataRequestTopic, topic_id=None, name=topic),),
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    [entry] = response.topics
    assert entry.topic_id.int != 0 and response.controller_id == 1 and entry.partitions[0].leader_id == 1
    return entry.topic_id


@pytest.mark.parametrize("version", [4, 7, 11, 12, 13, 16, 17])
def test_fetch_every_version_returns_the_stored_batches(broker: Broker, topic: str, version: int) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        produce(wire, topic, [b"a", b"b"])
        produce(wire, topic, [b"c"])
        tid = topic_id_of(wire, topic) if version >= 13 else None
        response = wire.request(1, version, fetch_request(version, topic, 1, topic_id=tid))
    [partition] = response.responses[0].partitions
    assert partition.error_code == ErrorCode.none and partition.high_watermark == 3
    # starts with the batch holding offset 1, which begins at offset 0
    assert [(r.offset, r.value) for r in iter_records(partition.records)] == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_empty_records_are_zero_length_and_out_of_range_is_an_error(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        produce(wire, topic, [b"x"])
        at_end = wire.request(1, 12, fetch_request(12, topic, 1)).responses[0].partitions[0]
        assert at_end.error_code == ErrorCode.none and at_end.records == b""
        beyond = wire.request(1, 12, fetch_request(12, topic, 5)).responses[0].partitions[0]
        assert beyond.error_code == ErrorCode.offset_out_of_range and beyond.high_watermark == 1


def test_one_whole_batch_even_when_larger_than_max_bytes(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        produce(wire, topic, [b"z" * 50_000])
        produce(wire, topic, [b"y" * 10])
        response = wire.request(1, 12, fetch_request(12, topic, 0, max_bytes=100, partition_max=100))
    records = list(iter_records(response.responses[0].partitions[0].records))
    assert [r.offset for r in records] == [0] and len(records[0].value) == 50_000


def test_long_poll_waits_for_data_and_wakes_when_it_arrives(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire, Wire(broker.bootstrap_servers) as other:
        started = time.monotonic()
        empty = wire.request(1, 12, fetch_request(12, topic, 0, max_wait_ms=300))
        assert time.monotonic() - started >= 0.25
        assert empty.responses[0].partitions[0].records == b""
        timer = threading.Timer(0.3, lambda: produce(other, topic, [b"late"]))
        timer.start()
        started = time.monotonic()
        woke = wire.request(1, 12, fetch_request(12, topic, 0, max_wait_ms=10_000))
        waited = time.monotonic() - started
        timer.join()
    assert [r.value for r in iter_records(woke.responses[0].partitions[0].records)] == [b"late"]
    assert 0.25 <= waited < 5, waited


def test_a_long_poll_does_not_hold_back_other_requests_on_the_connection(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(1, 12, fetch_request(12, topic, 0, max_wait_ms=2_000))
        produce_started = time.monotonic()
        batch = build_batch([Record(None, b"p", [], 1)])
        wire.send(0, 9, produce_request(topic, batch))
        # answers come in request order: the fetch first (woken by the produce), then the produce
        correlation, fetched = wire.receive(1, 12)
        assert [r.value for r in iter_records(fetched.responses[0].partitions[0].records)] == [b"p"]
        correlation2, produced = wire.receive(0, 9)
        assert correlation2 == correlation + 1 and time.monotonic() - produce_started < 1.5


def list_offsets(wire: Wire, topic: str, timestamp: int, version: int = 7, isolation_level: int = 0):
    m = __import__(f"kio.schema.list_offsets.v{version}.request", fromlist=["x"])
    request = make(m.ListOffsetsRequest, replica_id=-1, isolation_level=isolation_level, timeout=datetime.timedelta(seconds=5),
                   topics=(make(m.ListOffsetsTopic, name=topic, partitions=(
                       make(m.ListOffsetsPartition, partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),))
    return wire.request(2, version, request).topics[0].partitions[0]


def test_list_offsets_earliest_latest_time_and_max(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        at = int(time.time() * 1000) - 60_000  # recent: within the default stream's 7-day ttl
        produce(wire, topic, [b"a", b"b", b"c"], timestamp=at + 10_000)  # +10000, +10001, +10002
        produce(wire, topic, [b"d"], timestamp=at + 5_000)  # an older timestamp later in the log
        assert list_offsets(wire, topic, -2).offset == 0
        assert list_offsets(wire, topic, -1).offset == 4
        hit = list_offsets(wire, topic, at + 10_001)
        assert (hit.offset, hit.timestamp) == (1, at + 10_001)
        assert list_offsets(wire, topic, at + 4_000).offset == 0
        miss = list_offsets(wire, topic, at + 20_000)
        assert (miss.offset, miss.timestamp) == (-1, -1)
        top = list_offsets(wire, topic, -3)
        assert (top.offset, top.timestamp, top.leader_epoch) == (2, at + 10_002, 0)  # the batch's epoch


def test_list_offsets_by_time_answers_the_epoch_of_the_batch_found(tmp_path) -> None:
    """Kafka answers a hit by timestamp with the found batch's partitionLeaderEpoch (FileRecords.
    searchForTimestamp), not the current one, and a miss with the default -1; a restart of the disk
    store leads from a higher epoch, so records written before it carry an older one."""
    data = str(tmp_path / "data")
    at = int(time.time() * 1000) - 60_000
    with Broker(data_dir=data) as first:
        name = create_topic(first.bootstrap_servers, "epochs")
        with Wire(first.bootstrap_servers) as wire:
            produce(wire, name, [b"a"], timestamp=at)
            before = list_offsets(wire, name, at).leader_epoch
    with Broker(data_dir=data) as second, Wire(second.bootstrap_servers) as wire:
        produce(wire, name, [b"b"], timestamp=at + 1_000)
        old, new, latest = list_offsets(wire, name, at), list_offsets(wire, name, at + 1), list_offsets(wire, name, -1)
        assert (old.offset, old.leader_epoch) == (0, before)
        assert (new.offset, new.leader_epoch) == (1, latest.leader_epoch) and latest.leader_epoch > before
        miss = list_offsets(wire, name, at + 2_000)
        assert (miss.offset, miss.timestamp, miss.leader_epoch) == (-1, -1, -1)


def test_offset_for_leader_epoch(broker: Broker, topic: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        produce(wire, topic, [b"a", b"b"])
        m = __import__("kio.schema.offset_for_leader_epoch.v4.request", fromlist=["x"])

        def ask(epoch: int):
            request = make(m.OffsetForLeaderEpochRequest, replica_id=-1, topics=(make(
                m.OffsetForLeaderTopic, topic=topic, partitions=(make(
                    m.OffsetForLeaderPartition, partition=0, current_leader_epoch=-1, leader_epoch=epoch),)),))
            part = wire.request(23, 4, request).topics[0].partitions[0]
            return part.error_code, part.leader_epoch, part.end_offset

        current = list_offsets(wire, topic, -1).leader_epoch
        assert ask(current) == (ErrorCode.none, current, 2)
        assert ask(current + 5) == (ErrorCode.none, -1, -1)  # a future epoch


def test_advertised_host_is_what_metadata_returns() -> None:
    with Broker(advertised_host="kafka.example.internal", advertised_port=19999) as broker:
        with Wire(broker.bootstrap_servers) as wire:
            m = __import__("kio.schema.metadata.v9.request", fromlist=["x"])
            response = wire.request(3, 9, make(m.MetadataRequest, topics=(), allow_auto_topic_creation=False,
                                               include_cluster_authorized_operations=False,
                                               include_topic_authorized_operations=False))
    [node] = response.brokers
    assert (node.node_id, node.host, node.port) == (1, "kafka.example.internal", 19999)
