"""FindCoordinator: this broker coordinates every group (v0-3 one key, v4+ a batch).

Transactions are not offered, so key type 1 answers COORDINATOR_NOT_AVAILABLE
(what a Kafka cluster answers while no transaction coordinator is up).
"""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, ErrorCode, make, schema_of

GROUP_KEY = 0
TRANSACTION_KEY = 1


def _answer(key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == GROUP_KEY:
        return ErrorCode.none, None
    if key_type == TRANSACTION_KEY:
        return ErrorCode.coordinator_not_available, "transactions are not supported by this broker"
    return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}"


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    key_type = getattr(request, "key_type", GROUP_KEY)
    error, message = _answer(key_type)
    ok = error == ErrorCode.none
    node = dict(
        node_id=cluster.node_id if ok else -1,
        host=cluster.host if ok else "",
        port=cluster.port if ok else -1,
    )
    if hasattr(request, "coordinator_keys"):
        coordinators = tuple(
            make(m.Coordinator, key=key, error_code=error, error_message=message, **node)
            for key in request.coordinator_keys
        )
        return make(m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=coordinators)
    return make(
        m.FindCoordinatorResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message, **node
    )
