"""DescribeTopicPartitions, paged as Kafka 4.1 pages it, and kafka-topics --describe (which uses it)."""

from __future__ import annotations

import re
import uuid

import kio.schema.describe_topic_partitions.v0.request as m
from kafkacompat.protocol.messages import make

from compat_tests.reference import run_tool
from kafkacompat.testing import Broker
from kafkacompat.testing.reference_kafka import ReferenceKafka
from tests.conftest import create_topic
from tests.wire import Wire

PREFIX = f"dtp{uuid.uuid4().hex[:6]}"
NAMES = [f"{PREFIX}-b", f"{PREFIX}-a", "zz-missing", "bad/name"]


def _pages(bootstrap: str, limit: int) -> list[list[tuple]]:
    """Every page of one paged walk: (error, name, internal, partition indexes) per topic, then the cursor."""
    pages, cursor = [], None
    with Wire(bootstrap) as wire:
        while True:
            answer = wire.request(75, 0, make(m.DescribeTopicPartitionsRequest, response_partition_limit=limit, cursor=cursor,
                                              topics=tuple(make(m.TopicRequest, name=n) for n in NAMES)))
            page = [(t.error_code, t.name, t.is_internal, t.topic_authorized_operations,
                     [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas)
                      for p in t.partitions]) for t in answer.topics]
            nxt = answer.next_cursor
            pages.append([*page, nxt and (nxt.topic_name, nxt.partition_index)])
            if nxt is None or len(pages) > 10:
                return pages
            cursor = make(m.Cursor, topic_name=nxt.topic_name, partition_index=nxt.partition_index)


def test_pages_match_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    for bootstrap in (ours.bootstrap_servers, kafka41.bootstrap_servers):
        create_topic(bootstrap, f"{PREFIX}-a", 3)
        create_topic(bootstrap, f"{PREFIX}-b", 2)
    for limit in (0, 2, 5):
        assert _pages(ours.bootstrap_servers, limit) == _pages(kafka41.bootstrap_servers, limit), limit


def test_kafka_topics_describe_prints_what_it_prints_for_kafka(ours: Broker, kafka41: ReferenceKafka) -> None:
    def described(bootstrap: str) -> str:
        topic = create_topic(bootstrap, f"{PREFIX}-shown", 3)
        done = run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
        assert done.returncode == 0, done.stderr
        return re.sub(r"TopicId: \S+", "TopicId: -", done.stdout)

    assert described(ours.bootstrap_servers) == described(kafka41.bootstrap_servers)
