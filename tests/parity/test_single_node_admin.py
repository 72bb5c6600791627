"""ElectLeaders and partition reassignments, answered as a single-node Kafka 4.1 answers them."""

from __future__ import annotations

import datetime
import uuid

import kio.schema.alter_partition_reassignments.v0.request as ar
import kio.schema.elect_leaders.v2.request as el
import kio.schema.list_partition_reassignments.v0.request as lr
from kafkacompat.protocol.messages import make

from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import ReferenceKafka
from tests.conftest import create_topic
from tests.wire import Wire

TIMEOUT = datetime.timedelta(seconds=5)
TOPIC = f"single-{uuid.uuid4().hex[:6]}"


def _answers(bootstrap: str) -> list:
    create_topic(bootstrap, TOPIC, 2)
    out = []
    with Wire(bootstrap) as wire:
        for election in (0, 1):  # preferred, unclean
            out.append(wire.request(43, 2, make(el.ElectLeadersRequest, election_type=election, timeout=TIMEOUT, topic_partitions=(
                make(el.TopicPartitions, topic=TOPIC, partitions=(0, 5)), make(el.TopicPartitions, topic="nope", partitions=(0,))))))
            every = wire.request(43, 2, make(el.ElectLeadersRequest, election_type=election, topic_partitions=None, timeout=TIMEOUT))
            out.append([r.partition_result for r in every.replica_election_results if r.topic == TOPIC])
        out.append(wire.request(46, 0, make(lr.ListPartitionReassignmentsRequest, topics=None, timeout=TIMEOUT)))
        for replicas in ((1,), (2,), None, (1, 1), ()):
            out.append(wire.request(45, 0, make(ar.AlterPartitionReassignmentsRequest, timeout=TIMEOUT, topics=(
                make(ar.ReassignableTopic, name=TOPIC, partitions=(
                    make(ar.ReassignablePartition, partition_index=0, replicas=replicas),
                    make(ar.ReassignablePartition, partition_index=7, replicas=(1,)))),
                make(ar.ReassignableTopic, name="nope", partitions=(
                    make(ar.ReassignablePartition, partition_index=0, replicas=(1,)),))))))
    return out


def test_answers_match_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    assert _answers(ours.bootstrap_servers) == _answers(kafka41.bootstrap_servers)
