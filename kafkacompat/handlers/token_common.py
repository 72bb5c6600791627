"""What the four delegation token APIs share: who may manage tokens at all, and Kafka's timestamps."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from kafkacompat import storage

from ..security.delegation_tokens import DelegationTokens
from ..security.principal import ANONYMOUS
from ..services import Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
NO_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp


def token_requests_allowed(ctx: Request[Security]) -> bool:
    """Kafka's allowTokenRequests: tokens are handed out and managed only over a connection whose user is
    proven (SASL, or SSL with a client certificate), and never by a session that itself logged in with a
    token (else a leaked token could mint others). Refused: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    if ctx.sasl is not None and ctx.sasl.token_authenticated:
        return False
    if ctx.security_protocol == "PLAINTEXT":
        return False
    return not (ctx.security_protocol == "SSL" and ctx.principal == ANONYMOUS)


def timestamp(ms: int) -> datetime.datetime:
    """Milliseconds since the epoch as the datetime kio writes back as those milliseconds (-1 included)."""
    return EPOCH + datetime.timedelta(milliseconds=ms)


def milliseconds(period: datetime.timedelta) -> int:
    """A request's period (kio decodes int64 milliseconds as a timedelta) back as milliseconds."""
    return period // datetime.timedelta(milliseconds=1)


async def expiry_answer(ctx: Request[Security], response: str,
                        change: Callable[[DelegationTokens], Awaitable[tuple[ErrorCode, int]]]) -> Any:
    """Renew's and Expire's answer (named `response`): the error and new expiry of `change`, made only on a
    connection allowed to manage tokens of a broker that has them (else Kafka's refusal)."""
    tokens = ctx.cluster.tokens
    if not token_requests_allowed(ctx):
        error, expiry = ErrorCode.delegation_token_request_not_allowed, NO_TIMESTAMP
    elif not tokens.enabled:
        error, expiry = ErrorCode.delegation_token_auth_disabled, 0
    else:
        try:
            error, expiry = await change(tokens)
        except storage.StorageError as exc:  # not stored (the store logged why): the token stays as it was
            error, expiry = storage_error_code(exc), 0
    return make(getattr(schema_of(ctx), response), error_code=error, expiry_timestamp=timestamp(expiry),
                throttle_time=NO_THROTTLE)
