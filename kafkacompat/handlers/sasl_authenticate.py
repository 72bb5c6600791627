"""SaslAuthenticate: one SASL token each way; a refused login answers SASL_AUTHENTICATION_FAILED, then closes."""

from __future__ import annotations

import datetime
from typing import Any

from ..security.scram import AuthenticationFailed
from ..services import Request
from .common import ErrorCode, make, schema_of
from .registry import Api, changes

# SaslAuthenticate v0-2: v1+ carries the session lifetime (KIP-368 re-authentication); error answers: an injected error fails the login
API = Api(36, (0, 2), changes())


def _answer(ctx: Request[object], error: ErrorCode, message: str | None, token: bytes = b"", lifetime_ms: int = 0) -> Any:
    return make(
        schema_of(ctx).SaslAuthenticateResponse, error_code=error, error_message=message, auth_bytes=token,
        session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
    )


async def handle(ctx: Request[object], request: Any) -> Any:
    auth = ctx.sasl
    if auth is None or not auth.expecting_token or auth.raw_tokens:
        if auth is not None:
            auth.failed = True  # Kafka closes a connection that breaks the SASL sequence
        return _answer(ctx, ErrorCode.illegal_sasl_state, "Unexpected SaslAuthenticate request: no SaslHandshake "
                                                          "(v1 or later) started an exchange on this connection")
    try:
        token = await auth.evaluate(request.auth_bytes)
    except AuthenticationFailed as exc:
        return _answer(ctx, ErrorCode.sasl_authentication_failed, str(exc))
    # Kafka's answer carries an empty message, not a null one, when nothing failed
    return _answer(ctx, ErrorCode.none, "", token, auth.session_lifetime_ms if auth.authenticated else 0)
