"""AlterPartitionReassignments, as a single-node Kafka answers it.

The only valid assignment is this broker alone, which is what every
partition has: it succeeds and completes at once. Other brokers, repeated
or empty replica lists are refused with Kafka's messages; a cancellation
(null replicas) finds no reassignment in progress.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..services import Placement, Request, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# AlterPartitionReassignments v0
API = Api(45, (0, 0), reads())


class Reaches(Placement, Topics, Protocol):
    """What of the broker this module reaches."""


def _check(ctx: Request[Reaches], topic: str, info: Any, missing: ErrorCode, index: int, replicas: Any) -> tuple[ErrorCode, str | None]:
    node = ctx.cluster.node_id
    if info is None:
        return missing, f"Unable to find a topic named {topic}."
    if not 0 <= index < info.partitions:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{index}."
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, None
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    for broker in replicas:
        if replicas.count(broker) > 1:
            return ErrorCode.invalid_replica_assignment, (
                f"The manual partition assignment includes the broker {broker} more than once.")
        if broker != node:
            return ErrorCode.invalid_replica_assignment, (
                f"The manual partition assignment includes broker {broker}, but no such broker is registered.")
    return ErrorCode.none, None


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    responses = []
    for topic in request.topics:
        info, missing = ctx.cluster.topic_for(topic.name)
        partitions = []
        for part in topic.partitions:
            error, message = _check(ctx, topic.name, info, missing, part.partition_index, part.replicas)
            partitions.append(make(m.ReassignablePartitionResponse, partition_index=part.partition_index,
                                   error_code=error, error_message=message))
        responses.append(make(m.ReassignableTopicResponse, name=topic.name, partitions=tuple(partitions)))
    return make(m.AlterPartitionReassignmentsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, responses=tuple(responses))
