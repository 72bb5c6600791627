"""EndTxn: commit or abort; answered once every marker is written and offsets are settled.

v5 is KIP-890's transactions v2: the coordinator bumps the producer epoch at
every end and answers the producer id and epoch the client goes on with.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Request, Security, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes
from .txn_common import fenced_as

# EndTxn v0-5: v5 is transactions v2: a new epoch at every end (KIP-890)
API = Api(26, (0, 5), changes())


class Reaches(Security, Transactions, Protocol):
    """What of the broker this module reaches."""

FENCED_FROM = 2
TRANSACTIONS_V2_FROM = 5


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    producer_id, epoch = -1, -1
    if not ctx.cluster.authorizer.transactional_id(ctx, Operation.WRITE, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        error, producer_id, epoch = await ctx.cluster.transactions.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
            client_version=2 if ctx.version >= TRANSACTIONS_V2_FROM else 0,
        )
    return make(m.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=fenced_as(ctx.version, FENCED_FROM, error),
                producer_id=producer_id, producer_epoch=epoch)
