"""The hand-made topic entries of Metadata and DescribeTopicPartitions are exactly what kio writes, for every served version."""

from __future__ import annotations

import random
import uuid

import pytest
from kafkacompat.protocol.messages import encode_body, make, response_module
from kafkacompat.protocol.topic_entries import (
    DESCRIBE_TOPIC_PARTITIONS,
    METADATA,
    PartitionRoute,
    encode_topic_entry,
)
from kio.schema.errors import ErrorCode

from kafkacompat.handlers import SUPPORTED

VERSIONS = range(SUPPORTED[METADATA][0], SUPPORTED[METADATA][1] + 1)
NAMES = ["t", "orders", "/apps/iot:sensor-temperature", "ünïcødé-tøpic", "x" * 249]


def _routes(rng: random.Random) -> list[PartitionRoute]:
    routes = []
    for index in range(rng.choice([0, 1, 2, 7, 130])):
        leader = rng.choice([-1, 0, 1, 3, 2**31 - 1])
        nodes = [] if leader < 0 else [leader, *rng.sample(range(100), rng.randrange(3))]
        routes.append(PartitionRoute(rng.choice([0, 5, 75]), index, leader, rng.choice([-1, 0, 9, 2**31 - 1]),
                                     nodes, nodes[:1], rng.sample(range(100), rng.randrange(2)),
                                     rng.choice([None, (), (4,), (1, 2)]), rng.choice([None, (), (7, 8, 9)])))
    return routes


def _kio(api_key: int, version: int, name: str | None, topic_id: uuid.UUID, internal: bool,
         routes: list[PartitionRoute], operations: int, error: int) -> bytes:
    m = response_module(api_key, version)
    prefix = "Metadata" if api_key == METADATA else "DescribeTopicPartitions"
    elr = () if api_key == METADATA else ("eligible_leader_replicas", "last_known_elr")  # nullable
    return encode_body(make(
        getattr(m, f"{prefix}ResponseTopic"),
        error_code=ErrorCode(error),
        name=name,
        topic_id=topic_id,
        is_internal=internal,
        partitions=tuple(make(
            getattr(m, f"{prefix}ResponsePartition"),
            error_code=ErrorCode(r.error_code),
            partition_index=r.partition_index,
            leader_id=r.leader_id,
            leader_epoch=r.leader_epoch,
            replica_nodes=tuple(r.replica_nodes),
            isr_nodes=tuple(r.isr_nodes),
            offline_replicas=tuple(r.offline_replicas),
            **{field: None if getattr(r, field) is None else tuple(getattr(r, field)) for field in elr},
        ) for r in routes),
        topic_authorized_operations=operations,
    ))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_topic_is_the_bytes_kio_writes(version: int) -> None:
    rng = random.Random(version)
    for case in range(60):
        name = NAMES[case % len(NAMES)]
        topic_id = uuid.UUID(int=0) if case % 7 == 0 else uuid.UUID(int=rng.getrandbits(128))
        internal = case % 5 == 0
        routes = _routes(rng)
        operations = rng.choice([-(2**31), 0, 3064])
        error = rng.choice([0, 3, 29])
        ours = encode_topic_entry(METADATA, version, error, name, topic_id, internal, routes, operations)
        assert ours == _kio(METADATA, version, name, topic_id, internal, routes, operations, error), (version, case)


def test_a_null_name_is_written_from_v12_and_refused_before() -> None:
    topic_id = uuid.uuid4()
    assert encode_topic_entry(METADATA, 12, 100, None, topic_id, False, [], -(2**31)) == \
        _kio(METADATA, 12, None, topic_id, False, [], -(2**31), 100)
    with pytest.raises(ValueError, match="v12 only"):
        encode_topic_entry(METADATA, 11, 100, None, topic_id, False, [], -(2**31))


def test_versions_it_does_not_know_are_refused() -> None:
    with pytest.raises(ValueError, match="v13"):
        encode_topic_entry(METADATA, 13, 0, "t", None, False, [], 0)


def test_a_described_topic_is_the_bytes_kio_writes() -> None:
    rng = random.Random(75)
    for case in range(200):
        name = None if case % 11 == 0 else NAMES[case % len(NAMES)]
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        routes = _routes(rng)
        operations, error = rng.choice([-(2**31), 3064]), rng.choice([0, 3])
        internal = case % 3 == 0
        ours = encode_topic_entry(DESCRIBE_TOPIC_PARTITIONS, 0, error, name, topic_id, internal, routes, operations)
        assert ours == _kio(DESCRIBE_TOPIC_PARTITIONS, 0, name, topic_id, internal, routes, operations, error), case
    with pytest.raises(ValueError, match="v1"):
        encode_topic_entry(DESCRIBE_TOPIC_PARTITIONS, 1, 0, "t", None, False, [], 0)
