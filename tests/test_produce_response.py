"""The hand-made Produce response encoder writes exactly what kio writes, for every served version."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kafkacompat.protocol.messages import encode_body, make, response_module, response_schema
from kafkacompat.protocol.produce_response import PartitionResult, encode_produce_response

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


def _kio_bytes(version: int, topics: list[tuple[str | uuid.UUID, list[PartitionResult]]]) -> bytes:
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
                )
                for p in parts
            ),
        )
        for topic, parts in topics
    )
    body = make(response_schema(PRODUCE, version), responses=responses,
                throttle_time=datetime.timedelta(milliseconds=5))
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
