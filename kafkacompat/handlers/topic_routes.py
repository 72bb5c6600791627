"""What Metadata and DescribeTopicPartitions say of a topic: its partitions' routes and the operations allowed on it.

Both answers describe a partition the same way (one broker leads it, so
it is its own replica set and ISR, empty while it has no leader) and a
topic's authorized operations the same way; written twice, the two
handlers had drifted apart in shape only.
"""

from __future__ import annotations

from typing import Protocol

from kafkacompat.protocol.topic_entries import PartitionRoute
from kafkacompat.storage import TopicInfo

from ..security.acls import ResourceType
from ..services import Placement, Request, Security, Topics
from ..topic_names import canonical_name
from .common import UNSET_OPERATIONS


class Reaches(Topics, Placement, Security, Protocol):
    """What of the broker this module reaches."""


def partition_routes(cluster: Placement, info: TopicInfo, first: int = 0, end: int | None = None
                     ) -> list[PartitionRoute]:
    """Leader, epoch and error of partitions `first` to `end` (all by default), as clients are told them."""
    routes = []
    for index in range(first, info.partitions if end is None else end):
        error, node, epoch = cluster.routing(info, index)
        replicas = (node,) if node >= 0 else ()
        routes.append(PartitionRoute(error, index, node, epoch, replicas, replicas))
    return routes


def topic_operations(ctx: Request[Reaches], info: TopicInfo, ops: int) -> int:
    """Of the operations `ops`, those the principal may perform on the topic; UNSET_OPERATIONS when not asked."""
    if ops == UNSET_OPERATIONS:
        return ops
    cluster = ctx.cluster
    return cluster.authorizer.operations(ctx, ResourceType.TOPIC, canonical_name(info.stream, info.name,
                                         cluster.default_stream), ops, info.stream)
