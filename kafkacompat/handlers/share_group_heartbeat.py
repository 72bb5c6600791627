"""ShareGroupHeartbeat (KIP-932): join, stay and leave a share group (see shares.share_group)."""

from __future__ import annotations

import datetime
from typing import Any, Protocol

from ..broker.features import SHARE_VERSION
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings
from ..shares.share_group import ShareHeartbeat
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import client_host
from .registry import Api, changes

# ShareGroupHeartbeat v1 (KIP-932; v0 was Kafka 4.0's early access, gone in 4.1)
API = Api(76, (1, 1), changes())


class Reaches(Groups, Placement, Security, Settings, Protocol):
    """What of the broker this module reaches."""


async def _refusal(ctx: Request[Reaches], request: Any) -> ErrorCode | None:
    """The share group protocol switched off, READ on the group, DESCRIBE on the topics, the coordinator."""
    if ctx.cluster.features.level(SHARE_VERSION) < 1:
        return ErrorCode.unsupported_version
    authorizer = ctx.cluster.authorizer
    if not authorizer.group(ctx, Operation.READ, request.group_id):
        return ErrorCode.group_authorization_failed
    names = set(request.subscribed_topic_names or ())
    if authorizer.enabled and len(authorizer.topics(ctx, Operation.DESCRIBE, names)) < len(names):
        return ErrorCode.topic_authorization_failed
    coordinator = await ctx.cluster.coordinator_error(request.group_id)
    return None if coordinator is ErrorCode.none else coordinator


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    shares = ctx.cluster.shares
    refused = await _refusal(ctx, request)
    if refused is not None:  # Kafka's ShareGroupHeartbeatRequest.getErrorResponse: the code, member_epoch left 0
        return make(m.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=refused,
                    error_message=None, member_id=None, member_epoch=0,
                    heartbeat_interval=datetime.timedelta(0), assignment=None)
    result = shares.groups.heartbeat(ShareHeartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=request.subscribed_topic_names,
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
    ))
    assignment = None
    if result.assignment is not None:
        assignment = make(m.Assignment, topic_partitions=tuple(
            make(m.TopicPartitions, topic_id=topic_id, partitions=tuple(sorted(parts)))
            for topic_id, parts in sorted(result.assignment.items())
        ))
    interval = shares.groups.heartbeat_interval_ms(request.group_id) if result.error == ErrorCode.none else 0
    return make(
        m.ShareGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=interval),
        assignment=assignment,
    )
