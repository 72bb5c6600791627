"""ConsumerGroupHeartbeat (KIP-848): join, stay, reconcile and leave in one API (see groups.consumer_coordinator)."""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from ..broker.features import GROUP_VERSION
from ..groups.consumer_coordinator import HeartbeatRequest
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import client_host, millis
from .registry import Api, changes

# ConsumerGroupHeartbeat v0-1 (KIP-848); v1: the client makes its member id
API = Api(68, (0, 1), changes())


class Reaches(Groups, Placement, Security, Settings, Protocol):
    """What of the broker this module reaches."""


def _owned(topic_partitions: Any) -> dict[Any, frozenset[int]] | None:
    if topic_partitions is None:
        return None
    owned: dict[Any, frozenset[int]] = {}
    for tp in topic_partitions:
        owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return owned


def _refusal(ctx: Request[Reaches], request: Any) -> ErrorCode | None:
    """READ on the group, and DESCRIBE on every subscribed topic named (KafkaApis' order)."""
    authorizer = ctx.cluster.authorizer
    if not authorizer.group(ctx, Operation.READ, request.group_id):
        return ErrorCode.group_authorization_failed
    names = request.subscribed_topic_names or ()
    if authorizer.enabled and len(authorizer.topics(ctx, Operation.DESCRIBE, set(names))) < len(set(names)):
        return ErrorCode.topic_authorization_failed
    return None


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if ctx.cluster.features.level(GROUP_VERSION) < 1:  # KIP-848 groups off, as Kafka answers then
        return make(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.unsupported_version, error_message=None, member_id=None, member_epoch=0,
                    heartbeat_interval=datetime.timedelta(0), assignment=None)
    refused = _refusal(ctx, request)
    if refused is None:  # the group moved: look it up again
        error = await ctx.cluster.coordinator_error(request.group_id)
        refused = None if error is ErrorCode.none else error
    if refused is not None:  # Kafka's ConsumerGroupHeartbeatRequest.getErrorResponse: the code, member_epoch left 0
        return make(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=refused,
                    error_message=None, member_id=None, member_epoch=0,
                    heartbeat_interval=datetime.timedelta(0), assignment=None)
    if request.group_id in ctx.cluster.groups.streams.groups:  # one group id, one group type
        return make(m.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_id_not_found,
                    error_message=f"Group {request.group_id} is not a consumer group.", member_id=None,
                    member_epoch=0, heartbeat_interval=datetime.timedelta(0), assignment=None)
    result = ctx.cluster.groups.consumer.heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=millis(request.rebalance_timeout),
            subscribed_topic_names=request.subscribed_topic_names,
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=_owned(request.topic_partitions),
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            version=ctx.version,
        )
    )
    await ctx.cluster.groups.durable.flushed(request.group_id)  # the member's new epoch is stored before it acts
    assignment = None
    if result.assignment is not None:
        assignment = make(
            m.Assignment,
            topic_partitions=tuple(
                make(m.TopicPartitions, topic_id=topic_id, partitions=tuple(sorted(parts)))
                for topic_id, parts in sorted(result.assignment.items())
            ),
        )
    return make(
        m.ConsumerGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )
