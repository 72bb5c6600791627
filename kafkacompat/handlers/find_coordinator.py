"""FindCoordinator: this broker coordinates every group and transactional id (v4+ asks for many keys at once)."""

from __future__ import annotations

from typing import Any

from ..security.acls import Operation
from ..security.authorizer import GROUP_DENIED, TRANSACTIONAL_ID_DENIED
from .common import NO_THROTTLE, ErrorCode, make, schema_of

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _find(ctx: Any, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    cluster = ctx.cluster
    if key_type in (GROUP_KEY, TRANSACTION_KEY):
        host, port = cluster.address(ctx.listener)
        return ErrorCode.none, None, cluster.node_id, host, port
    return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", -1, "", -1


DENIED = {GROUP_KEY: (ErrorCode.group_authorization_failed, GROUP_DENIED),
          TRANSACTION_KEY: (ErrorCode.transactional_id_authorization_failed, TRANSACTIONAL_ID_DENIED)}


def _allowed(ctx: Any, key_type: int, key: str) -> bool:
    """DESCRIBE on the group or transactional id whose coordinator is asked for, as Kafka requires."""
    authorizer = ctx.cluster.authorizer
    if key_type == GROUP_KEY:
        return authorizer.group(ctx, Operation.DESCRIBE, key)
    if key_type == TRANSACTION_KEY:
        return authorizer.transactional_id(ctx, Operation.DESCRIBE, key)
    return True


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    key_type = getattr(request, "key_type", GROUP_KEY)
    if key_type == GROUP_KEY:
        await ctx.cluster.ensure_offsets_topic()
    error, message, node, host, port = _find(ctx, key_type)
    if ctx.version < 4:
        if not _allowed(ctx, key_type, request.key):
            error, message, node, host, port = *DENIED[key_type], -1, "", -1
        return make(
            m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=error,
            error_message=message, node_id=node, host=host, port=port,
        )
    coordinators = tuple(
        make(m.Coordinator, key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
        if _allowed(ctx, key_type, key) else
        make(m.Coordinator, key=key, node_id=-1, host="", port=-1, error_code=DENIED[key_type][0],
             error_message=DENIED[key_type][1])
        for key in request.coordinator_keys
    )
    return make(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)
