"""OffsetDelete v0: drop a group's committed offsets for some partitions.

As on Kafka: allowed for an empty group, and for a consumer group only on
topics its members do not subscribe to (GROUP_SUBSCRIBED_TO_TOPIC).
"""

from __future__ import annotations

from typing import Any

from ..cluster import TopicError
from ..groups import CONSUMER_PROTOCOL_TYPE, GroupState
from .common import NO_THROTTLE, ErrorCode, make, schema_of


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    coordinator = cluster.groups
    group_id = request.group_id
    group = coordinator.group(group_id) if group_id else None
    if not group_id:
        error = ErrorCode.invalid_group_id
    elif group is None or group.is_(GroupState.DEAD):
        error = ErrorCode.group_id_not_found
    elif not group.is_(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        error = ErrorCode.non_empty_group
    else:
        error = ErrorCode.none
    if error != ErrorCode.none:
        return make(m.OffsetDeleteResponse, error_code=error, throttle_time=NO_THROTTLE, topics=())
    topics = []
    for topic in request.topics:
        try:
            resolved = cluster.lookup(topic.name)
        except TopicError:
            resolved = None
        parts = []
        deletable = []
        for part in topic.partitions:
            index = part.partition_index
            if resolved is None or resolved.info is None or not 0 <= index < resolved.info.partitions:
                code = ErrorCode.unknown_topic_or_partition
            elif not group.is_(GroupState.EMPTY) and coordinator.is_subscribed(group, resolved.stream, resolved.topic):
                code = ErrorCode.group_subscribed_to_topic
            else:
                code = ErrorCode.none
                deletable.append((resolved.topic, index))
            parts.append(make(m.OffsetDeleteResponsePartition, partition_index=index, error_code=code))
        if deletable:
            await coordinator.offsets.delete_partitions(group_id, resolved.stream, deletable)
        topics.append(make(m.OffsetDeleteResponseTopic, name=topic.name, partitions=tuple(parts)))
    coordinator.forget_if_unused(group_id)
    return make(m.OffsetDeleteResponse, error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=tuple(topics))
