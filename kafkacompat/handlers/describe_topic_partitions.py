"""DescribeTopicPartitions (KIP-966): topics and their partitions, paged by a cursor.

Java's admin client (4.x) describes topics with it once it is advertised.
As Kafka 4.1 answers: topics in name order (all topics under their listed
names when none are named), starting at the cursor's topic and partition;
at most response_partition_limit partitions (at least one), the next
cursor pointing at the first partition left out; unknown or invalid names
are answered with their error where they sort on the page, without
counting against the limit. One broker leads every partition, so eligible leader replicas
are always empty lists.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkacompat.storage import TopicInfo

from ..broker.cluster import TopicError
from ..broker.topic_names import canonical_name
from ..security.acls import Operation, ResourceType
from .common import ALL_TOPIC_OPERATIONS, NO_THROTTLE, ErrorCode, make, schema_of

BROKER_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit


def _wanted(ctx: Any, request: Any) -> list[tuple[str, TopicInfo | None, ErrorCode]]:
    cluster = ctx.cluster
    authorizer = cluster.authorizer
    if not request.topics:
        found = [(cluster.listed_name(info.stream, info.name, ctx.client_software_name), info, ErrorCode.none)
                 for info in cluster.store.list_topics()
                 if authorizer.known_topic(ctx, Operation.DESCRIBE, info.stream, info.name, log_denied=False)]
    else:
        found = []
        for name in {topic.name for topic in request.topics}:
            if not authorizer.topic(ctx, Operation.DESCRIBE, name):
                found.append((name, None, ErrorCode.topic_authorization_failed))
                continue
            try:
                info = cluster.lookup(name).info
            except TopicError as exc:
                found.append((name, None, exc.code))
                continue
            found.append((name, info, ErrorCode.none if info else ErrorCode.unknown_topic_or_partition))
    return sorted(found, key=lambda entry: entry[0])


def _partition(m: Any, cluster: Any, info: TopicInfo, index: int) -> Any:
    error, node, epoch = cluster.routing(info, index)
    replicas = (node,) if node >= 0 else ()
    return make(m.DescribeTopicPartitionsResponsePartition, error_code=error, partition_index=index,
                leader_id=node, leader_epoch=epoch, replica_nodes=replicas, isr_nodes=replicas,
                eligible_leader_replicas=(), last_known_elr=(), offline_replicas=())


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    left = max(1, min(request.response_partition_limit, BROKER_PARTITION_LIMIT))
    cursor = request.cursor
    wanted = [entry for entry in _wanted(ctx, request) if cursor is None or entry[0] >= cursor.topic_name]
    await cluster.settle([info for _, info, _ in wanted if info is not None])
    topics = []
    next_cursor = None
    for position, (name, info, error) in enumerate(wanted):
        if info is None:
            topics.append(make(m.DescribeTopicPartitionsResponseTopic, error_code=error, name=name,
                               topic_id=uuid.UUID(int=0), is_internal=False, partitions=(),
                               topic_authorized_operations=ALL_TOPIC_OPERATIONS))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        last = min(info.partitions, first + left)
        partitions = tuple(_partition(m, cluster, info, index) for index in range(first, last))
        left -= len(partitions)
        topics.append(make(m.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none, name=name,
                           topic_id=info.topic_id, is_internal=cluster.is_internal(info), partitions=partitions,
                           topic_authorized_operations=cluster.authorizer.operations(
                               ctx, ResourceType.TOPIC, canonical_name(info.stream, info.name, cluster.default_stream),
                               ALL_TOPIC_OPERATIONS, info.stream)))
        if left == 0:
            if last < info.partitions:
                next_cursor = make(m.Cursor, topic_name=name, partition_index=last)
            elif position + 1 < len(wanted):
                next_cursor = make(m.Cursor, topic_name=wanted[position + 1][0], partition_index=0)
            break
    return make(m.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics),
                next_cursor=next_cursor)
