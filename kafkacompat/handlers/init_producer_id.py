"""InitProducerId: a producer id and epoch for idempotent and transactional producers.

As on Kafka, a non-transactional producer always gets a new id with epoch
0. A transactional id keeps its producer id and gets the next epoch, which
fences every older producer of that id (and aborts its open transaction).
"""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .group_common import millis
from .txn_common import fenced_as

FENCED_FROM = 4  # PRODUCER_FENCED in answers from v4 (KIP-588)


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
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
