"""The hand-made Produce response encoder writes exactly what kio writes, for every served version."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kafkacompat.protocol.messages import encode_body, make, response_module, response_schema
from kafkacompat.protocol.produce_response import NodeEndpoint, PartitionResult, encode_produce_response
from kio.schema.errors import ErrorCode

PRODUCE = 0
TOPICS = [
    ("orders", [
        PartitionResult(0, 0, 1234, -1, 0),
        PartitionResult(3, 0, 99, 1_700_000_000_123, 7),
        PartitionResult(5, ErrorCode.corrupt_message.value, -1, -1, -1, "record batch CRC-32C mismatch"),
        PartitionResult(6, ErrorCode.invalid_timestamp.value, -1, -1, -1, "rejected",
                        ((1, "Timestamp 9 of message with offset 1 is out of range."), (4, None))),
    ]),
    ("/apps/iot/pumps:metrics", [PartitionResult(1, ErrorCode.unknown_topic_or_partition.value, -1, -1, -1)]),
]


BY_ID = [(uuid.UUID(int=i + 1), parts) for i, (_, parts) in enumerate(TOPICS)]  # v13: topics by id


def _kio_bytes(version: int, topics: list[tuple[str | uuid.UUID, list[PartitionResult]]],
               nodes: tuple[NodeEndpoint, ...] = ()) -> bytes:
    m = response_module(PRODUCE, version)
    responses = tuple(
        make(
            m.TopicProduceResponse,
            **({"topic_id": topic} if isinstance(topic, uuid.UUID) else {"name": topic}),
            partition_responses=tuple(
                make(
                    m.PartitionProduceResponse,
                    index=p.index,
                    error_code=ErrorCode(p.error_code),
                    base_offset=p.base_offset,
                    log_append_time=(
                        datetime.datetime.fromtimestamp(p.log_append_time_ms / 1000, tz=datetime.UTC)
                        if p.log_append_time_ms >= 0 else None
                    ),
                    log_start_offset=p.log_start_offset,
                    record_errors=tuple(
                        make(m.BatchIndexAndErrorMessage, batch_index=index, batch_index_error_message=why)
                        for index, why in p.record_errors
                    ) if hasattr(m, "BatchIndexAndErrorMessage") else (),
                    error_message=p.error_message,
                    **({"current_leader": make(m.LeaderIdAndEpoch, leader_id=p.current_leader[0],
                                               leader_epoch=p.current_leader[1])}
                       if p.current_leader is not None and version >= 10 else {}),
                )
                for p in parts
            ),
        )
        for topic, parts in topics
    )
    endpoints = {"node_endpoints": tuple(make(m.NodeEndpoint, node_id=n.node_id, host=n.host, port=n.port,
                                              rack=n.rack) for n in nodes)} if version >= 10 else {}
    body = make(response_schema(PRODUCE, version), responses=responses,
                throttle_time=datetime.timedelta(milliseconds=5), **endpoints)
    return encode_body(body)


@pytest.mark.parametrize("version", range(3, 14))
def test_matches_kio_byte_for_byte(version: int) -> None:
    topics = BY_ID if version >= 13 else TOPICS
    assert encode_produce_response(version, topics, throttle_time_ms=5) == _kio_bytes(version, topics)


@pytest.mark.parametrize("version", [3, 9])
def test_no_topics(version: int) -> None:
    assert encode_produce_response(version, [], throttle_time_ms=5) == _kio_bytes(version, [])


def test_unserved_versions_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_produce_response(2, [])


MOVED = [("orders", [PartitionResult(0, 0, 7, -1, 0),
                     PartitionResult(2, ErrorCode.not_leader_or_follower.value, -1, -1, -1, current_leader=(3, 12))])]


@pytest.mark.parametrize("version", range(9, 14))
def test_a_refused_partition_names_its_current_leader_and_where_it_listens(version: int) -> None:
    """KIP-951 (v10+): NOT_LEADER_OR_FOLLOWER with the new leader, so librdkafka and the Java
    producer go there at once; older versions carry neither field."""
    nodes = (NodeEndpoint(3, "127.0.0.3", 9093, None), NodeEndpoint(4, "broker-4.example", 19092, "rack-b"))
    topics = [(uuid.UUID(int=9), parts) for _, parts in MOVED] if version >= 13 else MOVED
    assert encode_produce_response(version, topics, 5, nodes) == _kio_bytes(version, topics, nodes)
