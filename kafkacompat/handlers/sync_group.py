"""SyncGroup: the leader hands in assignments; every member waits for its own bytes."""

from __future__ import annotations

from typing import Any, Protocol

from ..groups import SyncResult
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes

# SyncGroup v0-5
API = Api(14, (0, 5), changes())


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""


def _response(m: Any, result: SyncResult) -> Any:
    return make(
        m.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if not ctx.cluster.authorizer.group(ctx, Operation.READ, request.group_id):
        return _response(m, SyncResult(ErrorCode.group_authorization_failed))
    refused = await ctx.cluster.coordinator_error(request.group_id)  # the group moved: the member looks it up again
    if refused is not ErrorCode.none:
        return _response(m, SyncResult(refused))
    answer = ctx.cluster.groups.sync(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    groups = ctx.cluster.groups

    async def deferred() -> Any:
        result = await answer
        await groups.durable.flushed(request.group_id)  # the assignment is stored before members act on it
        return _response(m, result)

    return deferred()
