"""AddOffsetsToTxn: a consumer group's offsets will be committed with the transaction."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Request, Security, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes
from .txn_common import fenced_as

# AddOffsetsToTxn v0-4
API = Api(25, (0, 4), changes())


class Reaches(Security, Transactions, Protocol):
    """What of the broker this module reaches."""

FENCED_FROM = 2


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    authorizer = ctx.cluster.authorizer
    if not authorizer.transactional_id(ctx, Operation.WRITE, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not authorizer.group(ctx, Operation.READ, request.group_id):
        error = ErrorCode.group_authorization_failed
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = await ctx.cluster.transactions.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
    return make(m.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE,
                error_code=fenced_as(ctx.version, FENCED_FROM, error))
