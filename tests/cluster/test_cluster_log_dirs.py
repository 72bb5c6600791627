"""AlterReplicaLogDirs in a cluster of brokers sharing one PostgreSQL + S3 store.

Each broker's one log dir is the object store. As on a Kafka cluster, the
broker leading a partition (its only replica) answers for it, and a broker
that does not host it answers REPLICA_NOT_AVAILABLE (kafka-reassign-partitions
retries on that); an unknown dir is LOG_DIR_NOT_FOUND on every broker.
"""

from __future__ import annotations

import kio.schema.alter_replica_log_dirs.v2.request as arld
import kio.schema.describe_log_dirs.v4.request as dld
import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing.cluster import BrokerCluster
from tests.cluster.test_shared_store import cluster, create_topic, known_to, leaders, wait_until  # noqa: F401 - the fixture
from tests.wire import Wire

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _alter(bootstrap: str, log_dir: str, topic: str) -> ErrorCode:
    with Wire(bootstrap) as wire:
        answer = wire.request(34, 2, make(arld.AlterReplicaLogDirsRequest, dirs=(
            make(arld.AlterReplicaLogDir, path=log_dir, topics=(
                make(arld.AlterReplicaLogDirTopic, name=topic, partitions=(0,)),)),)))
    [result] = answer.results
    [partition] = result.partitions
    return partition.error_code


def test_the_leader_answers_for_its_partition_and_the_others_say_replica_not_available(
        cluster: BrokerCluster) -> None:  # noqa: F811 - the imported fixture
    topic = create_topic(cluster.bootstrap, 1)
    leader = leaders(cluster.bootstrap, topic)[0]
    assert leader > 0
    other = next(n for n in (1, 2, 3) if n != leader)
    wait_until("the leader takes the topic in from the store", lambda: known_to(cluster.broker(leader).bootstrap, topic), 10)
    with Wire(cluster.broker(leader).bootstrap) as wire:
        [only] = wire.request(35, 4, make(dld.DescribeLogDirsRequest, topics=None)).results
    assert _alter(cluster.broker(leader).bootstrap, only.log_dir, topic) == ErrorCode.none
    assert _alter(cluster.broker(other).bootstrap, only.log_dir, topic) == ErrorCode.replica_not_available
    assert _alter(cluster.broker(other).bootstrap, "/no/such/dir", topic) == ErrorCode.log_dir_not_found
