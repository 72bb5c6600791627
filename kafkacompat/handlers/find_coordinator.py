"""FindCoordinator: this broker coordinates every group and transactional id (v4+ asks for many keys at once)."""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, ErrorCode, make, schema_of

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _find(ctx: Any, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    cluster = ctx.cluster
    if key_type in (GROUP_KEY, TRANSACTION_KEY):
        host, port = cluster.address(ctx.listener)
        return ErrorCode.none, None, cluster.node_id, host, port
    return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", -1, "", -1


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    key_type = getattr(request, "key_type", GROUP_KEY)
    if key_type == GROUP_KEY:
        await ctx.cluster.ensure_offsets_topic()
    error, message, node, host, port = _find(ctx, key_type)
    if ctx.version < 4:
        return make(
            m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=error,
            error_message=message, node_id=node, host=host, port=port,
        )
    coordinators = tuple(
        make(m.Coordinator, key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
        for key in request.coordinator_keys
    )
    return make(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)
