"""RenewDelegationToken: its owner, requester or a renewer moves a live token's expiry (never past its max time)."""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .token_common import NO_TIMESTAMP, milliseconds, timestamp, token_requests_allowed


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    tokens = ctx.cluster.tokens
    if not token_requests_allowed(ctx):
        error, expiry = ErrorCode.delegation_token_request_not_allowed, NO_TIMESTAMP
    elif not tokens.enabled:
        error, expiry = ErrorCode.delegation_token_auth_disabled, 0
    else:
        try:
            error, expiry = await tokens.renew(ctx.principal, request.hmac, milliseconds(request.renew_period))
        except storage.StorageError as exc:  # not stored: the token keeps its expiry
            error, expiry = storage_error_code(exc), 0
    return make(m.RenewDelegationTokenResponse, error_code=error, expiry_timestamp=timestamp(expiry),
                throttle_time=NO_THROTTLE)
