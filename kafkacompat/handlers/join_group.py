"""JoinGroup v0-9: the answer waits (deferred) until the rebalance's join phase ends."""

from __future__ import annotations

from typing import Any

from ..groups import JoinResult
from .common import NO_THROTTLE, make, schema_of


def client_host(ctx: Any) -> str:
    """The client address as Kafka shows it ("/127.0.0.1")."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


async def handle(ctx: Any, request: Any) -> Any:
    version = ctx.version
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)  # v0: the session timeout serves
    rebalance_ms = session_ms if rebalance is None else int(rebalance.total_seconds() * 1000)
    future = ctx.cluster.groups.join(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=version >= 4 and getattr(request, "group_instance_id", None) is None,
        support_skip_assignment=version >= 9,
    )
    if future.done():
        return _response(ctx, future.result())
    return _deferred(ctx, future)


async def _deferred(ctx: Any, future: Any) -> Any:
    return _response(ctx, await future)


def _response(ctx: Any, result: JoinResult) -> Any:
    m = schema_of(ctx)
    protocol_name = result.protocol_name
    if ctx.version < 7 and protocol_name is None:
        protocol_name = ""  # not nullable before v7
    members = tuple(
        make(m.JoinGroupResponseMember, member_id=member_id, group_instance_id=instance_id, metadata=metadata)
        for member_id, instance_id, metadata in result.members
    )
    return make(
        m.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )
