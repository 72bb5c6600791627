"""ListTransactions: transactional ids by state, producer, age (v1) and id pattern (v2)."""

from __future__ import annotations

import re
from typing import Any, Protocol

from ..security.acls import Operation, ResourceType
from ..services import Request, Security, Transactions
from ..transactions import TxnState
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# ListTransactions v0-2
API = Api(66, (0, 2), reads())


class Reaches(Security, Transactions, Protocol):
    """What of the broker this module reaches."""

_KNOWN_STATES = {state.value for state in TxnState}


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    wanted = list(request.state_filters)
    unknown = tuple(s for s in wanted if s not in _KNOWN_STATES)
    pattern = getattr(request, "transactional_id_pattern", None)
    try:
        found = ctx.cluster.transactions.list(
            [s for s in wanted if s in _KNOWN_STATES] if wanted else [], list(request.producer_id_filters),
            getattr(request, "duration_filter", -1), pattern,
        )
        error = ErrorCode.none
    except re.error:
        found, error = [], ErrorCode.invalid_regular_expression
    if wanted and not any(s in _KNOWN_STATES for s in wanted):
        found = []
    authorizer = ctx.cluster.authorizer
    if authorizer.enabled:  # only the ids the principal may describe, as Kafka lists them
        found = [meta for meta in found if authorizer.authorize(
            ctx, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, meta.transactional_id, log_denied=False)]
    states = tuple(
        make(m.TransactionState, transactional_id=meta.transactional_id, producer_id=meta.producer_id,
             transaction_state=meta.state.value)
        for meta in found
    )
    return make(m.ListTransactionsResponse, throttle_time=NO_THROTTLE, error_code=error,
                unknown_state_filters=unknown, transaction_states=states)
