"""DescribeDelegationToken: the live tokens the requester may see, with their HMACs, optionally by owner.

An empty owner list answers no tokens and a null one every visible token,
as Kafka does (kafka-delegation-tokens --describe without --owner-principal
sends an empty list). Who sees what: security.delegation_tokens.describable.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from ..security.acls import Operation, ResourceType
from ..security.delegation_tokens import TokenInfo, describable, split_principal
from ..services import Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .registry import Api, reads
from .token_common import token_requests_allowed

# DescribeDelegationToken v1-3: v3 shows each token's requester
API = Api(41, (1, 3), reads())


def _described(m: Any, ctx: Request[Security], token: TokenInfo) -> Any:
    owner_type, owner_name = split_principal(token.owner)
    requester_type, requester_name = split_principal(token.requester)
    renewers = tuple(make(m.DescribedDelegationTokenRenewer, principal_type=kind, principal_name=name)
                     for kind, name in map(split_principal, token.renewers))
    return make(m.DescribedDelegationToken, principal_type=owner_type, principal_name=owner_name,
                token_requester_principal_type=requester_type, token_requester_principal_name=requester_name,
                issue_timestamp=token.issue_ms, expiry_timestamp=token.expiry_ms, max_timestamp=token.max_ms,
                token_id=token.token_id, hmac=ctx.cluster.tokens.hmac(token.token_id), renewers=renewers)


async def _visible(ctx: Request[Security], request: Any) -> list[TokenInfo]:
    tokens, authorizer = ctx.cluster.tokens, ctx.cluster.authorizer
    owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    await tokens.remove_expired()
    return [token for token in tokens.tokens() if describable(
        token, ctx.principal, owners,
        lambda token_id: authorizer.authorize(ctx, Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id,
                                              log_denied=False),
        lambda owner: authorizer.authorize(ctx, Operation.DESCRIBE_TOKENS, ResourceType.USER, owner,
                                           log_denied=False))]


async def handle(ctx: Request[Security], request: Any) -> Any:
    m = schema_of(ctx)
    found: list[TokenInfo] = []
    if not token_requests_allowed(ctx):
        error = ErrorCode.delegation_token_request_not_allowed
    elif not ctx.cluster.tokens.enabled:
        error = ErrorCode.delegation_token_auth_disabled
    elif request.owners is not None and not request.owners:
        error = ErrorCode.none
    else:
        try:
            found, error = await _visible(ctx, request), ErrorCode.none
        except storage.StorageError as exc:  # expired tokens could not be removed: try again later
            error = storage_error_code(exc)
    return make(m.DescribeDelegationTokenResponse, error_code=error,
                tokens=tuple(_described(m, ctx, token) for token in found), throttle_time=NO_THROTTLE)
