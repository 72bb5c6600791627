"""The hand-made Fetch encoder writes exactly what kio writes, for every served version."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kafkacompat.protocol.fetch_response import INLINE_MAX, PartitionAnswer, encode_fetch_response
from kafkacompat.protocol.messages import (
    encode_body,
    encode_response,
    make,
    response_chunks,
    response_module,
    response_schema,
)
from kio.schema.errors import ErrorCode

FETCH = 1
SMALL = bytes(range(200))
LARGE = bytes(INLINE_MAX + 1000)  # handed on as its own chunk, not copied


def _kio_bytes(version: int, topics: list[tuple[object, list[PartitionAnswer]]], session_id: int) -> bytes:
    m = response_module(FETCH, version)
    by_id = version >= 13
    responses = tuple(
        make(
            m.FetchableTopicResponse,
            topic=None if by_id else key,
            topic_id=key if by_id else None,
            partitions=tuple(
                make(
                    m.PartitionData,
                    partition_index=p.index,
                    error_code=ErrorCode(p.error_code),
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    log_start_offset=p.log_start_offset,
                    aborted_transactions=None if p.aborted is None else tuple(
                        make(m.AbortedTransaction, producer_id=pid, first_offset=first) for pid, first in p.aborted
                    ),
                    preferred_read_replica=-1,
                    records=bytes(p.records),
                )
                for p in parts
            ),
        )
        for key, parts in topics
    )
    body = make(
        response_schema(FETCH, version),
        throttle_time=datetime.timedelta(milliseconds=7),
        error_code=ErrorCode.none,
        session_id=session_id,
        responses=responses,
    )
    return encode_body(body)


def _topics(version: int) -> list[tuple[object, list[PartitionAnswer]]]:
    def key(name: str) -> object:
        return uuid.uuid5(uuid.NAMESPACE_DNS, name) if version >= 13 else name

    return [
        (key("orders"), [
            PartitionAnswer(0, 0, 120, 120, 3, SMALL),
            PartitionAnswer(1, 0, 0, 0, 0, b""),
            PartitionAnswer(2, ErrorCode.offset_out_of_range.value, 55, 55, 10, b""),
            PartitionAnswer(3, 0, 1 << 40, 1 << 40, 0, memoryview(LARGE)),
            PartitionAnswer(4, 0, 90, 70, 0, SMALL, [(1000, 5), (1 << 50, 60)]),  # read_committed
            PartitionAnswer(5, 0, 90, 90, 0, b"", []),
        ]),
        (key("a.stream..topic_" + "x" * 140), [PartitionAnswer(7, 0, 9, 9, 0, LARGE + SMALL)]),
        (key("gone"), [PartitionAnswer(0, ErrorCode.unknown_topic_or_partition.value, -1, -1, -1, b"")]),
    ]


@pytest.mark.parametrize("version", range(4, 18))
def test_matches_kio_byte_for_byte(version: int) -> None:
    topics = _topics(version)
    chunks = encode_fetch_response(version, topics, throttle_time_ms=7, session_id=0)
    assert b"".join(chunks) == _kio_bytes(version, topics, 0)


@pytest.mark.parametrize("version", [4, 12, 17])
def test_no_topics(version: int) -> None:
    assert b"".join(encode_fetch_response(version, [], throttle_time_ms=7)) == _kio_bytes(version, [], 0)


def test_large_records_are_not_copied() -> None:
    view = memoryview(LARGE)
    chunks = encode_fetch_response(12, [("t", [PartitionAnswer(0, 0, 1, 1, 0, view)])])
    assert any(chunk is view for chunk in chunks)


def test_unserved_versions_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_fetch_response(3, [])


@pytest.mark.parametrize("version", [4, 11, 12, 17])
def test_framed_like_any_response(version: int) -> None:
    topics = _topics(version)
    chunks = encode_fetch_response(version, topics, throttle_time_ms=7)
    framed = response_chunks(FETCH, version, 4242, chunks)
    assert b"".join(framed) == encode_response(FETCH, version, 4242, _kio_bytes(version, topics, 0))
    assert len(framed[0]) > 8  # the frame header never travels alone
