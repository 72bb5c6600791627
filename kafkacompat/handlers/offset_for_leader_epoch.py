"""OffsetForLeaderEpoch: where an epoch ended, so consumers detect truncation."""

from __future__ import annotations

from typing import Any

from ..cluster import TopicError
from .common import NO_THROTTLE, ErrorCode, make, schema_of


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    topics = []
    for topic in request.topics:
        try:
            info = cluster.lookup(topic.topic).info
            missing = ErrorCode.unknown_topic_or_partition
        except TopicError as exc:
            info, missing = None, exc.code
        parts = []
        for part in topic.partitions:
            error, epoch, end = ErrorCode.none, -1, -1
            if info is None or not 0 <= part.partition < info.partitions:
                error = missing
            else:
                partition = cluster.store.partition(info.stream, info.name, part.partition)
                current = part.current_leader_epoch
                if current >= 0 and current != partition.leader_epoch:
                    error = (
                        ErrorCode.fenced_leader_epoch
                        if current < partition.leader_epoch
                        else ErrorCode.unknown_leader_epoch
                    )
                else:
                    epoch, end = await partition.end_offset_for_epoch(part.leader_epoch)
            parts.append(
                make(m.EpochEndOffset, error_code=error, partition=part.partition, leader_epoch=epoch, end_offset=end)
            )
        topics.append(make(m.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(parts)))
    return make(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
