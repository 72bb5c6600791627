"""ExpireDelegationToken: its owner, requester or a renewer ends a token now (negative period) or after a period."""

from __future__ import annotations

from typing import Any

from ..services import Request, Security
from .registry import Api, changes
from .token_common import expiry_answer, milliseconds

# ExpireDelegationToken v1-2
API = Api(40, (1, 2), changes())


async def handle(ctx: Request[Security], request: Any) -> Any:
    return await expiry_answer(ctx, "ExpireDelegationTokenResponse", lambda tokens: tokens.expire(
        ctx.principal, request.hmac, milliseconds(request.expiry_time_period)))
