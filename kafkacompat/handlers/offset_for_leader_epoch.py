"""OffsetForLeaderEpoch: where an epoch ended, so consumers detect truncation."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Placement, Request, Security, Topics
from .common import NO_THROTTLE, ErrorCode, leader_epoch_error, make, schema_of
from .registry import Api, reads

# OffsetForLeaderEpoch v2-4
API = Api(23, (2, 4), reads(("topics",), "topics"))


class Reaches(Topics, Placement, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    topics = []
    for topic in request.topics:
        info, missing = cluster.authorizer.topic_for(ctx, Operation.DESCRIBE, topic.topic)
        parts = []
        for part in topic.partitions:
            epoch, end = -1, -1
            partition, error = await cluster.serving_partition(info, missing, part.partition)
            if partition is not None and info is not None:  # a served partition has its topic
                current = cluster.leader_epoch(info, part.partition, partition)
                error = leader_epoch_error(current, part.current_leader_epoch)
                if error == ErrorCode.none:  # leader epochs as Metadata names them, not the store's own
                    epoch, end = await partition.end_offset_for_epoch(part.leader_epoch, current)
            parts.append(
                make(m.EpochEndOffset, error_code=error, partition=part.partition, leader_epoch=epoch, end_offset=end)
            )
        topics.append(make(m.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(parts)))
    return make(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
