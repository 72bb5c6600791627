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

import bisect
import dataclasses
import uuid
import weakref
from typing import Any, Protocol

from kafkacompat.protocol.topic_entries import PartitionRoute, encode_topic_entry
from kafkacompat.storage import TopicInfo

from ..broker.cluster import TopicError
from ..security.acls import Operation
from ..services import Placement, Request, Security, Topics
from ..topic_names import LEGAL_NAMES_ONLY
from .common import ALL_TOPIC_OPERATIONS, NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads
from .slices import ENCODED_FROM, Slicer, encode_with_array
from .topic_routes import partition_routes, topic_operations

# DescribeTopicPartitions v0
API = Api(75, (0, 0), reads())


class Reaches(Topics, Placement, Security, Protocol):
    """What of the broker this module reaches."""

BROKER_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit

Wanted = tuple[str, TopicInfo | None, ErrorCode]  # a topic asked for (or listed): name, topic, error


@dataclasses.dataclass
class _Order:
    """Every topic by the name it is listed under, as of one topics_changed() stamp of the store."""

    stamp: int
    names: list[str]  # sorted
    keys: list[tuple[str, str]]  # (stream, topic) of each name


# Kept between pages: sorting every topic for every page made paging to the end cost
# pages x topics (65 s for 51 pages at 100,000 topics, issue 32). One order per store and per
# naming of topics (canonical, or Kafka-legal aliases), rebuilt when a topic comes or goes.
_ORDERS: weakref.WeakKeyDictionary[object, dict[bool, _Order]] = weakref.WeakKeyDictionary()


async def _order(ctx: Request[Reaches], slicer: Slicer) -> _Order:
    cluster = ctx.cluster
    store = cluster.store
    kept = _ORDERS.setdefault(store, {})
    legal_only = ctx.client_software_name in LEGAL_NAMES_ONLY
    stamp = store.topics_changed()  # read first: a change while the order is built makes it stale
    order = kept.get(legal_only)
    if order is not None and order.stamp == stamp:
        return order
    listed = []
    for info in store.iter_topics():
        await slicer.pause()
        listed.append((cluster.listed_name(info.stream, info.name, ctx.client_software_name), info.stream, info.name))
    listed.sort()
    await slicer.pause()
    order = kept[legal_only] = _Order(stamp, [entry[0] for entry in listed], [(entry[1], entry[2]) for entry in listed])
    return order


async def _all_from(ctx: Request[Reaches], cursor: Any, left: int, slicer: Slicer) -> list[Wanted]:
    """The topics this client may describe from the cursor on: as many as this page holds, then the next one."""
    order = await _order(ctx, slicer)
    store, authorizer = ctx.cluster.store, ctx.cluster.authorizer
    found: list[Wanted] = []
    for position in range(bisect.bisect_left(order.names, cursor.topic_name) if cursor is not None else 0,
                          len(order.names)):
        stream, name = order.keys[position]
        info = store.get_topic(stream, name)  # deleted since the order was built: left out
        if info is None or not authorizer.known_topic(ctx, Operation.DESCRIBE, stream, name, log_denied=False):
            continue
        listed = order.names[position]
        found.append((listed, info, ErrorCode.none))
        if left <= 0:
            break  # the first topic of the next page: where its cursor points
        left -= max(0, info.partitions - (cursor.partition_index if cursor and listed == cursor.topic_name else 0))
    return found


def _named(ctx: Request[Reaches], request: Any) -> list[Wanted]:
    cluster = ctx.cluster
    found: list[Wanted] = []
    info: TopicInfo | None
    for name in {topic.name for topic in request.topics}:
        if not cluster.authorizer.topic(ctx, Operation.DESCRIBE, name):
            found.append((name, None, ErrorCode.topic_authorization_failed))
            continue
        try:
            info = cluster.lookup(name).info
        except TopicError as exc:
            found.append((name, None, exc.code))
            continue
        found.append((name, info, ErrorCode.none if info else ErrorCode.unknown_topic_or_partition))
    cursor = request.cursor
    return sorted((entry for entry in found if cursor is None or entry[0] >= cursor.topic_name),
                  key=lambda entry: entry[0])


def _partition(m: Any, route: PartitionRoute) -> Any:
    return make(m.DescribeTopicPartitionsResponsePartition, error_code=route.error_code,
                partition_index=route.partition_index, leader_id=route.leader_id, leader_epoch=route.leader_epoch,
                replica_nodes=route.replica_nodes, isr_nodes=route.isr_nodes, eligible_leader_replicas=(),
                last_known_elr=(), offline_replicas=())


PageEntry = tuple[str, TopicInfo | None, ErrorCode, int, int]  # name, info, error, first and end partition
Page = list[PageEntry]


def _page(m: Any, wanted: list[Wanted], cursor: Any, left: int) -> tuple[Page, Any]:
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
    await cluster.view.catch_up()  # topics created through another broker a moment ago are known
    wanted = await _all_from(ctx, cursor, left, Slicer()) if not request.topics else _named(ctx, request)
    page, next_cursor = _page(m, wanted, cursor, left)
    await cluster.settle([info for _, info, _, _, _ in page if info is not None])  # this page's, not all wanted

    answer = make(m.DescribeTopicPartitionsResponse, throttle_time=NO_THROTTLE, topics=(), next_cursor=next_cursor)
    if len(page) < ENCODED_FROM:
        return dataclasses.replace(answer, topics=tuple(_topic_entry(ctx, m, entry) for entry in page))
    # a page of 2,000 topics took 50-100 ms to encode in one go: other connections wait for none of it
    return await encode_with_array(ctx.header.api_key, ctx.version, answer, "topics", page,
                                   lambda entry: _topic_bytes(ctx, entry), Slicer(),
                                   sample=_topic_entry(ctx, m, ("", None, ErrorCode.none, 0, 0)))


def _topic_entry(ctx: Request[Reaches], m: Any, entry: PageEntry) -> Any:
    """A topic's entry as a kio entity (pages of fewer than ENCODED_FROM topics)."""
    cluster = ctx.cluster
    name, info, error, first, last = entry
    if info is None:
        return make(m.DescribeTopicPartitionsResponseTopic, error_code=error, name=name, topic_id=uuid.UUID(int=0),
                    is_internal=False, partitions=(), topic_authorized_operations=ALL_TOPIC_OPERATIONS)
    partitions = tuple(_partition(m, route) for route in partition_routes(cluster, info, first, last))
    return make(m.DescribeTopicPartitionsResponseTopic, error_code=ErrorCode.none, name=name,
                topic_id=info.topic_id, is_internal=cluster.is_internal(info), partitions=partitions,
                topic_authorized_operations=topic_operations(ctx, info, ALL_TOPIC_OPERATIONS))


def _topic_bytes(ctx: Request[Reaches], entry: PageEntry) -> bytes:
    """The same entry written by hand (big pages: kio's writer took most of their time)."""
    cluster = ctx.cluster
    name, info, error, first, last = entry
    if info is None:
        return encode_topic_entry(ctx.header.api_key, ctx.version, error, name, None, False, (), ALL_TOPIC_OPERATIONS)
    return encode_topic_entry(ctx.header.api_key, ctx.version, ErrorCode.none, name, info.topic_id,
                              cluster.is_internal(info), partition_routes(cluster, info, first, last),
                              topic_operations(ctx, info, ALL_TOPIC_OPERATIONS))
