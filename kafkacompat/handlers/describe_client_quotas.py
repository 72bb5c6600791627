"""DescribeClientQuotas: the quotas set per user / client id (kafka-configs --describe --entity-type clients/users)."""

from __future__ import annotations

from typing import Any

from ..services import Request, Settings
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeClientQuotas v0-1
API = Api(48, (0, 1), reads())

EXACT, DEFAULT, ANY = 0, 1, 2


async def handle(ctx: Request[Settings], request: Any) -> Any:
    m = schema_of(ctx)
    filters = [(c.entity_type, c.match_type, c.match) for c in request.components]
    if any(how not in (EXACT, DEFAULT, ANY) for _, how, _ in filters):
        return make(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.invalid_request,
                    error_message="Unknown match type", entries=None)
    entries = tuple(
        make(m.EntryData,
             entity=tuple(make(m.EntityData, entity_type=kind, entity_name=name) for kind, name in entity),
             values=tuple(make(m.ValueData, key=key, value=value) for key, value in sorted(values.items())))
        for entity, values in ctx.cluster.quotas.describe(filters, request.strict)
    )
    return make(m.DescribeClientQuotasResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, entries=entries)
