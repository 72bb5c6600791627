"""OffsetDelete: drop a group's committed offsets, except for topics its members consume."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..broker.cluster import TopicError
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Topics
from .common import NO_THROTTLE, ErrorCode, coordinator_storage_error_code, make, schema_of
from .group_common import partition_errors
from .registry import Api, changes

# OffsetDelete v0
API = Api(47, (0, 0), changes(("topics",), "topics"))


class Reaches(Topics, Placement, Security, Groups, Protocol):
    """What of the broker this module reaches."""


def _resolve(ctx: Request[Reaches], name: str) -> tuple[str, str] | None:
    try:
        return ctx.cluster.split(name)
    except TopicError:
        return None


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    if not cluster.authorizer.group(ctx, Operation.DELETE, request.group_id):
        return make(m.OffsetDeleteResponse, error_code=ErrorCode.group_authorization_failed,
                    throttle_time=NO_THROTTLE, topics=())
    refused = await cluster.coordinator_error(request.group_id)  # only its coordinator deletes its offsets
    if refused != ErrorCode.none:
        return make(m.OffsetDeleteResponse, error_code=refused, throttle_time=NO_THROTTLE, topics=())
    group_error, keep = cluster.groups.offset_delete_check(request.group_id)
    if group_error != ErrorCode.none:
        return make(m.OffsetDeleteResponse, error_code=group_error, throttle_time=NO_THROTTLE, topics=())
    assert keep is not None
    kept = {key for key in (_resolve(ctx, name) for name in keep) if key is not None}
    errors: dict[tuple[str, int], ErrorCode] = {}
    doomed: list[tuple[tuple[str, int], tuple[str, str, int]]] = []
    for topic in request.topics:
        info, _ = cluster.topic_for(topic.name)  # Kafka answers every miss here as unknown
        readable = cluster.authorizer.topic(ctx, Operation.READ, topic.name)
        for part in topic.partitions:
            key = (topic.name, part.partition_index)
            if not readable:
                errors[key] = ErrorCode.topic_authorization_failed
            elif info is None or not 0 <= part.partition_index < info.partitions:
                errors[key] = ErrorCode.unknown_topic_or_partition
            elif (info.stream, info.name) in kept:
                errors[key] = ErrorCode.group_subscribed_to_topic
            else:
                doomed.append((key, (info.stream, info.name, part.partition_index)))
    if doomed:
        try:
            await cluster.groups.delete_offsets(request.group_id, [target for _, target in doomed])
            outcome = ErrorCode.none
        except storage.StorageError as exc:  # logged by the store
            outcome = coordinator_storage_error_code(exc)
        for key, _ in doomed:
            errors[key] = outcome
    topics = partition_errors(m.OffsetDeleteResponseTopic, m.OffsetDeleteResponsePartition, request.topics, errors)
    return make(m.OffsetDeleteResponse, error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=topics)
