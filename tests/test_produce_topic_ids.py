"""Produce v13 (KIP-516, Kafka 4.1) names topics by id: appended where the id points, unknown ids refused."""

from __future__ import annotations

import datetime
import uuid

from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire

PRODUCE, METADATA = 0, 3


def _topic_ids(wire: Wire, names: list[str]) -> dict[str, uuid.UUID]:
    import kio.schema.metadata.v12.request as m

    topics = tuple(make(m.MetadataRequestTopic, name=name, topic_id=None) for name in names)
    response = wire.request(METADATA, 12, make(m.MetadataRequest, topics=topics, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
    return {t.name: t.topic_id for t in response.topics}


def _produce_v13(wire: Wire, parts: list[tuple[uuid.UUID, int, bytes]]) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
    """(topic id, partition) -> (error code, base offset) for one acks=all request."""
    import kio.schema.produce.v13.request as m

    request = make(m.ProduceRequest, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                   topic_data=tuple(make(m.TopicProduceData, topic_id=topic_id, partition_data=(
                       make(m.PartitionProduceData, index=index, records=records),)) for topic_id, index, records in parts))
    response = wire.request(PRODUCE, 13, request)
    return {(t.topic_id, p.index): (p.error_code.value, p.base_offset)
            for t in response.responses for p in t.partition_responses}


def test_v13_appends_by_topic_id_and_refuses_unknown_ids() -> None:
    with Broker() as broker:
        broker.create_topic("orders", partitions=2)
        broker.create_topic("/apps/iot/pumps:metrics")
        with Wire(broker.bootstrap_servers) as wire:
            ids = _topic_ids(wire, ["orders", "/apps/iot/pumps:metrics"])
            nobody = uuid.uuid4()
            batch = build_batch([Record(b"k", b"by-id", [], 1_700_000_000_000)])
            answers = _produce_v13(wire, [(ids["orders"], 1, batch), (nobody, 0, batch),
                                          (ids["/apps/iot/pumps:metrics"], 0, batch)])
        assert answers == {(ids["orders"], 1): (0, 0), (nobody, 0): (ErrorCode.unknown_topic_id.value, -1),
                           (ids["/apps/iot/pumps:metrics"], 0): (0, 0)}
        assert [m.value for m in broker.consume("orders", partition=1)] == [b"by-id"]
        assert [m.value for m in broker.consume("/apps/iot/pumps:metrics")] == [b"by-id"]
