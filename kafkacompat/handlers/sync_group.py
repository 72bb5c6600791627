"""SyncGroup v0-5: followers wait (deferred) for the leader's assignment."""

from __future__ import annotations

from typing import Any

from ..groups import SyncResult
from .common import NO_THROTTLE, make, schema_of


async def handle(ctx: Any, request: Any) -> Any:
    future = ctx.cluster.groups.sync(
        group_id=request.group_id,
        generation=request.generation_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    if future.done():
        return _response(ctx, future.result())
    return _deferred(ctx, future)


async def _deferred(ctx: Any, future: Any) -> Any:
    return _response(ctx, await future)


def _response(ctx: Any, result: SyncResult) -> Any:
    m = schema_of(ctx)
    return make(
        m.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
