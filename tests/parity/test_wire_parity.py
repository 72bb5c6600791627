"""Answers Kafka 4.1 gives on the wire, asked of both brokers the same way.

Each test runs against kafkacompat and against a real Kafka 4.1 node; the
expectations are what Kafka 4.1 answered when this was written.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import Record, build_batch
from kio.schema.errors import ErrorCode

from tests.conftest import create_topic
from tests.test_bad_input import produce_request
from tests.test_fetch_and_offsets import list_offsets
from tests.wire import Wire

from .test_fetch_max_bytes import _fill, _produce

TOPIC_OPERATIONS = 3576  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
CLUSTER_OPERATIONS = 8096  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE


@pytest.mark.parametrize(
    ("timestamp", "version", "answer"),
    [
        (-4, 8, (ErrorCode.none, -1, 0)),  # earliest local: every offset is local here
        (-4, 7, (ErrorCode.unsupported_version, -1, -1)),  # defined from v8
        (-5, 9, (ErrorCode.none, -1, -1)),  # latest tiered: nothing is tiered
        (-5, 8, (ErrorCode.unsupported_version, -1, -1)),  # defined from v9
        (-3, 1, (ErrorCode.unsupported_version, -1, -1)),  # max timestamp, defined from v7
        (-6, 10, (ErrorCode.unsupported_version, -1, -1)),  # not defined by v10
    ],
)
def test_list_offsets_special_timestamps(bootstrap: str, timestamp: int, version: int, answer: tuple) -> None:
    topic = _fill(bootstrap, 10, 3)
    with Wire(bootstrap) as wire:
        got = list_offsets(wire, topic, timestamp, version=version)
    assert (got.error_code, got.timestamp, got.offset) == answer


@pytest.mark.parametrize("version", [4, 9])
def test_list_offsets_misses_name_no_leader_epoch(bootstrap: str, version: int) -> None:
    """No record at or after T, or no record at all for -3: Kafka leaves the epoch at its default -1."""
    empty, filled = (create_topic(bootstrap, f"{kind}-{uuid.uuid4().hex[:8]}") for kind in ("empty", "filled"))
    at = int(time.time() * 1000) - 60_000  # recent: within the 7 days both keep
    with Wire(bootstrap) as wire:
        _produce(wire, produce_request(filled, build_batch([Record(None, b"v", [], at + i) for i in range(3)])))
        answers = [list_offsets(wire, empty, -3, version=max(version, 7)), list_offsets(wire, empty, at, version),
                   list_offsets(wire, filled, at + 3, version)]
        hit = list_offsets(wire, filled, at + 1, version)
    seen = [(a.error_code, a.timestamp, a.offset, a.leader_epoch) for a in answers]
    assert seen == [(ErrorCode.none, -1, -1, -1)] * 3
    assert (hit.timestamp, hit.offset) == (at + 1, 1)


def test_authorized_operations_bits(bootstrap: str) -> None:
    import kio.schema.describe_cluster.v1.request as dc
    import kio.schema.metadata.v10.request as md

    topic = create_topic(bootstrap, f"ops-{uuid.uuid4().hex[:8]}")
    with Wire(bootstrap) as wire:
        meta = wire.request(3, 10, make(md.MetadataRequest, topics=(make(md.MetadataRequestTopic, topic_id=None, name=topic),),
                                        allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                        include_topic_authorized_operations=True))
        asked = wire.request(60, 1, make(dc.DescribeClusterRequest, include_cluster_authorized_operations=True, endpoint_type=1))
        unasked = wire.request(60, 1, make(dc.DescribeClusterRequest, include_cluster_authorized_operations=False, endpoint_type=1))
    assert meta.topics[0].topic_authorized_operations == TOPIC_OPERATIONS
    assert meta.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert asked.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert unasked.cluster_authorized_operations == -(2**31)


def test_cluster_id_is_a_kafka_uuid(bootstrap: str) -> None:
    import kio.schema.describe_cluster.v1.request as dc

    with Wire(bootstrap) as wire:
        cluster_id = wire.request(60, 1, make(dc.DescribeClusterRequest, include_cluster_authorized_operations=False,
                                              endpoint_type=1)).cluster_id
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)


def test_consumer_offsets_is_internal_and_aiokafka_excludes_it_from_patterns(bootstrap: str) -> None:
    """Once groups are used, __consumer_offsets is listed as internal; aiokafka's
    exclude_internal_topics (the default) keeps it out of pattern subscriptions."""
    from aiokafka import AIOKafkaConsumer

    topic = create_topic(bootstrap, f"pattern-{uuid.uuid4().hex[:8]}")

    async def assigned(exclude_internal: bool) -> set[str]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                                    exclude_internal_topics=exclude_internal, metadata_max_age_ms=500)
        await consumer.start()
        try:
            consumer.subscribe(pattern=f"^({topic}|__consumer_offsets)$")
            for _ in range(100):
                topics = {tp.topic for tp in consumer.assignment()}
                if topic in topics:
                    return topics
                await asyncio.sleep(0.1)
            return {tp.topic for tp in consumer.assignment()}
        finally:
            await consumer.stop()

    assert asyncio.run(assigned(True)) == {topic}
    assert asyncio.run(assigned(False)) == {topic, "__consumer_offsets"}
    import kio.schema.metadata.v12.request as md

    with Wire(bootstrap) as wire:
        listed = wire.request(3, 12, make(md.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False)).topics
    internal = {t.name for t in listed if t.is_internal}
    # the session's Kafka 4.1 also holds __transaction_state once a test used transactions there
    assert "__consumer_offsets" in internal and internal <= {"__consumer_offsets", "__transaction_state"}
    assert {t.name for t in listed if t.name.startswith("__") and not t.is_internal} == set()
