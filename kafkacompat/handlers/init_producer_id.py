"""InitProducerId: a fresh producer id for idempotent producers.

As on Kafka, a non-transactional producer always gets a new id with epoch
0. Transactions are not offered yet, so a transactional id is refused.
"""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, ErrorCode, make, schema_of


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    if request.transactional_id is not None:
        return make(
            m.InitProducerIdResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.unsupported_version, producer_id=-1, producer_epoch=-1,
        )
    return make(
        m.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=ctx.cluster.producers.new_producer_id(),
        producer_epoch=0,
    )
