"""Heartbeat: keeps a member's session alive and tells it when a rebalance started."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes

# Heartbeat v0-4
API = Api(12, (0, 4), changes())


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    if not ctx.cluster.authorizer.group(ctx, Operation.READ, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:  # unless the group moved: the member finds its new coordinator
        error = await ctx.cluster.coordinator_error(request.group_id)
        if error is ErrorCode.none:
            error = ctx.cluster.groups.heartbeat(
                request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None)
            )
    return make(schema_of(ctx).HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)
