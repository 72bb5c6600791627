"""FindCoordinator: the broker leading a key's __consumer_offsets partition coordinates it, as on
Kafka (this broker, when it is alone); v4+ asks for many keys at once.

Transactional ids hash onto the same partitions (Kafka uses __transaction_state):
one placement rule, so a group and a transaction may share a coordinator.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..security.authorizer import GROUP_DENIED, TRANSACTIONAL_ID_DENIED
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# FindCoordinator v0-6: v4+ batches keys
API = Api(10, (0, 6), reads())


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""

GROUP_KEY, TRANSACTION_KEY = 0, 1


def _find(ctx: Request[Reaches], key_type: int, key: str) -> tuple[ErrorCode, str | None, int, str, int]:
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", -1, "", -1
    member = ctx.cluster.coordinator(key)
    if member is None:  # its partition's leader died and is not replaced yet: the client retries
        return ErrorCode.coordinator_not_available, "The coordinator is not available.", -1, "", -1
    if member.node_id == ctx.cluster.node_id:  # this broker: at the listener the client came in on
        return ErrorCode.none, None, member.node_id, *ctx.cluster.address(ctx.listener)
    return ErrorCode.none, None, member.node_id, member.host, member.port


DENIED = {GROUP_KEY: (ErrorCode.group_authorization_failed, GROUP_DENIED),
          TRANSACTION_KEY: (ErrorCode.transactional_id_authorization_failed, TRANSACTIONAL_ID_DENIED)}


def _allowed(ctx: Request[Reaches], key_type: int, key: str) -> bool:
    """DESCRIBE on the group or transactional id whose coordinator is asked for, as Kafka requires."""
    authorizer = ctx.cluster.authorizer
    if key_type == GROUP_KEY:
        return authorizer.group(ctx, Operation.DESCRIBE, key)
    if key_type == TRANSACTION_KEY:
        return authorizer.transactional_id(ctx, Operation.DESCRIBE, key)
    return True


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    key_type = getattr(request, "key_type", GROUP_KEY)
    message: str | None
    if key_type in (GROUP_KEY, TRANSACTION_KEY):  # both are placed by __consumer_offsets' leaders
        await ctx.cluster.ensure_offsets_topic()
        offsets = ctx.cluster.offsets_topic()
        if offsets is not None:
            await ctx.cluster.settle([offsets])
    if ctx.version < 4:
        if not _allowed(ctx, key_type, request.key):
            error, message, node, host, port = *DENIED[key_type], -1, "", -1
        else:
            error, message, node, host, port = _find(ctx, key_type, request.key)
        return make(
            m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=error,
            error_message=message, node_id=node, host=host, port=port,
        )
    coordinators = []
    for key in request.coordinator_keys:
        if _allowed(ctx, key_type, key):
            error, message, node, host, port = _find(ctx, key_type, key)
        else:
            (error, message), node, host, port = DENIED[key_type], -1, "", -1
        coordinators.append(make(m.Coordinator, key=key, node_id=node, host=host, port=port, error_code=error,
                                 error_message=message))
    return make(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
