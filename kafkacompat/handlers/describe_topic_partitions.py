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
from typing import Any, Protocol

from kafkacompat.storage import TopicInfo

from ..broker.cluster import TopicError
from ..security.acls import Operation, ResourceType
from ..services import Placement, Request, Security, Topics
from ..topic_names import canonical_name
from .common import ALL_TOPIC_OPERATIONS, NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads
from .slices import Slicer

# DescribeTopicPartitions v0
API = Api(75, (0, 0), reads())


class Reaches(Topics, Placement, Security, Protocol):
    """What of the broker this module reaches."""

BROKER_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit


async def _wanted(ctx: Request[Reaches], request: Any, slicer: Slicer) -> list[tuple[str, TopicInfo | None, ErrorCode]]:
    cluster = ctx.cluster
    authorizer = cluster.authorizer
    await cluster.view.catch_up()  # topics created through another broker a moment ago are known
    found: list[tuple[str, TopicInfo | None, ErrorCode]] = []
    info: TopicInfo | None
    if not request.topics:
        for info in cluster.store.list_topics():
            await slicer.pause()  # every page lists every topic: other connections go on meanwhile
            if authorizer.known_topic(ctx, Operation.DESCRIBE, info.stream, info.name, log_denied=False):
                found.append((cluster.listed_name(info.stream, info.name, ctx.client_software_name), info,
                              ErrorCode.none))
    else:
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


def _partition(m: Any, cluster: Reaches, info: TopicInfo, index: int) -> Any:
    error, node, epoch = cluster.routing(info, index)
    replicas = (node,) if node >= 0 else ()
    return make(m.DescribeTopicPartitionsResponsePartition, error_code=error, partition_index=index,
                leader_id=node, leader_epoch=epoch, replica_nodes=replicas, isr_nodes=replicas,
                eligible_leader_replicas=(), last_known_elr=(), offline_replicas=())


Page = list[tuple[str, TopicInfo | None, ErrorCode, int, int]]  # name, info, error, first and end partition


def _page(m: Any, wanted: list[tuple[str, TopicInfo | None, ErrorCode]], cursor: Any, left: int) -> tuple[Page, Any]:
    """The topics of this page with their partition ranges, and the cursor of the next page (or None)."""
    page: Page = []
    for position, (name, info, error) in enumerate(wanted):
        if info is None:
            page.append((name, None, error, 0, 0))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        last = min(info.partitions, first + left)
        left -= max(0, last - first)
        page.append((name, info, error, first, last))
        if left == 0:
            if last < info.partitions:
                return page, make(m.Cursor, topic_name=name, partition_index=last)
            if position + 1 < len(wanted):
                return page, make(m.Cursor, topic_name=wanted[position + 1][0], partition_index=0)
            return page, None
    return page, None


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    left = max(1, min(request.response_partition_limit, BROKER_PARTITION_LIMIT))
    cursor = request.cursor
    wanted = [entry for entry in await _wanted(ctx, request, Slicer())
              if cursor is None or entry[0] >= cursor.topic_name]
    page, next_cursor = _page(m, wanted, cursor, left)
    await cluster.settle([info for _, info, _, _, _ in page if info is not None])  # this page's, not all wanted
    topics = []
    for name, info, error, first, last in page:
        if info is None:
            topics.append(make(m.DescribeTopicPartitionsResponseTopic, error_code=error, name=name,
                               topic_id=uuid.UUID(int=0), is_internal=False, partitions=(),
                               topic_authorized_operations=ALL_TOPIC_OPERATIONS))
            continue
        partitions = tuple(_partition(m, cluster, info, index) for index in range(first, last))
        topics.append(make(m.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none, name=name,
                           topic_id=info.topic_id, is_internal=cluster.is_internal(info), partitions=partitions,
                           topic_authorized_operations=cluster.authorizer.operations(
                               ctx, ResourceType.TOPIC, canonical_name(info.stream, info.name, cluster.default_stream),
                               ALL_TOPIC_OPERATIONS, info.stream)))
    return make(m.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics),
                next_cursor=next_cursor)
