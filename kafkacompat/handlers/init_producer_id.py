"""InitProducerId: a producer id and epoch for idempotent and transactional producers.

As on Kafka, a non-transactional producer always gets a new id with epoch
0. A transactional id keeps its producer id and gets the next epoch, which
fences every older producer of that id (and aborts its open transaction).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import CLUSTER_NAME, Operation, ResourceType
from ..security.authorizer import client_host, deny
from ..services import Request, Security, Transactions
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import millis
from .registry import Api, changes
from .txn_common import fenced_as

# InitProducerId v0-5
API = Api(22, (0, 5), changes())


class Reaches(Security, Transactions, Protocol):
    """What of the broker this module reaches."""

FENCED_FROM = 4  # PRODUCER_FENCED in answers from v4 (KIP-588)


def _refusal(ctx: Request[Reaches], transactional_id: str | None) -> ErrorCode | None:
    """WRITE on the transactional id; an idempotent producer needs IDEMPOTENT_WRITE or WRITE on some topic."""
    authorizer = ctx.cluster.authorizer
    if not authorizer.enabled:
        return None
    if transactional_id is not None:
        if not authorizer.transactional_id(ctx, Operation.WRITE, transactional_id):
            return ErrorCode.transactional_id_authorization_failed
        return None
    if authorizer.cluster(ctx, Operation.IDEMPOTENT_WRITE, log_denied=False) or authorizer.any_allowed(
            ctx.principal, client_host(ctx.peer), Operation.WRITE, ResourceType.TOPIC):
        return None
    deny(ctx, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
    return ErrorCode.cluster_authorization_failed


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    refused = _refusal(ctx, request.transactional_id)
    if refused is not None:
        return make(m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=refused, producer_id=-1,
                    producer_epoch=-1)
    if request.transactional_id is None:
        return make(
            m.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            producer_id=ctx.cluster.producers.new_producer_id(),
            producer_epoch=0,
        )
    error, producer_id, epoch = await ctx.cluster.transactions.init_producer_id(
        request.transactional_id,
        millis(request.transaction_timeout),
        getattr(request, "producer_id", -1),
        getattr(request, "producer_epoch", -1),
    )
    return make(
        m.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=fenced_as(ctx.version, FENCED_FROM, error),
        producer_id=producer_id, producer_epoch=epoch,
    )
