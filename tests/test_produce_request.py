"""The hand-made Produce parser reads what kio reads, for every version, without copying records."""

from __future__ import annotations

import datetime
import struct
import sys
import uuid

import pytest
from kafkacompat.protocol.messages import MalformedRequestError, encode_body, make, request_schema
from kafkacompat.protocol.produce_request import parse_produce_request
from kafkacompat.protocol.records import Record, build_batch

PRODUCE = 0
BATCH = build_batch([Record(b"k", b"v" * 300, [("h", b"1")], 1_700_000_000_000)])
TOPIC_IDS = {"orders": uuid.UUID(int=0x1234), "/apps/iot/pumps:metrics": uuid.uuid4()}  # v13 names topics by id


def _request(version: int, transactional_id: str | None = None) -> bytes:
    m = sys.modules[request_schema(PRODUCE, version).__module__]
    body = m.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(milliseconds=30_000),
        topic_data=(
            make(m.TopicProduceData, name="orders", topic_id=TOPIC_IDS["orders"], partition_data=(
                m.PartitionProduceData(index=0, records=BATCH),
                m.PartitionProduceData(index=3, records=BATCH + BATCH),
                m.PartitionProduceData(index=5, records=None),
            )),
            make(m.TopicProduceData, name="/apps/iot/pumps:metrics", topic_id=TOPIC_IDS["/apps/iot/pumps:metrics"],
                 partition_data=(m.PartitionProduceData(index=1, records=b""),)),
        ),
    )
    return b"\x00" * 7 + encode_body(body)  # a header's worth of bytes before the body


def _shape(request: object) -> list[object]:
    return [
        request.transactional_id, request.acks,  # type: ignore[attr-defined]
        [(getattr(t, "name", None) or None, getattr(t, "topic_id", None),
          [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
         for t in request.topic_data],  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("version", range(3, 14))
def test_matches_kio(version: int) -> None:
    frame = _request(version, "tx-1")
    ours = parse_produce_request(frame, 7, version)
    kio_request, size = _reader(version)(frame, 7)
    assert 7 + size == len(frame)
    assert _shape(ours) == _shape(kio_request)
    assert ours.timeout_ms == 30_000


def _reader(version: int):  # type: ignore[no-untyped-def]
    from kio.serial import entity_reader

    return entity_reader(request_schema(PRODUCE, version))


def test_v13_names_topics_by_id_alone() -> None:
    request = parse_produce_request(_request(13), 7, 13)
    assert [(t.name, t.topic_id) for t in request.topic_data] == [("", id_) for id_ in TOPIC_IDS.values()]


def test_records_are_views_into_the_frame() -> None:
    frame = bytearray(_request(9))
    request = parse_produce_request(frame, 7, 9)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_versions_have_no_transactional_id(version: int) -> None:
    v3 = _request(3)
    legacy = v3[:7] + v3[9:]  # drop the null transactional id (int16 -1)
    assert _shape(parse_produce_request(legacy, 7, version)) == _shape(parse_produce_request(v3, 7, 3))


@pytest.mark.parametrize("version", [3, 9])
def test_truncation_and_trailing_bytes_are_malformed(version: int) -> None:
    frame = _request(version)
    for cut in (8, 20, len(frame) - 1):
        with pytest.raises(MalformedRequestError):
            parse_produce_request(frame[:cut], 7, version)
    with pytest.raises(MalformedRequestError, match="trailing"):
        parse_produce_request(frame + b"\x00", 7, version)


def test_a_lying_records_length_is_malformed() -> None:
    frame = bytearray(_request(3))
    # topic count at 7+2+2+4, then name, partition count, index, records length
    pos = 7 + 2 + 2 + 4 + 4 + 2 + len("orders") + 4 + 4
    struct.pack_into(">i", frame, pos, 1 << 30)
    with pytest.raises(MalformedRequestError):
        parse_produce_request(frame, 7, 3)
