"""LeaveGroup: one member (v0-2) or a batch of members by id or instance id (v3+)."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes

# LeaveGroup v0-5; error answers: v3+ lists members
API = Api(13, (0, 5), changes(("members",), "members"))


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    if not ctx.cluster.authorizer.group(ctx, Operation.READ, request.group_id):
        return make(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
                    **({"members": ()} if ctx.version >= 3 else {}))
    refused = await ctx.cluster.coordinator_error(request.group_id)  # the group moved: the member looks it up again
    if refused is not ErrorCode.none:
        return make(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=refused,
                    **({"members": ()} if ctx.version >= 3 else {}))
    if ctx.version < 3:
        leaving = [(request.member_id, None)]
    else:
        leaving = [(member.member_id, member.group_instance_id) for member in request.members]
    error, member_errors = ctx.cluster.groups.leave(request.group_id, leaving)
    await ctx.cluster.groups.durable.flushed(request.group_id)
    if ctx.version < 3:
        if error == ErrorCode.none and member_errors:
            error = member_errors[0]
        return make(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error)
    members = tuple(
        make(m.MemberResponse, member_id=member_id, group_instance_id=instance_id, error_code=member_error)
        for (member_id, instance_id), member_error in zip(leaving, member_errors)
    )
    return make(m.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error, members=members)
