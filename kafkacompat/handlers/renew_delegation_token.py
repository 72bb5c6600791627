"""RenewDelegationToken: its owner, requester or a renewer moves a live token's expiry (never past its max time)."""

from __future__ import annotations

from typing import Any

from ..services import Request, Security
from .registry import Api, changes
from .token_common import expiry_answer, milliseconds

# RenewDelegationToken v1-2
API = Api(39, (1, 2), changes())


async def handle(ctx: Request[Security], request: Any) -> Any:
    return await expiry_answer(ctx, "RenewDelegationTokenResponse", lambda tokens: tokens.renew(
        ctx.principal, request.hmac, milliseconds(request.renew_period)))
