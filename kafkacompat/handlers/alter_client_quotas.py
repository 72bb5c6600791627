"""AlterClientQuotas: set or remove producer/consumer byte-rate quotas per user / client id."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..broker.quotas import QuotaError, entity_of
from ..services import Controller, Request, Settings
from .common import NO_THROTTLE, ErrorCode, at_controller, make, schema_of, storage_error_code
from .registry import Api, changes

# AlterClientQuotas v0-1
API = Api(49, (0, 1), changes(("entries",), "entries"))


class QuotaChanges(Settings, Controller, Protocol):
    """The quotas, and the controller that writes them (ALTER_CONFIGS on the cluster is checked by the
    connection: security/refusals.py)."""


async def _alter(ctx: Request[QuotaChanges], entry: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    quotas = ctx.cluster.quotas
    try:
        entity = entity_of([(e.entity_type, e.entity_name) for e in entry.entity])
        ops = {op.key: None if op.remove else op.value for op in entry.ops}
        quotas.check(entity, ops)
        if not validate_only:
            await quotas.alter(entity, ops)
    except QuotaError as exc:
        return ErrorCode.invalid_request, str(exc)
    except storage.StorageError as exc:
        return storage_error_code(exc), str(exc)
    return ErrorCode.none, None


async def handle(ctx: Request[QuotaChanges], request: Any) -> Any:
    if not request.validate_only and (forwarded := await at_controller(ctx, request)) is not None:
        return forwarded
    m = schema_of(ctx)
    entries = []
    for entry in request.entries:
        error, message = await _alter(ctx, entry, request.validate_only)
        entries.append(make(m.EntryData, error_code=error, error_message=message, entity=tuple(
            make(m.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity)))
    return make(m.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(entries))
