"""CreateDelegationToken: a new token for the requester, or (KIP-373, v3) for an owner it may create tokens for.

Checks in Kafka's order (KafkaApis, then DelegationTokenControlManager):
a connection allowed to manage tokens, CREATE_TOKENS on the owner's User
resource when the owner is someone else, renewers that are users, tokens
enabled by delegation_token_secret_key.
"""

from __future__ import annotations

from typing import Any

from kafkacompat import storage

from ..broker.cluster import random_kafka_uuid
from ..security.acls import Operation, ResourceType
from ..security.delegation_tokens import USER_TYPE, split_principal
from ..services import Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of, storage_error_code
from .registry import Api, changes
from .token_common import NO_TIMESTAMP, milliseconds, timestamp, token_requests_allowed

# CreateDelegationToken v1-3 (v0 is gone since Kafka 4.0); v3 names an owner (KIP-373)
API = Api(38, (1, 3), changes())


def _refusal(ctx: Request[Security], request: Any, owner: str | None) -> ErrorCode | None:
    if not token_requests_allowed(ctx):
        return ErrorCode.delegation_token_request_not_allowed
    if owner is None:
        return ErrorCode.invalid_principal_type
    if owner != ctx.principal and not ctx.cluster.authorizer.authorize(ctx, Operation.CREATE_TOKENS,
                                                                       ResourceType.USER, owner):
        return ErrorCode.delegation_token_authorization_failed
    if any(r.principal_type != USER_TYPE for r in request.renewers):
        return ErrorCode.invalid_principal_type
    if not ctx.cluster.tokens.enabled:
        return ErrorCode.delegation_token_auth_disabled
    return None


def _owner(ctx: Request[Security], request: Any) -> str | None:
    """The owner asked for (v3), else the requester; None when a name comes without a principal type."""
    name = getattr(request, "owner_principal_name", None)
    if not name:
        return ctx.principal
    kind = request.owner_principal_type
    return f"{kind}:{name}" if kind else None


async def handle(ctx: Request[Security], request: Any) -> Any:
    m = schema_of(ctx)
    owner = _owner(ctx, request)
    owner_type, owner_name = split_principal(owner or ctx.principal)
    requester_type, requester_name = split_principal(ctx.principal)

    def answer(error: ErrorCode, issue: int = NO_TIMESTAMP, expiry: int = NO_TIMESTAMP, max_ms: int = NO_TIMESTAMP,
               token_id: str = "", mac: bytes = b"") -> Any:
        return make(m.CreateDelegationTokenResponse, error_code=error, principal_type=owner_type,
                    principal_name=owner_name, token_requester_principal_type=requester_type,
                    token_requester_principal_name=requester_name, issue_timestamp=timestamp(issue),
                    expiry_timestamp=timestamp(expiry), max_timestamp=timestamp(max_ms), token_id=token_id,
                    hmac=mac, throttle_time=NO_THROTTLE)

    refusal = _refusal(ctx, request, owner)
    if refusal is not None:
        return answer(refusal)
    assert owner is not None
    tokens = ctx.cluster.tokens
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in request.renewers]
    try:
        token = await tokens.create(random_kafka_uuid(), owner, ctx.principal, renewers,
                                    milliseconds(request.max_lifetime))
    except storage.StorageError as exc:  # not stored (the store logged why): no token
        return answer(storage_error_code(exc))
    return answer(ErrorCode.none, token.issue_ms, token.expiry_ms, token.max_ms, token.token_id,
                  tokens.hmac(token.token_id))
