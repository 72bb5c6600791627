"""UnregisterBroker: remove a broker's registration, as Kafka 4.1's controller does (`kafka-cluster unregister`).

Meant for a broker that died for good: on a cluster in PostgreSQL its row
(kept after its lease lapsed) goes. An id never registered, or already
removed, is BROKER_ID_NOT_REGISTERED. ALTER on the cluster is checked by
the connection's cluster gate.
"""

from __future__ import annotations

import logging
from typing import Any

from ..cluster import ClusterError
from ..services import Placement, Request
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes

# UnregisterBroker v0
API = Api(64, (0, 0), changes())

log = logging.getLogger(__name__)


async def handle(ctx: Request[Placement], request: Any) -> Any:
    m = schema_of(ctx)
    message: str | None
    try:
        removed = await ctx.cluster.view.unregister(request.broker_id)
    except ClusterError as exc:
        error, message = ErrorCode.request_timed_out, f"Cannot unregister broker {request.broker_id}: {exc}"
    else:
        if removed:
            log.warning("%s unregistered broker %d", ctx.principal, request.broker_id)
        error, message = ((ErrorCode.none, None) if removed else (
            ErrorCode.broker_id_not_registered, f"Broker ID {request.broker_id} is not currently registered"))
    return make(m.UnregisterBrokerResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message)
