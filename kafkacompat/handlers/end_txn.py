"""EndTxn: commit or abort; answered once every marker is written and offsets are settled."""

from __future__ import annotations

from typing import Any

from ..security.acls import Operation
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .txn_common import fenced_as

FENCED_FROM = 2


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    if not ctx.cluster.authorizer.transactional_id(ctx, Operation.WRITE, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        error = await ctx.cluster.transactions.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed
        )
    return make(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=fenced_as(ctx.version, FENCED_FROM, error))
