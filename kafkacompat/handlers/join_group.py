"""JoinGroup: park the member until the rebalance's join phase ends (see groups.coordinator)."""

from __future__ import annotations

from typing import Any, Protocol

from ..groups import JoinRequest, JoinResult
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import client_host, millis
from .registry import Api, changes

# JoinGroup v0-9
API = Api(11, (0, 9), changes())


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""


def _response(m: Any, version: int, result: JoinResult) -> Any:
    protocol_name = result.protocol_name
    if version < 7 and protocol_name is None:
        protocol_name = ""  # nullable only from v7
    members = tuple(
        make(m.JoinGroupResponseMember, member_id=member_id, group_instance_id=instance_id, metadata=metadata)
        for member_id, instance_id, metadata in result.members
    )
    return make(
        m.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    refused = await ctx.cluster.coordinator_error(request.group_id)  # another broker leads its offsets partition
    if refused is not ErrorCode.none:
        return _response(m, ctx.version, JoinResult(refused, request.member_id))
    session_timeout = millis(request.session_timeout)
    rebalance_timeout = millis(getattr(request, "rebalance_timeout", session_timeout))
    if not ctx.cluster.authorizer.group(ctx, Operation.READ, request.group_id):
        return _response(m, ctx.version, JoinResult(ErrorCode.group_authorization_failed, request.member_id))
    answer = ctx.cluster.groups.join(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.header.client_id or "",
            client_host=client_host(ctx),
            session_timeout_ms=session_timeout,
            rebalance_timeout_ms=rebalance_timeout if rebalance_timeout >= 0 else session_timeout,
            protocol_type=request.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
            require_known_member_id=ctx.version >= 4,
            supports_skip_assignment=ctx.version >= 9,
            reason=getattr(request, "reason", None),
        )
    )
    groups = ctx.cluster.groups

    async def deferred() -> Any:
        result = await answer
        await groups.durable.flushed(request.group_id)  # a classic member of a consumer group: its epoch is stored
        return _response(m, ctx.version, result)

    return deferred()
