"""CreatePartitions: grow a topic; shrinking is refused."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..broker.cluster import TopicError
from ..security.acls import Operation
from ..security.authorizer import TOPIC_DENIED
from ..services import Placement, Request, Security, Settings, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .partition_limits import PER_REQUEST_MESSAGE, partition_limit_error
from .registry import Api, changes

# CreatePartitions v0-3
API = Api(37, (0, 3), changes(("topics",), "results"))


class Reaches(Topics, Placement, Security, Settings, Protocol):
    """What of the broker this module reaches."""


async def _grow(ctx: Request[Reaches], topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    cluster = ctx.cluster
    if not cluster.authorizer.topic(ctx, Operation.ALTER, topic.name):
        return ErrorCode.topic_authorization_failed, TOPIC_DENIED
    try:
        info = cluster.lookup(topic.name).info
    except TopicError as exc:
        return exc.code, str(exc)
    if info is None:
        return ErrorCode.unknown_topic_or_partition, f"topic {topic.name} does not exist"
    if topic.count <= info.partitions:
        return (
            ErrorCode.invalid_partitions,
            # Kafka's wording (kafka-topics --alter prints it)
            f"The topic {topic.name} currently has {info.partitions} partition(s); "
            f"{topic.count} would not be an increase.",
        )
    refused = partition_limit_error(cluster, topic.count - info.partitions)
    if refused is not None:
        return refused
    if topic.assignments is not None:
        if len(topic.assignments) != topic.count - info.partitions:
            return ErrorCode.invalid_replica_assignment, "one assignment per new partition is required"
        if any(set(a.broker_ids) - {cluster.node_id} for a in topic.assignments):
            return ErrorCode.invalid_replica_assignment, f"broker {cluster.node_id} is the only broker"
    if validate_only:
        return ErrorCode.none, None
    try:
        grown = await cluster.store.add_partitions(info.stream, info.name, topic.count)
    except storage.StorageError as exc:
        return storage_error_code(exc), str(exc)
    await cluster.settle([grown])  # the new partitions have leaders before the answer
    return ErrorCode.none, None


def _requested_increase(ctx: Request[Reaches], topics: Any) -> int:
    """Partitions the whole request would add to the topics that exist."""
    total = 0
    for topic in topics:
        try:
            info = ctx.cluster.lookup(topic.name).info
        except TopicError:
            continue
        if info is not None:
            total += max(topic.count - info.partitions, 0)
    return total


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    results = []
    message: str | None
    too_many = _requested_increase(ctx, request.topics) > ctx.cluster.config.max_partitions_per_request
    for topic in request.topics:
        if too_many:
            error, message = ErrorCode.policy_violation, PER_REQUEST_MESSAGE
        else:
            error, message = await _grow(ctx, topic, request.validate_only)
        results.append(make(m.CreatePartitionsTopicResult, name=topic.name, error_code=error, error_message=message))
    return make(m.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
