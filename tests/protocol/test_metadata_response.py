"""The hand-made Metadata topic encoder writes exactly what kio writes, for every served version."""

from __future__ import annotations

import random
import uuid

import pytest
from kafkacompat.protocol.messages import encode_body, make, response_module
from kafkacompat.protocol.metadata_response import PartitionRoute, encode_topic
from kio.schema.errors import ErrorCode

from kafkacompat.handlers import SUPPORTED

METADATA = 3
VERSIONS = range(SUPPORTED[METADATA][0], SUPPORTED[METADATA][1] + 1)
NAMES = ["t", "orders", "/apps/iot:sensor-temperature", "ünïcødé-tøpic", "x" * 249]


def _routes(rng: random.Random) -> list[PartitionRoute]:
    routes = []
    for index in range(rng.choice([0, 1, 2, 7, 130])):
        leader = rng.choice([-1, 0, 1, 3, 2**31 - 1])
        nodes = [] if leader < 0 else [leader, *rng.sample(range(100), rng.randrange(3))]
        routes.append(PartitionRoute(rng.choice([0, 5, 75]), index, leader, rng.choice([-1, 0, 9, 2**31 - 1]),
                                     nodes, nodes[:1], rng.sample(range(100), rng.randrange(2))))
    return routes


def _kio(version: int, name: str | None, topic_id: uuid.UUID, internal: bool, routes: list[PartitionRoute],
         operations: int, error: int) -> bytes:
    m = response_module(METADATA, version)
    return encode_body(make(
        m.MetadataResponseTopic,
        error_code=ErrorCode(error),
        name=name,
        topic_id=topic_id,
        is_internal=internal,
        partitions=tuple(make(
            m.MetadataResponsePartition,
            error_code=ErrorCode(r.error_code),
            partition_index=r.partition_index,
            leader_id=r.leader_id,
            leader_epoch=r.leader_epoch,
            replica_nodes=tuple(r.replica_nodes),
            isr_nodes=tuple(r.isr_nodes),
            offline_replicas=tuple(r.offline_replicas),
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
        ours = encode_topic(version, error, name, topic_id, internal, routes, operations)
        assert ours == _kio(version, name, topic_id, internal, routes, operations, error), (version, case)


def test_a_null_name_is_written_from_v12_and_refused_before() -> None:
    topic_id = uuid.uuid4()
    assert encode_topic(12, 100, None, topic_id, False, [], -(2**31)) == \
        _kio(12, None, topic_id, False, [], -(2**31), 100)
    with pytest.raises(ValueError, match="v11"):
        encode_topic(11, 100, None, topic_id, False, [], -(2**31))


def test_versions_it_does_not_know_are_refused() -> None:
    with pytest.raises(ValueError, match="v13"):
        encode_topic(13, 0, "t", None, False, [], 0)
