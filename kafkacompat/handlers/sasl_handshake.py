"""SaslHandshake: the client names its SASL mechanism; v0 means its tokens follow as bare frames."""

from __future__ import annotations

from typing import Any

from ..services import Request
from .common import ErrorCode, make, schema_of
from .registry import Api, changes

# SaslHandshake v0-1: v0: the tokens follow as bare frames
API = Api(17, (0, 1), changes())


async def handle(ctx: Request[object], request: Any) -> Any:
    m = schema_of(ctx)
    auth = ctx.sasl
    if auth is None:  # a PLAINTEXT or SSL listener: there is nothing to authenticate, as Kafka answers
        return make(m.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    accepted = auth.handshake(request.mechanism, ctx.version)
    return make(
        m.SaslHandshakeResponse,
        error_code=ErrorCode.none if accepted else ErrorCode.unsupported_sasl_mechanism,
        mechanisms=auth.mechanisms,
    )
