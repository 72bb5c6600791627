"""DescribeQuorum: kafka-metadata-quorum.sh and the raw API show a single-node quorum shaped as Kafka 4.1's.

Ids, offsets and times differ between any two clusters: both outputs are
reduced to their shape (which lines, which JSON keys, which columns, the
leader's status, numbers as <n>) and must then be equal.
"""

from __future__ import annotations

import json
import re

import kio.schema.describe_quorum.v2.request as dq
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import ReferenceKafka
from tests.wire import Wire


def _status(bootstrap: str) -> dict[str, str]:
    done = run_tool("kafka-metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    assert done.returncode == 0, done.stderr
    return dict(re.split(r":\s+", line, maxsplit=1) for line in done.stdout.splitlines() if line.strip())


def _status_shape(status: dict[str, str]) -> dict[str, object]:
    voters = json.loads(status["CurrentVoters"])
    return {
        "keys": list(status),
        "leader_is_the_voter": [v["id"] for v in voters] == [int(status["LeaderId"])],
        "voter_keys": [sorted(v) for v in voters],
        "endpoints": [[re.sub(r"//[^:]+:\d+", "//<host>:<port>", e) for e in v["endpoints"]] for v in voters],
        "observers": status["CurrentObservers"],
        "lag": (status["MaxFollowerLag"], status["MaxFollowerLagTimeMs"]),
    }


def _replication_shape(bootstrap: str) -> list[list[str]]:
    done = run_tool("kafka-metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--replication")
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines() if line.strip()]
    return [rows[0]] + [[re.sub(r"^[\w-]{22}$", "<dir>", re.sub(r"^\d+$", "<n>", c.strip())) for c in r] for r in rows[1:]]


def _wrong_partition(bootstrap: str) -> object:
    with Wire(bootstrap) as wire:
        return wire.request(55, 2, make(dq.DescribeQuorumRequest, topics=(
            make(dq.TopicData, topic_name="__cluster_metadata", partitions=(make(dq.PartitionData, partition_index=1),)),)))


def test_metadata_quorum_described_as_kafka_describes_its_own(ours: Broker, kafka41: ReferenceKafka) -> None:
    mine, theirs = _status(ours.bootstrap_servers), _status(kafka41.bootstrap_servers)
    assert _status_shape(mine) == _status_shape(theirs)
    assert mine["ClusterId"] == ours.server.cluster.cluster_id and mine["LeaderId"] == "1"
    assert _replication_shape(ours.bootstrap_servers) == _replication_shape(kafka41.bootstrap_servers)
    assert _wrong_partition(ours.bootstrap_servers) == _wrong_partition(kafka41.bootstrap_servers)


def test_the_quorum_answer_names_this_node_as_leader_and_voter(ours: Broker) -> None:
    with Wire(ours.bootstrap_servers) as wire:
        answer = wire.request(55, 2, make(dq.DescribeQuorumRequest, topics=(
            make(dq.TopicData, topic_name="__cluster_metadata", partitions=(make(dq.PartitionData, partition_index=0),)),)))
    (partition,) = answer.topics[0].partitions
    assert answer.error_code == partition.error_code == ErrorCode.none
    assert partition.leader_id == 1 and [v.replica_id for v in partition.current_voters] == [1]
    assert [(n.node_id, n.listeners[0].port) for n in answer.nodes] == [(1, ours.port)]
